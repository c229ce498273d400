//! Captures alerts (`tracing::error!` with target `switchboard::alert`, the events Sentry
//! turns into issues), counted by the value of one of their fields.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// A layer counting alerts by the value of their field `field`.
#[derive(Clone)]
pub struct Alerts {
    field: &'static str,
    counts: Arc<Mutex<HashMap<String, usize>>>,
}

struct Value {
    field: &'static str,
    found: Option<String>,
}

impl Visit for Value {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == self.field {
            self.found = Some(format!("{value:?}"));
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == self.field {
            self.found = Some(value.to_owned());
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for Alerts {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if event.metadata().target() != "switchboard::alert" {
            return;
        }
        let mut value = Value {
            field: self.field,
            found: None,
        };
        event.record(&mut value);
        if let Some(key) = value.found {
            *self.counts.lock().unwrap().entry(key).or_default() += 1;
        }
    }
}

impl Alerts {
    /// Counts by `field` (`alert`: the kind; `subject`: the scope, a dead letter's id for
    /// `reply_dead`).
    pub fn by(field: &'static str) -> Alerts {
        Alerts {
            field,
            counts: Arc::default(),
        }
    }

    /// How many alerts had `value` in the field.
    pub fn count(&self, value: &str) -> usize {
        self.counts.lock().unwrap().get(value).copied().unwrap_or(0)
    }

    /// Captures this thread's alerts until the guard is dropped: a test's pods run on its
    /// runtime's one thread, other tests' pods elsewhere.
    pub fn on_this_thread(&self) -> tracing::subscriber::DefaultGuard {
        tracing::subscriber::set_default(tracing_subscriber::registry().with(self.clone()))
    }
}

static BY_FAILURE: OnceLock<Alerts> = OnceLock::new();

fn by_failure() -> &'static Alerts {
    BY_FAILURE.get_or_init(|| {
        let alerts = Alerts::by("subject");
        tracing_subscriber::registry()
            .with(alerts.clone())
            .try_init()
            .expect("no other global subscriber in the test binary");
        alerts
    })
}

/// Starts capturing the dead-letter alerts of every pod in this test process (call before
/// the pods run).
pub fn capture() {
    by_failure();
}

/// How many alerts were raised for dead letter `failure_id`.
pub fn alerts_for(failure_id: uuid::Uuid) -> usize {
    by_failure().count(&failure_id.to_string())
}
