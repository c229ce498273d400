//! One trace per inbound event across pods and the queue: a span's W3C Trace Context
//! (`traceparent`) is what crosses a boundary the process cannot see through (the inbox
//! row, a queue payload, the outbox row, a request to the agent, a request from a caller),
//! and the span on the other side continues it. The spans themselves are ordinary `tracing`
//! spans; the pod's OpenTelemetry layer (`switchboard_api::telemetry`) exports them when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set.
//!
//! Without that layer every function here finds no span context and does nothing: no
//! `traceparent` is stored or sent, and the cost is one failed downcast per call.

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The request header and the stored form: `00-{trace id}-{span id}-{flags}`.
pub const HEADER: &str = "traceparent";

/// A W3C `traceparent` (version `00`): the trace, the span that is the parent of whatever
/// continues it, and whether the trace is sampled. Only valid values exist: parsing
/// refuses what the W3C Trace Context recommendation says to ignore.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    trace_id: TraceId,
    span_id: SpanId,
    sampled: bool,
}

impl TraceParent {
    /// Parses a header or stored value; `None` for anything the recommendation rejects
    /// (a wrong length or separator, upper-case or non-hex digits, version `ff`, an
    /// all-zero trace or span id). A later version is read by its first four fields.
    pub fn parse(text: &str) -> Option<TraceParent> {
        let text = text.trim();
        let bytes = text.as_bytes();
        if bytes.len() < 55 || (bytes.len() > 55 && bytes[55] != b'-') {
            return None;
        }
        let version = text.get(0..2)?;
        if !lower_hex(version) || version == "ff" || (version == "00" && bytes.len() != 55) {
            return None;
        }
        if bytes[2] != b'-' || bytes[35] != b'-' || bytes[52] != b'-' {
            return None;
        }
        let (trace, span, flags) = (text.get(3..35)?, text.get(36..52)?, text.get(53..55)?);
        if !(lower_hex(trace) && lower_hex(span) && lower_hex(flags)) {
            return None;
        }
        let trace_id = TraceId::from_hex(trace).ok()?;
        let span_id = SpanId::from_hex(span).ok()?;
        let flags = u8::from_str_radix(flags, 16).ok()?;
        if trace_id == TraceId::INVALID || span_id == SpanId::INVALID {
            return None;
        }
        Some(TraceParent {
            trace_id,
            span_id,
            sampled: flags & 1 == 1,
        })
    }

    /// The trace id, 32 lower-case hex digits: what a tracing backend searches by.
    pub fn trace_id(&self) -> String {
        self.trace_id.to_string()
    }

    /// The parent span's id, 16 lower-case hex digits.
    pub fn span_id(&self) -> String {
        self.span_id.to_string()
    }

    /// Whether the trace was recorded (the sampler's decision where it started): an
    /// unsampled trace has a context to carry but nothing in the backend.
    pub fn is_sampled(&self) -> bool {
        self.sampled
    }

    fn span_context(&self) -> SpanContext {
        let flags = if self.sampled {
            TraceFlags::SAMPLED
        } else {
            TraceFlags::default()
        };
        SpanContext::new(self.trace_id, self.span_id, flags, true, TraceState::NONE)
    }

    fn of_context(context: &SpanContext) -> Option<TraceParent> {
        context.is_valid().then(|| TraceParent {
            trace_id: context.trace_id(),
            span_id: context.span_id(),
            sampled: context.is_sampled(),
        })
    }
}

fn lower_hex(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let flags = u8::from(self.sampled);
        write!(f, "00-{}-{}-{flags:02x}", self.trace_id, self.span_id)
    }
}

impl fmt::Debug for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TraceParent({self})")
    }
}

