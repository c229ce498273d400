//! Test support shared by the integration tests of every crate.
//!
//! Tests never guess where Postgres and Redis are: `scripts/test.sh` starts its own and
//! exports `SB_TEST_DATABASE_URL` (a superuser URL) and `SB_TEST_REDIS_URL`. Each test gets
//! a fresh, migrated database and a random Redis key prefix, so tests run in parallel
//! without seeing each other's data.
#![allow(clippy::unwrap_used, missing_docs)]

mod pod;
mod redis_cluster;
mod redis_server;
pub mod signing;
pub mod socket;

pub use pod::{TestPod, seed_member};
pub use redis_cluster::RedisCluster;
pub use redis_server::{RedisServer, free_port};

use std::collections::HashMap;
use std::path::PathBuf;
use switchboard_config::Config;
use uuid::Uuid;

/// A strong JWT secret used by every test pod.
pub const JWT_SECRET: &str =
    "test-jwt-secret-0123456789abcdef0123456789abcdef0123456789abcdef0123456789";
/// A fixed master key (base64 of 32 bytes).
pub const MASTER_KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

fn required(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| {
        panic!("{var} is not set: run the tests with scripts/test.sh, which starts Postgres and Redis for them")
    })
}

/// The Redis URL of the test run's Redis.
pub fn redis_url() -> String {
    required("SB_TEST_REDIS_URL")
}

/// The seed URLs of the test run's Redis Cluster (`SB_TEST_REDIS_CLUSTER_NODES`, set by
/// `scripts/test.sh` in the managed topology): pods on the shared test Redis run on it.
pub fn redis_cluster_nodes() -> Option<String> {
    std::env::var("SB_TEST_REDIS_CLUSTER_NODES")
        .ok()
        .filter(|v| !v.is_empty())
}

/// The test run's Redis TLS: `rediss://` is verified against `SB_TEST_TLS_CA` (the CA
/// `scripts/test.sh` generates for its TLS topology).
pub fn redis_tls(url: &str) -> switchboard_config::RedisTls {
    if url.starts_with("rediss://") {
        switchboard_config::RedisTls::Verify {
            ca: std::env::var_os("SB_TEST_TLS_CA").map(PathBuf::from),
        }
    } else {
        switchboard_config::RedisTls::Off
    }
}

/// A redis-rs client for `url` with the test run's TLS, for tests that look at keys.
pub fn redis_client(url: &str) -> redis::Client {
    switchboard_coord::client_for_url(url, &redis_tls(url)).expect("redis client")
}

/// `url` with its database (the URL's path) replaced by `name`, query kept.
fn with_database(url: &str, name: &str) -> String {
    let mut parsed = url::Url::parse(url).expect("test database URL parses");
    parsed.set_path(&format!("/{name}"));
    parsed.to_string()
}

/// A fresh database with every migration applied.
pub struct TestDb {
    /// What pods connect to: through the pooler in the TLS + pooler topology.
    pub url: String,
    /// Postgres itself (`DATABASE_DIRECT_URL`): migrations and the tests' own assertions.
    pub direct_url: String,
    /// Its name.
    pub name: String,
}

