//! Logging and error reporting set-up: tracing (JSON in production) and Sentry.
//!
//! Sentry is a third party, so nothing customer-owned or secret may reach it. The pod's
//! own logs keep full detail; Sentry gets what an engineer needs to find the fault. The
//! scrub runs twice: `before_breadcrumb` cleans each breadcrumb as the scope stores it, and
//! `before_send` cleans the whole event (message, `logentry`, exception values, `extra`,
//! every context map, including `Rust Tracing Fields` where sentry-tracing puts an event's
//! fields, `tags`, breadcrumbs again, `request`, `user`). Known leak it closes: Twilio's
//! "The 'To' number +1… is not a valid phone number." reached Sentry in the dead-letter
//! alert's fields and in the breadcrumb of the failed delivery.
//!
//! The rules (`fields.rs` for names, `text.rs` for shapes):
//! - **By name** (fields, extras, tags, breadcrumb data, at any depth): the value becomes
//!   `[scrubbed]` if the name carries a secret (contains `token`, `secret`, `password`,
//!   `authorization`, `api_key`, `cookie`, `signature`, `credential`, or is the word `auth`,
//!   `jwt`, …), customer text or contact details (has the word `body`, `text`, `content`,
//!   `reply`, `draft`, `email`, `phone`, `recipient`, `sender`, `subject`, `customer`,
//!   `payload`, …, or is exactly `to`, `from`, `cc`, `bcc`), or a provider's error text
//!   (`provider_error`, `last_error`, `delivery_error`, `upstream_…`). A last word that
//!   describes the value instead (`_id`, `_len`, `_count`, `_type`, `_status`, …) keeps it:
//!   `reply_id`, `body_len` and `provider_status` survive. Booleans and nulls always stay.
//! - **Error text** (`error`, `reason`, `detail`, `cause`, `…_error`) is a provider's, and
//!   removed, when it was logged next to a `channel` or `provider…` field (how dispatch logs a
//!   failed delivery and the dead-letter alert), or from code that handles provider responses
//!   or customer payloads (`switchboard::alert`, `switchboard_channels`, dispatch, inbound,
//!   intake, agent, email body targets; see `scrub.rs`). There, the text of an error
//!   recorded as an exception is removed too. Elsewhere an `error` is our own error's text
//!   (a database or Redis failure), kept because it is what makes the event useful.
//! - **Verbatim**: a removed value of 6+ characters is also erased wherever it is repeated
//!   (`"dead after {} retries: {}", n, error` puts the error into the message).
//! - **By shape**, in all remaining text: emails → `[email]`; phone numbers → `[phone]` (a
//!   `+` and 7–15 digits in any grouping, or 7–15 digits grouped as dialled: `(500) 555-0001`,
//!   `500-555-0001`, `020 7946 0958`; not UUIDs, dates, times, IPv4 addresses, durations,
//!   status codes or bare digit runs, which look like timestamps and ids); tokens → `[token]`
//!   (`Bearer …`/`Basic …`, JWTs, Telegram bot tokens, `whsec_`/`xox?-`/`sk_live_`-style
//!   keys, 32+ hex digits, 32+ base64 characters mixing digits and both cases); URL
//!   credentials → `scheme://[scrubbed]@`.
//! - **Request**: no body, cookies, query string, env or user; no headers naming
//!   authorization, cookies, signatures, tokens, secrets or API keys; no query in the URL.
//!
//! Not covered: an `error` field logged without a message becomes the message itself
//! (sentry-tracing does that), so only the shape rules apply to it; map keys and stack
//! frames (Rust fills in no variables) are not scrubbed; bare digit runs (`15005550001`
//! without `+`) are left unless their field's name removes them.

mod fields;
mod logs;
mod otel;
mod scrub;
mod text;

use std::sync::Arc;

