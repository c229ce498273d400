//! What every finished span goes through before it may leave the pod: the scrub (the same
//! rules as Sentry's, see `telemetry`), then a bounded queue.
//!
//! The bound is ours, in front of the SDK's batch processor: a span is admitted while
//! fewer than `OTEL_BSP_MAX_QUEUE_SIZE` are waiting or being exported, and dropped (counted
//! in `trace_spans_dropped_total`) otherwise. The count falls only when an export has
//! finished, successfully or not, so a collector that is down or slow costs at most that
//! many spans of memory and never a wait: ending a span is an atomic increment and a
//! non-blocking send. The SDK's own queue is as large as ours and so never fills; it drops
//! silently, which is why it is not the bound.

use super::super::fields::{Rule, classify};
use super::super::text::{SCRUBBED, scrub_text};
use opentelemetry::trace::Status;
use opentelemetry::{Context, KeyValue, Value};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Span, SpanData, SpanExporter, SpanProcessor,
};
use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Spans sent per export request at most.
const MAX_BATCH: usize = 512;

/// The pod's span processor: scrubs, bounds, batches.
#[derive(Debug)]
pub(super) struct Bounded {
    inner: BatchSpanProcessor,
    queued: Arc<AtomicUsize>,
    limit: usize,
}

impl Bounded {
    /// Up to `limit` spans held for `exporter`, sent every `delay` (or as soon as a batch
    /// is full).
    pub(super) fn new<E>(exporter: E, limit: usize, delay: Duration) -> Self
    where
        E: SpanExporter + 'static,
    {
        let queued = Arc::new(AtomicUsize::new(0));
        let config = BatchConfigBuilder::default()
            .with_max_queue_size(limit)
            .with_max_export_batch_size(MAX_BATCH.min(limit))
            .with_scheduled_delay(delay)
            .build();
        let counted = Counted {
            inner: exporter,
            queued: queued.clone(),
        };
        Self {
            inner: BatchSpanProcessor::new(counted, config),
            queued,
            limit,
        }
    }
}

