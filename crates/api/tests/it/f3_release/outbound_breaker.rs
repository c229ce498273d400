//! The per-connection circuit breaker is shared by the pods: opened by failures on pod A,
//! it makes pod B defer without calling the provider; after the cool-down exactly one probe
//! goes out; its state is in `/metrics`. Jobs are driven directly (no workers run), so which
//! pod sends is the test's choice.

use serde_json::json;
use std::time::Duration;
use switchboard_coord::breaker::BreakerState;
use switchboard_domain::ChannelKind;
use switchboard_flows::dispatch::{self, Outcome};
use switchboard_testing::fakes::accepted;
use switchboard_testing::{TestApp, TestDb, TestPod, delivery, seed_item, try_eventually};
use uuid::Uuid;
use wiremock::ResponseTemplate;

async fn due_now(db: &TestDb, outbox: Uuid) {
    let pool = db.pool().await;
    sqlx::query("UPDATE outbox SET next_attempt_at = now() WHERE id = $1")
        .bind(outbox)
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
}

/// Awaits `line` in `pod`'s `/metrics` (10 s at most); whether it came.
async fn metrics_show(pod: &TestPod, line: &str) -> bool {
    let shows = || async { pod.metrics().await.lines().any(|l| l == line).then_some(()) };
    try_eventually(Duration::from_secs(10), shows)
        .await
        .is_some()
}

#[tokio::test]
async fn a_breaker_opened_on_one_pod_defers_the_other_and_lets_one_probe_through() {
    let app = TestApp::builder()
        .pods(2)
        .fake_provider()
        .no_workers()
        .env("OUTBOX_SWEEP_INTERVAL_MS", "3600000")
        .env("OUTBOUND_BREAKER_THRESHOLD", "2")
        .env("OUTBOUND_BREAKER_COOLDOWN_MS", "5000")
        .env("OUTBOUND_MAX_INLINE_WAIT_MS", "200")
        .build()
        .await;
    let (a, b, db, provider) = (app.pod(0), app.pod(1), &app.db, app.provider());
    let org = app.org().await;
    let conn = org.conns["slack"];
    let reply_to = json!({"channel": "C1", "thread_ts": "1.5"});
    let mut rows = Vec::new();
    for _ in 0..2 {
        let item = seed_item(db, org.id, "slack", conn, reply_to.clone()).await;
        rows.push(a.as_user(&org.token).release_ok(item, None).await);
    }
    let (deps_a, deps_b) = (&a.server.state().flows, &b.server.state().flows);
    provider.always(Some(ResponseTemplate::new(503)));

    // Two failures on pod A open the breaker; A reschedules past the cool-down.
    let out = dispatch::process(deps_a, rows[0]).await.unwrap();
    assert!(
        matches!(out, Outcome::Rescheduled { after } if after >= Duration::from_millis(5000)),
        "{out:?}"
    );
    assert_eq!(provider.calls("slack").len(), 2);
    let breaker = dispatch::breaker(deps_b, ChannelKind::Slack, conn);
    assert_eq!(breaker.state().await.unwrap(), BreakerState::Open);
    let open = r#"outbound_breakers{channel="slack",state="open"} 1"#;
    assert!(
        metrics_show(b, open).await,
        "pod B's /metrics shows the open breaker"
    );

    // Pod B defers without calling; no attempt is counted.
    let out = dispatch::process(deps_b, rows[1]).await.unwrap();
    assert!(matches!(out, Outcome::Deferred { .. }), "{out:?}");
    assert_eq!(provider.calls("slack").len(), 2, "B made no call");
    let deferred = delivery(db, rows[1]).await;
    assert_eq!(
        (deferred.outbox_status.as_str(), deferred.attempts),
        ("retry", 0)
    );

    // After the cool-down both rows are due; exactly one probe goes out (a slow success).
    let half_open =
        || async { (breaker.state().await.unwrap() == BreakerState::HalfOpen).then_some(()) };
    assert!(
        try_eventually(Duration::from_secs(10), half_open)
            .await
            .is_some(),
        "the cool-down never ended"
    );
    let half_open = r#"outbound_breakers{channel="slack",state="half_open"} 1"#;
    assert!(metrics_show(a, half_open).await);
    due_now(db, rows[0]).await;
    due_now(db, rows[1]).await;
    let slow_ok = accepted("slack", 1).set_delay(Duration::from_millis(500));
    provider.always(Some(slow_ok));
    let (one, two) = tokio::join!(
        dispatch::process(deps_a, rows[0]),
        dispatch::process(deps_b, rows[1])
    );
    let outcomes = [one.unwrap(), two.unwrap()];
    assert_eq!(provider.calls("slack").len(), 3, "one probe: {outcomes:?}");
    assert!(
        outcomes.contains(&Outcome::Sent { parts: 1 }),
        "{outcomes:?}"
    );
    assert!(
        outcomes
            .iter()
            .any(|o| matches!(o, Outcome::Deferred { after } if *after <= Duration::from_secs(1))),
        "the other waits for the probe's answer: {outcomes:?}"
    );

    // The probe closed the breaker for everyone: the deferred row goes out too.
    assert_eq!(breaker.state().await.unwrap(), BreakerState::Closed);
    let waiting = if outcomes[0] == (Outcome::Sent { parts: 1 }) {
        rows[1]
    } else {
        rows[0]
    };
    due_now(db, waiting).await;
    let deps = if waiting == rows[0] { deps_a } else { deps_b };
    assert_eq!(
        dispatch::process(deps, waiting).await.unwrap(),
        Outcome::Sent { parts: 1 }
    );
    assert_eq!(provider.calls("slack").len(), 4);
    let closed = r#"outbound_breakers{channel="slack",state="open"} 0"#;
    assert!(metrics_show(b, closed).await);
}
