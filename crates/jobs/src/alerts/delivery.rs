//! Every pod's delivery loop: claims due alert deliveries (a lease, `SKIP LOCKED`), sends
//! each to its sink, and records the outcome: sent, retried with [`RETRY`] backoff, or dead
//! after [`MAX_ATTEMPTS`] or a refusal no retry fixes. A pod that dies mid-send leaves its
//! lease to lapse and another pod sends again (a sink may see a notice twice, never none;
//! PagerDuty folds repeats by `dedup_key`, webhooks by `webhook-id`).

use super::{Alerts, Routes};
use secrecy::ExposeSecret;
use std::time::Duration;
use switchboard_channels::alert_sinks::{Action, Notice, SinkError, Sinks};
use switchboard_channels::system_mail::Mail;
use switchboard_domain::alerts::AlertKind;
use switchboard_domain::backoff::Backoff;
use switchboard_domain::periodic;
use switchboard_store::StoreError;
use switchboard_store::alert_incidents::{self, Attempt, Due};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Attempts before a delivery is dead (about a day of retries).
pub const MAX_ATTEMPTS: i32 = 20;
/// Waits between attempts: 5 s doubling to at most 2 h.
pub const RETRY: Backoff = Backoff::new(Duration::from_secs(5), Duration::from_secs(2 * 3600));
/// How long a claim holds a delivery; longer than a sink's timeout.
const LEASE: Duration = Duration::from_secs(60);
/// Deliveries claimed at once.
const BATCH: i64 = 20;
/// How often the loop looks without being woken.
const POLL: Duration = Duration::from_secs(2);

impl Alerts {
    /// Starts the delivery loop on `tracker` until `token` is cancelled.
    pub fn spawn_delivery(&self, token: &CancellationToken, tracker: &TaskTracker) {
        let alerts = self.clone();
        let sinks = Sinks::new();
        let stop = token.clone();
        periodic::paced(token, tracker, move || {
            let (alerts, sinks, stop) = (alerts.clone(), sinks.clone(), stop.clone());
            async move {
                match deliver_due(&alerts, &sinks).await {
                    Ok(n) if n as i64 == BATCH => Duration::ZERO,
                    Ok(_) => {
                        tokio::select! {
                            () = alerts.queued.notified() => {}
                            () = stop.cancelled() => {}
                            () = tokio::time::sleep(POLL) => {}
                        }
                        Duration::ZERO
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "could not claim alert deliveries");
                        POLL
                    }
                }
            }
        });
    }
}

/// Sends one batch of due deliveries; returns how many were claimed.
pub async fn deliver_due(alerts: &Alerts, sinks: &Sinks) -> Result<usize, StoreError> {
    let due = alert_incidents::claim_due(&alerts.db, BATCH, LEASE).await?;
    for d in &due {
        let outcome = send(&alerts.routes, sinks, d).await;
        let attempt = match &outcome {
            Ok(()) => Attempt::Sent,
            Err(e) if e.retryable() && d.attempts < MAX_ATTEMPTS => Attempt::Retry {
                error: e.message(),
                after: RETRY.delay(d.attempts.unsigned_abs()),
            },
            Err(e) => Attempt::Dead { error: e.message() },
        };
        match &attempt {
            Attempt::Sent => {
                metrics::counter!("alert_deliveries_total", "sink" => d.sink.clone(), "outcome" => "sent")
                    .increment(1);
            }
            Attempt::Retry { error, .. } => {
                tracing::warn!(sink = %d.sink, attempts = d.attempts, %error, "alert delivery failed; retrying");
            }
            Attempt::Dead { error } => {
                metrics::counter!("alert_deliveries_total", "sink" => d.sink.clone(), "outcome" => "dead")
                    .increment(1);
                tracing::error!(sink = %d.sink, attempts = d.attempts, %error, incident = %d.incident_id, "alert delivery gave up");
            }
        }
        alert_incidents::finish(&alerts.db, d.id, d.attempts, &attempt).await?;
    }
    Ok(due.len())
}

