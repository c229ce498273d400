//! Fenced writes that hold (issue 23, item 6): a holder whose lease or claim was taken over
//! changes nothing, and stops; a fenced write Postgres fails is tried again while the lease
//! lasts; a reply that cannot be sent at all is dead at once with one alert.
//!
//! The outbound tests drive the job itself (`dispatch::process`) on pods without workers,
//! so each interleaving happens exactly where the test puts it: a fault point stops the job
//! after the provider accepted a part, another pod takes the row over, then the job goes on.

use crate::support::alerts::{alerts_for, capture};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use switchboard_api::error::ApiError;
use switchboard_api::idempotency::{Begin, CompleteError, Idempotent};
use switchboard_domain::Role;
use switchboard_domain::faults::{DispatchPoint, Step};
use switchboard_flows::dispatch::{self, Outcome};
use switchboard_flows::inbound;
use switchboard_store::crypto::SecretCipher;
use switchboard_store::idempotency::{self, Existing, KeyRef};
use switchboard_store::inbox::{self, RetryPolicy};
use switchboard_testing::{
    Endpoint, Org, TestApp, TestAppBuilder, TestDb, delivery, seed_item, seed_member,
    try_eventually, wait_outbox,
};
use uuid::Uuid;

/// Pods that run no jobs (the test runs them), their provider and an org.
async fn workerless(builder: TestAppBuilder) -> (TestApp, Org) {
    let app = builder.fake_provider().no_workers().build().await;
    let org = app.org().await;
    (app, org)
}

