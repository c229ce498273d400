//! The autopilot's policy (per org, `PUT /orgs/{id}/autopilot`) and its judgement of one
//! draft: whether it may send itself after a hold, and under which rule. Pure: the caller
//! gathers the facts (the org's local time, breaker states, the texts the draft may quote),
//! so every rule is decided here, in one place, and tested as a table.

use crate::ChannelKind;
use chrono::Weekday;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Shortest hold: long enough for an expert to see the countdown and stop it.
pub const MIN_HOLD_SECS: u32 = 10;
/// Longest hold (an hour).
pub const MAX_HOLD_SECS: u32 = 3600;
/// The hold when a channel's policy names none.
pub const DEFAULT_HOLD_SECS: u32 = 60;
/// Most phrases in `never_when.phrases`.
pub const MAX_PHRASES: usize = 200;
/// Longest phrase.
pub const MAX_PHRASE_CHARS: usize = 100;
/// Highest `max_per_hour`.
pub const MAX_PER_HOUR: u32 = 100_000;

/// An org's autopilot. Absent (never set) is the same as `enabled: false`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// The org's switch (default false): off, no draft sends itself whatever the channels say.
    #[serde(default)]
    pub enabled: bool,
    /// Per channel; a channel not named never sends itself.
    #[serde(default)]
    pub channels: Channels,
    /// Only within these hours, in the org's time zone; absent: at any hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub business_hours: Option<BusinessHours>,
    /// When a draft stays for a human even above the threshold.
    #[serde(default)]
    pub never_when: NeverWhen,
    /// Most replies the autopilot sends per hour for the org (across pods); absent: no cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_per_hour: Option<u32>,
}

/// The policy of each channel, one field per [`ChannelKind`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Channels {
    #[allow(missing_docs)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slack: Option<ChannelPolicy>,
    #[allow(missing_docs)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whatsapp: Option<ChannelPolicy>,
    #[allow(missing_docs)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telegram: Option<ChannelPolicy>,
    #[allow(missing_docs)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<ChannelPolicy>,
}

impl Channels {
    /// The channel's policy, if it has one.
    pub fn get(&self, channel: ChannelKind) -> Option<&ChannelPolicy> {
        match channel {
            ChannelKind::Slack => self.slack.as_ref(),
            ChannelKind::Whatsapp => self.whatsapp.as_ref(),
            ChannelKind::Telegram => self.telegram.as_ref(),
            ChannelKind::Email => self.email.as_ref(),
        }
    }
}

/// One channel's rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChannelPolicy {
    /// This channel's switch.
    pub enabled: bool,
    /// The agent's confidence the draft needs, 0 to 1 (inclusive).
    pub min_confidence: f64,
    /// Seconds the draft waits, visible and stoppable, before it is sent (10 to 3600).
    #[serde(default = "default_hold")]
    pub hold_secs: u32,
}

fn default_hold() -> u32 {
    DEFAULT_HOLD_SECS
}

/// Days and hours, in the org's time zone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BusinessHours {
    /// Days the hours apply, `mon` … `sun`.
    pub days: Vec<Day>,
    /// `HH:MM`, inclusive.
    pub start: String,
    /// `HH:MM`, exclusive; before `start` means the hours run past midnight.
    pub end: String,
}

/// A day of the week.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum Day {
    Mon,
    Tue,
    Wed,
    Thu,
    Fri,
    Sat,
    Sun,
}

impl From<Weekday> for Day {
    fn from(d: Weekday) -> Self {
        match d {
            Weekday::Mon => Day::Mon,
            Weekday::Tue => Day::Tue,
            Weekday::Wed => Day::Wed,
            Weekday::Thu => Day::Thu,
            Weekday::Fri => Day::Fri,
            Weekday::Sat => Day::Sat,
            Weekday::Sun => Day::Sun,
        }
    }
}

