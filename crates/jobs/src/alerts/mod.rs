//! Alerts for operators: an error log line with target `switchboard::alert`, which Sentry
//! turns into an event (request bodies and auth headers are scrubbed before send), raised
//! at most once per kind and subject per window across all pods.
//!
//! N pods see the same condition (Redis down, a backlog, a failing agent) at the same time;
//! without a shared claim each would page someone. The claim is a Redis `SET NX PX` on
//! `alert:{kind}:{subject}:{window start}`; when Redis is what failed (the rate limiter's
//! storage), the claim is a row in `alert_claims` instead, and only when neither answers is
//! the alert raised without a claim (twice rather than never).

use chrono::{TimeZone, Utc};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use switchboard_coord::Redis;
pub use switchboard_domain::alerts::{AlertKind, announce};
use switchboard_store::{PgPool, alert_claims};

/// The pod's alert raiser; cheap to clone.
#[derive(Clone)]
pub struct Alerts {
    db: PgPool,
    redis: Redis,
    window: Duration,
    pod_id: Arc<str>,
}

impl std::fmt::Debug for Alerts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Alerts")
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

/// How long a claim may wait for Redis before Postgres is asked instead.
const REDIS_CLAIM_TIMEOUT: Duration = Duration::from_millis(300);
/// How long a claim may wait for Postgres.
const DB_CLAIM_TIMEOUT: Duration = Duration::from_secs(2);

impl Alerts {
    /// Alerts claimed per `window` (at least a second).
    pub fn new(db: PgPool, redis: Redis, window: Duration, pod_id: &str) -> Self {
        Self {
            db,
            redis,
            window: window.max(Duration::from_secs(1)),
            pod_id: Arc::from(pod_id),
        }
    }

    /// Raises `kind` about `subject` unless some pod already did in this window; returns
    /// whether this call raised it.
    pub async fn raise(
        &self,
        kind: AlertKind,
        subject: &str,
        message: &str,
        details: Value,
    ) -> bool {
        let window_ms = i64::try_from(self.window.as_millis()).unwrap_or(i64::MAX);
        let now_ms = Utc::now().timestamp_millis();
        let start_ms = now_ms - now_ms.rem_euclid(window_ms);
        let key = format!("alert:{}:{subject}:{start_ms}", kind.as_str());
        let claimed = match tokio::time::timeout(
            REDIS_CLAIM_TIMEOUT,
            self.redis.set_nx(&key, &self.pod_id, self.window),
        )
        .await
        {
            Ok(Ok(won)) => won,
            _ => {
                let start = Utc
                    .timestamp_millis_opt(start_ms)
                    .single()
                    .unwrap_or_else(Utc::now);
                let claim =
                    alert_claims::claim(&self.db, kind.as_str(), subject, start, &self.pod_id);
                match tokio::time::timeout(DB_CLAIM_TIMEOUT, claim).await {
                    Ok(Ok(won)) => won,
                    _ => true,
                }
            }
        };
        if claimed {
            announce(kind, subject, message, &details);
        }
        claimed
    }
}

/// A dead reply's alert, claimed in its dead-letter row (one pod per row). A line of its
/// own: the provider's refusal (customer data: it may name the recipient) stays in fields
/// named `error`, which the Sentry scrubbing removes by name and then erases wherever the
/// message repeats it.
pub fn reply_dead(dead: &switchboard_store::dead_letters::Alert) {
    tracing::error!(
        target: "switchboard::alert",
        alert = AlertKind::ReplyDead.as_str(),
        failure_id = %dead.id,
        outbox_id = %dead.outbox_id,
        org_id = %dead.org_id,
        channel = %dead.channel,
        provider_status = dead.provider_status,
        attempts = dead.attempts,
        retries = dead.retries,
        error = %dead.error,
        "outbound reply is dead after {} dead-letter retries: {}",
        dead.retries,
        dead.error
    );
    metrics::counter!("alerts_raised_total", "alert" => AlertKind::ReplyDead.as_str()).increment(1);
}

/// Raises the alert of dead rows nobody alerted yet (`only` one, or any): claiming an
/// alert is one atomic statement, so each dead row alerts exactly once across all pods.
pub async fn raise_reply_dead(db: &PgPool, only: Option<uuid::Uuid>) -> usize {
    let alerts = match switchboard_store::dead_letters::claim_alerts(db, only, 100).await {
        Ok(alerts) => alerts,
        Err(e) => {
            tracing::warn!(error = %e, "could not claim dead-letter alerts");
            return 0;
        }
    };
    for a in &alerts {
        metrics::counter!("dead_letter_alerts_total", "channel" => a.channel.as_str()).increment(1);
        reply_dead(a);
    }
    alerts.len()
}
