//! Exports that stream: a customer's data (`GET /customers/{id}/export`) and, through
//! `audit.rs`, the audit log. Postgres builds each record as JSON text; a task reads the
//! rows as they arrive (never a whole result at once) and hands the response chunks of
//! [`CHUNK`] bytes through a channel of [`IN_FLIGHT`] slots, so a pod's memory for one export
//! is bounded whatever its size, and a slow client slows the reads rather than filling
//! memory. All sections are read in one read-only, repeatable-read transaction: one
//! consistent snapshot. A failure mid-way cuts the response (the client sees it truncated,
//! never a document that looks whole).

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::Path;
use crate::state::AppState;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures::TryStreamExt;
use switchboard_store::customers;
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

/// One part of an export: a statement whose rows are each one column of JSON text (or, for
/// CSV, one line), and its parameters.
pub(crate) struct Section {
    /// The record name (the document's key, NDJSON's `record`).
    pub name: &'static str,
    /// One row per record, its only column `text`.
    pub sql: String,
    /// Bound in order.
    pub params: Vec<Param>,
    /// A JSON document writes this section as one object, not a list.
    pub single: bool,
}

/// A statement parameter (`None` binds SQL null).
#[derive(Debug, Clone)]
pub(crate) enum Param {
    Uuid(Option<Uuid>),
    Uuids(Option<Vec<Uuid>>),
    Text(Option<String>),
    Time(Option<chrono::DateTime<chrono::Utc>>),
    Int(Option<i64>),
}

type TextQuery<'q> =
    sqlx::query::QueryScalar<'q, sqlx::Postgres, String, sqlx::postgres::PgArguments>;