/// When a draft above the threshold still waits for a human.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NeverWhen {
    /// The item is flagged for review (default true).
    #[serde(default = "yes")]
    pub flagged: bool,
    /// The draft is the stored fallback (always true: a fallback never sends itself).
    #[serde(default = "yes")]
    pub fallback: bool,
    /// The customer is new: this is their first conversation (default false).
    #[serde(default)]
    pub new_customer: bool,
    /// The customer's message contains one of these words or phrases (case-insensitive).
    #[serde(default)]
    pub phrases: Vec<String>,
    /// The draft has a link or a number found neither in the saved replies nor in the
    /// conversation (default true).
    #[serde(default = "yes")]
    pub unknown_link_or_number: bool,
}

fn yes() -> bool {
    true
}

impl Default for NeverWhen {
    fn default() -> Self {
        NeverWhen {
            flagged: true,
            fallback: true,
            new_customer: false,
            phrases: Vec::new(),
            unknown_link_or_number: true,
        }
    }
}

/// A policy that cannot be stored: the field and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} {problem}")]
pub struct Invalid {
    /// The field, as a JSON path (`channels.telegram.hold_secs`).
    pub field: String,
    /// What is wrong with it.
    pub problem: &'static str,
}

fn invalid(field: impl Into<String>, problem: &'static str) -> Invalid {
    Invalid {
        field: field.into(),
        problem,
    }
}

/// `HH:MM` as minutes after midnight.
fn minutes(text: &str) -> Option<u32> {
    let (h, m) = text.split_once(':')?;
    if h.len() != 2 || m.len() != 2 {
        return None;
    }
    let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
    (h < 24 && m < 60).then_some(h * 60 + m)
}

impl Policy {
    /// Every rule of the policy in bounds, or the first field that is not.
    pub fn validate(&self) -> Result<(), Invalid> {
        for kind in ChannelKind::ALL {
            let Some(c) = self.channels.get(kind) else {
                continue;
            };
            if !(0.0..=1.0).contains(&c.min_confidence) {
                return Err(invalid(
                    format!("channels.{kind}.min_confidence"),
                    "must be between 0 and 1",
                ));
            }
            if !(MIN_HOLD_SECS..=MAX_HOLD_SECS).contains(&c.hold_secs) {
                return Err(invalid(
                    format!("channels.{kind}.hold_secs"),
                    "must be between 10 and 3600",
                ));
            }
        }
        if let Some(hours) = &self.business_hours {
            if hours.days.is_empty() {
                return Err(invalid("business_hours.days", "must name at least one day"));
            }
            let (Some(start), Some(end)) = (minutes(&hours.start), minutes(&hours.end)) else {
                let field = if minutes(&hours.start).is_none() {
                    "business_hours.start"
                } else {
                    "business_hours.end"
                };
                return Err(invalid(field, "must be a time of day as HH:MM"));
            };
            if start == end {
                return Err(invalid("business_hours.end", "must differ from start"));
            }
        }
        let w = &self.never_when;
        if !w.fallback {
            return Err(invalid(
                "never_when.fallback",
                "cannot be false: a fallback draft never sends itself",
            ));
        }
        if w.phrases.len() > MAX_PHRASES {
            return Err(invalid("never_when.phrases", "holds at most 200 phrases"));
        }
        if w.phrases.iter().any(|p| {
            let n = p.trim().chars().count();
            n == 0 || n > MAX_PHRASE_CHARS
        }) {
            return Err(invalid(
                "never_when.phrases",
                "must each be 1 to 100 characters",
            ));
        }
        if let Some(n) = self.max_per_hour
            && !(1..=MAX_PER_HOUR).contains(&n)
        {
            return Err(invalid("max_per_hour", "must be between 1 and 100000"));
        }
        Ok(())
    }

    /// The policy turned off (the pause, `AUTOPILOT=off`): every rule kept for later.
    pub fn paused(mut self) -> Self {
        self.enabled = false;
        self
    }
}

