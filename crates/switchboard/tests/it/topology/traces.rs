//! OpenTelemetry traces from two real pods to a collector (`OtlpReceiver`): one inbound
//! event's path across pods and the queue is one trace, its release another one linked to
//! it, and neither carries what the customer wrote or who they are. A collector that hangs
//! costs dropped, counted spans, never a request's time or the pod's exit.

use crate::{exited, process_env, serve_ready, sigterm};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use switchboard_testing::fakes::{self, Provider};
use switchboard_testing::signing::{WHATSAPP_TOKEN, slack_message, whatsapp};
use switchboard_testing::{
    Endpoint, GrpcOtlpReceiver, Org, OtlpReceiver, ReceivedSpan, TestDb, random_prefix,
};
use uuid::Uuid;

/// What the customer wrote and who they are: none of it may reach a span.
const CUSTOMER: &str = "whatsapp:+15005550001";
const TEXT: &str = "It is ada@example.com, call me on +1 500 555 0002: the parcel never came";
const SECRETS: &[&str] = &[
    "15005550001",
    "500 555 0002",
    "ada@example.com",
    "parcel never came",
    // The agent's draft, released unchanged.
    "Happy to help",
];

/// The REST caller's own trace, sent with the release.
const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

fn pod_vars(
    db: &TestDb,
    prefix: &str,
    receiver: &OtlpReceiver,
    pod: &str,
) -> HashMap<String, String> {
    let mut vars = process_env(db, prefix);
    for (k, v) in [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint().as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ("POD_ID", pod),
        ("DRAIN_DELAY_MS", "100"),
        ("LOG_FORMAT", "json"),
    ] {
        vars.insert(k.into(), v.into());
    }
    vars
}

fn named<'a>(spans: &'a [ReceivedSpan], name: &str) -> &'a ReceivedSpan {
    let found: Vec<&ReceivedSpan> = spans.iter().filter(|s| s.name == name).collect();
    assert_eq!(found.len(), 1, "one {name} span: {spans:#?}");
    found[0]
}

fn child_of<'a>(spans: &'a [ReceivedSpan], name: &str, parent: &ReceivedSpan) -> &'a ReceivedSpan {
    let span = named(spans, name);
    assert_eq!(
        span.trace_id, parent.trace_id,
        "{name} is in its parent's trace"
    );
    assert_eq!(
        span.parent_span_id, parent.span_id,
        "{name}'s parent is {}",
        parent.name
    );
    assert!(
        span.start_unix_nanos >= parent.start_unix_nanos,
        "{name} starts after {}",
        parent.name
    );
    span
}

fn traceparent(span: &ReceivedSpan) -> String {
    format!("00-{}-{}-01", span.trace_id, span.span_id)
}

