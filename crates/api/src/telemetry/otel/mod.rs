//! OpenTelemetry export of the pod's spans (docs/OPERATIONS.md, "Tracing"), on when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set and absent otherwise: no layer, no processor, no
//! thread.
//!
//! Which spans: those of Switchboard's own code at `INFO` (the HTTP request, the webhook,
//! the `channel-inbound` job, the agent call, an expert's action, the `channel-outbound`
//! job and each provider call), never a log event. A log line is not an attribute: its
//! text is free, and a span's attributes are a fixed, named set, each one judged by the
//! Sentry rules before it leaves (`processor.rs`). The resource names the service, the pod
//! (`service.instance.id`) and the version (`service.version`).

mod http;
mod processor;

use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::tonic_types::transport::{Certificate, ClientTlsConfig};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use secrecy::ExposeSecret;
use std::collections::HashMap;
use std::time::Duration;
use switchboard_config::{OtlpProtocol, Root, Sampling, TraceExport};
use tracing::{Level, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::registry::LookupSpan;

/// The version every span's resource carries.
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// How long the exit waits for the last spans to be sent.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// Why the export could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum OtelError {
    /// The HTTP client.
    #[error(transparent)]
    Http(#[from] http::ExportHttpError),
    /// The exporter refused its configuration.
    #[error("could not build the OTLP exporter: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
    /// A header of `OTEL_EXPORTER_OTLP_HEADERS` is not a valid HTTP header (its name is
    /// said, never its value).
    #[error("OTEL_EXPORTER_OTLP_HEADERS: {0} is not a valid header")]
    Header(String),
    /// `OTEL_EXPORTER_OTLP_CERTIFICATE` could not be read.
    #[error("OTEL_EXPORTER_OTLP_CERTIFICATE: could not read {path}: {source}")]
    Certificate {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `OTEL_EXPORTER_OTLP_CERTIFICATE` holds no PEM certificate: refused at start for both
    /// protocols, rather than every export failing its handshake later.
    #[error("OTEL_EXPORTER_OTLP_CERTIFICATE: {0} holds no PEM certificate")]
    NotPem(std::path::PathBuf),
}

/// `OTEL_EXPORTER_OTLP_CERTIFICATE`, read and parsed once: its PEM for tonic, its
/// certificates for reqwest.
struct PrivateCa {
    pem: Vec<u8>,
    certs: Vec<reqwest::Certificate>,
}

fn private_ca(export: &TraceExport) -> Result<Option<PrivateCa>, OtelError> {
    let Some(path) = &export.ca else {
        return Ok(None);
    };
    let pem = std::fs::read(path).map_err(|source| OtelError::Certificate {
        path: path.clone(),
        source,
    })?;
    match reqwest::Certificate::from_pem_bundle(&pem) {
        Ok(certs) if !certs.is_empty() => Ok(Some(PrivateCa { pem, certs })),
        _ => Err(OtelError::NotPem(path.clone())),
    }
}

/// The running export; [`Tracing::shutdown`] sends what is still queued.
#[derive(Debug)]
pub struct Tracing {
    provider: SdkTracerProvider,
}

impl Tracing {
    /// Sends the spans still queued (a few seconds at most), then stops the exporter.
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown_with_timeout(SHUTDOWN_WAIT) {
            tracing::warn!(error = %e, "the last spans could not be exported");
        }
    }
}

/// The export `export` describes, for the pod `pod_id`, and the layer that feeds it. Must
/// run on the pod's tokio runtime (both exporters send from it).
pub(super) fn start<S>(
    export: &TraceExport,
    pod_id: &str,
) -> Result<(Tracing, impl Layer<S> + Send + Sync + 'static + use<S>), OtelError>
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    let exporter = exporter(export)?;
    let processor = processor::Bounded::new(exporter, export.queue, export.schedule_delay);
    let resource = Resource::builder_empty()
        .with_attributes(
            export
                .resource
                .iter()
                .map(|(k, v)| KeyValue::new(k.clone(), v.clone())),
        )
        .with_service_name(export.service_name.clone())
        .with_attributes([
            KeyValue::new("service.instance.id", pod_id.to_owned()),
            KeyValue::new("service.version", VERSION),
        ])
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_sampler(sampler(export.sampling))
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("switchboard");
    // Spans only, of our own code, at INFO or above: no log event becomes a span event, and
    // no dependency's spans (apalis, sqlx, hyper) are exported.
    let ours = filter_fn(|meta| {
        meta.is_span() && meta.target().starts_with("switchboard") && *meta.level() <= Level::INFO
    });
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_level(false)
        .with_filter(ours);
    Ok((Tracing { provider }, layer))
}

fn exporter(export: &TraceExport) -> Result<opentelemetry_otlp::SpanExporter, OtelError> {
    let headers: HashMap<String, String> = export
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), v.expose_secret().to_owned()))
        .collect();
    let ca = private_ca(export)?;
    Ok(match export.protocol {
        OtlpProtocol::HttpProtobuf => opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(http::Client::new(
                export.timeout,
                ca.as_ref().map_or(&[][..], |ca| &ca.certs),
            )?)
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(export.url.as_str())
            .with_timeout(export.timeout)
            .with_headers(headers)
            .build()?,
        OtlpProtocol::Grpc => {
            let mut map = axum::http::HeaderMap::new();
            for (name, value) in headers {
                let header = axum::http::HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| OtelError::Header(name.clone()))?;
                let value = axum::http::HeaderValue::from_str(&value)
                    .map_err(|_| OtelError::Header(name.clone()))?;
                map.insert(header, value);
            }
            let builder = opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_endpoint(export.url.as_str())
                .with_timeout(export.timeout)
                .with_metadata(
                    opentelemetry_otlp::tonic_types::metadata::MetadataMap::from_headers(map),
                );
            if export.url.scheme() == "https" {
                let pem = ca.as_ref().map(|ca| ca.pem.as_slice());
                builder.with_tls_config(grpc_tls(pem)).build()?
            } else {
                builder.build()?
            }
        }
    })
}

