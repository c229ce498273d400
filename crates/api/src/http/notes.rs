//! Internal notes: experts write on a conversation for the team. A note is stored in
//! `conversation_notes`, never in `messages`, so neither the dispatch job (customers) nor
//! the inbound job (the agent's history and `history_summary`) can read it; its
//! `note_added` event goes to the org's console sockets through the event outbox, committed
//! with the note and its audit row (`switchboard_flows::notes`). `Idempotency-Key` makes a
//! double click one note.

use crate::auth::Caller;
use crate::error::responses::Unauthorized;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{Json, Path, RequestId};
use crate::idempotency::{self, Idempotent};
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use switchboard_flows::idempotency::{Answer, Keyed};
use switchboard_flows::notes::{self, Author};
use switchboard_store::conversation_notes::{self, Note};
use switchboard_store::conversations;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

const MAX_BODY: usize = 4000;
/// A conversation's newest notes that `GET` returns.
const LIST_LIMIT: i64 = 500;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_notes, add_note))
}

/// A note as the console shows it.
#[derive(Debug, Serialize, ToSchema)]
struct NoteView {
    id: Uuid,
    conversation_id: Uuid,
    author_user_id: Option<Uuid>,
    author_email: Option<String>,
    body: String,
    created_at: DateTime<Utc>,
}

impl From<Note> for NoteView {
    fn from(n: Note) -> Self {
        NoteView {
            id: n.id,
            conversation_id: n.conversation_id,
            author_user_id: n.author_user_id,
            author_email: n.author_email,
            body: n.body,
            created_at: n.created_at,
        }
    }
}

#[derive(Serialize, ToSchema)]
struct NoteList {
    /// Oldest first (the newest 500).
    items: Vec<NoteView>,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct CreateNote {
    body: String,
}

/// The conversation's org, once the caller may see it (404 / 403).
async fn conversation_org(state: &AppState, caller: &Caller, id: Uuid) -> ApiResult<Uuid> {
    let conversation = conversations::get(&state.db, id)
        .await?
        .ok_or_else(|| ApiError::not_found("conversation"))?;
    caller.role_in(conversation.org_id)?;
    Ok(conversation.org_id)
}

#[utoipa::path(get, path = "/conversations/{id}/notes", tag = "conversations", security(("bearer" = [])),
    params(("id" = Uuid, Path)),
    responses((status = 200, body = NoteList),
        Unauthorized,
        (status = 403, description = "Another org's conversation", body = ErrorBody),
        (status = 404, body = ErrorBody)))]
async fn list_notes(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<NoteList>> {
    conversation_org(&state, &caller, id).await?;
    let notes = conversation_notes::list(&state.db, id, LIST_LIMIT).await?;
    Ok(Json(NoteList {
        items: notes.into_iter().map(NoteView::from).collect(),
    }))
}

#[utoipa::path(post, path = "/conversations/{id}/notes", tag = "conversations", security(("bearer" = [])),
    params(("id" = Uuid, Path), ("Idempotency-Key" = Option<String>, Header, description = "The same key answers a retry with the first note")),
    request_body = CreateNote,
    description = "Adds an internal note: seen by the org's experts (live, `note_added`), never sent to the customer nor given to the agent (audited)",
    responses((status = 201, body = NoteView),
        (status = 400, body = ErrorBody),
        Unauthorized,
        (status = 403, description = "Another org's conversation", body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 422, description = "Empty or longer than 4000 characters", body = ErrorBody)))]
async fn add_note(
    State(state): State<AppState>,
    caller: Caller,
    RequestId(request_id): RequestId,
    Path(id): Path<Uuid>,
    req: Idempotent<CreateNote>,
) -> ApiResult<Response> {
    let org_id = conversation_org(&state, &caller, id).await?;
    let body = req.body.body.trim();
    if body.is_empty() || body.chars().count() > MAX_BODY {
        return Err(ApiError::validation(format!(
            "body must be 1 to {MAX_BODY} characters"
        )));
    }
    let author = Author {
        org_id,
        user_id: caller.user_id,
        request_id: request_id.as_deref(),
    };
    let key = req.key(org_id, caller.user_id);
    let added = notes::add(&state.flows, author, id, body, key.as_ref(), |note| {
        let view = serde_json::to_value(NoteView::from(note)).map_err(ApiError::internal)?;
        Ok::<_, ApiError>(Answer {
            status: StatusCode::CREATED.as_u16(),
            body: view,
        })
    })
    .await?;
    Ok(match added {
        Keyed::Ran(answer) => (StatusCode::CREATED, axum::Json(answer.body)).into_response(),
        Keyed::Replayed(first) => idempotency::replayed(first),
    })
}