/// A webhook on pod 1, its job on pod 2, its release through pod 1 (sent from pod 1, pod 2
/// gone by then): the event's spans are one trace across the two pods, parent by parent;
/// the release continues its caller's trace and links to the event's; the agent is told the
/// trace; and no span holds the customer's number, email, text or the reply.
#[tokio::test]
async fn one_event_is_one_trace_across_pods_and_its_release_links_to_it() {
    let db = TestDb::fresh().await;
    let prefix = random_prefix();
    let receiver = OtlpReceiver::start().await;
    let agent = fakes::agent().await;
    let provider = Provider::start().await;
    let with_fakes = |pod: &str| {
        let mut vars = pod_vars(&db, &prefix, &receiver, pod);
        vars.insert("AGENT_URL".into(), agent.uri());
        vars.extend(provider.env());
        vars
    };
    // Pod 1 takes no inbound job: the webhook's job is pod 2's.
    let mut vars1 = with_fakes("pod-1");
    vars1.insert("INBOUND_CONCURRENCY".into(), "0".into());
    let (mut one, pod1) = serve_ready(&vars1).await;
    let (mut two, _pod2) = serve_ready(&with_fakes("pod-2")).await;

    let org = Org::create(&db, &pod1).await;
    let conn = org.conns["whatsapp"];
    let url = format!("https://switchboard.test/webhooks/whatsapp/{conn}");
    let signed = whatsapp(WHATSAPP_TOKEN, "AC123", &url, "SM1", CUSTOMER, TEXT);
    let (status, body) = pod1.send_webhook(&org.webhook("whatsapp"), &signed).await;
    assert_eq!(status, 200, "{body}");
    db.wait_for_count("SELECT count(*) FROM drafts", 1).await;

    // Pod 2 leaves (and sends its last spans): the release and its send are pod 1's.
    sigterm(&two);
    assert!(exited(&mut two, Duration::from_secs(60)).await.success());
    let item: Uuid = db.scalar("SELECT id FROM expert_queue").await;
    let caller = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01");
    let released = pod1
        .as_user(&org.token)
        .request(
            reqwest::Method::POST,
            &format!("/expert-queue/{item}/release"),
        )
        .header("traceparent", &caller)
        .json(&serde_json::json!({}))
        .send()
        .await
        .expect("release");
    assert_eq!(released.status(), 200);
    db.wait_for_count("SELECT count(*) FROM outbox WHERE status = 'sent'", 1)
        .await;
    sigterm(&one);
    assert!(exited(&mut one, Duration::from_secs(60)).await.success());

    let wanted = [
        "webhook",
        "channel_inbound",
        "agent_call",
        "expert_action",
        "channel_outbound",
        "provider_call",
    ];
    let spans = receiver
        .spans_until(|s| wanted.iter().all(|w| s.iter().any(|span| span.name == *w)))
        .await;

    // The event: webhook request → webhook on pod 1 → job → agent call on pod 2.
    let request = named(&spans, "POST /webhooks/{channel}/{connection_id}");
    assert_eq!(request.parent_span_id, "", "the provider sent no trace");
    assert_eq!(request.attribute("http.response.status_code"), Some("200"));
    let webhook = child_of(&spans, "webhook", request);
    let job = child_of(&spans, "channel_inbound", webhook);
    let call = child_of(&spans, "agent_call", job);
    assert_eq!((request.pod(), webhook.pod()), ("pod-1", "pod-1"));
    assert_eq!((job.pod(), call.pod()), ("pod-2", "pod-2"));
    for span in [webhook, job] {
        assert_eq!(span.attribute("channel"), Some("whatsapp"), "{}", span.name);
        assert_eq!(span.attribute("org_id"), Some(org.id.to_string().as_str()));
        assert_eq!(
            span.attribute("connection_id"),
            Some(conn.to_string().as_str())
        );
    }
    assert_eq!(webhook.attribute("outcome"), Some("accepted"));
    assert_eq!(job.attribute("outcome"), Some("drafted"));
    assert_eq!(call.attribute("outcome"), Some("drafted"));
    assert_eq!(call.attribute("http.response.status_code"), Some("200"));
    // The inbox row holds the webhook's context, and the agent was told its call's.
    let stored: String = db.scalar("SELECT traceparent FROM inbound_events").await;
    assert_eq!(stored, traceparent(webhook));
    let asked = agent.received_requests().await.expect("recorded");
    let header = asked[0]
        .headers
        .get("traceparent")
        .map(|v| v.to_str().unwrap_or(""));
    assert_eq!(header, Some(traceparent(call).as_str()));

    // The release: the caller's trace → expert action → send → provider call, all on pod 1,
    // linked to the event's trace (the job that stored the message it answers).
    let release = named(&spans, "POST /expert-queue/{id}/release");
    assert_eq!(
        (release.trace_id.as_str(), release.parent_span_id.as_str()),
        (CALLER_TRACE, CALLER_SPAN),
        "the release continues its caller's trace"
    );
    let action = child_of(&spans, "expert_action", release);
    let send = child_of(&spans, "channel_outbound", action);
    let provider_call = child_of(&spans, "provider_call", send);
    for span in [release, action, send, provider_call] {
        assert_eq!(span.pod(), "pod-1", "{}", span.name);
    }
    let event = (job.trace_id.clone(), job.span_id.clone());
    assert!(action.links.contains(&event), "{:?}", action.links);
    assert!(send.links.contains(&event), "{:?}", send.links);
    assert_eq!(action.attribute("action"), Some("release"));
    assert_eq!(action.attribute("outcome"), Some("unchanged"));
    assert_eq!(send.attribute("outcome"), Some("sent"));
    assert_eq!(send.attribute("attempt"), Some("1"));
    assert_eq!(provider_call.attribute("channel"), Some("whatsapp"));
    assert_eq!(provider_call.attribute("outcome"), Some("accepted"));

    // The journey names each step's trace: the event's for the intake and the draft, the
    // release's for the release and the delivery.
    let steps: Vec<(String, Option<String>)> =
        sqlx::query_as("SELECT step, trace_id FROM message_journey ORDER BY at, step")
            .fetch_all(&db.pool().await)
            .await
            .expect("the journey");
    let trace_of = |step: &str| {
        let found: Vec<&Option<String>> = steps
            .iter()
            .filter(|(s, _)| s == step)
            .map(|(_, t)| t)
            .collect();
        assert_eq!(found.len(), 1, "one {step} step: {steps:?}");
        found[0].clone()
    };
    for step in ["received", "committed", "queued", "drafted", "shown"] {
        assert_eq!(trace_of(step), Some(webhook.trace_id.clone()), "{step}");
    }
    for step in ["released", "attempt", "delivered"] {
        assert_eq!(trace_of(step).as_deref(), Some(CALLER_TRACE), "{step}");
    }

    for span in &spans {
        assert_eq!(
            span.resource.get("service.name").map(String::as_str),
            Some("switchboard")
        );
        assert!(span.resource.contains_key("service.version"), "{span:?}");
        for text in span.texts() {
            for secret in SECRETS {
                assert!(
                    !text.contains(secret),
                    "{} carries {secret:?}: {text}",
                    span.name
                );
            }
        }
    }
}