/// TLS to a gRPC collector: the system roots, and the private CA when one is set, the
/// same trust as the HTTP exporter's.
fn grpc_tls(ca: Option<&[u8]>) -> ClientTlsConfig {
    let tls = ClientTlsConfig::new().with_native_roots();
    match ca {
        Some(pem) => tls.ca_certificate(Certificate::from_pem(pem)),
        None => tls,
    }
}

fn sampler(sampling: Sampling) -> Sampler {
    let root = |root: Root| match root {
        Root::AlwaysOn => Sampler::AlwaysOn,
        Root::AlwaysOff => Sampler::AlwaysOff,
        Root::Ratio(r) => Sampler::TraceIdRatioBased(r),
    };
    match sampling {
        Sampling::AlwaysOn => Sampler::AlwaysOn,
        Sampling::AlwaysOff => Sampler::AlwaysOff,
        Sampling::Ratio(r) => Sampler::TraceIdRatioBased(r),
        Sampling::ParentBased(r) => Sampler::ParentBased(Box::new(root(r))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn export_with_ca(text: &str) -> (TraceExport, std::path::PathBuf) {
        let path = std::env::temp_dir().join(format!("otlp-ca-{}.pem", uuid::Uuid::new_v4()));
        std::fs::write(&path, text).expect("write");
        let export = TraceExport {
            url: "https://collector:4318/v1/traces".parse().expect("url"),
            protocol: OtlpProtocol::HttpProtobuf,
            headers: Vec::new(),
            ca: Some(path.clone()),
            timeout: Duration::from_secs(1),
            service_name: "switchboard".into(),
            sampling: Sampling::AlwaysOn,
            resource: Vec::new(),
            queue: 8,
            schedule_delay: Duration::from_millis(100),
        };
        (export, path)
    }

    #[test]
    fn a_certificate_file_without_a_certificate_is_refused() {
        let (export, path) = export_with_ca("not a certificate");
        let refused = private_ca(&export).err().map(|e| e.to_string());
        let _ = std::fs::remove_file(&path);
        assert_eq!(
            refused,
            Some(format!(
                "OTEL_EXPORTER_OTLP_CERTIFICATE: {} holds no PEM certificate",
                path.display()
            ))
        );
    }
}
