//! Set-up and request helpers for the expert API tests: an org with an admin and two
//! experts on two pods, queue items seeded in bulk, and one helper per request shape.

use serde_json::{Value, json};
use switchboard_domain::Role;
use switchboard_testing::signing::secrets;
use switchboard_testing::{TestDb, TestPod, random_prefix, seed_member};
use uuid::Uuid;

/// Two pods on one database and Redis, an org with an admin and two experts.
pub struct Org {
    pub db: TestDb,
    pub a: TestPod,
    pub b: TestPod,
    pub org: Uuid,
    pub admin: String,
    pub expert: String,
    pub expert_id: Uuid,
    pub other_expert: String,
    pub connection: Uuid,
}

impl Org {
    pub async fn start() -> Org {
        let db = TestDb::fresh().await;
        let prefix = random_prefix();
        // No workers: what a release pushes stays in the queue where the tests count it.
        let no_workers = |v: &mut std::collections::HashMap<String, String>| {
            v.insert("WORKER_CONCURRENCY".into(), "0".into());
        };
        let redis = switchboard_testing::redis_url();
        let a = TestPod::start_with(&db, &redis, &prefix, no_workers).await;
        let b = TestPod::start_with(&db, &redis, &prefix, no_workers).await;
        let (org, admin_email, password) = seed_member(&db, None, Role::Admin).await;
        let (_, expert_email, _) = seed_member(&db, Some(org), Role::Expert).await;
        let (_, other_email, _) = seed_member(&db, Some(org), Role::Expert).await;
        let admin = a.login(&admin_email, &password).await;
        let expert = a.login(&expert_email, &password).await;
        let other_expert = b.login(&other_email, &password).await;
        let (status, created) = post(
            &a,
            &admin,
            "/channel-connections",
            json!({"org_id": org, "channel": "slack", "name": "slack", "secrets": secrets("slack")}),
            None,
        )
        .await;
        assert_eq!(status, 201, "{created}");
        let connection = created["id"].as_str().unwrap().parse().unwrap();
        let expert_id = user_id(&db, &expert_email).await;
        Org {
            db,
            a,
            b,
            org,
            admin,
            expert,
            expert_id,
            other_expert,
            connection,
        }
    }

    /// Seeds `n` pending items (each with its customer, conversation, inbound message and
    /// draft) created one millisecond apart, the newest now; returns their ids, oldest first.
    pub async fn seed_items(&self, n: i64) -> Vec<Uuid> {
        seed_items(&self.db, self.org, self.connection, n).await
    }
}

/// Seeds `n` items for `org` on `connection`; see [`Org::seed_items`].
pub async fn seed_items(db: &TestDb, org: Uuid, connection: Uuid, n: i64) -> Vec<Uuid> {
    switchboard_testing::seed_queue_items(db, org, connection, n).await
}

async fn user_id(db: &TestDb, email: &str) -> Uuid {
    let pool = db.pool().await;
    let id = sqlx::query_scalar("SELECT id FROM users WHERE lower(email) = lower($1)")
        .bind(email)
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    id
}

/// `POST {path}` as `token` with a JSON body and an optional Idempotency-Key.
pub async fn post(
    pod: &TestPod,
    token: &str,
    path: &str,
    body: Value,
    key: Option<&str>,
) -> (u16, Value) {
    let mut req = pod
        .client
        .post(pod.url(path))
        .bearer_auth(token)
        .json(&body);
    if let Some(key) = key {
        req = req.header("Idempotency-Key", key);
    }
    let r = req.send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// `GET {path}` as `token`.
pub async fn get(pod: &TestPod, token: &str, path: &str) -> (u16, Value) {
    let r = pod
        .client
        .get(pod.url(path))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// `POST /expert-queue/{item}/{action}`.
pub async fn act(
    pod: &TestPod,
    token: &str,
    item: Uuid,
    action: &str,
    body: Value,
) -> (u16, Value) {
    post(
        pod,
        token,
        &format!("/expert-queue/{item}/{action}"),
        body,
        None,
    )
    .await
}

/// Jobs waiting in the `channel-outbound` queue (scheduled, parked or active).
pub async fn outbound_jobs(pod: &TestPod) -> usize {
    let queue = pod.server.state().flows.outbound.queue_ref();
    switchboard_flows::upkeep::depth(&queue)
        .await
        .unwrap()
        .total()
}
