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
