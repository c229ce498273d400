//! The OpenTelemetry trace export, configured by the standard `OTEL_*` variables (the
//! OpenTelemetry SDK specification's names and meanings), read here like every other
//! setting so that `_FILE`, the TOML files and the start-up checks apply to them too. The
//! SDK is never left to read the environment itself: what it would read is what this
//! module resolves, once, into [`TraceExport`].
//!
//! No `OTEL_EXPORTER_OTLP_ENDPOINT`, no export: [`Config::trace_export`] is `None` and the
//! pod installs no OpenTelemetry layer at all. `OTEL_EXPORTER_OTLP_HEADERS` usually carries
//! a backend's API key, so it is a secret and no message ever quotes it.

use crate::Config;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;
use url::Url;

/// `OTEL_EXPORTER_OTLP_PROTOCOL`: how spans reach the collector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum OtlpProtocol {
    /// Protobuf over HTTP (`POST {endpoint}/v1/traces`), the specification's default.
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
    /// OTLP over gRPC (HTTP/2; TLS with an `https://` endpoint).
    #[serde(rename = "grpc")]
    Grpc,
}

/// `OTEL_TRACES_SAMPLER`: the specification's built-in samplers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SamplerName {
    /// Every trace.
    AlwaysOn,
    /// No trace.
    AlwaysOff,
    /// A fraction of the traces (`OTEL_TRACES_SAMPLER_ARG`), by trace id.
    Traceidratio,
    /// A caller's decision when there is one, else every trace.
    ParentbasedAlwaysOn,
    /// A caller's decision when there is one, else none.
    ParentbasedAlwaysOff,
    /// A caller's decision when there is one, else a fraction.
    ParentbasedTraceidratio,
}

/// Which traces are recorded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sampling {
    /// Every one.
    AlwaysOn,
    /// None.
    AlwaysOff,
    /// This fraction, in [0, 1], by trace id (so every pod decides alike).
    Ratio(f64),
    /// The parent's decision (a `traceparent` from a caller or from the queue), else the
    /// root rule.
    ParentBased(Root),
}

/// The rule of a parent-based sampler for a trace that starts here.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Root {
    /// Every one.
    AlwaysOn,
    /// None.
    AlwaysOff,
    /// This fraction.
    Ratio(f64),
}

/// Everything the exporter needs, resolved and checked.
#[derive(Debug, Clone)]
pub struct TraceExport {
    /// The URL spans are sent to: for `http/protobuf` the endpoint with `/v1/traces`
    /// appended (as the specification says of `OTEL_EXPORTER_OTLP_ENDPOINT`), for `grpc`
    /// the endpoint itself.
    pub url: Url,
    /// HTTP or gRPC.
    pub protocol: OtlpProtocol,
    /// Headers sent with every export (an API key, usually), percent-decoded.
    pub headers: Vec<(String, SecretString)>,
    /// `OTEL_EXPORTER_OTLP_CERTIFICATE`: a CA (PEM) trusted beside the system roots for an
    /// `https://` collector.
    pub ca: Option<PathBuf>,
    /// Longest wait for one export.
    pub timeout: Duration,
    /// `service.name`.
    pub service_name: String,
    /// Which traces are recorded.
    pub sampling: Sampling,
    /// `OTEL_RESOURCE_ATTRIBUTES`, percent-decoded; the pod's own (`service.instance.id`,
    /// `service.version`) are added by the pod and win.
    pub resource: Vec<(String, String)>,
    /// Finished spans one pod holds while the collector is slow or away; more are dropped
    /// (and counted), never waited for.
    pub queue: usize,
    /// Longest a finished span waits before its batch is sent.
    pub schedule_delay: Duration,
}

