use crate::inbound_support::{agent, connections, count, pod, send, wait_for_count};
use serde_json::{Value, json};
use std::time::Duration;
use switchboard_testing::signing;
use switchboard_testing::{RedisServer, TestDb, TestPod, random_prefix, redis_url};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

#[tokio::test]
async fn five_concurrent_messages_all_reach_history_summary() {
    let db = TestDb::fresh().await;
    let agent = agent().await;
    let prefix = random_prefix();
    let a = pod(&db, &redis_url(), &prefix, &agent.uri()).await;
    let b = pod(&db, &redis_url(), &prefix, &agent.uri()).await;
    let (_, conns) = connections(&db, &a).await;
    let path = format!("/webhooks/slack/{}", conns[0].1);
    let signed: Vec<_> = (0..5)
        .map(|i| {
            signing::slack(
                "slack-signing-secret",
                &format!("EvC{i}"),
                "U9",
                &format!("1700000001.{i:06}"),
                &format!("message {i}"),
            )
        })
        .collect();
    let sends = signed
        .iter()
        .enumerate()
        .map(|(i, s)| send(if i % 2 == 0 { &a } else { &b }, &path, s));
    for (status, _) in futures::future::join_all(sends).await {
        assert_eq!(status, 200);
    }
    assert_eq!(
        wait_for_count(&db, "SELECT count(*) FROM drafts", 5).await,
        5
    );
    assert_eq!(count(&db, "SELECT count(*) FROM conversations").await, 1);
    let pool = db.pool().await;
    let history: Value =
        sqlx::query_scalar("SELECT agent_context -> 'history_summary' FROM conversations")
            .fetch_one(&pool)
            .await
            .unwrap();
    let entries = history.as_array().unwrap();
    assert_eq!(
        entries.len(),
        10,
        "5 messages + 5 drafts, capped at 10: {history}"
    );
    for i in 0..5 {
        let text = format!("message {i}");
        assert!(
            entries
                .iter()
                .any(|e| e["role"] == "customer" && e["text"] == text.as_str()),
            "{text} missing: {history}"
        );
    }
    assert_eq!(
        count(&db, "SELECT count(*) FROM expert_queue").await,
        1,
        "one live item per conversation"
    );
}

/// A provider message that arrives again in another event (a new event id, the same
/// message) is stored once, with one history entry and one draft; and a customer whose
/// details did not change is not written again for each message.
#[tokio::test]
async fn a_message_repeated_in_a_new_event_is_stored_once_and_customers_are_not_rewritten() {
    let db = TestDb::fresh().await;
    let agent = agent().await;
    let a = pod(&db, &redis_url(), &random_prefix(), &agent.uri()).await;
    let (_, conns) = connections(&db, &a).await;
    let path = format!("/webhooks/slack/{}", conns[0].1);
    let event =
        |id: &str, ts: &str, text: &str| signing::slack("slack-signing-secret", id, "U7", ts, text);
    let processed = "SELECT count(*) FROM inbound_events WHERE processed_at IS NOT NULL";
    assert_eq!(
        send(&a, &path, &event("EvR1", "1700000002.000001", "first"))
            .await
            .0,
        200
    );
    assert_eq!(wait_for_count(&db, processed, 1).await, 1);
    let pool = db.pool().await;
    let customer_version = || async {
        sqlx::query_scalar::<_, String>("SELECT xmin::text FROM customers")
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    let before = customer_version().await;

    assert_eq!(
        send(&a, &path, &event("EvR2", "1700000002.000001", "first"))
            .await
            .0,
        200
    );
    assert_eq!(
        send(&a, &path, &event("EvR3", "1700000002.000002", "second"))
            .await
            .0,
        200
    );
    assert_eq!(wait_for_count(&db, processed, 3).await, 3);
    assert_eq!(count(&db, "SELECT count(*) FROM messages").await, 2);
    assert_eq!(count(&db, "SELECT count(*) FROM drafts").await, 2);
    let history: Value =
        sqlx::query_scalar("SELECT agent_context -> 'history_summary' FROM conversations")
            .fetch_one(&pool)
            .await
            .unwrap();
    let customer_entries: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["role"] == "customer")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(customer_entries, ["first", "second"], "{history}");
    assert_eq!(
        customer_version().await,
        before,
        "the customer row was rewritten"
    );
}