impl TestDb {
    /// Creates `sb_<random>` on the test server and migrates it. Both go to Postgres
    /// directly (`SB_TEST_DATABASE_DIRECT_URL`, default `SB_TEST_DATABASE_URL`): the
    /// migrator holds a session lock, which a transaction-mode pooler would not keep.
    pub async fn fresh() -> TestDb {
        let pooled_admin = required("SB_TEST_DATABASE_URL");
        let direct_admin =
            std::env::var("SB_TEST_DATABASE_DIRECT_URL").unwrap_or_else(|_| pooled_admin.clone());
        let name = format!("sb_{}", Uuid::new_v4().simple());
        let admin = sqlx::PgPool::connect(&direct_admin)
            .await
            .expect("connect to test postgres");
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&admin)
            .await
            .expect("create test database");
        admin.close().await;
        let db = TestDb {
            url: with_database(&pooled_admin, &name),
            direct_url: with_database(&direct_admin, &name),
            name,
        };
        let pool = db.pool().await;
        switchboard_store::migrate(&pool).await.expect("migrate");
        pool.close().await;
        db
    }

    /// Runs a `SELECT count(*) …` (any single bigint) and returns it.
    pub async fn count(&self, sql: &str) -> i64 {
        let pool = self.pool().await;
        let n = sqlx::query_scalar(sql).fetch_one(&pool).await.expect(sql);
        pool.close().await;
        n
    }

    /// Polls [`TestDb::count`] until it equals `want` or 30 s pass; returns the last value.
    pub async fn wait_for_count(&self, sql: &str, want: i64) -> i64 {
        let mut last = -1;
        for _ in 0..300 {
            last = self.count(sql).await;
            if last == want {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        last
    }

    /// A pool on this database (for assertions on rows), straight to Postgres.
    pub async fn pool(&self) -> sqlx::PgPool {
        sqlx::PgPool::connect(&self.direct_url)
            .await
            .expect("connect")
    }
}

/// Environment variables for a test pod on `db` with its own Redis prefix, on the test
/// run's topology (TLS and the pooler when `scripts/test.sh` set them up).
pub fn pod_env(db: &TestDb, redis_url: &str, prefix: &str) -> HashMap<String, String> {
    let mut vars: HashMap<String, String> = [
        ("APP_ENV", "test"),
        ("BIND_ADDR", "127.0.0.1"),
        ("PORT", "0"),
        ("DATABASE_URL", db.url.as_str()),
        ("DATABASE_DIRECT_URL", db.direct_url.as_str()),
        ("REDIS_URL", redis_url),
        ("REDIS_PREFIX", prefix),
        ("JWT_SECRET", JWT_SECRET),
        ("MASTER_ENCRYPTION_KEY", MASTER_KEY),
        ("PUBLIC_BASE_URL", "https://switchboard.test"),
        ("DB_POOL_SIZE", "5"),
        ("EXPECTED_PODS", "2"),
        ("BODY_LIMIT_BYTES", "65536"),
        // No test ever reaches a real provider: tests that send replies point these at
        // their fake provider; elsewhere replies fail fast against a closed port.
        ("SLACK_API_BASE", "http://127.0.0.1:9"),
        ("TWILIO_API_BASE", "http://127.0.0.1:9"),
        ("TELEGRAM_API_BASE", "http://127.0.0.1:9"),
        ("RESEND_API_BASE", "http://127.0.0.1:9"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    // Pods on the shared test Redis run on the cluster when the topology has one; a test
    // that brings its own Redis (to stop it) keeps it.
    if let (Some(nodes), true) = (redis_cluster_nodes(), redis_url == self::redis_url()) {
        vars.insert("REDIS_CLUSTER_NODES".into(), nodes);
    }
    if let Ok(mode) = std::env::var("SB_TEST_DATABASE_POOLER") {
        vars.insert("DATABASE_POOLER".into(), mode);
    }
    if let (true, Ok(ca)) = (
        redis_url.starts_with("rediss://"),
        std::env::var("SB_TEST_TLS_CA"),
    ) {
        vars.insert("REDIS_TLS_CA".into(), ca);
    }
    vars
}

/// The workspace's `config/` folder.
pub fn config_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../config"))
}

/// Builds a [`Config`] from variables, as the binary would from its environment.
pub fn config_from(vars: &HashMap<String, String>) -> Config {
    switchboard_config::load_from(vars, &config_dir()).expect("test config loads")
}

/// A random Redis key prefix for one test.
pub fn random_prefix() -> String {
    format!("t{}", &Uuid::new_v4().simple().to_string()[..12])
}

/// An HTTP client for tests (no pooling surprises across pods, short timeouts).
pub fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .expect("client")
}

/// Seeds `n` pending expert-queue items for `org` on `connection` (each with its customer,
/// conversation, inbound message and draft), created one millisecond apart, the newest
/// now; returns their ids, oldest first.
pub async fn seed_queue_items(db: &TestDb, org: Uuid, connection: Uuid, n: i64) -> Vec<Uuid> {
    let pool = db.pool().await;
    let tag = Uuid::new_v4().simple().to_string();
    let ids: Vec<Uuid> = sqlx::query_scalar(
        "WITH cu AS (
           INSERT INTO customers (org_id, channel, external_id, display_name)
           SELECT $1, 'slack', $3 || '-' || i, 'Customer ' || i FROM generate_series(1, $4) i
           RETURNING id, external_id
         ), conv AS (
           INSERT INTO conversations (org_id, customer_id, channel, connection_id)
           SELECT $1, cu.id, 'slack', $2 FROM cu RETURNING id, customer_id
         ), msg AS (
           INSERT INTO messages (org_id, conversation_id, direction, author, body, channel,
                                 channel_message_id, reply_to)
           SELECT $1, conv.id, 'inbound', 'customer', 'Where is my order?', 'slack',
                  conv.id::text, jsonb_build_object('channel', 'C1', 'thread_ts', '1.5')
           FROM conv RETURNING id, conversation_id
         ), d AS (
           INSERT INTO drafts (org_id, conversation_id, message_id, body, confidence)
           SELECT $1, conversation_id, id, 'It ships tomorrow.', 0.8 FROM msg
           RETURNING id, conversation_id, message_id, body, confidence
         )
         INSERT INTO expert_queue (org_id, conversation_id, draft_id, draft_message_id, draft_body,
                                   draft_confidence, created_at, updated_at)
         SELECT $1, d.conversation_id, d.id, d.message_id, d.body, d.confidence,
                clock_timestamp() - (($4 - row_number() OVER ()) || ' ms')::interval,
                clock_timestamp() - (($4 - row_number() OVER ()) || ' ms')::interval
         FROM d
         RETURNING id",
    )
    .bind(org)
    .bind(connection)
    .bind(tag)
    .bind(n)
    .fetch_all(&pool)
    .await
    .unwrap();
    let ordered: Vec<Uuid> = sqlx::query_scalar(
        "SELECT id FROM expert_queue WHERE id = ANY($1) ORDER BY created_at, id",
    )
    .bind(&ids)
    .fetch_all(&pool)
    .await
    .unwrap();
    pool.close().await;
    ordered
}