use secrecy::ExposeSecret;
use switchboard_config::{Config, LogFormat};
use tracing::{Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{FilterExt, LevelFilter, filter_fn};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

pub use otel::{OtelError, Tracing};
pub use scrub::{scrub, scrub_breadcrumb};

/// Installs the global tracing subscriber; `RUST_LOG` overrides `LOG_LEVEL`. With
/// `OTEL_EXPORTER_OTLP_ENDPOINT` set, the pod's spans are also exported (see `otel`):
/// the returned [`Tracing`] sends the last of them at exit. Must run on the pod's tokio
/// runtime. An export that cannot be set up is reported on stderr and the pod runs
/// without it: observability never stops the service.
///
/// `LOG_LEVEL` (or `RUST_LOG`) filters what is logged and what Sentry hears, each layer
/// with its own copy of the filter, so that it never hides the exported spans: those are
/// chosen by the OpenTelemetry layer's own filter (our spans at `INFO`), whatever the logs'
/// level.
pub fn init_tracing(config: &Config) -> Option<Tracing> {
    let level = config.telemetry.log_level.clone();
    let logs = move || {
        EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| EnvFilter::new(format!("{level},sqlx=warn")))
    };
    let (tracing, otel_layer) = match config
        .trace_export()
        .map(|e| otel::start(&e, &config.pod_id()))
    {
        None => (None, None),
        Some(Ok((tracing, layer))) => (Some(tracing), Some(layer)),
        Some(Err(e)) => {
            eprintln!("switchboard: traces are not exported: {e}");
            (None, None)
        }
    };
    let registry = with_sentry(tracing_subscriber::registry(), &logs).with(otel_layer);
    let result = match config.log_format() {
        LogFormat::Json => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .event_format(logs::WithTraceIds(
                        tracing_subscriber::fmt::format().json().flatten_event(true),
                    ))
                    .with_filter(logs()),
            )
            .try_init(),
        LogFormat::Pretty => registry
            .with(tracing_subscriber::fmt::layer().with_filter(logs()))
            .try_init(),
    };
    // Already installed (tests start several apps in one process): keep the first, and
    // the export that came with it.
    match result {
        Ok(()) => tracing,
        Err(_) => {
            if let Some(tracing) = tracing {
                tracing.shutdown();
            }
            None
        }
    }
}

/// `subscriber` with what Sentry hears from tracing: `ERROR` events become Sentry events,
/// `INFO` and `WARN` events breadcrumbs. Without the filters every event would be sent as an
/// error event, and each error would also be its own breadcrumb. The two layers are added
/// one by one: composed with `Layer::and_then` over the registry, tracing-subscriber takes
/// the error layer's level (ERROR) for the whole stack and breadcrumbs are never recorded.
/// Each also passes only what `logs` (the logs' level) lets through.
fn with_sentry<S>(
    subscriber: S,
    logs: &dyn Fn() -> EnvFilter,
) -> impl Subscriber + for<'a> LookupSpan<'a> + Send + Sync + use<S>
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    use sentry::integrations::tracing::{BreadcrumbLayer, ErrorLayer};
    let breadcrumbs = filter_fn(|meta| matches!(*meta.level(), Level::INFO | Level::WARN))
        .with_max_level_hint(LevelFilter::INFO)
        .and(logs());
    subscriber
        .with(BreadcrumbLayer::new().with_filter(breadcrumbs))
        .with(ErrorLayer::new().with_filter(LevelFilter::ERROR.and(logs())))
}

/// Starts Sentry when `SENTRY_DSN` is set; keep the guard alive for the process lifetime.
/// Panics are captured; events and breadcrumbs are scrubbed (see the module docs) before
/// anything leaves the process.
pub fn init_sentry(config: &Config) -> Option<sentry::ClientInitGuard> {
    let dsn = config.telemetry.sentry_dsn.as_ref()?;
    let mut options = client_options();
    options.release = sentry::release_name!();
    options.environment = Some(config.app.env.as_str().into());
    let guard = sentry::init((dsn.expose_secret(), options));
    Some(guard)
}

/// The options every Sentry client of the process starts from: no default PII, scrubbing.
fn client_options() -> sentry::ClientOptions {
    let mut options = sentry::ClientOptions::default();
    options.send_default_pii = false;
    options.before_send = Some(Arc::new(|event| Some(scrub(event))));
    options.before_breadcrumb = Some(Arc::new(|breadcrumb| Some(scrub_breadcrumb(breadcrumb))));
    options
}

#[cfg(test)]
mod tests;
