//! Scrubbing tested on captured events: tracing wired to Sentry as `init_tracing` wires it,
//! Sentry configured as `init_sentry` configures it, and the serialized event searched for
//! what must not leave the process.

use std::fmt;

use sentry::protocol::{Breadcrumb, Event, Map, Request, User, Value};

use super::{client_options, with_sentry};

const WHATSAPP_ERROR: &str = "The 'To' number +15005550001 is not a valid phone number.";
const JWT: &str =
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c2VyLTQyIn0.dBjftJeZ4CVPmB92K27uhbUJU1p1rwW1gFWFOEjXk";
const OUTBOX_ID: &str = "0190f3c2-7b1e-7c3a-9d4e-5f6a7b8c9d0e";

/// What must appear nowhere in anything sent.
const LEAKS: &[&str] = &[
    "5005550001",
    "555-0001",
    "ann@example.com",
    "example.com",
    "eyJhbGci",
    "dBjftJeZ4CVP",
    "not a valid phone number",
    "Hello Ann",
];

/// Runs `emit` under a subscriber wired like `init_tracing` and a Sentry client configured
/// like `init_sentry` (with `options` changed by `adjust`), and returns what was sent.
fn capture_with(
    adjust: impl FnOnce(&mut sentry::ClientOptions),
    emit: impl FnOnce(),
) -> Vec<Event<'static>> {
    let mut options = client_options();
    adjust(&mut options);
    let subscriber = with_sentry(tracing_subscriber::registry(), &|| {
        tracing_subscriber::EnvFilter::new("trace")
    });
    sentry::test::with_captured_events_options(
        || tracing::subscriber::with_default(subscriber, emit),
        options,
    )
}

fn capture(emit: impl FnOnce()) -> Vec<Event<'static>> {
    capture_with(|_| {}, emit)
}

fn only(events: Vec<Event<'static>>) -> (Event<'static>, String) {
    assert_eq!(events.len(), 1, "{events:#?}");
    let event = events.into_iter().next().expect("one event");
    let json = serde_json::to_string(&event).expect("an event serializes");
    (event, json)
}

fn assert_no_leaks(json: &str) {
    for leak in LEAKS {
        assert!(!json.contains(leak), "{leak:?} reached Sentry: {json}");
    }
}

/// The failed delivery, then its dead-letter alert, as dispatch logs them.
fn dead_letter_story() {
    tracing::info!(
        outbox_id = OUTBOX_ID,
        channel = "whatsapp",
        to = "whatsapp:+15005550001",
        body = "Hello Ann, your order shipped",
        "sending reply to whatsapp:+15005550001 with Authorization: Bearer {JWT}"
    );
    tracing::warn!(
        outbox_id = OUTBOX_ID,
        channel = "whatsapp",
        attempts = 4,
        dead = false,
        error = WHATSAPP_ERROR,
        "outbound delivery failed; dead-lettered"
    );
    tracing::info!(authorization = %format!("Bearer {JWT}"), "provider call retried");
    tracing::error!(
        target: "switchboard::alert",
        outbox_id = OUTBOX_ID,
        channel = "whatsapp",
        provider_status = 400,
        attempt = 5,
        customer_email = "ann@example.com",
        error = %WHATSAPP_ERROR,
        "outbound reply is dead after {} dead-letter retries: {}",
        5,
        WHATSAPP_ERROR
    );
}

#[test]
fn a_dead_letter_alert_reaches_sentry_without_customer_data() {
    let (event, json) = only(capture(dead_letter_story));
    assert_no_leaks(&json);

    assert_eq!(
        event.message.as_deref(),
        Some("outbound reply is dead after 5 dead-letter retries: [scrubbed]")
    );
    for kept in [
        format!("\"outbox_id\":\"{OUTBOX_ID}\""),
        "\"attempt\":5".to_owned(),
        "\"channel\":\"whatsapp\"".to_owned(),
        "\"provider_status\":400".to_owned(),
        "\"error\":\"[scrubbed]\"".to_owned(),
        "\"customer_email\":\"[scrubbed]\"".to_owned(),
    ] {
        assert!(json.contains(&kept), "{kept} is missing: {json}");
    }
    let crumbs = &event.breadcrumbs.values;
    assert_eq!(crumbs.len(), 3, "{crumbs:#?}");
    assert_eq!(
        crumbs[0].message.as_deref(),
        Some("sending reply to [scrubbed] with Authorization: Bearer [token]")
    );
    assert_eq!(
        crumbs[1].message.as_deref(),
        Some("outbound delivery failed; dead-lettered")
    );
    assert_eq!(crumbs[1].data.get("dead"), Some(&Value::Bool(false)));
    assert_eq!(crumbs[1].data.get("attempts"), Some(&Value::from(4)));
}

