//! Splitting a reply into parts each channel will take. A provider rejects an over-long
//! message outright (Telegram, Twilio) rather than truncating it, so the dispatch job
//! splits before sending and records each part on its own; the split must therefore be
//! deterministic, or a retry would resend differently cut parts.

use super::ChannelKind;

/// The longest text one message may carry on `channel`, in chars; `None` when one message
/// always suffices (Slack splits long posts itself, an email has no practical limit).
pub fn max_chars(channel: ChannelKind) -> Option<usize> {
    match channel {
        ChannelKind::Telegram => Some(4096),
        ChannelKind::Whatsapp => Some(1600),
        ChannelKind::Slack | ChannelKind::Email => None,
    }
}

/// Ordered parts of at most `max_chars` chars, cut at whitespace so words stay whole; a
/// word longer than the limit is cut at char boundaries. Text within the limit comes back
/// unchanged as one part; whitespace around a cut is dropped, whitespace inside a part
/// (line breaks) is kept. Blank text gives no parts, since no provider takes an empty one.
/// A `max_chars` of 0 is treated as 1.
pub fn split(text: &str, max_chars: usize) -> Vec<String> {
    let max = max_chars.max(1);
    if text.trim().is_empty() {
        return Vec::new();
    }
    if text.chars().count() <= max {
        return vec![text.to_owned()];
    }
    let mut parts = Vec::new();
    // The part being built: byte range in `text` and its length in chars.
    let mut current: Option<(usize, usize, usize)> = None;
    for (start, word) in words(text) {
        let word_chars = word.chars().count();
        if let Some((from, to, chars)) = current {
            let joined = chars + text[to..start].chars().count() + word_chars;
            if joined <= max {
                current = Some((from, start + word.len(), joined));
                continue;
            }
            parts.push(text[from..to].to_owned());
        }
        let (mut start, mut rest, mut rest_chars) = (start, word, word_chars);
        while rest_chars > max {
            let cut = rest.char_indices().nth(max).map_or(rest.len(), |(i, _)| i);
            parts.push(rest[..cut].to_owned());
            (start, rest, rest_chars) = (start + cut, &rest[cut..], rest_chars - max);
        }
        current = Some((start, start + rest.len(), rest_chars));
    }
    if let Some((from, to, _)) = current {
        parts.push(text[from..to].to_owned());
    }
    parts
}

/// The whitespace-separated words of `text` with their byte offsets, so parts can be cut
/// from the original text and keep its own spacing.
fn words(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut rest = text.char_indices().peekable();
    std::iter::from_fn(move || {
        while rest.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let (start, _) = *rest.peek()?;
        let mut end = text.len();
        for (i, c) in rest.by_ref() {
            if c.is_whitespace() {
                end = i;
                break;
            }
        }
        Some((start, &text[start..end]))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chars(parts: &[String]) -> Vec<usize> {
        parts.iter().map(|p| p.chars().count()).collect()
    }

    #[test]
    fn short_and_exact_text_is_one_unchanged_part() {
        assert_eq!(split("  hi\nthere ", 50), ["  hi\nthere "]);
        let exact = "abcde fghij";
        assert_eq!(split(exact, 11), [exact]);
        assert!(split("", 10).is_empty() && split(" \n\t", 10).is_empty());
    }

    #[test]
    fn cuts_fall_on_word_boundaries() {
        let parts = split("the quick brown fox jumps over the lazy dog", 15);
        assert_eq!(parts, ["the quick brown", "fox jumps over", "the lazy dog"]);
        // Line breaks inside a part survive; those at a cut are dropped.
        assert_eq!(
            split("one two\nthree\n\nfour five", 13),
            ["one two\nthree", "four five"]
        );
        assert_eq!(split("a bb ccc", 1), ["a", "b", "b", "c", "c", "c"]);
    }

    #[test]
    fn the_limit_counts_chars_not_bytes() {
        // Several bytes per char: a byte count would cut far too early.
        let text = "żółwś ćmaąę ñandú 日本語です 🦀🦀🦀🦀🦀";
        let parts = split(text, 11);
        assert_eq!(parts, ["żółwś ćmaąę", "ñandú 日本語です", "🦀🦀🦀🦀🦀"]);
        assert!(chars(&parts).iter().all(|&n| n <= 11));
    }

    #[test]
    fn long_words_are_hard_split_and_the_tail_is_reused() {
        let parts = split("hi abcdefghij xy", 4);
        assert_eq!(parts, ["hi", "abcd", "efgh", "ij", "xy"]);
        let parts = split("go 🦀🦀🦀🦀🦀🦀🦀 ok", 5);
        assert_eq!(parts, ["go", "🦀🦀🦀🦀🦀", "🦀🦀 ok"]);
        let parts = split("abcdefgh", 4);
        assert_eq!(parts, ["abcd", "efgh"]);
    }

    #[test]
    fn parts_rejoin_to_the_words_in_order() {
        let text: String = (0..3000).map(|i| format!("word{i} ")).collect();
        let limit = max_chars(ChannelKind::Whatsapp).expect("limited");
        let parts = split(&text, limit);
        assert!(parts.len() > 1 && chars(&parts).iter().all(|&n| (1..=limit).contains(&n)));
        let rejoined: Vec<&str> = parts.iter().flat_map(|p| p.split_whitespace()).collect();
        assert_eq!(rejoined, text.split_whitespace().collect::<Vec<_>>());
    }

    #[test]
    fn channel_limits() {
        assert_eq!(max_chars(ChannelKind::Telegram), Some(4096));
        assert_eq!(max_chars(ChannelKind::Whatsapp), Some(1600));
        assert_eq!(max_chars(ChannelKind::Slack), None);
        assert_eq!(max_chars(ChannelKind::Email), None);
        let telegram = "é".repeat(4096);
        assert_eq!(split(&telegram, 4096), [telegram.as_str()]);
        let over = format!("{telegram} x");
        assert_eq!(chars(&split(&over, 4096)), [4096, 1]);
        let whatsapp = "ü".repeat(1601);
        assert_eq!(chars(&split(&whatsapp, 1600)), [1600, 1]);
    }
}
