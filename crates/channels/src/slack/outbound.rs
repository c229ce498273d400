//! Slack `chat.postMessage`. Slack answers almost everything with HTTP 200 and puts the
//! verdict in `{"ok": false, "error": …}`, so the error code, not the status, decides
//! whether a retry can help.

use reqwest::{Client, RequestBuilder};
use serde_json::{Value, json};
use url::Url;

use crate::outbound::{
    Answer, FieldError, Outbound, PartOutcome, PartRequest, endpoint, reply_str, secret,
};

/// Slack errors that say "not now" rather than "never". Everything else (`invalid_auth`,
/// `channel_not_found`, `not_in_channel`, `is_archived`, `msg_too_long`, unknown codes…)
/// fails the same way on every attempt, so it goes to a human instead of the retry loop.
const TRANSIENT: [&str; 4] = [
    "internal_error",
    "fatal_error",
    "service_unavailable",
    "request_timeout",
];

pub(crate) struct Api;

impl Outbound for Api {
    /// Threaded when the customer wrote in (or started) a thread, so the answer sits under
    /// their message rather than in the channel at large.
    fn build(
        &self,
        client: &Client,
        base: &Url,
        req: &PartRequest<'_>,
    ) -> Result<RequestBuilder, FieldError> {
        let token = secret(req, "bot_token")?;
        let mut body = json!({"channel": reply_str(req, "channel")?, "text": req.text});
        if let Some(thread_ts) = crate::outbound::non_empty(req.reply_to, "thread_ts") {
            body["thread_ts"] = Value::from(thread_ts);
        }
        let url = endpoint(req.channel, base, &["chat.postMessage"])?;
        Ok(client.post(url).bearer_auth(token).json(&body))
    }

