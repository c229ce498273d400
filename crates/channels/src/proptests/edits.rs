//! Edits of a valid JSON payload: members dropped or repeated, values of another type, very
//! long or hostile strings, deep nesting, and raw text a `Value` cannot hold (numbers past
//! `f64`, lone surrogates in `\u` escapes, broken escapes), spliced into the serialised
//! document.

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Map, Value};

use super::inputs::{MAX_LEN, fill, long_text, short_text, text};

/// Any JSON value, kept small: long strings come from [`Edit::Long`] only.
pub(crate) fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        short_text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            vec((short_text(), inner), 0..4)
                .prop_map(|members| Value::Object(members.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// JSON text no `Value` produces: numbers beyond `i64`/`u64`/`f64`, lone and reversed
/// surrogates, escapes that are not escapes, raw control characters, broken literals.
#[rustfmt::skip]
const RAW: &[&str] = &[
    "1e999", "-1e999", "1e-999", "-0", "0.0", "18446744073709551616", "-9223372036854775809",
    "9223372036854775807", "-9223372036854775808", "1.7976931348623157e308", "4.9e-324", "1E+2",
    "01", "\"\\ud800\"", "\"\\udc00\"", "\"x\\ud800\\u0041\"", "\"\\udc00\\ud800\"",
    "\"\\ud83d\\ude00\"", "\"\\u0000\"", "\"\\u202e\\u200f\\u0301\"", "\"\\uZZZZ\"",
    "\"\\x41\"", "\"tab\there\"", "\"\\", "\"unterminated", "NaN", "Infinity", "tru", "nul",
    "[", "{", "}", "",
];

/// One edit of a JSON document. Nodes are counted in document order; a `usize` picks one
/// modulo their number, whatever the document's size.
#[derive(Debug, Clone)]
pub(crate) enum Edit {
    /// A member of an object goes.
    Drop(usize, usize),
    /// A node becomes another value, usually of another type.
    Replace(usize, Value),
    /// A string keeps its type but takes hostile text (the parser reads it further).
    Text(usize, String),
    /// A node becomes a very long string.
    Long(usize, String),
    /// A node is wrapped in this many arrays (or objects).
    Nest(usize, usize, bool),
    /// A node is replaced by raw JSON text (see [`RAW`]), or by a number of this many digits.
    Raw(usize, Result<&'static str, usize>),
    /// An object gets one of its keys a second time, with this value.
    Duplicate(usize, usize, Value),
}

/// How deep [`Edit::Nest`] goes: mostly within serde_json's limit of 128, sometimes past it.
fn depth() -> impl Strategy<Value = usize> {
    prop_oneof![3 => 1..120usize, 1 => 120..300usize]
}

pub(crate) fn edit() -> impl Strategy<Value = Edit> {
    let at = any::<usize>;
    prop_oneof![
        3 => (at(), at()).prop_map(|(o, k)| Edit::Drop(o, k)),
        4 => (at(), json()).prop_map(|(n, v)| Edit::Replace(n, v)),
        4 => (at(), text()).prop_map(|(n, s)| Edit::Text(n, s)),
        1 => (at(), long_text()).prop_map(|(n, s)| Edit::Long(n, s)),
        1 => (at(), depth(), any::<bool>()).prop_map(|(n, d, a)| Edit::Nest(n, d, a)),
        1 => (at(), prop_oneof![select(RAW).prop_map(Ok), (1..MAX_LEN).prop_map(Err)])
            .prop_map(|(n, raw)| Edit::Raw(n, raw)),
        2 => (at(), at(), json()).prop_map(|(o, k, v)| Edit::Duplicate(o, k, v)),
    ]
}

/// A few edits, then maybe a cut at some byte (which may split a UTF-8 sequence).
pub(crate) fn edits() -> impl Strategy<Value = (Vec<Edit>, Option<usize>)> {
    (vec(edit(), 1..4), option::weighted(0.1, any::<usize>()))
}

/// `base` with `edits` applied, serialised, then cut at `cut`.
pub(crate) fn mutate(base: &str, edits: &[Edit], cut: Option<usize>) -> Vec<u8> {
    let mut doc: Value = serde_json::from_str(base).expect("the base payloads are JSON");
    // Text substitutions made after serialising: (the quoted marker, what replaces it).
    let mut raw: Vec<(String, String)> = Vec::new();
    for edit in edits {
        let mut marker = || {
            let m = format!("\u{e000}switchboard-marker-{}\u{e000}", raw.len());
            raw.push((quoted(&m), String::new()));
            m
        };
        match edit {
            Edit::Drop(o, k) => {
                if let Some(Value::Object(map)) = nth(&mut doc, *o, is_filled_object) {
                    if let Some(key) = map.keys().nth(k % map.len()).cloned() {
                        map.remove(&key);
                    }
                }
            }
            Edit::Replace(n, v) => *nth(&mut doc, *n, any_node).expect("a node") = v.clone(),
            Edit::Text(n, s) => {
                if let Some(node) = nth(&mut doc, *n, Value::is_string) {
                    *node = s.clone().into();
                }
            }
            Edit::Long(n, s) => *nth(&mut doc, *n, any_node).expect("a node") = s.clone().into(),
            Edit::Nest(n, depth, array) => {
                let node = nth(&mut doc, *n, any_node).expect("a node");
                for _ in 0..*depth {
                    let inner = node.take();
                    *node = if *array {
                        Value::Array(vec![inner])
                    } else {
                        Value::Object(Map::from_iter([("n".to_owned(), inner)]))
                    };
                }
            }
            Edit::Raw(n, text) => {
                let m = marker();
                *nth(&mut doc, *n, any_node).expect("a node") = Value::String(m);
                raw.last_mut().expect("just pushed").1 = match text {
                    Ok(text) => (*text).to_owned(),
                    Err(digits) => fill("9876543210", *digits),
                };
            }
            Edit::Duplicate(o, k, v) => {
                let m = marker();
                if let Some(Value::Object(map)) = nth(&mut doc, *o, is_filled_object) {
                    let key = map.keys().nth(k % map.len()).cloned().expect("in range");
                    map.insert(m, v.clone());
                    raw.last_mut().expect("just pushed").1 = quoted(&key);
                }
            }
        }
    }
    let mut text = serde_json::to_string(&doc).expect("a Value serialises");
    for (marker, replacement) in raw {
        text = text.replacen(&marker, &replacement, 1);
    }
    let mut bytes = text.into_bytes();
    if let Some(cut) = cut {
        bytes.truncate(cut % (bytes.len() + 1));
    }
    bytes
}

fn quoted(s: &str) -> String {
    serde_json::to_string(s).expect("a string serialises")
}

fn any_node(_: &Value) -> bool {
    true
}

fn is_filled_object(v: &Value) -> bool {
    v.as_object().is_some_and(|m| !m.is_empty())
}

/// The `at`-th node (document order) of those `keep` accepts; `None` when there are none.
fn nth(doc: &mut Value, at: usize, keep: fn(&Value) -> bool) -> Option<&mut Value> {
    let count = count(doc, keep);
    if count == 0 {
        return None;
    }
    let mut left = at % count;
    find(doc, &mut left, keep)
}

fn count(v: &Value, keep: fn(&Value) -> bool) -> usize {
    let children = match v {
        Value::Array(items) => items.iter().map(|c| count(c, keep)).sum(),
        Value::Object(map) => map.values().map(|c| count(c, keep)).sum(),
        _ => 0,
    };
    usize::from(keep(v)) + children
}

fn find<'a>(v: &'a mut Value, left: &mut usize, keep: fn(&Value) -> bool) -> Option<&'a mut Value> {
    if keep(v) {
        if *left == 0 {
            return Some(v);
        }
        *left -= 1;
    }
    match v {
        Value::Array(items) => items.iter_mut().find_map(|c| find(c, left, keep)),
        Value::Object(map) => map.values_mut().find_map(|c| find(c, left, keep)),
        _ => None,
    }
}

#[test]
fn edits_do_what_they_say() {
    let base = r#"{"type":"x","n":1}"#;
    let dup = mutate(base, &[Edit::Duplicate(0, 1, Value::Null)], None);
    let dup = String::from_utf8(dup).expect("utf-8");
    assert_eq!(dup.matches("\"type\"").count(), 2, "{dup}");
    let raw = mutate(base, &[Edit::Raw(1, Ok("1e999"))], None);
    assert!(String::from_utf8_lossy(&raw).contains("1e999"));
    let nested = mutate(base, &[Edit::Nest(0, 3, true)], None);
    assert_eq!(nested, b"[[[{\"n\":1,\"type\":\"x\"}]]]");
    assert_eq!(fill("é", 5), "éé");
}
