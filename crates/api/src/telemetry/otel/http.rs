//! OTLP/HTTP through the pods' own reqwest (rustls, no second TLS stack). The SDK's batch
//! processor exports from a thread of its own, outside the tokio runtime, where reqwest's
//! connections cannot run; each export is therefore handed to the runtime the pod started
//! the exporter on, and the processor's thread only waits for its answer.

use async_trait::async_trait;
use bytes::Bytes;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};
use std::time::Duration;
use tokio::runtime::Handle;

/// A collector's answer is a status and a few bytes; more is not read.
const ANSWER_CAP: usize = 64 * 1024;

/// The exporter's HTTP client.
#[derive(Debug, Clone)]
pub(super) struct Client {
    http: reqwest::Client,
    runtime: Handle,
}

/// Why an export request got no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum ExportHttpError {
    /// No tokio runtime where the exporter was built.
    #[error("the trace exporter needs the pod's tokio runtime")]
    NoRuntime,
    /// The client could not be built.
    #[error("could not build the trace exporter's HTTP client: {0}")]
    Build(#[source] reqwest::Error),
    /// The export's task ended without an answer (the runtime is shutting down).
    #[error("the export was cancelled")]
    Cancelled,
    /// The collector answered more than [`ANSWER_CAP`] bytes.
    #[error("the collector's answer is too large")]
    TooLarge,
}

impl Client {
    /// A client whose every request gives up after `timeout`, on the current runtime,
    /// trusting `ca` beside the system roots.
    pub(super) fn new(
        timeout: Duration,
        ca: &[reqwest::Certificate],
    ) -> Result<Self, ExportHttpError> {
        let runtime = Handle::try_current().map_err(|_| ExportHttpError::NoRuntime)?;
        let mut builder = reqwest::Client::builder().timeout(timeout);
        for cert in ca {
            builder = builder.add_root_certificate(cert.clone());
        }
        let http = builder.build().map_err(ExportHttpError::Build)?;
        Ok(Self { http, runtime })
    }
}

#[async_trait]
impl HttpClient for Client {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let http = self.http.clone();
        let exported = self.runtime.spawn(async move {
            let request = reqwest::Request::try_from(request)?;
            let mut answer = http.execute(request).await?;
            let mut body = Vec::new();
            while let Some(chunk) = answer.chunk().await? {
                if body.len() + chunk.len() > ANSWER_CAP {
                    return Err(HttpError::from(ExportHttpError::TooLarge));
                }
                body.extend_from_slice(&chunk);
            }
            let mut response = Response::new(Bytes::from(body));
            *response.status_mut() = answer.status();
            *response.headers_mut() = std::mem::take(answer.headers_mut());
            Ok::<_, HttpError>(response)
        });
        exported
            .await
            .map_err(|_| HttpError::from(ExportHttpError::Cancelled))?
    }
}