/// A push on one pod wakes the idle workers of every other pod at once, through a Redis
/// notification, instead of leaving them to their next poll. The listening queue's wake
/// signal is rung by nothing else here.
#[tokio::test]
async fn a_push_is_announced_to_the_idle_workers_of_other_pods() {
    let prefix = random_prefix();
    let redis = switchboard_coord::Redis::connect_lazy(
        &redis_url(),
        &switchboard_testing::redis_tls(&redis_url()),
        &prefix,
    )
    .unwrap();
    let pushing = switchboard_flows::queue::InboundQueue::inbound(&redis);
    let listening = switchboard_flows::queue::InboundQueue::inbound(&redis);
    let token = tokio_util::sync::CancellationToken::new();
    let tracker = tokio_util::task::TaskTracker::new();
    listening.spawn_wake_listener(token.clone(), &tracker);
    let client = switchboard_testing::redis_client(&redis_url());
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let channel = format!("{prefix}:queue:channel-inbound:pushed");
    let mut listeners = 0;
    for _ in 0..100 {
        let numsub: (String, i64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(&channel)
            .query_async(&mut conn)
            .await
            .unwrap();
        listeners = numsub.1;
        if listeners > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(listeners, 1, "the listener never subscribed");
    let signal = listening.push_signal();
    // A new subscription wakes the workers once, for whatever was pushed before it.
    tokio::time::timeout(Duration::from_secs(10), signal.notified())
        .await
        .expect("no wake after subscribing");

    pushing.push_events(&[uuid::Uuid::new_v4()]).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), signal.notified())
        .await
        .expect("the push did not wake the other pod's workers");
    // A pod's own listener skips its own pushes (its workers were woken directly).
    listening
        .push_events(&[uuid::Uuid::new_v4()])
        .await
        .unwrap();
    signal.notified().await; // the direct wake of the listening pod's own push
    assert!(
        tokio::time::timeout(Duration::from_millis(300), signal.notified())
            .await
            .is_err(),
        "a pod's own push woke its workers twice"
    );
    token.cancel();
    tracker.close();
    tracker.wait().await;
}

#[tokio::test]
async fn redis_flushed_after_50_acks_loses_nothing() {
    let db = TestDb::fresh().await;
    let redis = RedisServer::start().await;
    // A slow agent keeps most jobs waiting in Redis when it is flushed.
    let agent = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_delay(Duration::from_millis(300))
                .set_body_json(json!({"reply": "ok", "confidence": 0.5, "cost_usd": 0.0})),
        )
        .mount(&agent)
        .await;
    let prefix = random_prefix();
    let a = pod(&db, &redis.url(), &prefix, &agent.uri()).await;
    let (_, conns) = connections(&db, &a).await;
    let path = format!("/webhooks/telegram/{}", conns[2].1);
    let signed: Vec<_> = (0..50)
        .map(|i| signing::telegram("tg-secret-0123456789", 1000 + i, 100 + i, "help"))
        .collect();
    for s in &signed {
        let (status, body) = send(&a, &path, s).await;
        assert_eq!(status, 200, "{body}");
    }
    let client = redis::Client::open(redis.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();

    assert_eq!(
        wait_for_count(&db, "SELECT count(*) FROM drafts", 50).await,
        50
    );
    assert_eq!(count(&db, "SELECT count(*) FROM messages").await, 50);
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM inbound_events WHERE processed_at IS NULL"
        )
        .await,
        0
    );
    let requeued = count(&db, "SELECT coalesce(sum((detail->>'pushed')::int), 0) FROM cron_runs WHERE job = 'inbox-sweeper'").await;
    assert!(requeued > 0, "the sweeper re-enqueued what the flush lost");
}