impl Param {
    /// `query` with this parameter bound next.
    pub(crate) fn bind_to(self, query: TextQuery<'_>) -> TextQuery<'_> {
        match self {
            Param::Uuid(v) => query.bind(v),
            Param::Uuids(v) => query.bind(v),
            Param::Text(v) => query.bind(v),
            Param::Time(v) => query.bind(v),
            Param::Int(v) => query.bind(v),
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

impl From<sqlx::Error> for ExportError {
    fn from(e: sqlx::Error) -> Self {
        ExportError::Store(e.into())
    }
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
    let mut tx = db.begin().await?;
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .execute(&mut *tx)
        .await?;
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
        let mut query = sqlx::query_scalar::<_, String>(&section.sql);
        for param in &section.params {
            query = param.clone().bind_to(query);
        }
        let mut rows = query.fetch(&mut *tx);
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
        drop(rows);
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
    tx.commit().await?;
    Ok(())
}

/// The sections of a customer's export: who they are, their conversations (with the
/// agent's running summary), every message both ways with its delivery, the drafts experts
/// were shown, the internal notes (flagged as such), each reply's deliveries and dead
/// letters, and the audit rows that name them or their conversations.
fn customer_sections(org_id: Uuid, customer_id: Uuid) -> Vec<Section> {
    let conversations = "SELECT id FROM conversations WHERE customer_id = $1 AND org_id = $2";
    let section = |name, single, sql: String| Section {
        name,
        sql,
        params: vec![Param::Uuid(Some(customer_id)), Param::Uuid(Some(org_id))],
        single,
    };
    vec![
        section(
            "customer",
            true,
            "SELECT jsonb_build_object('id', id, 'org_id', org_id, 'channel', channel,
                    'external_id', external_id, 'display_name', display_name,
                    'created_at', created_at, 'updated_at', updated_at)::text
             FROM customers WHERE id = $1 AND org_id = $2"
                .into(),
        ),
        section(
            "conversations",
            false,
            "SELECT jsonb_build_object('id', id, 'channel', channel, 'status', status,
                    'created_at', created_at, 'updated_at', updated_at, 'closed_at', closed_at,
                    'history_summary', agent_context -> 'history_summary')::text
             FROM conversations WHERE customer_id = $1 AND org_id = $2
             ORDER BY created_at, id"
                .into(),
        ),
        section(
            "messages",
            false,
            format!(
                "SELECT jsonb_build_object('id', m.id, 'conversation_id', m.conversation_id,
                        'direction', m.direction, 'author', m.author, 'body', m.body,
                        'created_at', m.created_at, 'delivery_status', m.delivery_status,
                        'delivered_at', m.delivered_at, 'delivery_error', m.delivery_error,
                        'provider_message_id', m.provider_message_id)::text
                 FROM messages m WHERE m.conversation_id IN ({conversations})
                 ORDER BY m.conversation_id, m.created_at, m.id"
            ),
        ),
        section(
            "drafts",
            false,
            format!(
                "SELECT jsonb_build_object('id', d.id, 'conversation_id', d.conversation_id,
                        'message_id', d.message_id, 'body', d.body, 'confidence', d.confidence,
                        'fallback', d.fallback, 'created_at', d.created_at)::text
                 FROM drafts d WHERE d.conversation_id IN ({conversations})
                 ORDER BY d.conversation_id, d.created_at, d.id"
            ),
        ),
        section(
            "notes",
            false,
            format!(
                "SELECT jsonb_build_object('id', n.id, 'conversation_id', n.conversation_id,
                        'internal', true, 'author_user_id', n.author_user_id, 'body', n.body,
                        'created_at', n.created_at)::text
                 FROM conversation_notes n WHERE n.conversation_id IN ({conversations})
                 ORDER BY n.conversation_id, n.created_at, n.id"
            ),
        ),
        section(
            "deliveries",
            false,
            format!(
                "SELECT jsonb_build_object('id', o.id, 'conversation_id', o.conversation_id,
                        'message_id', o.message_id, 'channel', o.channel, 'status', o.status,
                        'attempts', o.attempts, 'provider_id', o.provider_id,
                        'last_error', o.last_error, 'created_at', o.created_at,
                        'sent_at', o.sent_at,
                        'dead_letter', CASE WHEN f.id IS NULL THEN NULL ELSE jsonb_build_object(
                          'status', f.status, 'error', f.error, 'provider_status', f.provider_status,
                          'retries', f.retries, 'created_at', f.created_at) END)::text
                 FROM outbox o LEFT JOIN channel_failures f ON f.outbox_id = o.id
                 WHERE o.conversation_id IN ({conversations})
                 ORDER BY o.created_at, o.id"
            ),
        ),
        section(
            "audit",
            false,
            format!(
                "SELECT jsonb_build_object('id', a.id, 'actor_user_id', a.actor_user_id,
                        'action', a.action, 'target_type', a.target_type,
                        'target_id', a.target_id, 'details', a.details,
                        'request_id', a.request_id, 'created_at', a.created_at)::text
                 FROM audit_log a
                 WHERE a.org_id = $2
                   AND (a.target_id = $1
                        OR a.target_id IN ({conversations})
                        OR a.target_id IN (SELECT q.id FROM expert_queue q
                                           WHERE q.conversation_id IN ({conversations}))
                        OR a.target_id IN (SELECT n.id FROM conversation_notes n
                                           WHERE n.conversation_id IN ({conversations}))
                        OR (a.details ->> 'conversation_id') IN
                           (SELECT id::text FROM conversations WHERE customer_id = $1 AND org_id = $2))
                 ORDER BY a.id"
            ),
        ),
    ]
}

#[utoipa::path(get, path = "/customers/{id}/export", tag = "conversations", security(("bearer" = [])),
    params(("id" = Uuid, Path), ("Accept" = Option<String>, Header, description = "`application/x-ndjson` for one record per line (`{\"record\": …, \"data\": …}`), else one JSON document")),
    description = "Everything held about the customer (org admins), streamed: `customer`, `conversations` (with the agent's running summary), `messages` both ways with their delivery, `drafts` shown to experts, `notes` (internal), `deliveries` with their dead letters, and the `audit` rows naming them. One consistent snapshot; a response cut short means the export failed.",
    responses((status = 200, description = "The export", content_type = "application/json"), (status = 401, description = "No valid bearer token", body = ErrorBody), (status = 403, description = "Another org's customer, or not an admin", body = ErrorBody), (status = 404, description = "No such customer (or erased)", body = ErrorBody)))]
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
        customer_sections(customer.org_id, customer.id),
        format,
        &format!("customer-{id}.{extension}"),
    ))
}

/// Routes of this module.
pub fn router() -> utoipa_axum::router::OpenApiRouter<AppState> {
    utoipa_axum::router::OpenApiRouter::new().routes(utoipa_axum::routes!(export_customer))
}
