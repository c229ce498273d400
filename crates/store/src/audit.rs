//! The audit log: who did what, with the org, the target and the request id, in the
//! transaction of the action itself where it has one. Every expert action, connection
//! change, member removal, change of an org's settings, saved-reply change, internal note,
//! inbox replay, dead-letter retry and logout, the CLI's deactivations and reactivations,
//! and every login, success or failure (a hash of the email, never the password), write a
//! row.

use crate::StoreError;
use crate::export::{Param, Section};
use serde_json::Value;
use sqlx::{PgExecutor, PgPool};
use switchboard_domain::Event;
use uuid::Uuid;

/// Who acted, and through which request.
#[derive(Debug, Clone, Copy)]
pub struct Actor<'a> {
    /// The org the action concerns.
    pub org_id: Option<Uuid>,
    /// The user, when known (a failed login has none).
    pub user_id: Option<Uuid>,
    /// The request's `x-request-id`.
    pub request_id: Option<&'a str>,
}

/// Appends an audit entry; takes any executor so it can join the caller's transaction.
pub async fn record<'e>(
    db: impl PgExecutor<'e>,
    actor: Actor<'_>,
    action: &str,
    target: Option<(&str, Uuid)>,
    details: Value,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO audit_log (org_id, actor_user_id, action, target_type, target_id, details, request_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(actor.org_id)
    .bind(actor.user_id)
    .bind(action)
    .bind(target.map(|t| t.0))
    .bind(target.map(|t| t.1))
    .bind(details)
    .bind(actor.request_id)
    .execute(db)
    .await?;
    Ok(())
}

/// Appends an audit entry and stores the action's realtime events (in order, for the relay)
/// in one statement, inside the action's transaction.
pub async fn record_with_events<'e>(
    db: impl PgExecutor<'e>,
    actor: Actor<'_>,
    action: &str,
    target: Option<(&str, Uuid)>,
    details: Value,
    events: &[Event],
) -> Result<(), StoreError> {
    let (names, payloads) = crate::event_outbox::columns(events.iter())?;
    sqlx::query(
        "WITH a AS (
           INSERT INTO audit_log (org_id, actor_user_id, action, target_type, target_id, details,
                                  request_id)
           VALUES ($1, $2, $3, $4, $5, $6, $7))
         INSERT INTO event_outbox (org_id, event, payload)
         SELECT $1, e, p FROM UNNEST($8::text[], $9::jsonb[]) WITH ORDINALITY AS t(e, p, i)
         WHERE $1 IS NOT NULL
         ORDER BY i",
    )
    .bind(actor.org_id)
    .bind(actor.user_id)
    .bind(action)
    .bind(target.map(|t| t.0))
    .bind(target.map(|t| t.1))
    .bind(details)
    .bind(actor.request_id)
    .bind(&names)
    .bind(&payloads)
    .execute(db)
    .await?;
    Ok(())
}

/// Which audit rows an export or a page covers; `None` is no condition.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// These orgs' rows only (`None`: the whole deployment, the operator's CLI).
    pub orgs: Option<Vec<Uuid>>,
    /// Rows of this actor.
    pub actor: Option<Uuid>,
    /// Rows of this action (`customer.erased`, `expert.release` …).
    pub action: Option<String>,
    /// From this time on (inclusive).
    pub since: Option<chrono::DateTime<chrono::Utc>>,
    /// Before this time (exclusive).
    pub until: Option<chrono::DateTime<chrono::Utc>>,
}

/// How each selected row is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowFormat {
    /// A JSON object (as text).
    Json,
    /// One CSV line of [`CSV_HEADER`]'s columns.
    Csv,
}

/// The columns of a CSV export, in order.
pub const CSV_HEADER: &str = "id,created_at,org_id,actor_user_id,actor_email,action,target_type,target_id,request_id,details";