/// A draft the autopilot sends after its hold: the send is a trace of its own, started by
/// `autopilot_release` on the pod whose slot it was, with the send and the provider call as
/// its children and a link to the event's trace; the outbox row carries it across.
#[tokio::test]
async fn an_autopilot_send_is_its_own_trace_linked_to_the_events() {
    let db = TestDb::fresh().await;
    let receiver = OtlpReceiver::start().await;
    let agent = fakes::agent().await;
    let provider = Provider::start().await;
    let mut vars = pod_vars(&db, &random_prefix(), &receiver, "pod-1");
    vars.insert("AGENT_URL".into(), agent.uri());
    vars.insert("SCHEDULE_AUTOPILOT_SEND".into(), "* * * * * *".into());
    vars.extend(provider.env());
    let (mut child, pod) = serve_ready(&vars).await;
    let org = Org::create(&db, &pod).await;
    let (status, body) = pod
        .as_user(&org.token)
        .put(
            &format!("/orgs/{}/autopilot", org.id),
            serde_json::json!({
                "enabled": true,
                "channels": {"slack": {"enabled": true, "min_confidence": 0.8, "hold_secs": 10}},
            }),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let signed = slack_message("U1", "1700000000.000001", "when do you open?");
    let (status, body) = pod.send_webhook(&org.webhook("slack"), &signed).await;
    assert_eq!(status, 200, "{body}");
    db.wait_for_count(
        "SELECT count(*) FROM expert_queue WHERE status = 'auto_pending'",
        1,
    )
    .await;
    sqlx::query("UPDATE expert_queue SET send_at = now() WHERE status = 'auto_pending'")
        .execute(&db.pool().await)
        .await
        .expect("end the hold's wait");
    db.wait_for_count("SELECT count(*) FROM outbox WHERE status = 'sent'", 1)
        .await;
    let stored: Option<String> = db.scalar("SELECT traceparent FROM outbox").await;
    sigterm(&child);
    assert!(exited(&mut child, Duration::from_secs(60)).await.success());

    let wanted = ["channel_inbound", "autopilot_release", "provider_call"];
    let spans = receiver
        .spans_until(|s| wanted.iter().all(|w| s.iter().any(|span| span.name == *w)))
        .await;
    let job = named(&spans, "channel_inbound");
    let release = named(&spans, "autopilot_release");
    assert_ne!(release.trace_id, job.trace_id, "a trace of its own");
    assert!(
        release
            .links
            .contains(&(job.trace_id.clone(), job.span_id.clone())),
        "linked to the event's: {:?}",
        release.links
    );
    assert_eq!(
        release.attribute("org_id"),
        Some(org.id.to_string().as_str())
    );
    assert_eq!(release.attribute("rule"), Some("slack confidence >= 0.80"));
    assert_eq!(
        stored,
        Some(traceparent(release)),
        "the outbox row carries it"
    );
    let send = child_of(&spans, "channel_outbound", release);
    child_of(&spans, "provider_call", send);
}

/// OTLP over gRPC reaches a plaintext collector and one behind TLS whose CA only
/// `OTEL_EXPORTER_OTLP_CERTIFICATE` names; without that CA the pod does not trust the
/// collector, sends it nothing and counts the failed exports, while its webhooks go on.
#[tokio::test]
async fn grpc_export_in_plaintext_and_over_tls_with_a_private_ca() {
    let db = TestDb::fresh().await;
    let plain = GrpcOtlpReceiver::start().await;
    let tls = GrpcOtlpReceiver::start_tls().await;
    let untrusted = GrpcOtlpReceiver::start_tls().await;
    for (receiver, trusted, ca) in [
        (&plain, true, None),
        (&tls, true, tls.ca()),
        (&untrusted, false, None),
    ] {
        let mut vars = process_env(&db, &random_prefix());
        for (k, v) in [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint().as_str()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_BSP_SCHEDULE_DELAY", "50"),
            ("WORKER_CONCURRENCY", "0"),
        ] {
            vars.insert(k.into(), v.into());
        }
        if let Some(ca) = ca {
            let ca = ca.to_str().expect("a UTF-8 path");
            vars.insert("OTEL_EXPORTER_OTLP_CERTIFICATE".into(), ca.into());
        }
        let (mut child, pod) = serve_ready(&vars).await;
        let org = Org::create(&db, &pod).await;
        let signed = slack_message("U1", "1700000000.000001", "hello over grpc");
        let (status, body) = pod.send_webhook(&org.webhook("slack"), &signed).await;
        assert_eq!(status, 200, "{body}");
        let org_id = org.id.to_string();
        let ours = |spans: &[ReceivedSpan]| {
            spans
                .iter()
                .any(|s| s.name == "webhook" && s.attribute("org_id") == Some(org_id.as_str()))
        };
        if trusted {
            let spans = receiver.spans_until(ours).await;
            assert!(ours(&spans), "{}: {spans:#?}", receiver.endpoint());
            let webhook = named(&spans, "webhook");
            assert_eq!(webhook.attribute("outcome"), Some("accepted"));
        } else {
            let failed = switchboard_testing::settled(
                Duration::from_secs(30),
                || metric_values(&pod),
                |m| m.get("trace_export_failures_total").copied().unwrap_or(0.0) >= 1.0,
            )
            .await;
            assert!(
                failed
                    .get("trace_export_failures_total")
                    .copied()
                    .unwrap_or(0.0)
                    >= 1.0,
                "{failed:?}"
            );
            assert!(
                receiver.spans().is_empty(),
                "an untrusted collector got spans"
            );
        }
        sigterm(&child);
        assert!(exited(&mut child, Duration::from_secs(30)).await.success());
    }
}

/// A collector that takes exports and never answers: the pod answers every webhook at once,
/// holds at most `OTEL_BSP_MAX_QUEUE_SIZE` spans and counts the rest as dropped, and still
/// exits on SIGTERM in its usual time.
#[tokio::test]
async fn a_hanging_collector_costs_dropped_spans_not_requests_or_memory() {
    let db = TestDb::fresh().await;
    let receiver = OtlpReceiver::stalled().await;
    let mut vars = pod_vars(&db, &random_prefix(), &receiver, "pod-1");
    vars.insert("OTEL_BSP_MAX_QUEUE_SIZE".into(), "8".into());
    vars.insert("OTEL_BSP_SCHEDULE_DELAY".into(), "20".into());
    // Longer than the whole burst: a webhook that waited for an export would show.
    vars.insert("OTEL_EXPORTER_OTLP_TIMEOUT".into(), "120000".into());
    vars.insert("WORKER_CONCURRENCY".into(), "0".into());
    let (mut child, pod) = serve_ready(&vars).await;
    let org = Org::create(&db, &pod).await;

    let started = Instant::now();
    for n in 0..40 {
        let signed = slack_message("U1", &format!("1700000000.{n:06}"), "hello");
        let (status, body) = pod.send_webhook(&org.webhook("slack"), &signed).await;
        assert_eq!(status, 200, "{body}");
    }
    let burst = started.elapsed();
    assert!(
        burst < Duration::from_secs(120),
        "the webhooks waited for the collector: {burst:?}"
    );
    assert!(receiver.requests().await >= 1, "the exporter never tried");

    let metrics = metric_values(&pod).await;
    let dropped = metrics
        .get("trace_spans_dropped_total")
        .copied()
        .unwrap_or(0.0);
    // 40 webhooks make 80 spans (the request's and the webhook's); 8 are held.
    assert!(dropped >= 60.0, "dropped {dropped}: {metrics:?}");
    assert_eq!(metrics.get("trace_spans_queued"), Some(&8.0), "{metrics:?}");

    sigterm(&child);
    assert!(exited(&mut child, Duration::from_secs(30)).await.success());
}

/// The pod's `/metrics` samples without labels.
async fn metric_values(pod: &Endpoint) -> HashMap<String, f64> {
    pod.metrics()
        .await
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (name, value) = l.split_once(' ')?;
            Some((name.to_owned(), value.trim().parse().ok()?))
        })
        .collect()
}