/// The sweeper keeps a day of its own slot records and leaves other jobs' records alone.
#[tokio::test]
async fn sweeper_prunes_its_old_slot_records() {
    let db = TestDb::fresh().await;
    sqlx::query(
        "INSERT INTO cron_runs (job, slot, pod_id, status) VALUES
           ('inbox-sweeper', now() - interval '2 days', 'gone-pod', 'ok'),
           ('inbox-sweeper', now() - interval '1 hour', 'gone-pod', 'ok'),
           ('other-job', now() - interval '2 days', 'gone-pod', 'ok')",
    )
    .execute(&db.pool().await)
    .await
    .unwrap();
    let agent = agent().await;
    let _p = pod(&db, &redis_url(), &random_prefix(), &agent.uri()).await;
    let old = "SELECT count(*) FROM cron_runs WHERE job = 'inbox-sweeper' AND slot < now() - interval '1 day'";
    let mut left = count(&db, old).await;
    for _ in 0..100 {
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        left = count(&db, old).await;
    }
    assert_eq!(left, 0, "two-day-old sweeper slots are pruned");
    let kept = "SELECT count(*) FROM cron_runs WHERE pod_id = 'gone-pod'";
    assert_eq!(
        count(&db, kept).await,
        2,
        "recent slots and other jobs stay"
    );
}

#[tokio::test]
async fn agent_503_then_200_gives_one_real_draft() {
    let db = TestDb::fresh().await;
    let agent = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat"))
        .respond_with(ResponseTemplate::new(503))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&agent)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"reply": "second try", "confidence": 0.7, "cost_usd": 0.01})),
        )
        .with_priority(2)
        .mount(&agent)
        .await;
    let p = pod(&db, &redis_url(), &random_prefix(), &agent.uri()).await;
    let (_, conns) = connections(&db, &p).await;
    let s = signing::slack(
        "slack-signing-secret",
        "EvR",
        "U2",
        "1700000002.000001",
        "retry me",
    );
    assert_eq!(
        send(&p, &format!("/webhooks/slack/{}", conns[0].1), &s)
            .await
            .0,
        200
    );
    assert_eq!(
        wait_for_count(&db, "SELECT count(*) FROM drafts", 1).await,
        1
    );
    let pool = db.pool().await;
    let (body, fallback): (String, bool) = sqlx::query_as("SELECT body, fallback FROM drafts")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!((body.as_str(), fallback), ("second try", false));
    assert_eq!(agent.received_requests().await.unwrap().len(), 2);
    let flagged: bool = sqlx::query_scalar("SELECT flagged_for_review FROM expert_queue")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(!flagged);
}

#[tokio::test]
async fn agent_down_stores_a_flagged_fallback_and_the_breaker_is_shared() {
    let db = TestDb::fresh().await;
    let agent = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat"))
        .respond_with(ResponseTemplate::new(500))
        .mount(&agent)
        .await;
    let prefix = random_prefix();
    let a = pod(&db, &redis_url(), &prefix, &agent.uri()).await;
    let b = pod(&db, &redis_url(), &prefix, &agent.uri()).await;
    let (_, conns) = connections(&db, &a).await;
    let path = format!("/webhooks/slack/{}", conns[0].1);
    // Five failures on pod A (different customers, so five conversations).
    for i in 0..5 {
        let s = signing::slack(
            "slack-signing-secret",
            &format!("EvD{i}"),
            &format!("U{i}"),
            &format!("1700000003.{i:06}"),
            "anyone?",
        );
        assert_eq!(send(&a, &path, &s).await.0, 200);
        assert_eq!(
            wait_for_count(&db, "SELECT count(*) FROM drafts", i + 1).await,
            i + 1
        );
    }
    assert_eq!(
        count(&db, "SELECT count(*) FROM drafts WHERE fallback").await,
        5
    );
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM expert_queue WHERE flagged_for_review"
        )
        .await,
        5
    );
    assert!(
        b.server
            .state()
            .flows
            .agent
            .breaker()
            .is_open()
            .await
            .unwrap(),
        "B sees A's open breaker"
    );
    let calls = agent.received_requests().await.unwrap().len();
    // Pod B no longer calls the agent while the breaker is open.
    let s = signing::slack(
        "slack-signing-secret",
        "EvD9",
        "U9",
        "1700000003.000009",
        "still there?",
    );
    assert_eq!(send(&b, &path, &s).await.0, 200);
    assert_eq!(
        wait_for_count(&db, "SELECT count(*) FROM drafts", 6).await,
        6
    );
    assert_eq!(agent.received_requests().await.unwrap().len(), calls);
}

