//! Test support shared by the integration tests of every crate.
//!
//! Tests never guess where Postgres and Redis are: `scripts/test.sh` starts its own and
//! exports `SB_TEST_DATABASE_URL` (a superuser URL) and `SB_TEST_REDIS_URL`. Each test gets
//! a fresh, migrated database and a random Redis key prefix, so tests run in parallel
//! without seeing each other's data. [`TestApp`] puts pods, fakes and data together; what
//! a test waits for it awaits with [`eventually`] instead of sleeping.
#![allow(clippy::unwrap_used, missing_docs)]

mod app;
pub mod dump;
pub mod fake_smtp;
pub mod fakes;
mod load;
pub mod otlp;
mod pod;
mod redis_cluster;
mod redis_sentinel;
mod redis_server;
pub mod rows;
mod seed;
pub mod signing;
pub mod socket;
mod user;

pub use app::{TestApp, TestAppBuilder};
pub use fake_smtp::FakeSmtp;
pub use fakes::{Call, Provider};
pub use load::Load;
pub use otlp::{GrpcOtlpReceiver, OtlpReceiver, ReceivedSpan};
pub use pod::{Endpoint, Forwarded, TestPod};
pub use redis_cluster::RedisCluster;
pub use redis_sentinel::{RedisSentinel, SENTINEL_MASTER};
pub use redis_server::{RedisServer, free_port};
pub use rows::{Delivery, delivery, wait_outbox};
pub use seed::{seed_item, seed_member, seed_queue_items, user_id};
pub use user::{CHANNELS, Member, Org, User, outbox_of};

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;
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

/// The sentinels of the test run's Redis (`SB_TEST_REDIS_SENTINELS`, set by
/// `scripts/test.sh` in the sentinel topology) and the name of the master they watch: pods
/// on the shared test Redis find it through them.
pub fn redis_sentinels() -> Option<(String, String)> {
    let sentinels = std::env::var("SB_TEST_REDIS_SENTINELS")
        .ok()
        .filter(|v| !v.is_empty())?;
    let master =
        std::env::var("SB_TEST_REDIS_SENTINEL_MASTER").unwrap_or_else(|_| "switchboard".into());
    Some((sentinels, master))
}