    fn classify(&self, answer: &Answer, req: &PartRequest<'_>) -> PartOutcome {
        let error = answer.body["error"].as_str();
        if answer.is_success() && answer.body["ok"] != false {
            let ts = answer.body["ts"].as_str().unwrap_or_default();
            return PartOutcome::Accepted {
                provider_id: ts.to_owned(),
            };
        }
        let status = Some(answer.status);
        match error {
            Some("ratelimited") => PartOutcome::Retry {
                after: answer.retry_after,
                reason: "slack rate limited the bot (ratelimited)".to_owned(),
                status,
            },
            Some(code) if TRANSIENT.contains(&code) => PartOutcome::Retry {
                after: answer.retry_after,
                reason: format!("slack had a transient failure ({code})"),
                status,
            },
            Some(code) if answer.is_success() => PartOutcome::Permanent {
                reason: format!("slack refused the message ({code})"),
                status,
            },
            Some(code) => answer.failure(req.channel, code),
            None => answer.failure(req.channel, &answer.snippet()),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::outbound::testkit::*;
    use switchboard_domain::ChannelKind::Slack;

    fn secrets() -> serde_json::Value {
        json!({"signing_secret": "sign-secret", "bot_token": "xoxb-test-token"})
    }

    fn posted(ts: &str) -> Reply {
        Reply::new(200).set_body_json(json!({"ok": true, "channel": "D1", "ts": ts}))
    }

    #[tokio::test]
    async fn first_reply_posts_to_the_channel() {
        let server = provider(posted("1700000001.000200")).await;
        let (secrets, reply_to) = (secrets(), json!({"channel": "D1"}));
        let out = providers(&format!("{}/api", server.uri()))
            .send_part(&part(Slack, &secrets, &reply_to, "Hello there"))
            .await;
        assert_eq!(verdict(&out), ("accepted", None, None, "1700000001.000200"));
        let sent = only_request(&server).await;
        assert_eq!(sent.method.as_str(), "POST");
        assert_eq!(sent.url.path(), "/api/chat.postMessage");
        assert_eq!(header(&sent, "authorization"), "Bearer xoxb-test-token");
        assert_eq!(header(&sent, "content-type"), "application/json");
        let body: serde_json::Value = sent.body_json().expect("json");
        assert_eq!(body, json!({"channel": "D1", "text": "Hello there"}));
    }

    #[tokio::test]
    async fn threaded_reply_carries_thread_ts() {
        let server = provider(posted("1.9")).await;
        let (secrets, reply_to) = (secrets(), json!({"channel": "C9", "thread_ts": "1.5"}));
        // A base with a trailing slash joins the same way.
        let out = providers(&format!("{}/api/", server.uri()))
            .send_part(&part(Slack, &secrets, &reply_to, "Threaded"))
            .await;
        assert_eq!(verdict(&out), ("accepted", None, None, "1.9"));
        let sent = only_request(&server).await;
        assert_eq!(sent.url.path(), "/api/chat.postMessage");
        let body: serde_json::Value = sent.body_json().expect("json");
        assert_eq!(
            body,
            json!({"channel": "C9", "text": "Threaded", "thread_ts": "1.5"})
        );
    }

    async fn outcome_of(reply: Reply) -> super::PartOutcome {
        let server = provider(reply).await;
        let (secrets, reply_to) = (secrets(), json!({"channel": "D1"}));
        providers(&server.uri())
            .send_part(&part(Slack, &secrets, &reply_to, "hi"))
            .await
    }

    #[tokio::test]
    async fn rate_limit_is_retried_after_the_given_delay() {
        let limited = Reply::new(429)
            .insert_header("Retry-After", "7")
            .set_body_json(json!({"ok": false, "error": "ratelimited"}));
        let out = outcome_of(limited).await;
        let (kind, after, status, _) = verdict(&out);
        assert_eq!((kind, after, status), ("retry", Some(7), Some(429)));
    }

    #[tokio::test]
    async fn server_and_transient_errors_are_retried() {
        let out = outcome_of(Reply::new(503).set_body_string("upstream down")).await;
        let (kind, after, status, reason) = verdict(&out);
        assert_eq!((kind, after, status), ("retry", None, Some(503)));
        assert!(reason.contains("upstream down"), "{reason}");
        let busy = json!({"ok": false, "error": "service_unavailable"});
        let out = outcome_of(Reply::new(200).set_body_json(busy)).await;
        assert_eq!(verdict(&out).0, "retry");
    }

    #[tokio::test]
    async fn refusals_are_permanent() {
        for code in ["channel_not_found", "invalid_auth", "some_new_error"] {
            let refused = json!({"ok": false, "error": code});
            let out = outcome_of(Reply::new(200).set_body_json(refused)).await;
            let (kind, _, status, reason) = verdict(&out);
            assert_eq!((kind, status), ("permanent", Some(200)));
            assert!(reason.contains(code), "{reason}");
        }
    }

    #[tokio::test]
    async fn unreachable_slack_is_retried() {
        let (secrets, reply_to) = (secrets(), json!({"channel": "D1"}));
        let out = providers(&closed_base())
            .send_part(&part(Slack, &secrets, &reply_to, "hi"))
            .await;
        let (kind, after, status, reason) = verdict(&out);
        assert_eq!((kind, after, status), ("retry", None, None));
        assert!(
            reason.starts_with("slack request could not connect"),
            "{reason}"
        );
    }

    #[tokio::test]
    async fn a_hung_provider_times_out_into_a_retry() {
        // The test clients time out after 500 ms.
        let slow = posted("1.1").set_delay(std::time::Duration::from_secs(5));
        let out = outcome_of(slow).await;
        let (kind, after, status, reason) = verdict(&out);
        assert_eq!((kind, after, status), ("retry", None, None));
        assert!(reason.starts_with("slack request timed out"), "{reason}");
    }

    #[tokio::test]
    async fn missing_fields_are_named_without_values() {
        let server = provider(posted("1.1")).await;
        let p = providers(&server.uri());
        let no_token = json!({"signing_secret": "sign-secret"});
        let out = p
            .send_part(&part(Slack, &no_token, &json!({"channel": "D1"}), "hi"))
            .await;
        let (kind, _, _, reason) = verdict(&out);
        assert_eq!(kind, "permanent");
        assert!(
            reason.contains("bot_token") && !reason.contains("sign-secret"),
            "{reason}"
        );
        let out = p
            .send_part(&part(Slack, &secrets(), &json!({"channel": 5}), "hi"))
            .await;
        assert_eq!(
            verdict(&out),
            (
                "permanent",
                None,
                None,
                "slack reply_to lacks a usable `channel`"
            )
        );
        assert!(
            server
                .received_requests()
                .await
                .expect("recorded")
                .is_empty()
        );
    }
}
