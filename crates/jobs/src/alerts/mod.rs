//! Alerts for operators, raised and resolved through [`Alerts`] only.
//!
//! N pods see the same condition (Redis down, a backlog, a failing agent) at the same time.
//! Raising opens an incident in Postgres, where the partial unique index on open
//! `(kind, scope)` lets exactly one pod open it; that pod writes the alert's log line
//! (target `switchboard::alert`, which Sentry captures) and, in the same statement, queues
//! one delivery per configured sink whose minimum severity the kind reaches (and, for a
//! dead reply, a notice to the org's account manager). Resolving closes the incident and
//! queues a resolve for each sink that got the trigger. Every pod's [`delivery`] loop sends
//! what is due, retried with backoff like replies.
//!
//! When Postgres cannot record an incident, the log line is still written once per
//! `ALERT_WINDOW_SECS` across pods, claimed with a Redis `SET NX PX` (or, with Redis away
//! too, a row in `alert_claims`; with neither, twice rather than never); sinks hear of it
//! when a pod next raises it with Postgres back.

pub mod delivery;

use chrono::{TimeZone, Utc};
use secrecy::SecretString;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use switchboard_channels::system_mail::Mailer;
use switchboard_config::Config;
use switchboard_coord::Redis;
pub use switchboard_domain::alerts::{AlertKind, Severity, announce};
use switchboard_store::alert_incidents::{self, Opening, Scopes, Target};
use switchboard_store::{PgPool, alert_claims, orgs};
use tokio::sync::Notify;
use url::Url;
use uuid::Uuid;

/// How long a raise waits for the Redis claim before trying Postgres.
const REDIS_CLAIM_TIMEOUT: Duration = Duration::from_millis(300);
/// How long a raise waits for Postgres before raising without a claim.
const DB_TIMEOUT: Duration = Duration::from_secs(2);

/// The sinks this deployment routes to (`ALERT_*`), each with its minimum severity.
#[derive(Clone)]
pub struct Routes {
    pub(crate) slack: Option<(SecretString, Severity)>,
    pub(crate) pagerduty: Option<(Url, SecretString, Severity)>,
    pub(crate) webhook: Option<(Url, SecretString, Severity)>,
    /// Sends the account manager's notices; `None` when no system mail is configured.
    pub(crate) mailer: Option<Mailer>,
    /// Where the console is, for links in notices.
    pub(crate) console: Url,
    /// The deployment's name in notices (the public URL's host).
    pub(crate) source: String,
}

impl Routes {
    /// The routes `config` names; account manager notices go through `mailer` when it is
    /// configured.
    pub fn from_config(config: &Config, mailer: Mailer) -> Self {
        let a = &config.alerts;
        let console = config.http.public_base_url.clone();
        Routes {
            slack: a
                .slack_webhook_url
                .clone()
                .map(|url| (url, a.slack_min_severity)),
            pagerduty: a
                .pagerduty_routing_key
                .clone()
                .map(|key| (a.pagerduty_url.clone(), key, a.pagerduty_min_severity)),
            webhook: match (&a.webhook_url, &a.webhook_secret) {
                (Some(url), Some(secret)) => {
                    Some((url.clone(), secret.clone(), a.webhook_min_severity))
                }
                _ => None,
            },
            mailer: mailer.is_configured().then_some(mailer),
            source: console.host_str().unwrap_or("switchboard").to_owned(),
            console,
        }
    }

    /// The sinks that take `kind`.
    fn targets(&self, kind: AlertKind) -> Vec<Target> {
        let severity = kind.severity();
        let mut targets = Vec::new();
        let mut add = |sink, min: Severity| {
            if severity >= min {
                targets.push(Target {
                    sink,
                    recipient: None,
                });
            }
        };
        if let Some((_, min)) = &self.slack {
            add("slack", *min);
        }
        if let Some((_, _, min)) = &self.pagerduty {
            add("pagerduty", *min);
        }
        if let Some((_, _, min)) = &self.webhook {
            add("webhook", *min);
        }
        targets
    }
}

/// The pod's alert raiser; cheap to clone.
#[derive(Clone)]
pub struct Alerts {
    db: PgPool,
    redis: Redis,
    window: Duration,
    pod_id: Arc<str>,
    routes: Arc<Routes>,
    /// Rung when this pod queued a delivery, so its delivery loop sends it at once.
    queued: Arc<Notify>,
}

/// One alert to raise.
#[derive(Debug, Clone)]
pub struct Alert<'a> {
    /// What it is about.
    pub kind: AlertKind,
    /// Which instance of it: one incident is open per kind and scope.
    pub scope: &'a str,
    /// The org it concerns, which lets that org's admins see it in `GET /alerts`.
    pub org_id: Option<Uuid>,
    /// One line for a person (no customer data: it goes to every sink).
    pub message: &'a str,
    /// Figures behind it.
    pub details: Value,
}

