//! Logging and error reporting set-up: tracing (JSON in production) and Sentry.

use secrecy::ExposeSecret;
use switchboard_config::{Config, LogFormat};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Installs the global tracing subscriber; `RUST_LOG` overrides `LOG_LEVEL`.
pub fn init_tracing(config: &Config) {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("{},sqlx=warn", config.log_level)));
    let registry = tracing_subscriber::registry()
        .with(filter)
        .with(sentry::integrations::tracing::ErrorLayer::new())
        .with(sentry::integrations::tracing::BreadcrumbLayer::new());
    let result = match config.log_format() {
        LogFormat::Json => registry
            .with(tracing_subscriber::fmt::layer().json().flatten_event(true))
            .try_init(),
        LogFormat::Pretty => registry.with(tracing_subscriber::fmt::layer()).try_init(),
    };
    // Already installed (tests start several apps in one process): keep the first.
    let _ = result;
}

/// Starts Sentry when `SENTRY_DSN` is set; keep the guard alive for the process lifetime.
/// Panics are captured; request bodies, cookies, auth headers and user data are scrubbed
/// before anything leaves the process.
pub fn init_sentry(config: &Config) -> Option<sentry::ClientInitGuard> {
    let dsn = config.sentry_dsn.as_ref()?;
    let mut options = sentry::ClientOptions::default();
    options.release = sentry::release_name!();
    options.environment = Some(config.app_env.as_str().into());
    options.send_default_pii = false;
    options.before_send = Some(std::sync::Arc::new(|event| Some(scrub(event))));
    let guard = sentry::init((dsn.expose_secret(), options));
    Some(guard)
}

/// Removes personal data and secrets from an event.
pub fn scrub(mut event: sentry::protocol::Event<'static>) -> sentry::protocol::Event<'static> {
    if let Some(request) = event.request.as_mut() {
        request.data = None;
        request.cookies = None;
        request.query_string = None;
        request.env.clear();
        request.headers.retain(|name, _| {
            let name = name.to_ascii_lowercase();
            !(name.contains("authorization")
                || name.contains("cookie")
                || name.contains("signature")
                || name.contains("token")
                || name.contains("secret"))
        });
    }
    event.user = None;
    event
}

#[cfg(test)]
mod tests {
    use super::scrub;
    use sentry::protocol::{Event, Request, User};

    #[test]
    fn scrub_removes_pii() {
        let mut request = Request {
            data: Some("{\"password\":\"x\"}".into()),
            ..Default::default()
        };
        request
            .headers
            .insert("Authorization".into(), "Bearer t".into());
        request
            .headers
            .insert("X-Slack-Signature".into(), "v0=..".into());
        request.headers.insert("Accept".into(), "*/*".into());
        let event = scrub(Event {
            user: Some(User {
                email: Some("a@b.c".into()),
                ..Default::default()
            }),
            request: Some(request),
            ..Default::default()
        });
        assert!(event.user.is_none());
        let request = event.request.expect("kept");
        assert!(request.data.is_none());
        assert_eq!(request.headers.len(), 1);
    }
}
