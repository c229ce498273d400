//! What a pod checks before it starts: the production invariants (AA9's connection budget
//! among them), the schedules, the proxy list and that its master keys open every stored
//! secret. Every broken rule is reported at once, so an operator fixes a configuration in
//! one go rather than one restart per line.

use crate::protection::client_ip::TrustedProxies;
use sqlx::PgPool;
use std::time::Duration;
use switchboard_config::{AppEnv, Config, Violation};
use switchboard_store::StoreError;
use switchboard_store::crypto::SecretCipher;
use switchboard_store::rekey;

/// The configuration's violations (one line each) and the trusted proxies it names.
pub(super) async fn check(config: &Config, db: &PgPool) -> (Vec<String>, TrustedProxies) {
    let mut violations: Vec<String> = config
        .static_violations()
        .iter()
        .map(Violation::to_string)
        .collect();
    let production = config.app.env == AppEnv::Production;
    if !production {
        let redis = &config.redis;
        if redis.url.is_none() && redis.cluster_nodes.is_none() && redis.sentinels.is_none() {
            violations
                .push("REDIS_URL or REDIS_CLUSTER_NODES must be set (or REDIS_SENTINELS)".into());
        }
        if config.master_keys().is_empty() {
            violations.push("MASTER_ENCRYPTION_KEY must be set (or MASTER_ENCRYPTION_KEYS)".into());
        }
    }
    if config.database.max_connections.is_some() {
        if let Some(v) = config.declared_budget_violation() {
            if production {
                violations.push(v.to_string());
            } else {
                tracing::warn!("{v}");
            }
        }
    } else {
        server_budget(config, db, production, &mut violations).await;
    }
    violations.extend(crate::scheduled::schedule_violations(config));
    violations.extend(stored_keys(config, db).await);
    let proxies = TrustedProxies::parse(&config.http.trusted_proxies).unwrap_or_else(|e| {
        violations.push(e.to_string());
        Default::default()
    });
    let proxies = if production {
        proxies.warning_on_untrusted()
    } else {
        proxies
    };
    (violations, proxies)
}

/// AA9 against the server's own `max_connections`, when no budget is declared.
async fn server_budget(
    config: &Config,
    db: &PgPool,
    production: bool,
    violations: &mut Vec<String>,
) {
    match tokio::time::timeout(
        Duration::from_secs(5),
        switchboard_store::max_connections(db),
    )
    .await
    {
        Ok(Ok(max)) => {
            if let Some(v) = config.connection_budget_violation(max) {
                if production {
                    violations.push(v.to_string());
                } else {
                    tracing::warn!("{v}");
                }
            }
        }
        Ok(Err(e)) if production => violations.push(format!(
            "cannot verify the connection budget: {}",
            switchboard_store::explain(&e)
        )),
        Err(_) if production => violations
            .push("cannot verify the connection budget: Postgres did not answer within 5 s".into()),
        _ => tracing::warn!("Postgres unreachable at start-up; /ready will report it"),
    }
}

/// Stored secrets from before key ids tried at start, per column.
const LEGACY_SAMPLE: i64 = 200;

/// Every stored secret is under a key this pod has (see `switchboard_store::rekey`): a key
/// removed too early would otherwise show only later, as webhooks refused and replies dead
/// one by one. Postgres away (or not migrated yet) is only logged; `/ready` reports it.
async fn stored_keys(config: &Config, db: &PgPool) -> Vec<String> {
    let Some(cipher) = SecretCipher::with_keys(&config.master_keys()) else {
        return Vec::new();
    };
    let found = tokio::time::timeout(Duration::from_secs(5), async {
        let census = rekey::census(db).await?;
        let legacy = match census.legacy {
            0 => 0,
            _ => rekey::unreadable_legacy(db, &cipher, LEGACY_SAMPLE).await?,
        };
        Ok::<_, StoreError>((census.unknown(&cipher), legacy))
    })
    .await;
    let (unknown, legacy) = match found {
        Ok(Ok(found)) => found,
        Ok(Err(e)) => {
            let why = switchboard_store::explain(&e);
            tracing::warn!("cannot check the stored secrets' master keys: {why}");
            return Vec::new();
        }
        Err(_) => {
            tracing::warn!(
                "cannot check the stored secrets' master keys: Postgres did not answer within 5 s"
            );
            return Vec::new();
        }
    };
    let var = match config.channels.master_encryption_keys {
        Some(_) => "MASTER_ENCRYPTION_KEYS",
        None => "MASTER_ENCRYPTION_KEY",
    };
    let mut out = Vec::new();
    if !unknown.is_empty() {
        let total: i64 = unknown.iter().map(|(_, n)| n).sum();
        let ids: Vec<String> = unknown
            .iter()
            .map(|(id, n)| format!("{id} ({n})"))
            .collect();
        out.push(format!(
            "{total} stored secret(s) are encrypted under master key id(s) {} that {var} does not list: \
             add the key back after the first one (docs/OPERATIONS.md, \"Rotating the master key\")",
            ids.join(", ")
        ));
    }
    if legacy > 0 {
        out.push(format!(
            "{legacy} stored secret(s) from before key ids (of the first {LEGACY_SAMPLE} checked) \
             open with none of the keys in {var}: add the key they were written with"
        ));
    }
    out
}
