//! What a pod checks before it starts: the production invariants (AA9's connection budget
//! among them), the schedules and the proxy list. Every broken rule is reported at once, so
//! an operator fixes a configuration in one go rather than one restart per line.

use crate::protection::client_ip::TrustedProxies;
use sqlx::PgPool;
use std::time::Duration;
use switchboard_config::{AppEnv, Config, Violation};

/// The configuration's violations (one line each) and the trusted proxies it names.
pub(super) async fn check(config: &Config, db: &PgPool) -> (Vec<String>, TrustedProxies) {
    let mut violations: Vec<String> = config
        .static_violations()
        .iter()
        .map(Violation::to_string)
        .collect();
    let production = config.app.env == AppEnv::Production;
    if !production {
        if config.redis.url.is_none() && config.redis.cluster_nodes.is_none() {
            violations.push("REDIS_URL or REDIS_CLUSTER_NODES must be set".into());
        }
        if config.channels.master_encryption_key.is_none() {
            violations.push("MASTER_ENCRYPTION_KEY must be set".into());
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