impl Serialize for TraceParent {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// A payload's `traceparent` field: absent, null or unreadable all read as none, so a
/// bad value costs the trace its continuation and never fails the job that carries it.
pub fn lenient<'de, D: Deserializer<'de>>(d: D) -> Result<Option<TraceParent>, D::Error> {
    let text = Option::<String>::deserialize(d)?;
    Ok(text.as_deref().and_then(TraceParent::parse))
}

/// The context of the span the caller is in, if it is exported.
pub fn current() -> Option<TraceParent> {
    of(&tracing::Span::current())
}

/// The context of `span`, if it is exported (it starts the span, so a parent must be set
/// before: [`continue_in`]).
pub fn of(span: &tracing::Span) -> Option<TraceParent> {
    let context = span.context();
    TraceParent::of_context(context.span().span_context())
}

/// Makes `span` a child of `parent` (a span on another pod, or a caller's): call it before
/// the span is first entered, as a started span keeps the parent it started with. Sampling
/// follows the parent's decision under the parent-based samplers.
pub fn continue_in(span: &tracing::Span, parent: Option<&TraceParent>) {
    if let Some(parent) = parent {
        let context = opentelemetry::Context::new().with_remote_span_context(parent.span_context());
        // Refused only when the span is off or already started: it then keeps its own.
        let _ = span.set_parent(context);
    }
}

/// Links `span` to `other`'s trace: the two are separate traces (a release starts its own),
/// and a backend shows the way from one to the other. Nothing when `span` is in that trace
/// already (a job pushed with its trace, then found with the same on its row).
pub fn link(span: &tracing::Span, other: Option<&TraceParent>) {
    let Some(other) = other else {
        return;
    };
    if of(span).is_some_and(|own| own.trace_id == other.trace_id) {
        return;
    }
    span.add_link(other.span_context());
}

#[cfg(test)]
mod tests {
    use super::TraceParent;

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn valid_values_round_trip() {
        let t = TraceParent::parse(VALID).expect("valid");
        assert_eq!(t.to_string(), VALID);
        assert_eq!(t.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(t.span_id(), "00f067aa0ba902b7");
        assert!(t.is_sampled());
        let unsampled = TraceParent::parse(&VALID.replace("-01", "-00")).expect("valid");
        assert!(!unsampled.is_sampled());
        // Other flag bits are kept out of the stored form, which only says "sampled".
        let other_flags = TraceParent::parse(&VALID.replace("-01", "-03")).expect("valid");
        assert_eq!(other_flags.to_string(), VALID);
        // A later version is read by its first four fields.
        let later = format!("{}-more", VALID.replacen("00", "cc", 1));
        assert_eq!(
            TraceParent::parse(&later).map(|t| t.to_string()),
            Some(VALID.to_owned())
        );
    }

    #[test]
    fn what_the_recommendation_rejects_is_none() {
        for bad in [
            "",
            "garbage",
            &VALID.to_uppercase(),
            &VALID.replacen("00", "ff", 1),
            &format!("{VALID}-extra"),
            &VALID[..54],
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn payload_fields_are_lenient() {
        #[derive(serde::Deserialize, serde::Serialize)]
        struct Job {
            #[serde(
                default,
                deserialize_with = "super::lenient",
                skip_serializing_if = "Option::is_none"
            )]
            traceparent: Option<TraceParent>,
        }
        let read = |json: &str| {
            serde_json::from_str::<Job>(json)
                .expect("never fails")
                .traceparent
        };
        assert_eq!(read("{}"), None);
        assert_eq!(read(r#"{"traceparent": null}"#), None);
        assert_eq!(read(r#"{"traceparent": "junk"}"#), None);
        let job = Job {
            traceparent: TraceParent::parse(VALID),
        };
        let json = serde_json::to_string(&job).expect("json");
        assert_eq!(json, format!(r#"{{"traceparent":"{VALID}"}}"#));
        assert_eq!(read(&json), TraceParent::parse(VALID));
    }

    #[test]
    fn without_an_exporting_layer_nothing_is_carried() {
        let span = tracing::info_span!("untraced");
        assert_eq!(super::of(&span), None);
        assert_eq!(super::current(), None);
    }
}