/// Why one attempt did not land.
#[derive(Debug, thiserror::Error)]
enum SendError {
    #[error(transparent)]
    Sink(#[from] SinkError),
    #[error("{0}")]
    Mail(String, bool),
    #[error("{0}")]
    Unroutable(&'static str),
}

impl SendError {
    fn retryable(&self) -> bool {
        match self {
            SendError::Sink(e) => e.retryable(),
            SendError::Mail(_, retryable) => *retryable,
            SendError::Unroutable(_) => false,
        }
    }

    fn message(&self) -> &str {
        match self {
            SendError::Sink(SinkError::Unavailable(m) | SinkError::Refused(m))
            | SendError::Mail(m, _) => m,
            SendError::Unroutable(m) => m,
        }
    }
}

async fn send(routes: &Routes, sinks: &Sinks, d: &Due) -> Result<(), SendError> {
    let runbook = d.kind.runbook();
    let notice = Notice {
        delivery_id: d.id,
        incident_id: d.incident_id,
        action: if d.action == "resolve" {
            Action::Resolve
        } else {
            Action::Trigger
        },
        kind: d.kind.as_str(),
        severity: d.severity.as_str(),
        scope: &d.scope,
        summary: &d.summary,
        details: &d.details,
        runbook: &runbook,
        opened_at: d.opened_at,
        resolved_at: d.resolved_at,
        source: &routes.source,
    };
    // A sink unset since the delivery was queued is not routable any more.
    match d.sink.as_str() {
        "slack" => {
            let (url, _) = routes
                .slack
                .as_ref()
                .ok_or(SendError::Unroutable("ALERT_SLACK_WEBHOOK_URL is not set"))?;
            Ok(sinks.slack(url.expose_secret(), &notice).await?)
        }
        "pagerduty" => {
            let (url, key, _) = routes.pagerduty.as_ref().ok_or(SendError::Unroutable(
                "ALERT_PAGERDUTY_ROUTING_KEY is not set",
            ))?;
            Ok(sinks
                .pagerduty(url.as_str(), key.expose_secret(), &notice)
                .await?)
        }
        "webhook" => {
            let (url, secret, _) = routes
                .webhook
                .as_ref()
                .ok_or(SendError::Unroutable("ALERT_WEBHOOK_URL is not set"))?;
            Ok(sinks
                .webhook(url.as_str(), secret.expose_secret(), &notice)
                .await?)
        }
        "account_manager" => account_manager(routes, d).await,
        _ => Err(SendError::Unroutable("unknown sink")),
    }
}

/// The account manager's notice of a dead reply, with a link to it in the console.
async fn account_manager(routes: &Routes, d: &Due) -> Result<(), SendError> {
    let mailer = routes.mailer.as_ref().ok_or(SendError::Unroutable(
        "no system mail is configured (MAIL_*)",
    ))?;
    let to = d
        .recipient
        .as_deref()
        .ok_or(SendError::Unroutable("the notice has no recipient"))?;
    if d.kind != AlertKind::ReplyDead {
        return Err(SendError::Unroutable(
            "only dead replies notify the account manager",
        ));
    }
    let mut link = routes.console.clone();
    link.set_fragment(Some(&format!("/admin/dead-letters/{}", d.scope)));
    let text = format!(
        "A reply to one of your customers could not be delivered.\n\n{}\n\nOpen it in the \
         console to retry it or answer another way:\n{link}\n",
        d.summary
    );
    let mail = Mail {
        to: to.to_owned(),
        subject: "A reply to a customer could not be delivered".to_owned(),
        text,
        html: None,
    };
    mailer
        .send(&mail)
        .await
        .map(|_| ())
        .map_err(|e| SendError::Mail(e.to_string(), e.is_retryable()))
}
