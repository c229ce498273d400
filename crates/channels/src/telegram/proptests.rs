//! Telegram's webhooks through [`crate::verify_and_parse`], the function the webhook
//! handler calls, with the secret token Telegram echoes so every input reaches the parser.

use http::HeaderMap;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Value, json};
use switchboard_domain::ChannelKind;

use crate::proptests::config;
use crate::proptests::edits::{edits, mutate};
use crate::proptests::inputs::bytes;
use crate::proptests::webhooks::signed;
use crate::test_support::headers;

const TOKEN: &str = "s3cr3t-token_value";

/// Valid updates of each shape the Telegram parser tells apart.
pub(crate) const BASES: &[&str] = &[
    concat!(
        r#"{"update_id":10001,"message":{"message_id":7,"date":1700000000,"#,
        r#""from":{"id":555,"is_bot":false,"first_name":"Ada","last_name":"Lovelace","username":"ada"},"#,
        r#""chat":{"id":-100200,"type":"private"},"text":"hello bot"}}"#
    ),
    concat!(
        r#"{"update_id":10002,"message":{"message_id":8,"from":{"id":556,"username":"bob"},"#,
        r#""chat":{"id":42,"type":"group"},"photo":[{"file_id":"f"}],"caption":"see this"}}"#
    ),
    r#"{"update_id":10003,"edited_message":{"message_id":7,"from":{"id":555},"chat":{"id":-100200},"text":"edited"}}"#,
];

/// The connection's secrets.
pub(crate) fn secrets() -> Value {
    json!({"bot_token": "123:abc", "secret_token": TOKEN})
}

/// The headers Telegram would send with any body.
pub(crate) fn signed_headers(_body: &[u8]) -> HeaderMap {
    headers(&[("X-Telegram-Bot-Api-Secret-Token", TOKEN)])
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn telegram_signed_bytes_never_panic(body in bytes()) {
        signed(ChannelKind::Telegram, &body)?;
    }

    #[test]
    fn telegram_update_mutations_never_panic(base in select(BASES), (edits, cut) in edits()) {
        signed(ChannelKind::Telegram, &mutate(base, &edits, cut))?;
    }
}