/// What the judge knows about a draft that just landed.
#[derive(Debug, Clone)]
#[allow(missing_docs)] // The draft's own facts, named as in `judge`.
pub struct Facts<'a> {
    pub channel: ChannelKind,
    /// The agent's confidence as it answered (clamped here; absent counts as 0).
    pub confidence: Option<f64>,
    pub fallback: bool,
    pub flagged: bool,
    /// An expert has the item (claimed or snoozed).
    pub taken: bool,
    /// This is the customer's first conversation.
    pub first_conversation: bool,
    /// What the customer wrote last.
    pub customer_text: &'a str,
    pub draft: &'a str,
    /// The texts a link or a number in the draft may come from: the org's saved replies and
    /// the conversation's messages.
    pub known_texts: &'a [&'a str],
    /// Now, in the org's time zone: the day and the minute of the day.
    pub local: (Weekday, u32),
    /// The agent's circuit breaker is open (its drafts are not to be trusted now).
    pub agent_breaker_open: bool,
    /// The outbound breaker of the channel is open (the reply would not go out now).
    pub outbound_breaker_open: bool,
}

/// Why a draft stays for a human: the first rule that refused it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)] // Each names the rule of `judge` it stands for.
pub enum Refusal {
    Off,
    ChannelOff,
    LowConfidence,
    OutsideHours,
    Fallback,
    Flagged,
    NewCustomer,
    Phrase,
    UnknownLinkOrNumber,
    AgentBreakerOpen,
    OutboundBreakerOpen,
    /// The item is claimed or snoozed: an expert has it.
    Taken,
}

impl Refusal {
    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Off => "off",
            Refusal::ChannelOff => "channel_off",
            Refusal::LowConfidence => "low_confidence",
            Refusal::OutsideHours => "outside_hours",
            Refusal::Fallback => "fallback",
            Refusal::Flagged => "flagged",
            Refusal::NewCustomer => "new_customer",
            Refusal::Phrase => "phrase",
            Refusal::UnknownLinkOrNumber => "unknown_link_or_number",
            Refusal::AgentBreakerOpen => "agent_breaker_open",
            Refusal::OutboundBreakerOpen => "outbound_breaker_open",
            Refusal::Taken => "taken",
        }
    }
}

/// A draft the policy admits: how long it is held and the rule's name for the record.
#[derive(Debug, Clone, PartialEq)]
pub struct Admitted {
    /// Seconds before it is sent.
    pub hold_secs: u32,
    /// The rule's name, e.g. `telegram confidence >= 0.90`.
    pub rule: String,
}

/// The agent's confidence as the autopilot reads it: within 0 to 1, absent or NaN as 0.
pub fn clamp_confidence(c: Option<f64>) -> f64 {
    match c {
        Some(c) if c.is_finite() => c.clamp(0.0, 1.0),
        Some(c) if c == f64::INFINITY => 1.0,
        _ => 0.0,
    }
}

/// Whether `policy` lets this draft send itself after a hold.
pub fn judge(policy: &Policy, facts: &Facts<'_>) -> Result<Admitted, Refusal> {
    if !policy.enabled {
        return Err(Refusal::Off);
    }
    let channel = match policy.channels.get(facts.channel) {
        Some(c) if c.enabled => c,
        _ => return Err(Refusal::ChannelOff),
    };
    // The safety rails first: none of the org's settings lifts them.
    if facts.fallback {
        return Err(Refusal::Fallback);
    }
    if facts.taken {
        return Err(Refusal::Taken);
    }
    if facts.agent_breaker_open {
        return Err(Refusal::AgentBreakerOpen);
    }
    if facts.outbound_breaker_open {
        return Err(Refusal::OutboundBreakerOpen);
    }
    if clamp_confidence(facts.confidence) < channel.min_confidence {
        return Err(Refusal::LowConfidence);
    }
    if let Some(hours) = &policy.business_hours
        && !within(hours, facts.local)
    {
        return Err(Refusal::OutsideHours);
    }
    let never = &policy.never_when;
    if never.flagged && facts.flagged {
        return Err(Refusal::Flagged);
    }
    if never.new_customer && facts.first_conversation {
        return Err(Refusal::NewCustomer);
    }
    if !never.phrases.is_empty() {
        let text = facts.customer_text.to_lowercase();
        if never
            .phrases
            .iter()
            .any(|p| text.contains(&p.trim().to_lowercase()))
        {
            return Err(Refusal::Phrase);
        }
    }
    if never.unknown_link_or_number && has_unknown_link_or_number(facts.draft, facts.known_texts) {
        return Err(Refusal::UnknownLinkOrNumber);
    }
    Ok(Admitted {
        hold_secs: channel.hold_secs,
        rule: format!(
            "{} confidence >= {:.2}",
            facts.channel, channel.min_confidence
        ),
    })
}