/// About 11 700 characters: three Telegram parts.
fn three_part_text() -> String {
    (0..1300)
        .map(|i| format!("word{i:04}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn telegram_reply_to() -> Value {
    json!({"chat_id": 555, "message_id": 7})
}

fn slack_reply_to() -> Value {
    json!({"channel": "C1", "thread_ts": "1700000000.000100"})
}

async fn execute(db: &TestDb, sql: &str, id: Uuid) {
    let pool = db.pool().await;
    sqlx::query(sql).bind(id).execute(&pool).await.unwrap();
    pool.close().await;
}

/// (a) Pod A's job stops after its first part was accepted; its lease runs out, pod B takes
/// the row over and sends the whole reply; when A goes on, its record of the part matches
/// nothing and it sends no further part.
#[tokio::test]
async fn a_lost_lease_stops_the_remaining_parts_of_a_multi_part_reply() {
    let (app, org) = workerless(TestApp::builder().pods(2)).await;
    let (a, b, db, provider) = (app.pod(0), app.pod(1), &app.db, app.provider());
    let conn = org.conns["telegram"];
    let item = seed_item(db, org.id, "telegram", conn, telegram_reply_to()).await;
    let text = three_part_text();
    let outbox = a.as_user(&org.token).release_ok(item, Some(&text)).await;

    let paused = a
        .server
        .state()
        .flows
        .faults
        .pause_dispatch(DispatchPoint::PartAccepted);
    let deps_a = a.server.state().flows.clone();
    let job_a = tokio::spawn(async move { dispatch::process(&deps_a, outbox).await });
    paused.reached().await;
    assert_eq!(provider.calls("telegram").len(), 1, "A's first part");

    // A stalls past its lease; B claims the row and delivers all three parts.
    let lapse = "UPDATE outbox SET locked_until = now() - interval '1 second' WHERE id = $1";
    execute(db, lapse, outbox).await;
    let by_b = dispatch::process(&b.server.state().flows, outbox)
        .await
        .unwrap();
    assert_eq!(by_b, Outcome::Sent { parts: 3 });
    assert_eq!(provider.calls("telegram").len(), 4);

    paused.resume();
    let by_a = job_a.await.unwrap().unwrap();
    assert_eq!(by_a, Outcome::LeaseLost);
    assert_eq!(
        provider.calls("telegram").len(),
        4,
        "A sent no part after it found its lease taken over"
    );
    let sent = delivery(db, outbox).await;
    assert_eq!(sent.outbox_status, "sent");
    assert_eq!(
        sent.parts.as_array().unwrap().len(),
        3,
        "B's record stands: {}",
        sent.parts
    );
}

/// (a) The same with the row taken over while the part was in flight, by a claim A cannot
/// tell from its own but by the lease id: no part after the first, nothing recorded by A.
#[tokio::test]
async fn a_run_whose_part_record_matches_nothing_sends_no_further_part() {
    let (app, org) = workerless(TestApp::builder()).await;
    let (a, db, provider) = (app.pod(0), &app.db, app.provider());
    let conn = org.conns["telegram"];
    let item = seed_item(db, org.id, "telegram", conn, telegram_reply_to()).await;
    let text = three_part_text();
    let outbox = a.as_user(&org.token).release_ok(item, Some(&text)).await;

    let faults = &a.server.state().flows.faults;
    let paused = faults.pause_dispatch(DispatchPoint::PartAccepted);
    let deps = a.server.state().flows.clone();
    let job = tokio::spawn(async move { dispatch::process(&deps, outbox).await });
    paused.reached().await;
    // What another pod's claim writes.
    let take_over = "UPDATE outbox SET lease_id = gen_random_uuid(),
                            locked_until = now() + interval '1 hour' WHERE id = $1";
    execute(db, take_over, outbox).await;
    paused.resume();

    assert_eq!(job.await.unwrap().unwrap(), Outcome::LeaseLost);
    assert_eq!(
        provider.calls("telegram").len(),
        1,
        "no part after the first"
    );
    let row = delivery(db, outbox).await;
    assert_eq!(row.parts, json!([]), "the new holder's row is untouched");
    assert_eq!(row.outbox_status, "queued");
}

/// (b) The record of an accepted part fails once (Postgres dropped the connection): it is
/// tried again and recorded, and the reply is sent once.
#[tokio::test]
async fn an_outcome_write_that_fails_once_is_retried_and_recorded() {
    let (app, org) = workerless(TestApp::builder()).await;
    let (pod, db, provider) = (app.pod(0), &app.db, app.provider());
    let conn = org.conns["telegram"];
    let item = seed_item(db, org.id, "telegram", conn, telegram_reply_to()).await;
    let text = three_part_text();
    let outbox = pod.as_user(&org.token).release_ok(item, Some(&text)).await;

    let deps = &pod.server.state().flows;
    // The first part's record fails once; then the second part's record, then the outcome.
    deps.faults.fail_dispatch_writes(1);
    assert_eq!(
        dispatch::process(deps, outbox).await.unwrap(),
        Outcome::Sent { parts: 3 }
    );
    assert!(!deps.faults.dispatch_write_fails(), "the fault was used");
    assert_eq!(
        provider.calls("telegram").len(),
        3,
        "each part sent once: none sent again for want of its record"
    );
    let sent = delivery(db, outbox).await;
    assert_eq!(sent.outbox_status, "sent");
    assert_eq!(sent.parts.as_array().unwrap().len(), 3);
    assert_eq!(sent.delivery_status.as_deref(), Some("sent"));
}

/// (b) An outcome write that keeps failing is given up when the lease would run out, not
/// before (and not never): the row is left to the sweeper with its lease.
#[tokio::test]
async fn a_fenced_write_that_keeps_failing_is_given_up_within_the_lease() {
    let (app, org) = workerless(TestApp::builder().env("OUTBOX_LEASE_SECS", "1")).await;
    let (pod, db, provider) = (app.pod(0), &app.db, app.provider());
    let item = seed_item(db, org.id, "slack", org.conns["slack"], slack_reply_to()).await;
    let outbox = pod.as_user(&org.token).release_ok(item, None).await;

    let deps = &pod.server.state().flows;
    deps.faults.fail_dispatch_writes(u32::MAX);
    let started = Instant::now();
    let result = dispatch::process(deps, outbox).await;
    let took = started.elapsed();
    deps.faults.fail_dispatch_writes(0);
    assert!(result.is_err(), "{result:?}");
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(3),
        "retried for about the lease (1 s), took {took:?}"
    );
    assert_eq!(provider.calls("slack").len(), 1);
    let row = delivery(db, outbox).await;
    assert_eq!(
        (row.outbox_status.as_str(), row.parts),
        ("queued", json!([]))
    );
}

/// (c) A connection whose secrets no longer decrypt with the master key: the reply is dead
/// at once with the reason and exactly one alert, the provider is never called, and no
/// sweeper or dead-letter pass picks it up again.
#[tokio::test]
async fn an_undecryptable_secret_is_one_dead_letter_and_one_alert_without_a_retry_loop() {
    capture();
    let app = TestApp::builder()
        .fake_provider()
        .env("DEAD_LETTER_INTERVAL_MS", "200")
        .env("DEAD_LETTER_BACKOFF_MS", "50")
        .build()
        .await;
    let (pod, db, provider) = (app.pod(0), &app.db, app.provider());
    let org = app.org().await;
    let conn = org.conns["slack"];
    let item = seed_item(db, org.id, "slack", conn, slack_reply_to()).await;
    // The secrets as another master key sealed them (a key rotated without re-encrypting).
    let foreign = SecretCipher::new(&[9u8; 32])
        .seal(conn, br#"{"bot_token": "xoxb-1", "signing_secret": "s"}"#)
        .unwrap();
    let pool = db.pool().await;
    sqlx::query("UPDATE channel_connections SET secrets_ciphertext = $2 WHERE id = $1")
        .bind(conn)
        .bind(&foreign)
        .execute(&pool)
        .await
        .unwrap();
    let outbox = pod.as_user(&org.token).release_ok(item, None).await;

    let dead = wait_outbox(db, outbox, "dead").await;
    assert_eq!(dead.delivery_status.as_deref(), Some("dead"));
    // The alert is claimed by the statement after the one that made the row dead.
    let alerted = "SELECT count(*) FROM channel_failures WHERE alerted_at IS NOT NULL";
    assert_eq!(db.wait_for_count(alerted, 1).await, 1);
    let error = dead.delivery_error.unwrap();
    assert!(error.contains("MASTER_ENCRYPTION_KEY"), "{error}");
    let (failure, status, retries, reason, alerted): (Uuid, String, i32, String, bool) =
        sqlx::query_as(
            "SELECT id, status, retries, error, alerted_at IS NOT NULL
             FROM channel_failures WHERE outbox_id = $1",
        )
        .bind(outbox)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!((status.as_str(), retries, alerted), ("dead", 0, true));
    assert!(reason.contains("cannot be read"), "{reason}");
    wait_alerts(failure, 1).await;

    // Nothing takes it up again: not the job, not the sweeper, not the dead-letter worker.
    let deps = &pod.server.state().flows;
    assert_eq!(
        dispatch::process(deps, outbox).await.unwrap(),
        Outcome::Finished
    );
    let stale = switchboard_store::outbox::stale_unsent(&pool, Duration::ZERO, 1000)
        .await
        .unwrap();
    assert!(
        !stale.contains(&outbox),
        "the sweeper leaves a dead row alone"
    );
    let pass = switchboard_flows::periodic::dead_letters::retry_due(&deps.dead_letters())
        .await
        .unwrap();
    assert_eq!((pass.retried, pass.alerted), (0, 0));
    assert_eq!(alerts_for(failure), 1, "exactly one alert");
    assert!(
        provider.calls("slack").is_empty(),
        "the provider was never called"
    );
    assert_eq!(
        db.count("SELECT count(*) FROM channel_failures").await,
        1,
        "one dead letter"
    );
    pool.close().await;
}

/// Waits (10 s at most) until dead letter `failure` has had `want` alerts: the alert is
/// logged just after its claim commits.
async fn wait_alerts(failure: Uuid, want: usize) {
    let raised = || async { (alerts_for(failure) >= want).then_some(()) };
    try_eventually(Duration::from_secs(10), raised).await;
    assert_eq!(alerts_for(failure), want);
}

/// An inbox event as the webhook path stores it, due at once.
async fn event(app: &TestApp) -> Uuid {
    let org = app.org().await;
    let (db, org, slack) = (&app.db, org.id, org.conns["slack"]);
    let payload = json!({"message": {"customer_external_id": "U9", "customer_name": null,
        "text": "hello", "channel_message_id": format!("{slack}:C1:1"),
        "reply_to": {"channel": "C1"}}, "raw": {}});
    let pool = db.pool().await;
    let id = sqlx::query_scalar(
        "INSERT INTO inbound_events (org_id, connection_id, channel, dedup_key, payload)
         VALUES ($1, $2, 'slack', 'ev-1', $3) RETURNING id",
    )
    .bind(org)
    .bind(slack)
    .bind(payload)
    .fetch_one(&pool)
    .await
    .unwrap();
    pool.close().await;
    id
}

/// What the tests compare of an inbox row: lease end, attempts, error, retry time, parking.
type InboxState = (
    Option<chrono::DateTime<chrono::Utc>>,
    i32,
    Option<String>,
    Option<chrono::DateTime<chrono::Utc>>,
    bool,
);

async fn inbox_state(pool: &sqlx::PgPool, id: Uuid) -> InboxState {
    sqlx::query_as(
        "SELECT locked_until, attempts, last_error, retry_at, parked_at IS NOT NULL
         FROM inbound_events WHERE id = $1",
    )
    .bind(id)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// (d) A job whose lease was taken over renews nothing and records no failure over the new
/// holder; the new holder's own renewal and failure apply.
#[tokio::test]
async fn inbox_renew_and_record_failure_by_a_former_holder_change_nothing() {
    let app = TestApp::builder().fake_agent().no_workers().build().await;
    let id = event(&app).await;
    let pool = app.db.pool().await;
    let lease = Duration::from_secs(30);
    let policy = RetryPolicy {
        max_attempts: 1,
        backoff: switchboard_domain::backoff::Backoff::new(
            Duration::from_secs(60),
            Duration::from_secs(600),
        ),
    };

    let first = inbox::claim_many(&pool, &[id], lease, "pod-t")
        .await
        .unwrap();
    let former = first[0].claim_token.unwrap();
    // Its lease runs out; another job claims the event.
    sqlx::query(
        "UPDATE inbound_events SET locked_until = now() - interval '1 second' WHERE id = $1",
    )
    .bind(id)
    .execute(&pool)
    .await
    .unwrap();
    let second = inbox::claim_many(&pool, &[id], lease, "pod-t")
        .await
        .unwrap();
    let holder = second[0].claim_token.unwrap();
    assert_ne!(former, holder);
    let before = inbox_state(&pool, id).await;

    let renewed = inbox::renew(&pool, id, former, Duration::from_secs(3600));
    assert!(!renewed.await.unwrap(), "the former holder renews nothing");
    // Parking after one attempt: the failure would free, delay and park the event.
    let recorded = inbox::record_failure(&pool, id, former, "stale failure", policy);
    assert_eq!(recorded.await.unwrap(), None);
    assert_eq!(inbox_state(&pool, id).await, before, "nothing changed");

    assert!(inbox::renew(&pool, id, holder, lease).await.unwrap());
    let failed = inbox::record_failure(&pool, id, holder, "real failure", policy)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((failed.attempts, failed.parked), (1, true));
    assert!(
        !inbox::renew(&pool, id, holder, lease).await.unwrap(),
        "a recorded failure ends the claim"
    );
    pool.close().await;
}

/// (d) A failed event waiting for its retry time is not claimed before it, whatever pushes
/// its job; once the time has come it is.
#[tokio::test]
async fn the_inbox_claim_skips_events_whose_retry_time_is_ahead() {
    let app = TestApp::builder().fake_agent().no_workers().build().await;
    let id = event(&app).await;
    let pool = app.db.pool().await;
    sqlx::query(
        "UPDATE inbound_events SET attempts = 1, last_error = 'agent away',
                retry_at = now() + interval '1 hour' WHERE id = $1",
    )
    .bind(id)
    .execute(&pool)
    .await
    .unwrap();
    let before = inbox_state(&pool, id).await;

    let lease = Duration::from_secs(30);
    assert!(
        inbox::claim_many(&pool, &[id], lease, "pod-t")
            .await
            .unwrap()
            .is_empty()
    );
    // The job a queue push runs.
    let deps = &app.pod(0).server.state().flows;
    assert_eq!(
        inbound::process(deps, id).await.unwrap(),
        inbound::Outcome::Waiting
    );
    assert_eq!(
        inbox_state(&pool, id).await,
        before,
        "not claimed, not counted"
    );

    sqlx::query("UPDATE inbound_events SET retry_at = now() - interval '1 second' WHERE id = $1")
        .bind(id)
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(
        inbound::process(deps, id).await.unwrap(),
        inbound::Outcome::Drafted { fallback: false }
    );
    pool.close().await;
}

/// (e) A request whose Idempotency-Key claim expired and was taken over by a retry neither
/// stores its answer over the retry's nor deletes the retry's claim.
#[tokio::test]
async fn idempotency_complete_and_release_by_a_stale_claimer_change_nothing() {
    let db = TestDb::fresh().await;
    let (org_id, email, _) = seed_member(&db, None, Role::Admin).await;
    let user_id = switchboard_testing::user_id(&db, &email).await;
    let pool = db.pool().await;
    let key = KeyRef {
        org_id,
        user_id,
        key: "release-1",
    };
    let lease = Duration::from_secs(60);
    let Existing::Claimed { token: stale } =
        idempotency::claim(&pool, key, "hash", lease).await.unwrap()
    else {
        panic!("the first request claims the key");
    };
    let expire = "UPDATE idempotency_keys SET locked_until = now() - interval '1 second'";
    sqlx::query(expire).execute(&pool).await.unwrap();
    let Existing::Claimed { token: retry } =
        idempotency::claim(&pool, key, "hash", lease).await.unwrap()
    else {
        panic!("the retry takes the expired claim over");
    };
    assert_ne!(stale, retry);

    let answer = json!({"from": "the stale request"});
    assert!(
        !idempotency::complete(&pool, key, stale, 200, &answer)
            .await
            .unwrap()
    );
    assert!(!idempotency::release(&pool, key, stale).await.unwrap());
    assert_eq!(
        idempotency::claim(&pool, key, "hash", lease).await.unwrap(),
        Existing::InProgress,
        "the retry still holds the key, unanswered"
    );

    let answer = json!({"from": "the retry"});
    assert!(
        idempotency::complete(&pool, key, retry, 200, &answer)
            .await
            .unwrap()
    );
    assert!(
        !idempotency::release(&pool, key, retry).await.unwrap(),
        "an answered key is never given back"
    );
    assert_eq!(
        idempotency::claim(&pool, key, "hash", lease).await.unwrap(),
        Existing::Done {
            status: 200,
            body: answer
        }
    );
    pool.close().await;
}

/// (e) Through the request extractor: the stale request's answer is refused (the handler's
/// `?` then drops its transaction) and answers `idempotency_in_progress`; its settling
/// afterwards changes nothing either.
#[tokio::test]
async fn a_stale_claimers_answer_is_refused_as_in_progress() {
    let db = TestDb::fresh().await;
    let (org_id, email, _) = seed_member(&db, None, Role::Admin).await;
    let user_id = switchboard_testing::user_id(&db, &email).await;
    let pool = db.pool().await;
    let request = || async {
        let req = axum::http::Request::post("/expert-queue/x/release")
            .header("idempotency-key", "k-1")
            .body(axum::body::Body::from("{}"))
            .unwrap();
        let idem = <Idempotent<Value> as axum::extract::FromRequest<()>>::from_request(req, &())
            .await
            .unwrap();
        match idem.begin(&pool, org_id, user_id).await.unwrap() {
            Begin::Run(Some(guard)) => guard,
            _ => panic!("the key is claimed"),
        }
    };
    let stale = request().await;
    sqlx::query("UPDATE idempotency_keys SET locked_until = now() - interval '1 second'")
        .execute(&pool)
        .await
        .unwrap();
    let retry = request().await;

    let mut tx = pool.begin().await.unwrap();
    let refused = stale
        .complete_in(&mut tx, axum::http::StatusCode::OK, &json!({"stale": true}))
        .await
        .unwrap_err();
    assert!(matches!(refused, CompleteError::TakenOver), "{refused}");
    // What the handler answers (`map_err(ApiError::from)?`).
    let refused = ApiError::from(refused);
    assert_eq!(
        (refused.status().as_u16(), refused.code()),
        (409, "idempotency_in_progress")
    );
    drop(tx);
    stale.fail(&pool, &refused).await;

    let mut tx = pool.begin().await.unwrap();
    retry
        .complete_in(&mut tx, axum::http::StatusCode::OK, &json!({"retry": true}))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let stored: Value =
        sqlx::query_scalar("SELECT response_body FROM idempotency_keys WHERE key = 'k-1'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(stored, json!({"retry": true}));
    pool.close().await;
}

#[tokio::test]
async fn a_release_whose_key_was_taken_over_rolls_back_and_the_retry_answers() {
    let (app, org) = workerless(TestApp::builder()).await;
    let (pod, db) = (app.pod(0), &app.db);
    let item = seed_item(db, org.id, "slack", org.conns["slack"], slack_reply_to()).await;
    let path = format!("/expert-queue/{item}/release");
    // `POST {path}` with `Idempotency-Key: k-1`, as a future a test can spawn.
    let send = || {
        let (pod, token, path) = (Endpoint::clone(pod), org.token.clone(), path.clone());
        async move {
            let user = pod.as_user(&token);
            let (status, body, replayed) = user
                .post_with_key_replayed(&path, json!({"body": null}), "k-1")
                .await;
            (status, replayed, body)
        }
    };

    let paused = pod
        .server
        .state()
        .flows
        .faults
        .pause_release(Step::AfterEvents);
    let stale = tokio::spawn(send());
    paused.reached().await;
    let expire = "UPDATE idempotency_keys SET locked_until = now() - interval '1 second'";
    assert_eq!(
        db.count(&format!(
            "WITH e AS ({expire} RETURNING 1) SELECT count(*) FROM e"
        ))
        .await,
        1
    );
    let retry = tokio::spawn(send());
    // The retry has taken the key over (and now waits for the item's row).
    let held = "SELECT count(*) FROM idempotency_keys WHERE locked_until > now()";
    assert_eq!(db.wait_for_count(held, 1).await, 1);
    paused.resume();

    let (status, _, body) = stale.await.unwrap();
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("idempotency_in_progress"))
    );
    let (status, replayed, answer) = retry.await.unwrap();
    assert_eq!((status, replayed), (200, false), "{answer}");
    let conversation = "SELECT count(*) FROM outbox o JOIN expert_queue q
                          ON q.conversation_id = o.conversation_id";
    assert_eq!(db.count(conversation).await, 1, "one reply, the retry's");
    let released = "SELECT count(*) FROM audit_log WHERE action = 'queue_item.release'";
    assert_eq!(
        db.count(released).await,
        1,
        "the stale request's audit row rolled back"
    );

    let (status, replayed, again) = send().await;
    assert_eq!((status, replayed), (200, true));
    assert_eq!(again, answer, "the key answers with the retry's answer");
}
