//! CONTRIBUTING's list of the places a new channel touches, checked against the workspace:
//! the list is read from CONTRIBUTING.md itself, so the page and this check cannot drift.
//!
//! Each line of the list starts with the path of one place; `<channel>` in it stands for
//! every channel's name. A backticked text with `<channel>` on the same line (that is not a
//! path) names what the place holds for each channel. The other way round, every Rust file
//! with an arm for each channel (`ChannelKind::Slack …=>`, and so on for every variant) is a
//! place a new channel touches, so it must be on the list.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use switchboard_domain::ChannelKind;

/// The workspace's root, where CONTRIBUTING.md is.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One line of the list: its text (continuation lines joined) and its backticked texts.
struct Place {
    line: String,
    spans: Vec<String>,
}

impl Place {
    /// The backticked texts that are paths: a folder or file of the workspace.
    fn paths(&self) -> impl Iterator<Item = &str> {
        self.spans.iter().map(String::as_str).filter(|s| is_path(s))
    }

    /// The backticked texts with `<channel>` that are not paths.
    fn needles(&self) -> impl Iterator<Item = &str> {
        self.spans
            .iter()
            .map(String::as_str)
            .filter(|s| s.contains("<channel>") && !is_path(s))
    }
}

fn is_path(span: &str) -> bool {
    let extension = [".rs", ".toml", ".md", ".ts", ".js", ".mjs", ".sh", ".sql"]
        .iter()
        .any(|e| span.ends_with(e));
    !span.contains(' ') && !span.contains("::") && (span.contains('/') || extension)
}

/// The lines of CONTRIBUTING's "A channel" list.
fn places() -> Vec<Place> {
    let text = read(&root().join("CONTRIBUTING.md"));
    let section = text
        .split("\n**")
        .find(|s| s.starts_with("A channel.**"))
        .expect("CONTRIBUTING.md has an **A channel.** paragraph");
    let mut lines: Vec<String> = Vec::new();
    for line in section.lines() {
        if let Some(item) = line.strip_prefix("- ") {
            lines.push(item.to_owned());
        } else if let (Some(last), true) = (lines.last_mut(), line.starts_with("  ")) {
            last.push(' ');
            last.push_str(line.trim());
        }
    }
    lines
        .into_iter()
        .map(|line| {
            let spans = line.split('`').skip(1).step_by(2).map(str::to_owned);
            Place {
                spans: spans.collect(),
                line,
            }
        })
        .collect()
}

/// `text` for `channel`.
fn expand(text: &str, channel: ChannelKind) -> String {
    text.replace("<channel>", channel.as_str())
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Whether `text` has a match arm for every channel: for each variant, a line where
/// `ChannelKind::{Variant}` comes before a `=>`.
fn arms_for_every_channel(text: &str) -> bool {
    ChannelKind::ALL.into_iter().all(|channel| {
        let variant = format!("ChannelKind::{channel:?}");
        text.lines().any(|line| {
            line.split_once("=>")
                .is_some_and(|(pattern, _)| pattern.contains(&variant))
        })
    })
}

#[test]
fn every_channel_is_one_folder_with_its_inbound_and_outbound_halves() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for channel in ChannelKind::ALL {
        let folder = src.join(channel.as_str());
        for file in ["mod.rs", "inbound.rs", "outbound.rs"] {
            assert!(
                folder.join(file).is_file(),
                "{channel}: {} is missing",
                folder.join(file).display()
            );
        }
    }
}

#[test]
fn every_place_contributing_lists_for_a_channel_exists_and_holds_it() {
    let places = places();
    assert!(
        places.len() > 10,
        "the list was not found: {} lines",
        places.len()
    );
    for place in &places {
        let first = place
            .paths()
            .next()
            .unwrap_or_else(|| panic!("a line of the list names no path: {}", place.line));
        for channel in ChannelKind::ALL {
            for path in place.paths() {
                let path = root().join(expand(path, channel));
                assert!(
                    path.exists(),
                    "{} is missing ({})",
                    path.display(),
                    place.line
                );
            }
            let file = root().join(expand(first, channel));
            for needle in place.needles() {
                let needle = expand(needle, channel);
                assert!(
                    file.is_file() && read(&file).contains(&needle),
                    "{} does not hold `{needle}` ({})",
                    file.display(),
                    place.line
                );
            }
        }
    }
}

#[test]
fn every_match_over_the_channels_is_a_place_contributing_lists() {
    let listed: BTreeSet<PathBuf> = places()
        .iter()
        .flat_map(|place| place.paths().map(str::to_owned).collect::<Vec<_>>())
        .flat_map(|path| ChannelKind::ALL.map(|channel| PathBuf::from(expand(&path, channel))))
        .collect();
    let root = root();
    let mut files = Vec::new();
    let crates = std::fs::read_dir(root.join("crates")).expect("crates/");
    for krate in crates.flatten() {
        rust_files(&krate.path().join("src"), &mut files);
        rust_files(&krate.path().join("tests"), &mut files);
    }
    assert!(files.len() > 100, "{} Rust files found", files.len());
    let unlisted: Vec<String> = files
        .iter()
        .filter(|file| arms_for_every_channel(&read(file)))
        .filter_map(|file| file.strip_prefix(&root).ok())
        .filter(|file| !listed.contains(*file))
        .map(|file| file.display().to_string())
        .collect();
    assert!(
        unlisted.is_empty(),
        "these files match over every channel, so a new channel touches them, but \
         CONTRIBUTING.md's \"A channel\" list does not name them: {unlisted:?}"
    );
}

#[test]
fn an_arm_for_every_channel_is_recognised() {
    let arms: String = ChannelKind::ALL
        .map(|channel| format!("        ChannelKind::{channel:?} => 1,\n"))
        .concat();
    assert!(arms_for_every_channel(&arms));
    let one_short: String = arms.lines().skip(1).collect::<Vec<_>>().join("\n");
    assert!(!arms_for_every_channel(&one_short));
    assert!(is_path("crates/channels/src/<channel>/inbound.rs") && is_path("README.md"));
    assert!(!is_path("webhook_<channel> =") && !is_path("Providers::send_part"));
}
