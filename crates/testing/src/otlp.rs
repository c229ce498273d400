//! A trace collector for tests: an OTLP/HTTP receiver (`POST /v1/traces`, protobuf) that
//! decodes each export with the `opentelemetry-proto` types, so a test reads what a real
//! backend would receive from the pods, resource and all. [`OtlpReceiver::stalled`] is a
//! collector that takes connections and never answers, as one that hangs does.
//! [`GrpcOtlpReceiver`] is the same collector over OTLP/gRPC (tonic's server, the service
//! the protocol defines), plaintext or behind TLS with a CA of its own.

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
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

/// The collector over OTLP/gRPC (`opentelemetry.proto.collector.trace.v1.TraceService`).
pub struct GrpcOtlpReceiver {
    received: Arc<Mutex<Vec<ReceivedSpan>>>,
    endpoint: String,
    ca: Option<PathBuf>,
    _ca_file: Option<TempCa>,
    server: tokio::task::JoinHandle<()>,
}

/// The CA's PEM file, removed with the receiver.
struct TempCa(PathBuf);

impl Drop for TempCa {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl Drop for GrpcOtlpReceiver {
    fn drop(&mut self) {
        self.server.abort();
    }
}

#[derive(Clone)]
struct Collect(Arc<Mutex<Vec<ReceivedSpan>>>);

#[tonic::async_trait]
impl TraceService for Collect {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let spans = spans_of(request.into_inner());
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend(spans);
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

impl GrpcOtlpReceiver {
    /// A plaintext collector (`http://127.0.0.1:port`).
    pub async fn start() -> GrpcOtlpReceiver {
        Self::serve(None).await
    }

    /// A collector behind TLS, its certificate for `localhost` signed by a CA made for it
    /// ([`GrpcOtlpReceiver::ca`]), which no system trusts.
    pub async fn start_tls() -> GrpcOtlpReceiver {
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, "switchboard test collector CA");
        let ca_key = rcgen::KeyPair::generate().expect("CA key");
        let ca_cert = ca.self_signed(&ca_key).expect("CA");
        let issuer = rcgen::Issuer::new(ca, ca_key);
        let leaf = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
        let leaf_key = rcgen::KeyPair::generate().expect("key");
        let leaf_cert = leaf.signed_by(&leaf_key, &issuer).expect("certificate");
        let identity =
            tonic::transport::Identity::from_pem(leaf_cert.pem(), leaf_key.serialize_pem());
        let path = std::env::temp_dir().join(format!("otlp-ca-{}.pem", uuid::Uuid::new_v4()));
        std::fs::write(&path, ca_cert.pem()).expect("write the CA");
        let mut receiver = Self::serve(Some(identity)).await;
        receiver.ca = Some(path.clone());
        receiver._ca_file = Some(TempCa(path));
        receiver
    }

    async fn serve(identity: Option<tonic::transport::Identity>) -> GrpcOtlpReceiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let received = Arc::new(Mutex::new(Vec::new()));
        let mut builder = tonic::transport::Server::builder();
        let scheme = match identity {
            Some(identity) => {
                builder = builder
                    .tls_config(tonic::transport::ServerTlsConfig::new().identity(identity))
                    .expect("TLS");
                "https://localhost"
            }
            None => "http://127.0.0.1",
        };
        let router = builder.add_service(TraceServiceServer::new(Collect(received.clone())));
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
        let server = tokio::spawn(async move {
            let _ = router.serve_with_incoming(incoming).await;
        });
        GrpcOtlpReceiver {
            received,
            endpoint: format!("{scheme}:{port}"),
            ca: None,
            _ca_file: None,
            server,
        }
    }

    /// `OTEL_EXPORTER_OTLP_ENDPOINT` for the pods.
    pub fn endpoint(&self) -> String {
        self.endpoint.clone()
    }

    /// The CA file for `OTEL_EXPORTER_OTLP_CERTIFICATE` (TLS receivers only).
    pub fn ca(&self) -> Option<&std::path::Path> {
        self.ca.as_deref()
    }

    /// Every span received so far, in the order they arrived.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.received
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Awaits spans that `done` accepts (30 s at most) and returns them, or the last spans
    /// seen, for the caller's assertions to show.
    pub async fn spans_until(&self, done: impl Fn(&[ReceivedSpan]) -> bool) -> Vec<ReceivedSpan> {
        crate::settled(
            Duration::from_secs(30),
            || async { self.spans() },
            |s| done(s),
        )
        .await
    }
}

/// The spans of one export request body.
pub fn decode(body: &[u8]) -> Vec<ReceivedSpan> {
    spans_of(ExportTraceServiceRequest::decode(body).expect("an OTLP trace export"))
}

fn spans_of(request: ExportTraceServiceRequest) -> Vec<ReceivedSpan> {
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
