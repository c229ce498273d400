//! Exports that stream: a customer's data (`GET /customers/{id}/export`) and, through
//! `audit.rs`, the audit log. Postgres builds each record as JSON text; a task reads the
//! rows as they arrive (never a whole result at once) and hands the response chunks of
//! [`CHUNK`] bytes through a channel of [`IN_FLIGHT`] slots, so a pod's memory for one export
//! is bounded whatever its size, and a slow client slows the reads rather than filling
//! memory. All sections are read in one read-only, repeatable-read transaction: one
//! consistent snapshot. A failure mid-way cuts the response (the client sees it truncated,
//! never a document that looks whole).

use crate::auth::Caller;
use crate::error::responses::Unauthorized;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::Path;
use crate::state::AppState;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures::TryStreamExt;
use switchboard_store::customers;
use switchboard_store::export::{Section, Snapshot};
use switchboard_store::{PgPool, StoreError};
use tokio::sync::mpsc;
use uuid::Uuid;

/// Bytes gathered before a chunk goes to the client.
const CHUNK: usize = 64 * 1024;
/// Chunks waiting for the client at most.
const IN_FLIGHT: usize = 8;

/// How an export is written, from the request's `Accept`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// One JSON document.
    Json,
    /// One JSON record per line: `{"record": <section>, "data": …}`.
    Ndjson,
    /// Comma-separated values with a header line (sections with fixed columns only).
    Csv,
}

pub(crate) const NDJSON: &str = "application/x-ndjson";

impl Format {
    /// `application/x-ndjson` (or `application/jsonl`), `text/csv` when `csv` is allowed,
    /// else JSON.
    pub(crate) fn from_accept(headers: &HeaderMap, csv: bool) -> Format {
        let accept = headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if accept.contains(NDJSON) || accept.contains("application/jsonl") {
            Format::Ndjson
        } else if csv && accept.contains("text/csv") {
            Format::Csv
        } else {
            Format::Json
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Format::Json => "application/json",
            Format::Ndjson => NDJSON,
            Format::Csv => "text/csv; charset=utf-8",
        }
    }
}

/// Why an export stopped mid-way.
#[derive(Debug, thiserror::Error)]
enum ExportError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The client went away.
    #[error("the client went away")]
    Gone,
}

/// Where the export writes: a chunk buffer that goes to the client once full.
struct Sink {
    buf: Vec<u8>,
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
}

impl Sink {
    async fn write(&mut self, bytes: &[u8]) -> Result<(), ExportError> {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= CHUNK {
            self.flush().await?;
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), ExportError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        self.tx.send(Ok(chunk)).await.map_err(|_| ExportError::Gone)
    }
}

/// The streamed response of `sections` in `format`, with `filename` for a download.
pub(crate) fn stream(
    db: PgPool,
    sections: Vec<Section>,
    format: Format,
    filename: &str,
) -> Response {
    let (tx, mut rx) = mpsc::channel(IN_FLIGHT);
    tokio::spawn(async move {
        let mut sink = Sink {
            buf: Vec::with_capacity(CHUNK),
            tx,
        };
        let result = write_all(&db, &sections, format, &mut sink).await;
        match result {
            Ok(()) => {
                let _ = sink.flush().await;
            }
            Err(ExportError::Gone) => {}
            Err(ExportError::Store(error)) => {
                tracing::warn!(%error, "an export failed mid-way; its response is cut");
                let _ = sink.tx.send(Err(std::io::Error::other(error))).await;
            }
        }
    });
    let body = Body::from_stream(futures::stream::poll_fn(move |cx| rx.poll_recv(cx)));
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    if let Ok(disposition) = HeaderValue::from_str(&format!("attachment; filename=\"{filename}\""))
    {
        headers.insert(header::CONTENT_DISPOSITION, disposition);
    }
    response
}

async fn write_all(
    db: &PgPool,
    sections: &[Section],
    format: Format,
    sink: &mut Sink,
) -> Result<(), ExportError> {
    let mut snapshot = Snapshot::begin(db).await?;
    if format == Format::Json {
        sink.write(b"{").await?;
    }
    for (i, section) in sections.iter().enumerate() {
        if format == Format::Json {
            if i > 0 {
                sink.write(b",").await?;
            }
            sink.write(format!("\"{}\":", section.name).as_bytes())
                .await?;
            if !section.single {
                sink.write(b"[").await?;
            }
        }
        let mut rows = std::pin::pin!(snapshot.rows(section));
        let mut n = 0usize;
        while let Some(row) = rows.try_next().await? {
            match format {
                Format::Json => {
                    if n > 0 {
                        sink.write(b",").await?;
                    }
                    sink.write(row.as_bytes()).await?;
                }
                Format::Ndjson => {
                    sink.write(format!("{{\"record\":\"{}\",\"data\":", section.name).as_bytes())
                        .await?;
                    sink.write(row.as_bytes()).await?;
                    sink.write(b"}\n").await?;
                }
                Format::Csv => {
                    sink.write(row.as_bytes()).await?;
                    sink.write(b"\r\n").await?;
                }
            }
            n += 1;
        }
        if format == Format::Json {
            if section.single && n == 0 {
                sink.write(b"null").await?;
            }
            if !section.single {
                sink.write(b"]").await?;
            }
        }
    }
    if format == Format::Json {
        sink.write(b"}").await?;
    }
    snapshot.finish().await?;
    Ok(())
}

#[utoipa::path(get, path = "/customers/{id}/export", tag = "conversations", security(("bearer" = [])),
    params(("id" = Uuid, Path),
        ("Accept" = Option<String>, Header, description = "`application/x-ndjson` for one record \
            per line (`{\"record\": …, \"data\": …}`), else one JSON document")),
    description = "Everything held about the customer (org admins), streamed: `customer`, \
        `conversations` (with the agent's running summary), `messages` both ways with their \
        delivery, `drafts` shown to experts, `notes` (internal), `deliveries` with their dead \
        letters, each message's `journey` steps, and the `audit` rows naming them. One consistent snapshot; a response cut short \
        means the export failed.",
    responses((status = 200, description = "The export", content_type = "application/json"),
        Unauthorized,
        (status = 403, description = "Another org's customer, or not an admin", body = ErrorBody),
        (status = 404, description = "No such customer (or erased)", body = ErrorBody)))]
async fn export_customer(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let customer = customers::get(&state.db, id)
        .await?
        .ok_or_else(|| ApiError::not_found("customer"))?;
    caller.require_admin(customer.org_id)?;
    let format = Format::from_accept(&headers, false);
    let extension = if format == Format::Ndjson {
        "ndjson"
    } else {
        "json"
    };
    Ok(stream(
        state.db.clone(),
        customers::export::sections(customer.org_id, customer.id),
        format,
        &format!("customer-{id}.{extension}"),
    ))
}

/// Routes of this module.
pub fn router() -> utoipa_axum::router::OpenApiRouter<AppState> {
    utoipa_axum::router::OpenApiRouter::new().routes(utoipa_axum::routes!(export_customer))
}