impl Config {
    /// The trace export, or `None` when `OTEL_EXPORTER_OTLP_ENDPOINT` is unset. The load
    /// has checked every part of it (see [`check`]), so only an unset endpoint is `None`.
    pub fn trace_export(&self) -> Option<TraceExport> {
        let t = &self.traces;
        let endpoint = t.endpoint.clone()?;
        Some(TraceExport {
            url: match t.protocol {
                OtlpProtocol::HttpProtobuf => signal_url(&endpoint),
                OtlpProtocol::Grpc => endpoint,
            },
            protocol: t.protocol,
            headers: t
                .headers
                .as_ref()
                .map(|h| pairs(h.expose_secret()).unwrap_or_default())
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, SecretString::from(v)))
                .collect(),
            ca: t.certificate.clone(),
            timeout: Duration::from_millis(t.timeout_ms),
            service_name: t.service_name.clone(),
            sampling: sampling(t.sampler, t.sampler_arg.as_deref()).unwrap_or(Sampling::AlwaysOff),
            resource: pairs(&t.resource_attributes).unwrap_or_default(),
            queue: t.queue_size,
            schedule_delay: Duration::from_millis(t.schedule_delay_ms),
        })
    }
}

/// `{endpoint}/v1/traces`, the endpoint's own path kept as its prefix.
fn signal_url(endpoint: &Url) -> Url {
    let mut url = endpoint.clone();
    let path = format!("{}/v1/traces", endpoint.path().trim_end_matches('/'));
    url.set_path(&path);
    url
}

/// `OTEL_TRACES_SAMPLER_ARG` is not a ratio (the text it holds, which is never a secret).
#[derive(Debug, PartialEq, thiserror::Error)]
#[error("OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1 (it is {0:?})")]
struct BadRatio(String);

/// The sampler `name` with its argument; the message names the variable, never guesses.
fn sampling(name: SamplerName, arg: Option<&str>) -> Result<Sampling, BadRatio> {
    let ratio = || -> Result<f64, BadRatio> {
        let Some(arg) = arg.map(str::trim).filter(|a| !a.is_empty()) else {
            // The specification's default for the ratio samplers.
            return Ok(1.0);
        };
        match arg.parse::<f64>() {
            Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
            _ => Err(BadRatio(arg.to_owned())),
        }
    };
    Ok(match name {
        SamplerName::AlwaysOn => Sampling::AlwaysOn,
        SamplerName::AlwaysOff => Sampling::AlwaysOff,
        SamplerName::Traceidratio => Sampling::Ratio(ratio()?),
        SamplerName::ParentbasedAlwaysOn => Sampling::ParentBased(Root::AlwaysOn),
        SamplerName::ParentbasedAlwaysOff => Sampling::ParentBased(Root::AlwaysOff),
        SamplerName::ParentbasedTraceidratio => Sampling::ParentBased(Root::Ratio(ratio()?)),
    })
}

/// Why a `key=value,…` list does not parse: where, never what.
#[derive(Debug, PartialEq, Eq)]
enum PairsError {
    /// Entry `n` (1-based) has no `=` or an empty key.
    Entry(usize),
    /// Entry `n` has a bad percent escape or is not UTF-8 once decoded.
    Encoding(usize),
}

/// `key1=value1,key2=value2` (the W3C Baggage form both variables use), each side
/// percent-decoded and trimmed; empty entries are skipped.
fn pairs(text: &str) -> Result<Vec<(String, String)>, PairsError> {
    let mut out = Vec::new();
    for (i, entry) in text.split(',').enumerate() {
        let entry = entry.trim();
        if entry.is_empty() {
            continue;
        }
        let n = i + 1;
        let (key, value) = entry.split_once('=').ok_or(PairsError::Entry(n))?;
        let key = decode(key.trim()).ok_or(PairsError::Encoding(n))?;
        let value = decode(value.trim()).ok_or(PairsError::Encoding(n))?;
        if key.is_empty() {
            return Err(PairsError::Entry(n));
        }
        out.push((key, value));
    }
    Ok(out)
}

