//! The customer simulator: a page (and `POST /simulator/send`) that writes to the demo org
//! the way a customer would, as a correctly signed webhook sent through the load balancer
//! (or straight to one pod), and shows what each channel's fake API received in reply.
//!
//! The connections and their secrets come from the seed file (`.dev/seed.json`, which
//! `switchboard admin seed-demo` writes): it is read at every send, so it may appear after
//! this process started.

use super::Demo;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::atomic::{AtomicI64, Ordering};
use switchboard_channels::signing::{self, Signed};
use switchboard_domain::ChannelKind;
use url::Url;

/// Telegram `update_id`s must be new for every update of a bot: numbers from the clock,
/// increasing within this process.
static UPDATE_ID: AtomicI64 = AtomicI64::new(0);

#[derive(Deserialize)]
pub(super) struct SendRequest {
    channel: String,
    text: String,
    /// The customer's name; the same name is the same customer.
    #[serde(default)]
    customer: Option<String>,
    /// `lb` (default) or `pod-1`, `pod-2`, … (the `--pod-url`s in order).
    #[serde(default)]
    target: Option<String>,
}

fn refuse(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({"error": message.into()}))).into_response()
}

/// A stable number for a name, so one name is always the same customer.
fn fingerprint(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// `GET /simulator/config`: what the page needs to draw its form.
pub(super) async fn config(State(demo): State<Demo>) -> Json<Value> {
    let seed = demo.seed();
    let channels: Vec<&str> = ["slack", "whatsapp", "telegram", "email"]
        .into_iter()
        .filter(|c| {
            seed.as_ref()
                .is_ok_and(|s| s["channels"][c]["id"].is_string())
        })
        .collect();
    let mut targets = vec!["lb".to_owned()];
    targets.extend((1..=demo.pods.len()).map(|i| format!("pod-{i}")));
    Json(json!({
        "console_url": demo.switchboard.as_str(),
        "channels": channels,
        "targets": targets,
        "seed_error": seed.err().map(|e| e.to_string()),
    }))
}

/// `POST /simulator/send`.
pub(super) async fn send(State(demo): State<Demo>, Json(req): Json<SendRequest>) -> Response {
    let seed = match demo.seed() {
        Ok(seed) => seed,
        Err(e) => return refuse(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    };
    let connection = &seed["channels"][&req.channel];
    let (Some(webhook_url), Some(secrets)) = (
        connection["webhook_url"].as_str(),
        connection["secrets"].as_object(),
    ) else {
        return refuse(
            StatusCode::NOT_FOUND,
            format!("the seed has no {} connection", req.channel),
        );
    };
    let secret = |name: &str| {
        secrets
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let base = match req.target.as_deref().unwrap_or("lb") {
        "lb" => demo.switchboard.clone(),
        pod => match pod
            .strip_prefix("pod-")
            .and_then(|n| n.parse::<usize>().ok())
            .and_then(|n| demo.pods.get(n.wrapping_sub(1)))
        {
            Some(url) => url.clone(),
            None => return refuse(StatusCode::BAD_REQUEST, format!("unknown target {pod}")),
        },
    };
    let Ok(public) = Url::parse(webhook_url) else {
        return refuse(
            StatusCode::BAD_REQUEST,
            "the seed's webhook_url is not a URL",
        );
    };
    let Ok(target) = base.join(public.path()) else {
        return refuse(StatusCode::BAD_REQUEST, "cannot build the webhook URL");
    };
    let name = req
        .customer
        .as_deref()
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .unwrap_or("Ada Lovelace")
        .to_owned();
    let n = fingerprint(&name);
    let now = chrono::Utc::now();
    let unique = uuid::Uuid::new_v4().simple().to_string();
    let Ok(channel) = req.channel.parse::<ChannelKind>() else {
        let other = &req.channel;
        return refuse(StatusCode::BAD_REQUEST, format!("unknown channel {other}"));
    };
    let (signed, customer): (Signed, String) = match channel {
        ChannelKind::Slack => {
            let user = format!("U{:08X}", n as u32);
            let body = json!({
                "type": "event_callback", "event_id": format!("Ev{unique}"), "team_id": "TDEMO",
                "event": {"type": "message", "user": user, "text": req.text, "channel": format!("D{:08X}", n as u32),
                          "ts": format!("{}.{:06}", now.timestamp(), now.timestamp_subsec_micros())}
            });
            let body = serde_json::to_vec(&body).unwrap_or_default();
            (
                signing::slack(secret("signing_secret"), now.timestamp(), body),
                user,
            )
        }
        ChannelKind::Whatsapp => {
            let from = format!("whatsapp:+1555{:07}", n % 10_000_000);
            let params = vec![
                ("AccountSid", secret("account_sid").to_owned()),
                ("Body", req.text.clone()),
                ("From", from.clone()),
                ("MessageSid", format!("SM{unique}")),
                ("NumMedia", "0".to_owned()),
                ("ProfileName", name.clone()),
                (
                    "To",
                    format!(
                        "whatsapp:{}",
                        secret("from_number").trim_start_matches("whatsapp:")
                    ),
                ),
            ];
            (
                signing::whatsapp(secret("auth_token"), webhook_url, params),
                from,
            )
        }
        ChannelKind::Telegram => {
            let floor = now.timestamp_millis();
            let next = |prev: i64| Some(prev.max(floor) + 1);
            let prev = UPDATE_ID
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, next)
                .unwrap_or_else(|p| p);
            let id = prev.max(floor) + 1;
            let chat = (n % 1_000_000_000) as i64 + 1;
            let body = json!({
                "update_id": id,
                "message": {"message_id": id % 1_000_000_000, "date": now.timestamp(), "text": req.text,
                            "from": {"id": chat, "is_bot": false, "first_name": name},
                            "chat": {"id": chat, "type": "private"}}
            });
            let body = serde_json::to_vec(&body).unwrap_or_default();
            (
                signing::telegram(secret("secret_token"), body),
                chat.to_string(),
            )
        }
        ChannelKind::Email => {
            let slug: String = name
                .to_lowercase()
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '.' })
                .collect();
            let address = format!("{slug}@customers.example");
            let email_id = uuid::Uuid::new_v4().to_string();
            demo.rec.store_email(&email_id, &req.text);
            let body = json!({
                "type": "email.received", "created_at": now.to_rfc3339(),
                "data": {"email_id": email_id, "from": format!("{name} <{address}>"),
                         "to": [secret("from_address")], "subject": format!("Question from {name}"),
                         "message_id": format!("<{unique}@customers.example>")}
            });
            let body = serde_json::to_vec(&body).unwrap_or_default();
            match signing::standard_webhook(
                secret("webhook_secret"),
                &format!("msg_{unique}"),
                now.timestamp(),
                body,
            ) {
                Ok(signed) => (signed, address),
                Err(e) => return refuse(StatusCode::BAD_REQUEST, e.to_string()),
            }
        }
    };
    let mut request = demo.http.post(target.clone()).body(signed.body);
    for (name, value) in signed.headers {
        request = request.header(name, value);
    }
    match request.send().await {
        Ok(answer) => {
            let status = answer.status().as_u16();
            let served_by = answer
                .headers()
                .get("x-served-by")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let text = answer.text().await.unwrap_or_default();
            Json(json!({
                "status": status, "answer": text, "sent_to": target.as_str(),
                "served_by": served_by, "channel": req.channel, "customer": customer, "name": name,
            }))
            .into_response()
        }
        Err(e) => refuse(
            StatusCode::BAD_GATEWAY,
            format!("could not reach {}: {}", target, e.without_url()),
        ),
    }
}