impl SpanProcessor for Bounded {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, mut span: SpanData) {
        if self.queued.fetch_add(1, Ordering::AcqRel) >= self.limit {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            metrics::counter!("trace_spans_dropped_total").increment(1);
            metrics::gauge!("trace_spans_queued").set(self.limit as f64);
            return;
        }
        scrub(&mut span);
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The exporter, giving back each batch's share of the bound once it is done with it.
#[derive(Debug)]
struct Counted<E> {
    inner: E,
    queued: Arc<AtomicUsize>,
}

impl<E: SpanExporter> SpanExporter for Counted<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len();
        let result = self.inner.export(batch).await;
        let before = self.queued.fetch_sub(n, Ordering::AcqRel);
        metrics::gauge!("trace_spans_queued").set(before.saturating_sub(n) as f64);
        match &result {
            Ok(()) => metrics::counter!("trace_spans_exported_total").increment(n as u64),
            Err(_) => metrics::counter!("trace_export_failures_total").increment(1),
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The Sentry rules on a span: an attribute whose name marks a secret, customer text,
/// contact details or error text (a span never knows whether an error is a provider's, so
/// all of it) becomes `[scrubbed]`; every other string, and the span's name and status
/// message, lose emails, phone numbers and tokens by shape, and any removed value repeated
/// in them. Numbers and booleans are kept: the attributes that carry them (`attempt`,
/// `http.response.status_code`) are named for what they count.
pub(super) fn scrub(span: &mut SpanData) {
    last_values(&mut span.attributes);
    let mut removed = Vec::new();
    for attribute in &mut span.attributes {
        redact(attribute, &mut removed);
    }
    for attribute in &mut span.attributes {
        scrub_value(&mut attribute.value, &removed);
    }
    if let Cow::Owned(name) = scrub_text(&span.name, &removed) {
        span.name = Cow::Owned(name);
    }
    if let Status::Error { description } = &mut span.status {
        if let Cow::Owned(text) = scrub_text(description, &removed) {
            *description = Cow::Owned(text);
        }
    }
    for event in &mut span.events.events {
        for attribute in &mut event.attributes {
            redact(attribute, &mut removed);
            scrub_value(&mut attribute.value, &removed);
        }
        if let Cow::Owned(name) = scrub_text(&event.name, &removed) {
            event.name = Cow::Owned(name);
        }
    }
}

/// A field recorded again (an attempt, the status of the last try) is pushed again by the
/// SDK: the last value is the one that holds.
fn last_values(attributes: &mut Vec<KeyValue>) {
    let mut seen: Vec<&str> = Vec::with_capacity(attributes.len());
    let mut keep = vec![true; attributes.len()];
    for (i, attribute) in attributes.iter().enumerate().rev() {
        if seen.contains(&attribute.key.as_str()) {
            keep[i] = false;
        } else {
            seen.push(attribute.key.as_str());
        }
    }
    if keep.iter().all(|k| *k) {
        return;
    }
    let mut flags = keep.into_iter();
    attributes.retain(|_| flags.next().unwrap_or(true));
}

fn redact(attribute: &mut KeyValue, removed: &mut Vec<String>) {
    if matches!(attribute.value, Value::Bool(_)) {
        return;
    }
    if classify(attribute.key.as_str()) == Rule::Keep {
        return;
    }
    removed.push(attribute.value.as_str().into_owned());
    attribute.value = Value::from(SCRUBBED);
}

fn scrub_value(value: &mut Value, removed: &[String]) {
    let scrubbed = match value {
        Value::String(s) => match scrub_text(s.as_str(), removed) {
            Cow::Owned(text) => text,
            Cow::Borrowed(_) => return,
        },
        Value::Array(opentelemetry::Array::String(items)) => {
            for item in items.iter_mut() {
                if let Cow::Owned(text) = scrub_text(item.as_str(), removed) {
                    *item = text.into();
                }
            }
            return;
        }
        _ => return,
    };
    *value = Value::from(scrubbed);
}

#[cfg(test)]
mod tests {
    use super::scrub;
    use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status};
    use opentelemetry::{InstrumentationScope, KeyValue, Value};
    use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
    use std::time::SystemTime;

    fn span(attributes: Vec<KeyValue>) -> SpanData {
        SpanData {
            span_context: SpanContext::empty_context(),
            parent_span_id: SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: "POST /webhooks/{channel}/{connection_id}".into(),
            start_time: SystemTime::now(),
            end_time: SystemTime::now(),
            attributes,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: Status::error("could not send to ada@example.com"),
            instrumentation_scope: InstrumentationScope::builder("test").build(),
        }
    }

    fn value<'a>(span: &'a SpanData, key: &str) -> &'a Value {
        &span
            .attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .unwrap_or_else(|| panic!("no {key}"))
            .value
    }

    #[test]
    fn spans_are_scrubbed_like_sentry_events() {
        let mut s = span(vec![
            KeyValue::new("channel", "whatsapp"),
            KeyValue::new("org_id", "0b6f3c52-3b8e-4f53-a7c5-1d6e2b7c9a10"),
            KeyValue::new("outcome", "accepted"),
            KeyValue::new("attempt", 2),
            KeyValue::new("http.response.status_code", 503),
            KeyValue::new("to", "+15005550001"),
            KeyValue::new("text", "call me on +44 20 7946 0958, my card is 4111"),
            KeyValue::new("error", "The 'To' number +15005550001 is not valid"),
            KeyValue::new("note", "customer says hunter2-long-secret"),
            KeyValue::new(
                "uri",
                "/webhooks/slack/0b6f3c52-3b8e-4f53-a7c5-1d6e2b7c9a10",
            ),
            KeyValue::new("reason", "mail to bob@example.org bounced"),
            KeyValue::new(
                "summary",
                "echo: customer says hunter2-long-secret, and +1 500 555 0001",
            ),
            KeyValue::new("fallback", true),
            KeyValue::new("attempt", 3),
        ]);
        scrub(&mut s);
        assert_eq!(value(&s, "channel").as_str(), "whatsapp");
        assert_eq!(
            value(&s, "org_id").as_str(),
            "0b6f3c52-3b8e-4f53-a7c5-1d6e2b7c9a10"
        );
        assert_eq!(value(&s, "outcome").as_str(), "accepted");
        // Recorded twice: the last value holds, once.
        assert_eq!(value(&s, "attempt"), &Value::I64(3));
        assert_eq!(
            s.attributes
                .iter()
                .filter(|kv| kv.key.as_str() == "attempt")
                .count(),
            1
        );
        assert_eq!(value(&s, "http.response.status_code"), &Value::I64(503));
        assert_eq!(value(&s, "fallback"), &Value::Bool(true));
        for removed in ["to", "text", "error", "note", "reason"] {
            assert_eq!(value(&s, removed).as_str(), "[scrubbed]", "{removed}");
        }
        assert_eq!(
            value(&s, "uri").as_str(),
            "/webhooks/slack/0b6f3c52-3b8e-4f53-a7c5-1d6e2b7c9a10"
        );
        let summary = value(&s, "summary").as_str();
        assert!(
            !summary.contains("hunter2") && !summary.contains("555"),
            "{summary}"
        );
        assert_eq!(s.name, "POST /webhooks/{channel}/{connection_id}");
        assert_eq!(s.status, Status::error("could not send to [email]"));
    }
}
