//! The inbound job queue in Redis: a push wakes other pods' idle workers, finished jobs
//! leave nothing behind, a backlog of any size drains (parked, with a short active list),
//! and the metadata of workers long gone is deleted.

use redis::aio::MultiplexedConnection;
use std::time::Duration;
use switchboard_jobs::queue::InboundQueue;
use switchboard_testing::signing::{TELEGRAM_SECRET, telegram};
use switchboard_testing::{TestApp, random_prefix, redis_client, redis_tls, redis_url, settled};
use uuid::Uuid;

/// The inbound queue under `prefix` on the shared Redis, as a pod would open it.
fn queue(prefix: &str) -> InboundQueue {
    let redis =
        switchboard_coord::Redis::connect_lazy(&redis_url(), &redis_tls(&redis_url()), prefix)
            .unwrap();
    InboundQueue::inbound(&redis)
}

async fn connection() -> MultiplexedConnection {
    let client = redis_client(&redis_url());
    client.get_multiplexed_async_connection().await.unwrap()
}

/// `{prefix}:{queue:channel-inbound}:{key}`.
fn key(prefix: &str, key: &str) -> String {
    format!("{prefix}:{{queue:channel-inbound}}:{key}")
}

/// `(scheduled, parked, active)` job counts of the `channel-inbound` queue under `prefix`.
async fn queue_lengths(mut conn: MultiplexedConnection, prefix: &str) -> (u64, u64, u64) {
    redis::pipe()
        .cmd("ZCARD")
        .arg(key(prefix, "scheduled"))
        .cmd("ZCARD")
        .arg(key(prefix, "scheduled:parked"))
        .cmd("LLEN")
        .arg(key(prefix, "active"))
        .query_async(&mut conn)
        .await
        .unwrap()
}

/// A push on one pod wakes the idle workers of every other pod at once, through a Redis
/// notification, instead of leaving them to their next poll. The listening queue's wake
/// signal is rung by nothing else here.
#[tokio::test]
async fn a_push_is_announced_to_the_idle_workers_of_other_pods() {
    let prefix = random_prefix();
    let pushing = queue(&prefix);
    let listening = queue(&prefix);
    let token = tokio_util::sync::CancellationToken::new();
    let tracker = tokio_util::task::TaskTracker::new();
    listening.spawn_wake_listener(token.clone(), &tracker);
    let conn = connection().await;
    let channel = format!("{prefix}:queue:channel-inbound:pushed");
    let subscribers = || {
        let mut conn = conn.clone();
        let channel = channel.clone();
        async move {
            let numsub: (String, i64) = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg(&channel)
                .query_async(&mut conn)
                .await
                .unwrap();
            numsub.1
        }
    };
    let listeners = settled(Duration::from_secs(5), subscribers, |n| *n > 0).await;
    assert_eq!(listeners, 1, "the listener never subscribed");
    let signal = listening.push_signal();
    // A new subscription wakes the workers once, for whatever was pushed before it.
    tokio::time::timeout(Duration::from_secs(10), signal.notified())
        .await
        .expect("no wake after subscribing");

    pushing.push_events(&[Uuid::new_v4()]).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), signal.notified())
        .await
        .expect("the push did not wake the other pod's workers");
    // A pod's own listener skips its own pushes (its workers were woken directly). Nothing
    // outside the listener tells when it has seen its own notification, so this one check
    // waits a while for a wake that must not come.
    listening.push_events(&[Uuid::new_v4()]).await.unwrap();
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

