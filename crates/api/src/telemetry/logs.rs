//! JSON log lines that join their trace: a line written inside an exported span gets
//! `trace_id` and `span_id` (the span's own, as the backend shows it), so a backend or a
//! grep goes from one to the other. Outside a span, or without an export, the line is the
//! JSON formatter's, unchanged.

use opentelemetry::trace::TraceContextExt;
use std::fmt;
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// A JSON event format with the current span's trace and span ids added.
pub(super) struct WithTraceIds<F>(pub(super) F);

impl<S, N, F> FormatEvent<S, N> for WithTraceIds<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        // Entering an exported span makes its context the current one (the OpenTelemetry
        // layer's context activation), so this is the span the event is logged in.
        let context = opentelemetry::Context::current();
        let span = context.span();
        let ids = span.span_context();
        if !ids.is_valid() {
            return self.0.format_event(ctx, writer, event);
        }
        let mut line = String::new();
        self.0.format_event(ctx, Writer::new(&mut line), event)?;
        let body = line.trim_end();
        let Some(open) = body.strip_suffix('}') else {
            return writer.write_str(&line);
        };
        let comma = if open.ends_with('{') { "" } else { "," };
        writeln!(
            writer,
            "{open}{comma}\"trace_id\":\"{}\",\"span_id\":\"{}\"}}",
            ids.trace_id(),
            ids.span_id()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::WithTraceIds;
    use opentelemetry::trace::TracerProvider as _;
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::layer::SubscriberExt;

    /// The JSON lines written, shared with the test.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("lines").extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_line_inside_an_exported_span_names_its_trace_and_span() {
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")))
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .event_format(WithTraceIds(
                        tracing_subscriber::fmt::format().json().flatten_event(true),
                    ))
                    .with_writer(move || writer.clone()),
            );
        let traced = tracing::subscriber::with_default(subscriber, || {
            tracing::info!("outside");
            let span = tracing::info_span!("webhook");
            let _entered = span.enter();
            tracing::info!(channel = "slack", "inside");
            switchboard_domain::trace::of(&span).expect("an exported span")
        });
        let text = String::from_utf8(lines.0.lock().expect("lines").clone()).expect("utf-8");
        let parsed: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("each line is JSON"))
            .collect();
        assert_eq!(parsed.len(), 2, "{text}");
        assert_eq!(parsed[0]["message"], "outside");
        assert!(parsed[0].get("trace_id").is_none(), "{text}");
        assert_eq!(parsed[1]["message"], "inside");
        assert_eq!(parsed[1]["channel"], "slack");
        assert_eq!(parsed[1]["trace_id"], traced.trace_id());
        assert_eq!(parsed[1]["span_id"], traced.span_id());
    }
}
