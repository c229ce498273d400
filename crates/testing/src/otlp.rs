//! A trace collector for tests: an OTLP/HTTP receiver (`POST /v1/traces`, protobuf) that
//! decodes each export with the `opentelemetry-proto` types, so a test reads what a real
//! backend would receive from the pods, resource and all. [`OtlpReceiver::stalled`] is a
//! collector that takes connections and never answers, as one that hangs does.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message;
use std::collections::BTreeMap;
use std::time::Duration;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// One span as the collector received it.
#[derive(Debug, Clone)]
pub struct ReceivedSpan {
    /// 32 lower-case hex digits.
    pub trace_id: String,
    /// 16 lower-case hex digits.
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    /// The span's name (`webhook`, `POST /webhooks/{channel}/{connection_id}`, …).
    pub name: String,
    /// Its attributes, every value as text.
    pub attributes: BTreeMap<String, String>,
    /// Its resource's attributes (`service.name`, `service.instance.id`, …).
    pub resource: BTreeMap<String, String>,
    /// `(trace id, span id)` of each link.
    pub links: Vec<(String, String)>,
    /// Start, in nanoseconds since the epoch.
    pub start_unix_nanos: u64,
    /// 0 unset, 1 ok, 2 error.
    pub status_code: i32,
}

impl ReceivedSpan {
    /// The attribute `key`, if the span has it.
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }

    /// The pod that sent it (`service.instance.id`).
    pub fn pod(&self) -> &str {
        self.resource
            .get("service.instance.id")
            .map_or("", String::as_str)
    }

    /// Every text the span carries: its name and its attributes' and resource's values.
    pub fn texts(&self) -> Vec<&str> {
        std::iter::once(self.name.as_str())
            .chain(self.attributes.values().map(String::as_str))
            .chain(self.attributes.keys().map(String::as_str))
            .chain(self.resource.values().map(String::as_str))
            .collect()
    }
}

/// The fake collector.
pub struct OtlpReceiver {
    server: MockServer,
}

impl OtlpReceiver {
    /// A collector that accepts every export at once.
    pub async fn start() -> OtlpReceiver {
        Self::answering(ResponseTemplate::new(200)).await
    }

    /// A collector that takes every export and never answers (an hour, longer than any test).
    pub async fn stalled() -> OtlpReceiver {
        Self::answering(ResponseTemplate::new(200).set_delay(Duration::from_secs(3600))).await
    }

    async fn answering(answer: ResponseTemplate) -> OtlpReceiver {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/traces"))
            .respond_with(answer)
            .mount(&server)
            .await;
        OtlpReceiver { server }
    }

    /// `OTEL_EXPORTER_OTLP_ENDPOINT` for the pods (`/v1/traces` is theirs to append).
    pub fn endpoint(&self) -> String {
        self.server.uri()
    }

    /// Export requests received so far (a stalled collector counts those it holds).
    pub async fn requests(&self) -> usize {
        self.server.received_requests().await.map_or(0, |r| r.len())
    }

    /// Every span received so far, in the order they arrived.
    pub async fn spans(&self) -> Vec<ReceivedSpan> {
        let requests = self.server.received_requests().await.unwrap_or_default();
        requests.iter().flat_map(|r| decode(&r.body)).collect()
    }

    /// Awaits spans that `done` accepts (30 s at most) and returns them, or the last spans
    /// seen, for the caller's assertions to show.
    pub async fn spans_until(&self, done: impl Fn(&[ReceivedSpan]) -> bool) -> Vec<ReceivedSpan> {
        crate::settled(Duration::from_secs(30), || self.spans(), |s| done(s)).await
    }
}

/// The spans of one export request body.
pub fn decode(body: &[u8]) -> Vec<ReceivedSpan> {
    let request = ExportTraceServiceRequest::decode(body).expect("an OTLP trace export");
    let mut spans = Vec::new();
    for resource_spans in request.resource_spans {
        let resource = resource_spans
            .resource
            .map(|r| attributes(&r.attributes))
            .unwrap_or_default();
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                spans.push(ReceivedSpan {
                    trace_id: hex::encode(&span.trace_id),
                    span_id: hex::encode(&span.span_id),
                    parent_span_id: hex::encode(&span.parent_span_id),
                    name: span.name,
                    attributes: attributes(&span.attributes),
                    resource: resource.clone(),
                    links: span
                        .links
                        .iter()
                        .map(|l| (hex::encode(&l.trace_id), hex::encode(&l.span_id)))
                        .collect(),
                    start_unix_nanos: span.start_time_unix_nano,
                    status_code: span.status.map_or(0, |s| s.code),
                });
            }
        }
    }
    spans
}

fn attributes(kvs: &[KeyValue]) -> BTreeMap<String, String> {
    kvs.iter()
        .map(|kv| {
            (
                kv.key.clone(),
                kv.value.as_ref().map_or(String::new(), text),
            )
        })
        .collect()
}

fn text(value: &AnyValue) -> String {
    match &value.value {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(any_value::Value::ArrayValue(a)) => {
            a.values.iter().map(text).collect::<Vec<_>>().join(",")
        }
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}