/// `%XX` escapes decoded; `None` for a broken escape or bytes that are not UTF-8.
fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The rules of the trace settings, one line in `broken` per broken rule.
pub(crate) fn check(c: &Config, broken: &mut Vec<String>) {
    let t = &c.traces;
    if let Err(e) = sampling(t.sampler, t.sampler_arg.as_deref()) {
        broken.push(e.to_string());
    }
    if let Some(headers) = &t.headers {
        match pairs(headers.expose_secret()) {
            Ok(_) => {}
            Err(PairsError::Entry(n)) => broken.push(format!(
                "OTEL_EXPORTER_OTLP_HEADERS entry {n} is not key=value"
            )),
            Err(PairsError::Encoding(n)) => broken.push(format!(
                "OTEL_EXPORTER_OTLP_HEADERS entry {n} has a bad percent escape"
            )),
        }
    }
    match pairs(&t.resource_attributes) {
        Ok(_) => {}
        Err(PairsError::Entry(n)) => broken.push(format!(
            "OTEL_RESOURCE_ATTRIBUTES entry {n} is not key=value"
        )),
        Err(PairsError::Encoding(n)) => broken.push(format!(
            "OTEL_RESOURCE_ATTRIBUTES entry {n} has a bad percent escape"
        )),
    }
    if let Some(endpoint) = &t.endpoint {
        if !matches!(endpoint.scheme(), "http" | "https") {
            broken.push(format!(
                "OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL (it is {})",
                crate::redact_url(endpoint.as_str())
            ));
        }
        if t.certificate.is_some() && endpoint.scheme() != "https" {
            broken.push(
                "OTEL_EXPORTER_OTLP_CERTIFICATE is for an https:// OTEL_EXPORTER_OTLP_ENDPOINT (it is http://)"
                    .into(),
            );
        }
    }
    if let Some(ca) = &t.certificate {
        if !ca.is_file() {
            broken.push(format!(
                "OTEL_EXPORTER_OTLP_CERTIFICATE names {}, which is not a readable file",
                ca.display()
            ));
        }
    }
    if t.service_name.trim().is_empty() {
        broken.push("OTEL_SERVICE_NAME must not be empty".into());
    }
    if t.queue_size == 0 {
        broken.push("OTEL_BSP_MAX_QUEUE_SIZE must be at least 1 (it is 0)".into());
    }
    if t.schedule_delay_ms == 0 {
        broken.push("OTEL_BSP_SCHEDULE_DELAY must be at least 1 (it is 0)".into());
    }
    if t.timeout_ms == 0 {
        broken.push("OTEL_EXPORTER_OTLP_TIMEOUT must be at least 1 (it is 0)".into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::path::PathBuf;

    fn load(pairs: &[(&str, &str)]) -> Result<Config, crate::ConfigError> {
        let vars: HashMap<String, String> = [
            ("APP_ENV", "test"),
            ("DATABASE_URL", "postgres://localhost/db"),
            ("JWT_SECRET", "x"),
        ]
        .iter()
        .chain(pairs)
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../config"));
        crate::load_from(&vars, &dir)
    }

    fn refused(pairs: &[(&str, &str)]) -> String {
        load(pairs).expect_err("refused").to_string()
    }

    #[test]
    fn no_endpoint_no_export() {
        let c = load(&[("OTEL_TRACES_SAMPLER", "always_on")]).expect("loads");
        assert!(c.trace_export().is_none());
    }

    #[test]
    fn the_defaults_are_the_specifications() {
        let c = load(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")]).expect("loads");
        let e = c.trace_export().expect("on");
        assert_eq!(e.url.as_str(), "http://collector:4318/v1/traces");
        assert_eq!(e.protocol, OtlpProtocol::HttpProtobuf);
        assert_eq!(e.service_name, "switchboard");
        assert_eq!(e.sampling, Sampling::ParentBased(Root::AlwaysOn));
        assert_eq!(e.timeout, Duration::from_secs(10));
        assert_eq!(e.queue, 2048);
        assert_eq!(e.schedule_delay, Duration::from_secs(5));
        assert!(e.headers.is_empty() && e.resource.is_empty() && e.ca.is_none());
    }

    #[test]
    fn every_variable_is_read() {
        let c = load(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317/"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "x-api-key=s%3Dcret, x-team = ops",
            ),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
            ("OTEL_SERVICE_NAME", "switchboard-eu"),
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.1"),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "deployment.environment=prod,cloud.region=eu%2Dwest",
            ),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "64"),
        ])
        .expect("loads");
        let e = c.trace_export().expect("on");
        assert_eq!(e.url.as_str(), "http://collector:4317/");
        assert_eq!(e.protocol, OtlpProtocol::Grpc);
        let headers: Vec<(&str, &str)> = e
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.expose_secret()))
            .collect();
        assert_eq!(headers, [("x-api-key", "s=cret"), ("x-team", "ops")]);
        assert_eq!(e.timeout, Duration::from_millis(2500));
        assert_eq!(e.service_name, "switchboard-eu");
        assert_eq!(e.sampling, Sampling::ParentBased(Root::Ratio(0.1)));
        assert_eq!(
            e.resource,
            [
                ("deployment.environment".to_owned(), "prod".to_owned()),
                ("cloud.region".to_owned(), "eu-west".to_owned())
            ]
        );
        assert_eq!(e.queue, 64);
        // The headers are a secret: the configuration's Debug output never shows them.
        assert!(!format!("{c:?}").contains("s%3Dcret"));
    }

    #[test]
    fn grpc_over_tls_takes_a_private_ca() {
        let ca = std::env::temp_dir().join(format!("otlp-ca-{}.pem", std::process::id()));
        std::fs::write(&ca, "not read until the pod starts").expect("write");
        let c = load(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector:4317"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            (
                "OTEL_EXPORTER_OTLP_CERTIFICATE",
                ca.to_str().expect("utf-8"),
            ),
        ])
        .expect("loads");
        let e = c.trace_export().expect("on");
        assert_eq!(e.protocol, OtlpProtocol::Grpc);
        assert_eq!(e.url.as_str(), "https://collector:4317/");
        assert_eq!(e.ca.as_deref(), Some(ca.as_path()));
        let _ = std::fs::remove_file(&ca);
    }

    #[test]
    fn an_endpoint_path_prefixes_the_signal_path() {
        let c = load(&[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "https://otlp.example/prefix/",
        )])
        .expect("loads");
        let url = c.trace_export().expect("on").url;
        assert_eq!(url.as_str(), "https://otlp.example/prefix/v1/traces");
    }

    #[test]
    fn bad_values_refuse_the_start_without_quoting_secrets() {
        for (pairs, expected) in [
            (
                vec![
                    ("OTEL_TRACES_SAMPLER", "traceidratio"),
                    ("OTEL_TRACES_SAMPLER_ARG", "1.5"),
                ],
                "OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1",
            ),
            (
                vec![("OTEL_TRACES_SAMPLER", "sometimes")],
                "OTEL_TRACES_SAMPLER",
            ),
            (
                vec![("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")],
                "OTEL_EXPORTER_OTLP_PROTOCOL",
            ),
            (
                vec![("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=ok,hunter2-secret")],
                "OTEL_EXPORTER_OTLP_HEADERS entry 2 is not key=value",
            ),
            (
                vec![("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=hunter2%zz")],
                "OTEL_EXPORTER_OTLP_HEADERS entry 1 has a bad percent escape",
            ),
            (
                vec![("OTEL_RESOURCE_ATTRIBUTES", "=x")],
                "OTEL_RESOURCE_ATTRIBUTES entry 1 is not key=value",
            ),
            (
                vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://collector")],
                "must be an http:// or https:// URL",
            ),
            (
                vec![
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317"),
                    ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/etc/hostname"),
                ],
                "OTEL_EXPORTER_OTLP_CERTIFICATE is for an https:// OTEL_EXPORTER_OTLP_ENDPOINT",
            ),
            (
                vec![
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector:4317"),
                    ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/nonexistent/ca.pem"),
                ],
                "OTEL_EXPORTER_OTLP_CERTIFICATE names /nonexistent/ca.pem, which is not a readable file",
            ),
            (
                vec![("OTEL_BSP_MAX_QUEUE_SIZE", "0")],
                "OTEL_BSP_MAX_QUEUE_SIZE must be at least 1",
            ),
            (
                vec![("OTEL_SERVICE_NAME", " ")],
                "OTEL_SERVICE_NAME must not be empty",
            ),
        ] {
            let err = refused(&pairs);
            assert!(err.contains(expected), "{pairs:?}: {err}");
            assert!(!err.contains("hunter2"), "{err}");
        }
    }

    #[test]
    fn a_ratio_without_its_argument_is_every_trace() {
        let c = load(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_TRACES_SAMPLER", "traceidratio"),
        ])
        .expect("loads");
        assert_eq!(c.trace_export().expect("on").sampling, Sampling::Ratio(1.0));
        let c = load(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_TRACES_SAMPLER_ARG", "1"),
            ("OTEL_TRACES_SAMPLER", "traceidratio"),
        ])
        .expect("loads");
        assert_eq!(c.trace_export().expect("on").sampling, Sampling::Ratio(1.0));
    }
}