/// Finished jobs are acknowledged (the workers' in-flight sets empty out) and vacuumed from
/// Redis by the sweeper, so Redis does not grow with every webhook ever received.
#[tokio::test]
async fn finished_jobs_leave_nothing_behind_in_redis() {
    let app = TestApp::builder().fake_agent().build().await;
    let (p, db, prefix) = (app.pod(0), &app.db, &app.prefix);
    let path = app.org().await.webhook("telegram");
    for i in 0..30 {
        let update = telegram(TELEGRAM_SECRET, 300 + i, 300 + i, "hi");
        assert_eq!(p.send_webhook(&path, &update).await.0, 200);
    }
    assert_eq!(
        db.wait_for_count("SELECT count(*) FROM drafts", 30).await,
        30
    );

    let conn = connection().await;
    let leftovers = || {
        let mut conn = conn.clone();
        async move {
            let inflight: Vec<String> = redis::cmd("KEYS")
                .arg(key(prefix, "inflight:*"))
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
                .arg(key(prefix, "data"))
                .query_async(&mut conn)
                .await
                .unwrap();
            // Per-job metadata (`{queue}:meta:{id}`) and the done set go with the data.
            let meta: Vec<String> = redis::cmd("KEYS")
                .arg(key(prefix, "meta:*"))
                .query_async(&mut conn)
                .await
                .unwrap();
            let done: u64 = redis::cmd("SCARD")
                .arg(key(prefix, "done"))
                .query_async(&mut conn)
                .await
                .unwrap();
            (in_flight, data + meta.len() as u64 + done)
        }
    };
    let left = settled(Duration::from_secs(10), leftovers, |l| *l == (0, 0)).await;
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
    let prefix = random_prefix();
    let queue = queue(&prefix);
    // Pushed as the accept path pushes (bulk, ≤ 256 a call) while no pod runs: all of it
    // lands in apalis-redis's scheduled set. The ids are of no stored event, so each job
    // finds its event missing and finishes at once.
    let ids: Vec<Uuid> = (0..9000).map(|_| Uuid::new_v4()).collect();
    for chunk in ids.chunks(250) {
        queue.push_events(chunk).await.unwrap();
    }
    let mut conn = connection().await;
    let scheduled: u64 = redis::cmd("ZCARD")
        .arg(key(&prefix, "scheduled"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(scheduled, 9000, "the backlog waits in the scheduled set");

    let _app = TestApp::builder()
        .prefix(&prefix)
        .fake_agent()
        .build()
        .await;
    let lengths = || queue_lengths(conn.clone(), &prefix);
    let left = settled(Duration::from_secs(60), lengths, |l| *l == (0, 0, 0)).await;
    assert_eq!(
        left,
        (0, 0, 0),
        "(scheduled, parked, active) jobs left after 60 s"
    );
}

/// A backlog waits in the parked set, not in apalis-redis's active list, whose every
/// lease scans it: the active list holds at most `ACTIVE_TARGET` jobs.
#[tokio::test]
async fn a_backlog_waits_parked_and_the_active_list_stays_short() {
    use switchboard_jobs::queue::upkeep::ACTIVE_TARGET;
    let prefix = random_prefix();
    let queue = queue(&prefix);
    let ids: Vec<Uuid> = (0..3000).map(|_| Uuid::new_v4()).collect();
    for chunk in ids.chunks(250) {
        queue.push_events(chunk).await.unwrap();
    }
    // A pod without workers still runs the promoter; nothing takes jobs away meanwhile.
    let _app = TestApp::builder()
        .prefix(&prefix)
        .no_workers()
        .build()
        .await;
    let conn = connection().await;
    let target = ACTIVE_TARGET as u64;
    let lengths = || queue_lengths(conn.clone(), &prefix);
    let settled_at = |l: &(u64, u64, u64)| l.0 == 0 && l.2 == target;
    let lengths = settled(Duration::from_secs(10), lengths, settled_at).await;
    assert_eq!(
        lengths,
        (0, 3000 - target, target),
        "(scheduled, parked, active)"
    );
}

/// apalis-redis never deletes a worker's metadata; the sweeper deletes that of workers
/// whose heartbeat stopped long ago, and leaves the live ones alone.
#[tokio::test]
async fn gone_workers_leave_no_metadata_behind() {
    let prefix = random_prefix();
    let mut conn = connection().await;
    let workers = |k: &str| key(&prefix, &format!("workers{k}"));
    // A worker of a pod killed an hour ago: recorded, registered, its heartbeat stale.
    let gone = "pod-9-4242-dead00-inbound-0";
    let an_hour_ago = chrono::Utc::now().timestamp() - 3600;
    let () = redis::pipe()
        .cmd("ZADD")
        .arg(workers(":known"))
        .arg(an_hour_ago)
        .arg(gone)
        .ignore()
        .cmd("ZADD")
        .arg(workers(""))
        .arg(an_hour_ago)
        .arg(gone)
        .ignore()
        .cmd("HSET")
        .arg(workers(&format!(":metadata:{gone}")))
        .arg("backend_name")
        .arg("RedisStorage")
        .ignore()
        .query_async(&mut conn)
        .await
        .unwrap();

    let _app = TestApp::builder()
        .prefix(&prefix)
        .fake_agent()
        .build()
        .await;
    let metadata = || {
        let (mut conn, pattern) = (conn.clone(), workers(":metadata:*"));
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
    let only_live =
        |keys: &Vec<String>| !keys.iter().any(|k| k.ends_with(gone)) && !keys.is_empty();
    let left = settled(Duration::from_secs(10), metadata, only_live).await;
    assert_eq!(
        left.len(),
        1,
        "only the live pod's worker is left: {left:?}"
    );
    assert!(left[0].contains("-inbound-0") && !left[0].ends_with(gone));
    let known: Vec<String> = redis::cmd("ZRANGE")
        .arg(workers(":known"))
        .arg(0)
        .arg(-1)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(known.len(), 1, "the gone name is forgotten: {known:?}");
}