fn within(hours: &BusinessHours, (day, minute): (Weekday, u32)) -> bool {
    let (Some(start), Some(end)) = (minutes(&hours.start), minutes(&hours.end)) else {
        return false;
    };
    let on = |d: Weekday| hours.days.contains(&Day::from(d));
    if start < end {
        on(day) && (start..end).contains(&minute)
    } else {
        // Past midnight: the evening belongs to `day`, the early hours to the day before.
        (on(day) && minute >= start) || (on(day.pred()) && minute < end)
    }
}

/// Whether `draft` has a link or a number that none of `known` has as a whole: a `7` is not
/// vouched for by `17:00`, nor `https://shop.example` by `https://shop.example/help`, since a
/// part of a known figure is as much the agent's invention as any other. Links compare
/// without case, numbers as written.
fn has_unknown_link_or_number(draft: &str, known: &[&str]) -> bool {
    let known: std::collections::HashSet<String> = known
        .iter()
        .flat_map(|k| links_and_numbers(k))
        .map(|t| t.to_lowercase())
        .collect();
    links_and_numbers(draft)
        .iter()
        .any(|t| !known.contains(&t.to_lowercase()))
}

/// The links (`http://`, `https://`, `www.`) and numbers (digits with `.,:/-` between them)
/// of a text, as written, without the punctuation that ends a sentence.
pub fn links_and_numbers(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in text.split_whitespace() {
        let word = word.trim_matches(|c: char| "()[]<>\"'“”‘’".contains(c));
        let lower = word.to_ascii_lowercase();
        if lower.starts_with("http://")
            || lower.starts_with("https://")
            || lower.starts_with("www.")
        {
            let link = word.trim_end_matches(|c: char| ".,;:!?()[]<>\"'".contains(c));
            out.push(link.to_owned());
            continue;
        }
        let mut number = String::new();
        for c in word.chars() {
            if c.is_ascii_digit() || (!number.is_empty() && ".,:/-".contains(c)) {
                number.push(c);
            } else if !number.is_empty() {
                push_number(&mut out, &mut number);
            }
        }
        push_number(&mut out, &mut number);
    }
    out
}

fn push_number(out: &mut Vec<String>, number: &mut String) {
    let n = number.trim_end_matches(['.', ',', ':', '/', '-']);
    if !n.is_empty() {
        out.push(n.to_owned());
    }
    number.clear();
}

/// How an expert handled one draft they released or replaced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Handled {
    /// Sent as drafted.
    Unchanged,
    /// Sent edited: the share of the draft's words changed ([`edit_share`]).
    Edited(f64),
    /// The expert wrote their own reply instead.
    Replaced,
}

/// One draft an expert handled, as calibration counts it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HandledDraft {
    /// Its channel.
    pub channel: ChannelKind,
    /// The agent's confidence, clamped ([`clamp_confidence`]).
    pub confidence: f64,
    /// What the expert did with it.
    pub how: Handled,
}

/// Drafts of one channel whose confidence falls in `[from, from + 0.1)` (the last bucket
/// includes 1.0), and what experts did with them.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Bucket {
    #[allow(missing_docs)]
    pub channel: ChannelKind,
    /// The bucket's lower bound: 0.0, 0.1, … 0.9.
    pub from: f64,
    /// Drafts in it.
    pub drafts: i64,
    /// Sent unchanged.
    pub unchanged: i64,
    /// Sent edited.
    pub edited: i64,
    /// Replaced by the expert's own reply.
    pub replaced: i64,
    /// The median share of the draft's words an edit changed; none without edits.
    pub median_edit_share: Option<f64>,
}

/// What the org's threshold for a channel would have done with these drafts.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct AtThreshold {
    #[allow(missing_docs)]
    pub channel: ChannelKind,
    /// The channel's `min_confidence`.
    pub min_confidence: f64,
    /// Whether the channel's autopilot is on now.
    pub enabled: bool,
    /// Drafts at or above it: the autopilot would have sent them (before its other rules).
    pub would_send: i64,
    /// Of those, the ones an expert edited or replaced.
    pub changed: i64,
}