#[tokio::test]
async fn workers_recover_after_their_redis_connections_are_killed() {
    let db = TestDb::fresh().await;
    let redis = RedisServer::start().await;
    let agent = agent().await;
    let p = pod(&db, &redis.url(), &random_prefix(), &agent.uri()).await;
    let (_, conns) = connections(&db, &p).await;
    let path = format!("/webhooks/telegram/{}", conns[2].1);
    assert_eq!(
        send(
            &p,
            &path,
            &signing::telegram("tg-secret-0123456789", 1, 1, "before")
        )
        .await
        .0,
        200
    );
    assert_eq!(
        wait_for_count(&db, "SELECT count(*) FROM drafts", 1).await,
        1
    );

    let client = redis::Client::open(redis.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let me: i64 = redis::cmd("CLIENT")
        .arg("ID")
        .query_async(&mut conn)
        .await
        .unwrap();
    let killed: i64 = redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", "normal", "SKIPME", "yes"])
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(
        killed > 0,
        "the pod's connections were killed (we are client {me})"
    );

    for i in 2..12 {
        let (status, body) = send(
            &p,
            &path,
            &signing::telegram("tg-secret-0123456789", i, i, "after"),
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }
    assert_eq!(
        wait_for_count(&db, "SELECT count(*) FROM drafts", 11).await,
        11
    );
}

#[tokio::test]
async fn webhooks_are_acknowledged_while_redis_is_down_and_processed_after() {
    let db = TestDb::fresh().await;
    let mut redis = RedisServer::start().await;
    let agent = agent().await;
    let p = pod(&db, &redis.url(), &random_prefix(), &agent.uri()).await;
    let (_, conns) = connections(&db, &p).await;
    let path = format!("/webhooks/telegram/{}", conns[2].1);

    redis.stop();
    for i in 0..3 {
        let (status, body) = send(
            &p,
            &path,
            &signing::telegram("tg-secret-0123456789", 50 + i, 7, "redis is down"),
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }
    // The same update again while Redis is down: Postgres alone still deduplicates.
    let (status, body) = send(
        &p,
        &path,
        &signing::telegram("tg-secret-0123456789", 50, 7, "redis is down"),
    )
    .await;
    assert_eq!((status, body.contains("duplicate")), (200, true), "{body}");
    assert_eq!(count(&db, "SELECT count(*) FROM inbound_events").await, 3);

    redis.restart().await;
    assert_eq!(
        wait_for_count(&db, "SELECT count(*) FROM drafts", 3).await,
        3
    );
    assert_eq!(count(&db, "SELECT count(*) FROM messages").await, 3);
}

/// Finished jobs are acknowledged (the workers' in-flight sets empty out) and vacuumed from
/// Redis by the sweeper, so Redis does not grow with every webhook ever received.
#[tokio::test]
async fn finished_jobs_leave_nothing_behind_in_redis() {
    let db = TestDb::fresh().await;
    let agent = agent().await;
    let prefix = random_prefix();
    let p = pod(&db, &redis_url(), &prefix, &agent.uri()).await;
    let (_, conns) = connections(&db, &p).await;
    let path = format!("/webhooks/telegram/{}", conns[2].1);
    for i in 0..30 {
        assert_eq!(
            send(
                &p,
                &path,
                &signing::telegram("tg-secret-0123456789", 300 + i, 300 + i, "hi")
            )
            .await
            .0,
            200
        );
    }
    assert_eq!(
        wait_for_count(&db, "SELECT count(*) FROM drafts", 30).await,
        30
    );

    let client = switchboard_testing::redis_client(&redis_url());
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let queue = format!("{prefix}:{{queue:channel-inbound}}");
    let mut left = (u64::MAX, u64::MAX);
    for _ in 0..100 {
        let inflight: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{queue}:inflight:*"))
            .query_async(&mut conn)
            .await
            .unwrap();
        let mut in_flight = 0;
        for key in inflight {
            let n: u64 = redis::cmd("SCARD")
                .arg(&key)
                .query_async(&mut conn)
                .await
                .unwrap();
            in_flight += n;
        }
        let data: u64 = redis::cmd("HLEN")
            .arg(format!("{queue}:data"))
            .query_async(&mut conn)
            .await
            .unwrap();
        // Per-job metadata (`{queue}:meta:{id}`) and the done set go with the data.
        let meta: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{queue}:meta:*"))
            .query_async(&mut conn)
            .await
            .unwrap();
        let done: u64 = redis::cmd("SCARD")
            .arg(format!("{queue}:done"))
            .query_async(&mut conn)
            .await
            .unwrap();
        left = (in_flight, data + meta.len() as u64 + done);
        if left == (0, 0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        left,
        (0, 0),
        "(jobs still in flight, job payloads/metadata/done ids still stored)"
    );
}

/// A backlog past Lua's `unpack` limit (~8000 jobs due at once, e.g. left by pods without
/// workers) is still processed once workers start. Without the promoter, apalis-redis's
/// fetch fails on every poll and every worker dies in a loop.
#[tokio::test]
async fn a_backlog_past_the_lua_unpack_limit_is_still_processed() {
    let db = TestDb::fresh().await;
    let agent = agent().await;
    let prefix = random_prefix();
    let redis = switchboard_coord::Redis::connect_lazy(
        &redis_url(),
        &switchboard_testing::redis_tls(&redis_url()),
        &prefix,
    )
    .unwrap();
    let queue = switchboard_flows::queue::InboundQueue::inbound(&redis);
    // Pushed as the accept path pushes (bulk, ≤ 256 a call) while no pod runs: all of it
    // lands in apalis-redis's scheduled set. The ids are of no stored event, so each job
    // finds its event missing and finishes at once.
    let ids: Vec<uuid::Uuid> = (0..9000).map(|_| uuid::Uuid::new_v4()).collect();
    for chunk in ids.chunks(250) {
        queue.push_events(chunk).await.unwrap();
    }
    let client = switchboard_testing::redis_client(&redis_url());
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let key = |k: &str| format!("{prefix}:{{queue:channel-inbound}}:{k}");
    let scheduled: u64 = redis::cmd("ZCARD")
        .arg(key("scheduled"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(scheduled, 9000, "the backlog waits in the scheduled set");

    let _p = pod(&db, &redis_url(), &prefix, &agent.uri()).await;
    let mut left = (u64::MAX, u64::MAX, u64::MAX);
    for _ in 0..600 {
        left = queue_lengths(&mut conn, &prefix).await;
        if left == (0, 0, 0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        left,
        (0, 0, 0),
        "(scheduled, parked, active) jobs left after 60 s"
    );
}

/// `(scheduled, parked, active)` job counts of the `channel-inbound` queue under `prefix`.
async fn queue_lengths(
    conn: &mut redis::aio::MultiplexedConnection,
    prefix: &str,
) -> (u64, u64, u64) {
    let key = |k: &str| format!("{prefix}:{{queue:channel-inbound}}:{k}");
    redis::pipe()
        .cmd("ZCARD")
        .arg(key("scheduled"))
        .cmd("ZCARD")
        .arg(key("scheduled:parked"))
        .cmd("LLEN")
        .arg(key("active"))
        .query_async(conn)
        .await
        .unwrap()
}

/// A backlog waits in the parked set, not in apalis-redis's active list, whose every
/// lease scans it: the active list holds at most `ACTIVE_TARGET` jobs.
#[tokio::test]
async fn a_backlog_waits_parked_and_the_active_list_stays_short() {
    use switchboard_flows::upkeep::ACTIVE_TARGET;
    let db = TestDb::fresh().await;
    let prefix = random_prefix();
    let redis = switchboard_coord::Redis::connect_lazy(
        &redis_url(),
        &switchboard_testing::redis_tls(&redis_url()),
        &prefix,
    )
    .unwrap();
    let queue = switchboard_flows::queue::InboundQueue::inbound(&redis);
    let ids: Vec<uuid::Uuid> = (0..3000).map(|_| uuid::Uuid::new_v4()).collect();
    for chunk in ids.chunks(250) {
        queue.push_events(chunk).await.unwrap();
    }
    // A pod without workers still runs the promoter; nothing takes jobs away meanwhile.
    let _p = TestPod::start_with(&db, &redis_url(), &prefix, |v| {
        v.insert("WORKER_CONCURRENCY".into(), "0".into());
    })
    .await;
    let client = switchboard_testing::redis_client(&redis_url());
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let target = ACTIVE_TARGET as u64;
    let mut lengths = (u64::MAX, u64::MAX, u64::MAX);
    for _ in 0..100 {
        lengths = queue_lengths(&mut conn, &prefix).await;
        if lengths.0 == 0 && lengths.2 == target {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        lengths,
        (0, 3000 - target, target),
        "(scheduled, parked, active)"
    );
}

/// An agent slower than the inbox lease does not get the event handed to a second worker:
/// the running job renews its lease, so the agent is asked once.
#[tokio::test]
async fn a_job_slower_than_its_lease_keeps_its_event() {
    let db = TestDb::fresh().await;
    let agent = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_delay(Duration::from_secs(5))
                .set_body_json(json!({"reply": "slow", "confidence": 0.5, "cost_usd": 0.0})),
        )
        .mount(&agent)
        .await;
    let uri = agent.uri();
    let p = TestPod::start_with(&db, &redis_url(), &random_prefix(), move |v| {
        v.insert("AGENT_URL".into(), uri);
        // The sweeper looks every 300 ms for events older than 1 s whose lease (2 s) lapsed.
        v.insert("INBOX_GRACE_SECS".into(), "1".into());
        v.insert("INBOX_SWEEP_INTERVAL_MS".into(), "300".into());
        v.insert("INBOX_LEASE_SECS".into(), "2".into());
    })
    .await;
    let (_, conns) = connections(&db, &p).await;
    let path = format!("/webhooks/telegram/{}", conns[2].1);
    let (status, body) = send(
        &p,
        &path,
        &signing::telegram("tg-secret-0123456789", 77, 77, "slow"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        wait_for_count(&db, "SELECT count(*) FROM drafts", 1).await,
        1
    );
    // Long enough for a second run to reach the agent, had the event been handed over.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let asked = agent.received_requests().await.unwrap_or_default().len();
    assert_eq!(asked, 1, "the agent was asked once");
    let requeued = count(&db, "SELECT coalesce(sum((detail->>'pushed')::int), 0) FROM cron_runs WHERE job = 'inbox-sweeper'").await;
    assert_eq!(requeued, 0, "the sweeper never saw the event as abandoned");
}

/// A Resend `email.received` webhook as Resend sends it: metadata, no body.
fn email_without_body(email_id: &str) -> signing::Signed {
    let body = serde_json::to_vec(&json!({
        "type": "email.received", "created_at": "2026-11-29T10:00:00Z",
        "data": {"email_id": email_id, "from": "Ann Lee <ann@example.test>",
                 "to": ["support@example.test"], "subject": "Parcel",
                 "message_id": format!("<{email_id}@mail.example.test>"), "attachments": []}
    }))
    .unwrap();
    let whsec = signing::secrets("email")["webhook_secret"]
        .as_str()
        .unwrap()
        .to_owned();
    signing::standard_webhook(&whsec, email_id, chrono::Utc::now().timestamp(), body)
}

#[tokio::test]
async fn an_email_webhook_without_its_body_gets_it_from_resend() {
    use wiremock::matchers::header;
    let db = TestDb::fresh().await;
    let agent = agent().await;
    let resend = MockServer::start().await;
    let answer = |json: Value| ResponseTemplate::new(200).set_body_json(json);
    for (id, response) in [
        (
            "em_text",
            answer(
                json!({"object": "email", "id": "em_text", "text": "My parcel never arrived", "html": "<p>ignored</p>"}),
            ),
        ),
        (
            "em_html",
            answer(
                json!({"object": "email", "id": "em_html", "text": null, "html": "<p>Hello</p><p>from HTML</p>"}),
            ),
        ),
        (
            "em_gone",
            ResponseTemplate::new(404).set_body_json(json!({"name": "not_found"})),
        ),
    ] {
        Mock::given(method("GET"))
            .and(path(format!("/emails/receiving/{id}")))
            .and(header("authorization", "Bearer re_1"))
            .respond_with(response)
            .mount(&resend)
            .await;
    }
    // Resend busy once: the event stays unprocessed and the sweeper runs it again.
    Mock::given(method("GET"))
        .and(path("/emails/receiving/em_busy"))
        .respond_with(ResponseTemplate::new(503))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&resend)
        .await;
    Mock::given(method("GET"))
        .and(path("/emails/receiving/em_busy"))
        .respond_with(answer(json!({"id": "em_busy", "text": "second try"})))
        .with_priority(2)
        .mount(&resend)
        .await;
    let resend_base = resend.uri();
    let p = crate::inbound_support::pod_with(
        &db,
        &redis_url(),
        &random_prefix(),
        &agent.uri(),
        &[("RESEND_API_BASE", resend_base.as_str())],
    )
    .await;
    let (_, conns) = connections(&db, &p).await;
    let url = format!("/webhooks/email/{}", conns[3].1);
    for id in ["em_text", "em_html", "em_gone", "em_busy"] {
        assert_eq!(send(&p, &url, &email_without_body(id)).await.0, 200, "{id}");
    }
    // One that carries its text is never fetched.
    let with_text = signing::email(
        signing::secrets("email")["webhook_secret"]
            .as_str()
            .unwrap(),
        "em_inline",
        "<inline@mail.example.test>",
        "bo@example.test",
        "inline text",
    );
    assert_eq!(send(&p, &url, &with_text).await.0, 200);

    assert_eq!(
        wait_for_count(
            &db,
            "SELECT count(*) FROM inbound_events WHERE processed_at IS NOT NULL",
            5
        )
        .await,
        5
    );
    let pool = db.pool().await;
    let body = |id: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, String>(
                "SELECT body FROM messages WHERE channel_message_id LIKE '%:' || $1",
            )
            .bind(format!("<{id}@mail.example.test>"))
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };
    assert_eq!(body("em_text").await, "My parcel never arrived");
    let html = body("em_html").await;
    assert!(
        html.contains("Hello") && html.contains("from HTML") && !html.contains('<'),
        "{html}"
    );
    let gone = body("em_gone").await;
    assert!(
        gone.starts_with("(The body of this email could not be retrieved") && gone.contains("404"),
        "{gone}"
    );
    assert_eq!(body("em_busy").await, "second try");
    assert_eq!(body("inline").await, "inline text");
    assert_eq!(count(&db, "SELECT count(*) FROM drafts").await, 5);
    let fetched: Vec<String> = resend
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| r.url.path().to_owned())
        .collect();
    assert_eq!(
        fetched.len(),
        5,
        "one fetch each, two for em_busy: {fetched:?}"
    );
    assert!(!fetched.iter().any(|p| p.contains("em_inline")));
}

/// Statistics lag a burst: the planner must still claim an event through the primary key,
/// never by scanning the sweeper's index of every unprocessed event.
#[tokio::test]
async fn a_claim_uses_the_primary_key_while_statistics_lag_a_backlog() {
    let db = TestDb::fresh().await;
    let p = TestPod::start(&db, &random_prefix()).await;
    let (org, conns) = connections(&db, &p).await;
    let slack: uuid::Uuid = conns[0].1.parse().unwrap();
    let pool = db.pool().await;
    // Vacuumed while everything was processed (the sweeper's index empty), then a backlog
    // arrives before autovacuum looks again.
    let insert = |processed: bool, from: i32| {
        sqlx::query(
            "INSERT INTO inbound_events (org_id, connection_id, channel, dedup_key, payload,
                                         processed_at)
             SELECT $1, $2, 'slack', 'ev-' || i, '{}', CASE WHEN $3 THEN now() END
             FROM generate_series($4, $4 + 19999) i",
        )
        .bind(org)
        .bind(slack)
        .bind(processed)
        .bind(from)
    };
    insert(true, 0).execute(&pool).await.unwrap();
    sqlx::query("VACUUM ANALYZE inbound_events")
        .execute(&pool)
        .await
        .unwrap();
    insert(false, 20000).execute(&pool).await.unwrap();
    let plan: Vec<String> =
        sqlx::query_scalar(&format!("EXPLAIN {}", switchboard_store::inbox::CLAIM))
            .bind(vec![uuid::Uuid::new_v4(), uuid::Uuid::new_v4()])
            .bind(30.0_f64)
            .fetch_all(&pool)
            .await
            .unwrap();
    let plan = plan.join("\n");
    assert!(plan.contains("inbound_events_pkey"), "{plan}");
}

/// apalis-redis never deletes a worker's metadata; the sweeper deletes that of workers
/// whose heartbeat stopped long ago, and leaves the live ones alone.
#[tokio::test]
async fn gone_workers_leave_no_metadata_behind() {
    let db = TestDb::fresh().await;
    let agent = agent().await;
    let prefix = random_prefix();
    let client = switchboard_testing::redis_client(&redis_url());
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let key = |k: &str| format!("{prefix}:{{queue:channel-inbound}}:workers{k}");
    // A worker of a pod killed an hour ago: recorded, registered, its heartbeat stale.
    let gone = "pod-9-4242-dead00-inbound-0";
    let an_hour_ago = chrono::Utc::now().timestamp() - 3600;
    let () = redis::pipe()
        .cmd("ZADD")
        .arg(key(":known"))
        .arg(an_hour_ago)
        .arg(gone)
        .ignore()
        .cmd("ZADD")
        .arg(key(""))
        .arg(an_hour_ago)
        .arg(gone)
        .ignore()
        .cmd("HSET")
        .arg(key(&format!(":metadata:{gone}")))
        .arg("backend_name")
        .arg("RedisStorage")
        .ignore()
        .query_async(&mut conn)
        .await
        .unwrap();

    let _p = pod(&db, &redis_url(), &prefix, &agent.uri()).await;
    let metadata = |conn: &mut redis::aio::MultiplexedConnection| {
        let pattern = key(":metadata:*");
        let mut conn = conn.clone();
        async move {
            let mut keys: Vec<String> = redis::cmd("KEYS")
                .arg(pattern)
                .query_async(&mut conn)
                .await
                .unwrap();
            keys.sort();
            keys
        }
    };
    let mut left = Vec::new();
    for _ in 0..100 {
        left = metadata(&mut conn).await;
        if !left.iter().any(|k| k.ends_with(gone)) && !left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        left.len(),
        1,
        "only the live pod's worker is left: {left:?}"
    );
    assert!(left[0].contains("-inbound-0") && !left[0].ends_with(gone));
    let known: Vec<String> = redis::cmd("ZRANGE")
        .arg(key(":known"))
        .arg(0)
        .arg(-1)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(known.len(), 1, "the gone name is forgotten: {known:?}");
}
