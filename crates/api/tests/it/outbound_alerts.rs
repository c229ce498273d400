//! Captures the dead-letter alerts (`tracing::error!` with target `switchboard::alert`, the
//! event Sentry turns into an issue) of every pod in this test process, by failure id.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

static ALERTS: OnceLock<Mutex<HashMap<String, usize>>> = OnceLock::new();

struct Capture;

struct FailureId(Option<String>);

impl Visit for FailureId {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "failure_id" {
            self.0 = Some(format!("{value:?}"));
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if event.metadata().target() != "switchboard::alert" {
            return;
        }
        let mut id = FailureId(None);
        event.record(&mut id);
        if let Some(id) = id.0 {
            *alerts().lock().unwrap().entry(id).or_default() += 1;
        }
    }
}

fn alerts() -> &'static Mutex<HashMap<String, usize>> {
    ALERTS.get_or_init(|| {
        tracing_subscriber::registry()
            .with(Capture)
            .try_init()
            .expect("no other global subscriber in the test binary");
        Mutex::new(HashMap::new())
    })
}

/// Starts capturing (call before the pods run).
pub fn capture() {
    alerts();
}

/// How many alerts were raised for dead letter `failure_id`.
pub fn alerts_for(failure_id: uuid::Uuid) -> usize {
    alerts()
        .lock()
        .unwrap()
        .get(&failure_id.to_string())
        .copied()
        .unwrap_or(0)
}