/// The word-level edit distance from `draft` to `sent` as a share of the draft's words
/// (0: the same words; 1 or more: rewritten).
pub fn edit_share(draft: &str, sent: &str) -> f64 {
    let a: Vec<&str> = draft.split_whitespace().collect();
    let b: Vec<&str> = sent.split_whitespace().collect();
    // Levenshtein over words, one row at a time.
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, wa) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, wb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = if wa == wb {
                diagonal
            } else {
                1 + diagonal.min(above).min(row[j])
            };
            diagonal = above;
        }
    }
    row[b.len()] as f64 / a.len().max(1) as f64
}

/// The drafts per channel and 0.1-wide confidence bucket, buckets without drafts left out,
/// in channel then confidence order.
pub fn calibrate(drafts: &[HandledDraft]) -> Vec<Bucket> {
    let mut out = Vec::new();
    for channel in ChannelKind::ALL {
        for tenth in 0..10u8 {
            let inside: Vec<&HandledDraft> = drafts
                .iter()
                .filter(|d| d.channel == channel && bucket_of(d.confidence) == tenth)
                .collect();
            if inside.is_empty() {
                continue;
            }
            let count =
                |f: fn(&Handled) -> bool| inside.iter().filter(|d| f(&d.how)).count() as i64;
            let mut shares: Vec<f64> = inside
                .iter()
                .filter_map(|d| match d.how {
                    Handled::Edited(share) => Some(share),
                    _ => None,
                })
                .collect();
            shares.sort_by(f64::total_cmp);
            let median = match shares.len() {
                0 => None,
                n if n % 2 == 1 => Some(shares[n / 2]),
                n => Some((shares[n / 2 - 1] + shares[n / 2]) / 2.0),
            };
            out.push(Bucket {
                channel,
                from: f64::from(tenth) / 10.0,
                drafts: inside.len() as i64,
                unchanged: count(|h| *h == Handled::Unchanged),
                edited: count(|h| matches!(h, Handled::Edited(_))),
                replaced: count(|h| *h == Handled::Replaced),
                median_edit_share: median,
            });
        }
    }
    out
}

/// For each channel the policy names, what its threshold would have done with `drafts`.
pub fn at_thresholds(policy: &Policy, drafts: &[HandledDraft]) -> Vec<AtThreshold> {
    ChannelKind::ALL
        .into_iter()
        .filter_map(|channel| {
            let rule = policy.channels.get(channel)?;
            let above: Vec<&HandledDraft> = drafts
                .iter()
                .filter(|d| d.channel == channel && d.confidence >= rule.min_confidence)
                .collect();
            Some(AtThreshold {
                channel,
                min_confidence: rule.min_confidence,
                enabled: policy.enabled && rule.enabled,
                would_send: above.len() as i64,
                changed: above.iter().filter(|d| d.how != Handled::Unchanged).count() as i64,
            })
        })
        .collect()
}

fn bucket_of(confidence: f64) -> u8 {
    // 0.3 is 0.29999… in binary: a small nudge keeps it in its own bucket.
    ((confidence * 10.0 + 1e-9).floor().clamp(0.0, 9.0)) as u8
}

#[cfg(test)]
mod calibration_tests {
    use super::*;

    fn d(channel: ChannelKind, confidence: f64, how: Handled) -> HandledDraft {
        HandledDraft {
            channel,
            confidence,
            how,
        }
    }

    #[test]
    fn an_edit_share_counts_changed_words_against_the_drafts_length() {
        assert_eq!(edit_share("we open at nine", "we open at nine"), 0.0);
        assert_eq!(edit_share("we open at nine", "we open at ten"), 0.25);
        assert_eq!(edit_share("we open at nine", "we open at nine sharp"), 0.25);
        assert_eq!(edit_share("a b", "c d e f"), 2.0);
        assert_eq!(edit_share("", "anything"), 1.0);
    }