#[test]
fn only_error_events_are_sent() {
    let events = capture(|| {
        tracing::info!("an info line");
        tracing::warn!("a warning");
    });
    assert!(events.is_empty(), "{events:#?}");
}

#[test]
fn an_error_from_a_provider_module_is_removed_without_a_channel_field() {
    let (event, json) = only(capture(|| {
        tracing::error!(
            target: "switchboard_channels::whatsapp::outbound",
            error = "Message body 'Hello Ann, your order shipped' is too long",
            "whatsapp send failed"
        );
    }));
    assert_no_leaks(&json);
    assert_eq!(event.message.as_deref(), Some("whatsapp send failed"));
}

#[test]
fn our_own_errors_keep_their_text_but_not_contact_details() {
    let (_, json) = only(capture(|| {
        tracing::error!(
            error = "duplicate key for user ann@example.com on relation users",
            code = 23505,
            "request failed"
        );
    }));
    assert_no_leaks(&json);
    assert!(
        json.contains("duplicate key for user [email] on relation users"),
        "{json}"
    );
    assert!(json.contains("\"code\":23505"), "{json}");
}

#[derive(Debug)]
struct Refused;

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(WHATSAPP_ERROR)
    }
}

impl std::error::Error for Refused {}

#[test]
fn a_recorded_provider_error_loses_its_exception_text() {
    let (event, json) = only(capture(|| {
        let error = Refused;
        tracing::error!(
            channel = "sms",
            error = &error as &dyn std::error::Error,
            "send failed"
        );
    }));
    assert_no_leaks(&json);
    assert_eq!(event.exception.values.len(), 1);
    assert_eq!(
        event.exception.values[0].value.as_deref(),
        Some("[scrubbed]")
    );
}

#[test]
fn breadcrumbs_are_stored_scrubbed_before_any_event_is_sent() {
    // Without `before_send`, only `before_breadcrumb` stands between the scope and Sentry.
    let (_, json) = only(capture_with(
        |options| options.before_send = None,
        || {
            tracing::info!(
                channel = "telegram",
                text = "Hello Ann, your order shipped",
                error = WHATSAPP_ERROR,
                "reply to ann@example.com queued"
            );
            tracing::warn!(token = JWT, "webhook retried for +1 (500) 555-0001");
            tracing::error!("something broke");
        },
    ));
    assert_no_leaks(&json);
    assert!(json.contains("reply to [email] queued"), "{json}");
    assert!(json.contains("webhook retried for [phone]"), "{json}");
}

#[test]
fn before_breadcrumb_scrubs_message_and_data() {
    let options = client_options();
    let hook = options.before_breadcrumb.as_ref().expect("hook installed");
    let mut data = Map::new();
    data.insert("channel".into(), "whatsapp".into());
    data.insert("reason".into(), WHATSAPP_ERROR.into());
    data.insert("From".into(), "whatsapp:+15005550001".into());
    data.insert("outbox_id".into(), OUTBOX_ID.into());
    data.insert(
        "headers".into(),
        serde_json::json!({ "Authorization": format!("Bearer {JWT}"), "accept": "*/*" }),
    );
    let crumb = hook(Breadcrumb {
        message: Some(format!("whatsapp said: {WHATSAPP_ERROR}")),
        data,
        ..Default::default()
    })
    .expect("breadcrumbs are kept");
    let json = serde_json::to_string(&crumb).expect("serializes");
    assert_no_leaks(&json);
    assert_eq!(crumb.message.as_deref(), Some("whatsapp said: [scrubbed]"));
    assert_eq!(crumb.data["outbox_id"], OUTBOX_ID);
    assert_eq!(crumb.data["headers"]["accept"], "*/*");
    assert_eq!(crumb.data["headers"]["Authorization"], "[scrubbed]");
}

#[test]
fn the_request_loses_body_cookies_query_auth_and_user() {
    let mut request = Request {
        url: "https://api.example.org/v1/users/ann@example.com?token=abc#x"
            .parse()
            .ok(),
        data: Some("{\"password\":\"x\"}".into()),
        query_string: Some("token=abc".into()),
        cookies: Some("session=abc".into()),
        ..Default::default()
    };
    request
        .headers
        .insert("Authorization".into(), "Bearer t".into());
    request
        .headers
        .insert("X-Slack-Signature".into(), "v0=..".into());
    request.headers.insert("Accept".into(), "*/*".into());
    let event = super::scrub(Event {
        user: Some(User {
            email: Some("a@b.c".into()),
            ..Default::default()
        }),
        request: Some(request),
        ..Default::default()
    });
    assert!(event.user.is_none());
    let request = event.request.expect("kept");
    assert!(request.data.is_none());
    assert!(request.cookies.is_none());
    assert!(request.query_string.is_none());
    assert_eq!(request.headers.len(), 1);
    let url = request.url.expect("kept").to_string();
    assert!(!url.contains("ann@") && !url.contains("token"), "{url}");
}