/// A test that names a Redis shape of its own (a cluster or sentinels it started) gets that
/// one alone, not the topology's as well: the settings the test changed from `base` win.
pub fn one_redis_shape(base: &HashMap<String, String>, vars: &mut HashMap<String, String>) {
    let changed = |vars: &HashMap<String, String>, key: &str| vars.get(key) != base.get(key);
    let shapes: [(&str, &[&str]); 2] = [
        ("REDIS_SENTINELS", &["REDIS_CLUSTER_NODES"]),
        (
            "REDIS_CLUSTER_NODES",
            &["REDIS_SENTINELS", "REDIS_SENTINEL_MASTER"],
        ),
    ];
    for (own, others) in shapes {
        if changed(vars, own) && vars.contains_key(own) {
            for other in others {
                if !changed(vars, other) {
                    vars.remove(*other);
                }
            }
        }
    }
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

/// The keys of the shared test Redis matching `pattern`, sorted.
pub async fn redis_keys(pattern: &str) -> Vec<String> {
    let client = redis_client(&redis_url());
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("redis");
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg(pattern)
        .query_async(&mut conn)
        .await
        .expect("KEYS");
    keys.sort();
    keys
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
    /// Creates `sb_<random>` on the test server as a copy of a migrated template. Both go to
    /// Postgres directly (`SB_TEST_DATABASE_DIRECT_URL`, default `SB_TEST_DATABASE_URL`): the
    /// migrator holds a session lock, which a transaction-mode pooler would not keep.
    ///
    /// Copying a template is a file copy inside Postgres, several times faster than running
    /// every migration per test.
    pub async fn fresh() -> TestDb {
        let pooled_admin = required("SB_TEST_DATABASE_URL");
        let direct_admin =
            std::env::var("SB_TEST_DATABASE_DIRECT_URL").unwrap_or_else(|_| pooled_admin.clone());
        let name = format!("sb_{}", Uuid::new_v4().simple());
        let admin = sqlx::PgPool::connect(&direct_admin)
            .await
            .expect("connect to test postgres");
        let template = migrated_template(&admin, &direct_admin).await;
        sqlx::query(&format!("CREATE DATABASE {name} TEMPLATE {template}"))
            .execute(&admin)
            .await
            .expect("create test database");
        admin.close().await;
        TestDb {
            url: with_database(&pooled_admin, &name),
            direct_url: with_database(&direct_admin, &name),
            name,
        }
    }

    /// Runs a `SELECT count(*) …` (any single bigint) and returns it.
    pub async fn count(&self, sql: &str) -> i64 {
        let pool = self.pool().await;
        let n = sqlx::query_scalar(sql).fetch_one(&pool).await.expect(sql);
        pool.close().await;
        n
    }

    /// Awaits [`TestDb::count`] equal to `want` (30 s at most); returns the last value, so
    /// the caller's assertion names what it saw.
    pub async fn wait_for_count(&self, sql: &str, want: i64) -> i64 {
        self.wait_for(sql, |n| n == want).await
    }

    /// Awaits [`TestDb::count`] at least `want` (30 s at most); returns the last value.
    pub async fn wait_for_at_least(&self, sql: &str, want: i64) -> i64 {
        self.wait_for(sql, |n| n >= want).await
    }

    /// Awaits [`TestDb::count`] equal to `want` for as long as it keeps moving: it fails
    /// (returns the last value) once it stood still for 15 s, or after 2 min. For backlogs a
    /// loaded machine drains slowly but surely; a stuck one still fails soon.
    pub async fn wait_while_moving(&self, sql: &str, want: i64) -> i64 {
        const STILL: Duration = Duration::from_secs(15);
        let pool = self.pool().await;
        let start = tokio::time::Instant::now();
        let (mut last, mut moved) = (-1, start);
        loop {
            let n: i64 = sqlx::query_scalar(sql).fetch_one(&pool).await.expect(sql);
            if n == want || moved.elapsed() >= STILL || start.elapsed() >= STILL * 8 {
                pool.close().await;
                return n;
            }
            if n != last {
                (last, moved) = (n, tokio::time::Instant::now());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn wait_for(&self, sql: &str, done: impl Fn(i64) -> bool) -> i64 {
        let pool = self.pool().await;
        let count = || async { sqlx::query_scalar(sql).fetch_one(&pool).await.expect(sql) };
        let last = settled(Duration::from_secs(30), count, |n| done(*n)).await;
        pool.close().await;
        last
    }

    /// Awaits `n` runs of scheduled job `job` that finished ok and began after this call
    /// (30 s at most), and returns how many there were: the positive signal a check that
    /// something did *not* happen waits on, instead of sleeping for "long enough".
    pub async fn wait_for_job_runs(&self, job: &str, n: i64) -> i64 {
        let pool = self.pool().await;
        let since: chrono::DateTime<chrono::Utc> = sqlx::query_scalar("SELECT now()")
            .fetch_one(&pool)
            .await
            .expect("now");
        pool.close().await;
        let sql = format!(
            "SELECT count(*) FROM cron_runs WHERE job = '{job}' AND status = 'ok'
               AND started_at > '{}'::timestamptz",
            since.to_rfc3339()
        );
        self.wait_for_at_least(&sql, n).await
    }

    /// Runs a statement that returns one value (one row, one column) and returns it.
    pub async fn scalar<T>(&self, sql: &str) -> T
    where
        T: for<'r> sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres> + Send + Unpin,
    {
        let pool = self.pool().await;
        let value = sqlx::query_scalar(sql)
            .fetch_one(&pool)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        pool.close().await;
        value
    }

    /// A pool on this database (for assertions on rows), straight to Postgres.
    pub async fn pool(&self) -> sqlx::PgPool {
        sqlx::PgPool::connect(&self.direct_url)
            .await
            .expect("connect")
    }
}

/// How often [`eventually`] looks again: short enough that a test never waits noticeably
/// longer than the condition took.
const POLL: Duration = Duration::from_millis(25);

/// Awaits `check` answering `Some` and returns its value; panics naming `what` when
/// `deadline` passes first. For conditions the system offers no event for (a row written by
/// a worker, a key expired); a negative check waits on a positive signal with this instead
/// of sleeping.
pub async fn eventually<T, F, Fut>(what: &str, deadline: Duration, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    match try_eventually(deadline, check).await {
        Some(value) => value,
        None => panic!("{what}: not within {deadline:?}"),
    }
}

/// Awaits `check` giving a value `done` accepts (`deadline` at most) and returns the last
/// value either way, so that the caller's assertion shows what it saw.
pub async fn settled<T, F, Fut>(deadline: Duration, mut check: F, done: impl Fn(&T) -> bool) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = T>,
{
    let until = tokio::time::Instant::now() + deadline;
    loop {
        let value = check().await;
        if done(&value) || tokio::time::Instant::now() >= until {
            return value;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// [`eventually`] that answers `None` at the deadline instead of panicking.
pub async fn try_eventually<T, F, Fut>(deadline: Duration, check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    try_eventually_every(deadline, POLL, check).await
}

/// [`try_eventually`] looking every `interval`, for checks that cost more than a query
/// (a `redis-cli` process, a connection attempt).
pub async fn try_eventually_every<T, F, Fut>(
    deadline: Duration,
    interval: Duration,
    mut check: F,
) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let until = tokio::time::Instant::now() + deadline;
    loop {
        if let Some(value) = check().await {
            return Some(value);
        }
        if tokio::time::Instant::now() >= until {
            return None;
        }
        tokio::time::sleep(interval).await;
    }
}

/// The name of a database holding every migration of this build, creating it on first use.
/// Its name carries a digest of the migrations, so a changed migration gets a new template,
/// and an advisory lock lets the first of many test processes build it while the others
/// wait (nextest runs each test in a process of its own).
async fn migrated_template(admin: &sqlx::PgPool, admin_url: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut digest = Sha256::new();
    for m in switchboard_store::MIGRATOR.iter() {
        digest.update(m.version.to_be_bytes());
        digest.update(&m.checksum);
    }
    let name = format!("sb_template_{}", &hex::encode(digest.finalize())[..16]);
    let mut conn = admin.acquire().await.expect("connect to test postgres");
    // One key for every template build: they are rare, and one key cannot collide with
    // another's digest.
    sqlx::query("SELECT pg_advisory_lock(7304917301)")
        .execute(&mut *conn)
        .await
        .expect("template lock");
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(&name)
            .fetch_one(&mut *conn)
            .await
            .expect("look for the template");
    if !exists {
        // Built under another name and renamed when complete, so a process that died midway
        // never leaves a half-migrated template behind.
        let building = format!("{name}_building");
        sqlx::query(&format!("DROP DATABASE IF EXISTS {building}"))
            .execute(&mut *conn)
            .await
            .expect("drop a stale template build");
        sqlx::query(&format!("CREATE DATABASE {building}"))
            .execute(&mut *conn)
            .await
            .expect("create the template");
        let pool = sqlx::PgPool::connect(&with_database(admin_url, &building))
            .await
            .expect("connect to the template");
        switchboard_store::migrate(&pool)
            .await
            .expect("migrate the template");
        pool.close().await;
        sqlx::query(&format!("ALTER DATABASE {building} RENAME TO {name}"))
            .execute(&mut *conn)
            .await
            .expect("name the template");
    }
    sqlx::query("SELECT pg_advisory_unlock(7304917301)")
        .execute(&mut *conn)
        .await
        .expect("template unlock");
    name
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
    if let (Some((sentinels, master)), true) = (redis_sentinels(), redis_url == self::redis_url()) {
        vars.insert("REDIS_SENTINELS".into(), sentinels);
        vars.insert("REDIS_SENTINEL_MASTER".into(), master);
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