impl Alerts {
    /// The raiser of pod `pod_id`; log lines without Postgres are claimed per `window`.
    pub fn new(db: PgPool, redis: Redis, window: Duration, pod_id: &str, routes: Routes) -> Self {
        Self {
            db,
            redis,
            window: window.max(Duration::from_secs(1)),
            pod_id: Arc::from(pod_id),
            routes: Arc::new(routes),
            queued: Arc::new(Notify::new()),
        }
    }

    /// Raises `kind` about `scope` (a deployment-wide condition); see [`Alerts::raise_alert`].
    pub async fn raise(&self, kind: AlertKind, scope: &str, message: &str, details: Value) -> bool {
        self.raise_alert(Alert {
            kind,
            scope,
            org_id: None,
            message,
            details,
        })
        .await
    }

    /// Opens the alert's incident unless one is open for its kind and scope; returns
    /// whether this call opened it (and so wrote the log line and queued the deliveries).
    pub async fn raise_alert(&self, alert: Alert<'_>) -> bool {
        let mut targets = self.routes.targets(alert.kind);
        if alert.kind == AlertKind::ReplyDead
            && self.routes.mailer.is_some()
            && let Some(org) = alert.org_id
        {
            match orgs::account_manager(&self.db, org).await {
                Ok(Some(address)) => targets.push(Target {
                    sink: "account_manager",
                    recipient: Some(address),
                }),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(error = %e, %org, "could not read the org's account manager")
                }
            }
        }
        let opening = Opening {
            kind: alert.kind,
            scope: alert.scope,
            org_id: alert.org_id,
            summary: alert.message,
            details: &alert.details,
            raised_by: &self.pod_id,
        };
        let opened = tokio::time::timeout(
            DB_TIMEOUT,
            alert_incidents::open(&self.db, &opening, &targets),
        )
        .await;
        match opened {
            Ok(Ok(Some(incident))) => {
                let mut details = alert.details.clone();
                details["incident_id"] = json!(incident);
                announce(alert.kind, alert.scope, alert.message, &details);
                if !targets.is_empty() {
                    self.queued.notify_one();
                }
                true
            }
            Ok(Ok(None)) => false,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, alert = alert.kind.as_str(), "could not record the incident");
                self.announce_claimed(&alert).await
            }
            Err(_) => {
                tracing::warn!(
                    alert = alert.kind.as_str(),
                    "recording the incident timed out"
                );
                self.announce_claimed(&alert).await
            }
        }
    }

    /// Resolves the open incident of `kind` about `scope`, if there is one.
    pub async fn resolve(&self, kind: AlertKind, scope: &str) {
        self.resolve_scopes(kind, Scopes::Only(scope)).await;
    }

    /// Resolves every open incident of `kind` whose scope is not in `still`: the scopes
    /// where the condition still holds.
    pub async fn resolve_all_but(&self, kind: AlertKind, still: &[String]) {
        self.resolve_scopes(kind, Scopes::Except(still)).await;
    }

    async fn resolve_scopes(&self, kind: AlertKind, scopes: Scopes<'_>) {
        match alert_incidents::resolve(&self.db, kind, scopes).await {
            Ok(resolved) => {
                for incident in &resolved {
                    tracing::info!(
                        alert = kind.as_str(),
                        %incident,
                        "alert resolved"
                    );
                    metrics::counter!("alerts_resolved_total", "alert" => kind.as_str())
                        .increment(1);
                }
                if !resolved.is_empty() {
                    self.queued.notify_one();
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, alert = kind.as_str(), "could not resolve the alert")
            }
        }
    }

    /// Without Postgres: the log line, once per window across pods.
    async fn announce_claimed(&self, alert: &Alert<'_>) -> bool {
        let window_ms = i64::try_from(self.window.as_millis()).unwrap_or(i64::MAX);
        let now_ms = Utc::now().timestamp_millis();
        let start_ms = now_ms - now_ms.rem_euclid(window_ms);
        let kind = alert.kind.as_str();
        let key = format!("alert:{kind}:{}:{start_ms}", alert.scope);
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
                let claim = alert_claims::claim(&self.db, kind, alert.scope, start, &self.pod_id);
                match tokio::time::timeout(DB_TIMEOUT, claim).await {
                    Ok(Ok(won)) => won,
                    _ => true,
                }
            }
        };
        if claimed {
            announce(alert.kind, alert.scope, alert.message, &alert.details);
        }
        claimed
    }
}