    #[test]
    fn drafts_fall_in_tenths_with_their_median_edit() {
        use ChannelKind::{Slack, Telegram};
        let drafts = [
            d(Slack, 0.95, Handled::Unchanged),
            d(Slack, 1.0, Handled::Edited(0.5)),
            d(Slack, 0.9, Handled::Edited(0.1)),
            d(Slack, 0.3, Handled::Replaced),
            d(Telegram, 0.0, Handled::Unchanged),
        ];
        let buckets = calibrate(&drafts);
        let top = &buckets[1];
        assert_eq!((top.channel, top.from, top.drafts), (Slack, 0.9, 3));
        assert_eq!((top.unchanged, top.edited, top.replaced), (1, 2, 0));
        assert!((top.median_edit_share.expect("edits") - 0.3).abs() < 1e-9);
        assert_eq!((buckets[0].from, buckets[0].replaced), (0.3, 1));
        assert_eq!(buckets[0].median_edit_share, None);
        assert_eq!((buckets[2].channel, buckets[2].from), (Telegram, 0.0));
        assert_eq!(buckets.len(), 3);

        let policy = Policy {
            enabled: true,
            channels: Channels {
                slack: Some(ChannelPolicy {
                    enabled: true,
                    min_confidence: 0.9,
                    hold_secs: 60,
                }),
                ..Channels::default()
            },
            ..Policy::default()
        };
        let at = at_thresholds(&policy, &drafts);
        assert_eq!(at.len(), 1, "only the channels the policy names");
        assert_eq!(
            (at[0].would_send, at[0].changed, at[0].enabled),
            (3, 2, true)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        Policy {
            enabled: true,
            channels: Channels {
                telegram: Some(ChannelPolicy {
                    enabled: true,
                    min_confidence: 0.9,
                    hold_secs: 30,
                }),
                slack: Some(ChannelPolicy {
                    enabled: false,
                    min_confidence: 0.5,
                    hold_secs: 30,
                }),
                ..Channels::default()
            },
            business_hours: None,
            never_when: NeverWhen {
                phrases: vec!["Refund".into(), "talk to a human".into()],
                new_customer: true,
                ..NeverWhen::default()
            },
            max_per_hour: Some(10),
        }
    }

    fn facts<'a>() -> Facts<'a> {
        Facts {
            channel: ChannelKind::Telegram,
            confidence: Some(0.95),
            fallback: false,
            flagged: false,
            taken: false,
            first_conversation: false,
            customer_text: "What are your opening hours?",
            draft: "We are open 9:00-17:00, see https://example.com/hours.",
            known_texts: &["Opening hours: 9:00-17:00 https://example.com/hours"],
            local: (Weekday::Tue, 10 * 60),
            agent_breaker_open: false,
            outbound_breaker_open: false,
        }
    }

    #[test]
    fn each_rule_admits_or_refuses() {
        type Case = (
            &'static str,
            fn(&mut Policy, &mut Facts<'static>),
            Result<(), Refusal>,
        );
        let cases: Vec<Case> = vec![
            ("a confident draft", |_, _| {}, Ok(())),
            (
                "the org's switch off",
                |p, _| p.enabled = false,
                Err(Refusal::Off),
            ),
            (
                "a channel not named",
                |_, f| f.channel = ChannelKind::Email,
                Err(Refusal::ChannelOff),
            ),
            (
                "a channel switched off",
                |_, f| f.channel = ChannelKind::Slack,
                Err(Refusal::ChannelOff),
            ),
            (
                "just below the threshold",
                |_, f| f.confidence = Some(0.8999),
                Err(Refusal::LowConfidence),
            ),
            (
                "exactly at the threshold",
                |_, f| f.confidence = Some(0.9),
                Ok(()),
            ),
            (
                "no confidence counts as 0",
                |_, f| f.confidence = None,
                Err(Refusal::LowConfidence),
            ),
            (
                "a confidence above 1 is 1",
                |_, f| f.confidence = Some(7.0),
                Ok(()),
            ),
            (
                "NaN is 0",
                |_, f| f.confidence = Some(f64::NAN),
                Err(Refusal::LowConfidence),
            ),
            (
                "a fallback draft",
                |_, f| f.fallback = true,
                Err(Refusal::Fallback),
            ),
            (
                "the agent's breaker open",
                |_, f| f.agent_breaker_open = true,
                Err(Refusal::AgentBreakerOpen),
            ),
            (
                "an item an expert has is theirs",
                |_, f| f.taken = true,
                Err(Refusal::Taken),
            ),
            (
                "the channel's breaker open",
                |_, f| f.outbound_breaker_open = true,
                Err(Refusal::OutboundBreakerOpen),
            ),
            (
                "a flagged item",
                |_, f| f.flagged = true,
                Err(Refusal::Flagged),
            ),
            (
                "a flagged item, rule off",
                |p, f| {
                    p.never_when.flagged = false;
                    f.flagged = true
                },
                Ok(()),
            ),
            (
                "a new customer",
                |_, f| f.first_conversation = true,
                Err(Refusal::NewCustomer),
            ),
            (
                "a new customer, rule off",
                |p, f| {
                    p.never_when.new_customer = false;
                    f.first_conversation = true
                },
                Ok(()),
            ),
            (
                "a phrase, another case",
                |_, f| f.customer_text = "I want a REFUND now",
                Err(Refusal::Phrase),
            ),
            (
                "a phrase of several words",
                |_, f| f.customer_text = "can I Talk To A Human?",
                Err(Refusal::Phrase),
            ),
            (
                "an unknown number",
                |_, f| f.draft = "It costs 42 euros.",
                Err(Refusal::UnknownLinkOrNumber),
            ),
            (
                "an unknown link",
                |_, f| f.draft = "See https://evil.example/x",
                Err(Refusal::UnknownLinkOrNumber),
            ),
            (
                "a number that is part of a known one",
                |_, f| f.draft = "We close at 7.",
                Err(Refusal::UnknownLinkOrNumber),
            ),
            (
                "a link that is part of a known one",
                |_, f| f.draft = "See https://example.com for more.",
                Err(Refusal::UnknownLinkOrNumber),
            ),
            (
                "a known link in another case",
                |_, f| f.draft = "Hours: HTTPS://EXAMPLE.COM/hours",
                Ok(()),
            ),
            (
                "a known link and number",
                |_, f| f.draft = "Open 9:00-17:00 (https://example.com/hours).",
                Ok(()),
            ),
            (
                "unknown, rule off",
                |p, f| {
                    p.never_when.unknown_link_or_number = false;
                    f.draft = "It costs 42."
                },
                Ok(()),
            ),
            (
                "within business hours",
                |p, _| {
                    p.business_hours = Some(BusinessHours {
                        days: vec![Day::Tue],
                        start: "09:00".into(),
                        end: "17:00".into(),
                    })
                },
                Ok(()),
            ),
            (
                "at the hours' end",
                |p, f| {
                    p.business_hours = Some(BusinessHours {
                        days: vec![Day::Tue],
                        start: "09:00".into(),
                        end: "17:00".into(),
                    });
                    f.local = (Weekday::Tue, 17 * 60)
                },
                Err(Refusal::OutsideHours),
            ),
            (
                "on a day off",
                |p, f| {
                    p.business_hours = Some(BusinessHours {
                        days: vec![Day::Mon],
                        start: "09:00".into(),
                        end: "17:00".into(),
                    });
                    f.local = (Weekday::Tue, 600)
                },
                Err(Refusal::OutsideHours),
            ),
            (
                "past midnight, the early hours",
                |p, f| {
                    p.business_hours = Some(BusinessHours {
                        days: vec![Day::Fri],
                        start: "22:00".into(),
                        end: "06:00".into(),
                    });
                    f.local = (Weekday::Sat, 120)
                },
                Ok(()),
            ),
            (
                "past midnight, the day before is off",
                |p, f| {
                    p.business_hours = Some(BusinessHours {
                        days: vec![Day::Fri],
                        start: "22:00".into(),
                        end: "06:00".into(),
                    });
                    f.local = (Weekday::Fri, 120)
                },
                Err(Refusal::OutsideHours),
            ),
        ];
        for (name, change, want) in cases {
            let mut p = policy();
            let mut f = facts();
            change(&mut p, &mut f);
            let got = judge(&p, &f).map(|_| ());
            assert_eq!(got, want, "{name}");
        }
        let admitted = judge(&policy(), &facts()).expect("admitted");
        assert_eq!(admitted.hold_secs, 30);
        assert_eq!(admitted.rule, "telegram confidence >= 0.90");
    }

    #[test]
    fn links_and_numbers_are_read_as_written() {
        assert_eq!(
            links_and_numbers("Call +1 555-0100, or see www.shop.example/help. Order #1234!"),
            ["1", "555-0100", "www.shop.example/help", "1234"]
        );
        assert_eq!(
            links_and_numbers("Total: 1,299.00 EUR (incl. 19% VAT)."),
            ["1,299.00", "19"]
        );
        assert!(links_and_numbers("No numbers here.").is_empty());
    }

    #[test]
    fn a_policy_out_of_bounds_names_its_field() {
        let field = |change: fn(&mut Policy)| {
            let mut p = policy();
            change(&mut p);
            p.validate().map_err(|e| e.field)
        };
        assert_eq!(field(|_| {}), Ok(()));
        assert_eq!(
            field(|p| p
                .channels
                .telegram
                .as_mut()
                .expect("in the test policy")
                .min_confidence = 1.01),
            Err("channels.telegram.min_confidence".into())
        );
        assert_eq!(
            field(|p| p
                .channels
                .telegram
                .as_mut()
                .expect("in the test policy")
                .min_confidence = -0.1),
            Err("channels.telegram.min_confidence".into())
        );
        assert_eq!(
            field(|p| p
                .channels
                .telegram
                .as_mut()
                .expect("in the test policy")
                .min_confidence = f64::NAN),
            Err("channels.telegram.min_confidence".into())
        );
        assert_eq!(
            field(|p| p
                .channels
                .slack
                .as_mut()
                .expect("in the test policy")
                .hold_secs = 9),
            Err("channels.slack.hold_secs".into())
        );
        assert_eq!(
            field(|p| p
                .channels
                .slack
                .as_mut()
                .expect("in the test policy")
                .hold_secs = 3601),
            Err("channels.slack.hold_secs".into())
        );
        assert_eq!(
            field(|p| p.never_when.fallback = false),
            Err("never_when.fallback".into())
        );
        assert_eq!(
            field(|p| p.never_when.phrases.push("  ".into())),
            Err("never_when.phrases".into())
        );
        assert_eq!(
            field(|p| p.never_when.phrases.push("x".repeat(101))),
            Err("never_when.phrases".into())
        );
        assert_eq!(
            field(|p| p.max_per_hour = Some(0)),
            Err("max_per_hour".into())
        );
        assert_eq!(
            field(|p| p.business_hours = Some(BusinessHours {
                days: vec![],
                start: "09:00".into(),
                end: "17:00".into()
            })),
            Err("business_hours.days".into())
        );
        assert_eq!(
            field(|p| p.business_hours = Some(BusinessHours {
                days: vec![Day::Mon],
                start: "9:00".into(),
                end: "17:00".into()
            })),
            Err("business_hours.start".into())
        );
        assert_eq!(
            field(|p| p.business_hours = Some(BusinessHours {
                days: vec![Day::Mon],
                start: "09:00".into(),
                end: "24:00".into()
            })),
            Err("business_hours.end".into())
        );
        assert_eq!(
            field(|p| p.business_hours = Some(BusinessHours {
                days: vec![Day::Mon],
                start: "09:00".into(),
                end: "09:00".into()
            })),
            Err("business_hours.end".into())
        );
    }

    #[test]
    fn the_documents_defaults_are_safe() {
        let p: Policy = serde_json::from_str("{}").expect("empty policy");
        assert_eq!(p, Policy::default());
        assert!(!p.enabled && p.never_when.fallback && p.never_when.flagged);
        let p: Policy = serde_json::from_str(
            r#"{"enabled": true, "channels": {"email": {"enabled": true, "min_confidence": 0.8}}}"#,
        )
        .expect("policy");
        assert_eq!(
            p.channels.email.as_ref().map(|c| c.hold_secs),
            Some(DEFAULT_HOLD_SECS)
        );
        assert!(serde_json::from_str::<Policy>(r#"{"channels": {"fax": {}}}"#).is_err());
        assert!(serde_json::from_str::<Policy>(r#"{"enable": true}"#).is_err());
    }
}