/// A CSV cell of SQL expression `expr`: quoted, quotes doubled, and a leading `=`, `+`,
/// `-` or `@` escaped with `'` so that a spreadsheet never runs it as a formula.
fn csv_cell(expr: &str) -> String {
    format!(
        "'\"' || replace(CASE WHEN left(COALESCE(({expr})::text, ''), 1) IN ('=', '+', '-', '@')
                              THEN '''' || ({expr})::text ELSE COALESCE(({expr})::text, '') END,
                         '\"', '\"\"') || '\"'"
    )
}

/// The statement selecting rows of [`Filter`] in `format`, one text column each: `$1` orgs
/// (`uuid[]`, null for all), `$2` actor, `$3` action, `$4` since, `$5` until, `$6` cursor
/// (rows older than this id; null for none), `$7` limit (null for all). `newest_first`
/// orders a page; an export runs oldest first.
pub fn select_sql(format: RowFormat, newest_first: bool) -> String {
    let row = match format {
        RowFormat::Json => "jsonb_build_object('id', a.id, 'created_at', a.created_at,
               'org_id', a.org_id, 'actor_user_id', a.actor_user_id, 'actor_email', u.email,
               'action', a.action, 'target_type', a.target_type, 'target_id', a.target_id,
               'request_id', a.request_id, 'details', a.details)::text"
            .to_owned(),
        RowFormat::Csv => [
            "a.id",
            "to_char(a.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')",
            "a.org_id",
            "a.actor_user_id",
            "u.email",
            "a.action",
            "a.target_type",
            "a.target_id",
            "a.request_id",
            "a.details",
        ]
        .map(csv_cell)
        .join(" || ',' || "),
    };
    let order = if newest_first { "DESC" } else { "ASC" };
    format!(
        "SELECT {row} FROM audit_log a LEFT JOIN users u ON u.id = a.actor_user_id
          WHERE ($1::uuid[] IS NULL OR a.org_id = ANY($1))
            AND ($2::uuid IS NULL OR a.actor_user_id = $2)
            AND ($3::text IS NULL OR a.action = $3)
            AND ($4::timestamptz IS NULL OR a.created_at >= $4)
            AND ($5::timestamptz IS NULL OR a.created_at < $5)
            AND ($6::bigint IS NULL OR a.id < $6)
          ORDER BY a.id {order} LIMIT $7"
    )
}

/// [`select_sql`]'s parameters for `filter`, from `cursor` on, at most `limit` rows.
fn select_params(filter: &Filter, cursor: Option<i64>, limit: Option<i64>) -> Vec<Param> {
    vec![
        Param::Uuids(filter.orgs.clone()),
        Param::Uuid(filter.actor),
        Param::Text(filter.action.clone()),
        Param::Time(filter.since),
        Param::Time(filter.until),
        Param::Int(cursor),
        Param::Int(limit),
    ]
}

/// A page of [`Filter`]'s rows as JSON text, newest first: at most `limit`, older than row
/// `cursor` when given.
pub async fn page(
    db: &PgPool,
    filter: &Filter,
    cursor: Option<i64>,
    limit: i64,
) -> Result<Vec<String>, StoreError> {
    let section = Section {
        name: "audit",
        sql: select_sql(RowFormat::Json, true),
        params: select_params(filter, cursor, Some(limit)),
        single: false,
    };
    crate::export::all(db, &section).await
}

/// The sections of an export of [`Filter`]'s rows in `format`, oldest first; a CSV export
/// starts with its header line.
pub fn export_sections(filter: &Filter, format: RowFormat) -> Vec<Section> {
    let header = Section {
        name: "header",
        sql: format!("SELECT '{CSV_HEADER}'::text"),
        params: Vec::new(),
        single: true,
    };
    let rows = Section {
        name: "audit",
        sql: select_sql(format, false),
        params: select_params(filter, None, None),
        single: false,
    };
    match format {
        RowFormat::Csv => vec![header, rows],
        RowFormat::Json => vec![rows],
    }
}
