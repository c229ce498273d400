//! Postgres storage for Switchboard: the pool, the migrations, one small repository module
//! per table family, and the encryption of channel secrets at rest.
//!
//! State transitions are single `UPDATE … WHERE <expected state> RETURNING` statements and
//! creates are `INSERT … ON CONFLICT` on the unique indexes the migrations name (AA5).

pub mod alert_claims;
pub mod alert_incidents;
pub mod audit;
pub mod connections;
pub mod conversation_notes;
pub mod conversations;
pub mod cron_runs;
pub mod crypto;
pub mod customer_erasures;
pub mod customers;
pub mod dead_letters;
pub mod drafts;
mod error;
pub mod event_outbox;
pub mod events;
pub mod expert_queue;
pub mod export;
pub mod idempotency;
pub mod inbox;
pub mod invitations;
pub mod message_journey;
pub mod messages;
pub mod org_event_seq;
pub mod org_members;
pub mod orgs;
pub mod outbox;
pub mod password_resets;
pub mod rekey;
pub mod relay_lease;
pub mod report_metrics;
pub mod reports;
pub mod retention;
pub mod saved_replies;
pub mod users;

pub use error::StoreError;
pub use sqlx::PgPool;

/// The opening of a one-statement transaction that commits without waiting for its WAL
/// flush: a CTE named `async_commit` that the statement must reference (`FROM async_commit`)
/// so that it runs. `set_config(…, true)` lasts only for that statement's own transaction.
/// For writes whose loss in a crash is harmless and that a later durable commit flushes
/// anyway (each use says why); `concat!(async_commit!(), "…")` keeps the statement a literal.
#[macro_export]
macro_rules! async_commit {
    () => {
        "WITH async_commit AS (SELECT set_config('synchronous_commit', 'off', true))"
    };
}

use secrecy::ExposeSecret;
use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions, PgSslMode};
use std::str::FromStr;
use std::time::Duration;
use switchboard_config::{Config, PgTls, PoolerMode};

mod explain;
pub use explain::{Cause, cause, explain};

/// The embedded migrations from the workspace's `migrations/` folder.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations");

/// A pooled connection idle at least this long is pinged before it is handed out.
pub const IDLE_CHECK_AFTER: Duration = Duration::from_secs(1);

/// Which of the two database URLs a connection is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `DATABASE_URL`: the pods' pool, through a pooler when there is one.
    Pooled,
    /// `DATABASE_DIRECT_URL`: Postgres itself, for work that holds a session.
    Direct,
}

/// The connect options for `route`: its URL with the TLS settings applied, and, behind a
/// transaction-mode pooler, no statement cache (so no named statement: see the
/// `[patch.crates-io]` of sqlx-postgres) and no `extra_float_digits` startup parameter,
/// which PgBouncer refuses unless told to ignore it.
pub fn connect_options(config: &Config, route: Route) -> Result<PgConnectOptions, StoreError> {
    let url = match route {
        Route::Pooled => config.database.url.expose_secret(),
        Route::Direct => config.database_direct_url(),
    };
    let mut options = PgConnectOptions::from_str(url)
        .map_err(|_| StoreError::InvalidUrl)?
        .application_name("switchboard");
    let tls = config
        .pg_tls()
        .map_err(|e| StoreError::Config(e.to_string()))?;
    options = match tls {
        PgTls::Verify { ca } => {
            let options = options.ssl_mode(PgSslMode::VerifyFull);
            match ca {
                Some(ca) => options.ssl_root_cert(ca),
                None => options,
            }
        }
        PgTls::Require => options.ssl_mode(PgSslMode::Require),
        PgTls::Off => options.ssl_mode(PgSslMode::Disable),
        PgTls::FromUrl => match &config.database.tls_ca {
            Some(ca) => options.ssl_root_cert(ca),
            None => options,
        },
    };
    if route == Route::Pooled && config.database.pooler == PoolerMode::Transaction {
        options = options.statement_cache_capacity(0).extra_float_digits(None);
    }
    Ok(options)
}

/// Opens the pod's pool lazily: the pool connects on first use, so a pod can start (and
/// answer `/health`) while Postgres is briefly away, and `/ready` reports it.
pub fn connect_lazy(config: &Config) -> Result<PgPool, StoreError> {
    let options = connect_options(config, Route::Pooled)?;
    Ok(PgPoolOptions::new()
        .max_connections(config.database.pool_size)
        .min_connections(0)
        .acquire_timeout(Duration::from_secs(5))
        .idle_timeout(Duration::from_secs(300))
        // sqlx pings every connection it hands out: a round trip (and a Postgres wake-up)
        // before every statement. A connection in steady use has just proven itself; only
        // one that sat idle (Postgres may have restarted meanwhile) is checked first.
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for >= IDLE_CHECK_AFTER {
                    conn.ping().await?;
                }
                Ok(true)
            })
        })
        .connect_lazy_with(options))
}

/// A small pool on `DATABASE_DIRECT_URL`, for migrations and anything else that needs
/// its session to last (a transaction-mode pooler would not keep it).
pub async fn connect_direct(config: &Config) -> Result<PgPool, StoreError> {
    let options = connect_options(config, Route::Direct)?;
    Ok(PgPoolOptions::new()
        .max_connections(2)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options)
        .await?)
}

/// Applies every pending migration. Safe to run from several pods at once: sqlx takes a
/// session advisory lock around the run, which is why `pool` must be a direct one
/// ([`connect_direct`]).
pub async fn migrate(pool: &PgPool) -> Result<(), StoreError> {
    MIGRATOR.run(pool).await.map_err(StoreError::Migrate)
}

/// [`migrate`] on a database that a later release has migrated further: the migrations this
/// binary does not know are left alone instead of refused (sqlx's `ignore_missing`), so an
/// older release, rolled back to, can still run its migrate step. The ones it knows must
/// still match their checksums.
pub async fn migrate_ignoring_missing(pool: &PgPool) -> Result<(), StoreError> {
    let mut migrator = sqlx::migrate!("../../migrations");
    migrator.set_ignore_missing(true);
    migrator.run(pool).await.map_err(StoreError::Migrate)
}

/// The server's `max_connections`, for the AA9 budget check.
pub async fn max_connections(pool: &PgPool) -> Result<u32, StoreError> {
    let value: String = sqlx::query_scalar("SHOW max_connections")
        .fetch_one(pool)
        .await?;
    value
        .parse()
        .map_err(|_| StoreError::Unexpected(format!("max_connections is {value:?}")))
}

/// `SELECT 1`, for readiness.
pub async fn ping(pool: &PgPool) -> Result<(), StoreError> {
    sqlx::query("SELECT 1").execute(pool).await?;
    Ok(())
}

#[cfg(test)]
mod layout;
