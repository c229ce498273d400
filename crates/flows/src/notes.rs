//! Internal notes: an expert's note on a conversation, for the team only. It is stored in
//! `conversation_notes` (never `messages`, which customers and the agent read), with its
//! audit row and its `note_added` event in one transaction; an `Idempotency-Key` makes a
//! double click one note.

use crate::Deps;
use crate::idempotency::{self, Answer, Key, KeyError, Keyed, Refusal};
use serde_json::json;
use switchboard_domain::Event;
use switchboard_domain::events::NoteAdded;
use switchboard_store::StoreError;
use switchboard_store::audit::{self, Actor};
use switchboard_store::conversation_notes::{self, Note};
use uuid::Uuid;

/// Who writes the note, in which org, through which request.
#[derive(Debug, Clone, Copy)]
pub struct Author<'a> {
    /// The conversation's org.
    pub org_id: Uuid,
    /// The expert, whose address the note shows.
    pub user_id: Uuid,
    /// The request's `x-request-id`, for the audit row.
    pub request_id: Option<&'a str>,
}

/// Adds note `body` on `conversation_id` (the caller checked the author may see it): the
/// note, its audit row, its event and `answer`'s wording of it under `key`, committed
/// together; then the relay is woken. A retry of the key gets the first answer.
pub async fn add<E>(
    deps: &Deps,
    author: Author<'_>,
    conversation_id: Uuid,
    body: &str,
    key: Option<&Key>,
    answer: impl FnOnce(Note) -> Result<Answer, E>,
) -> Result<Keyed<Answer>, E>
where
    E: From<StoreError> + From<KeyError> + Refusal,
{
    let added = idempotency::keyed(&deps.db, key, async |guard| {
        let mut tx = deps.begin().await?;
        let note = conversation_notes::insert(
            &mut *tx,
            author.org_id,
            conversation_id,
            author.user_id,
            body,
        )
        .await?;
        let event = Event::NoteAdded(NoteAdded {
            id: note.id,
            conversation_id,
            author_user_id: note.author_user_id,
            author_email: note.author_email.clone(),
            body: note.body.clone(),
            created_at: note.created_at,
        });
        audit::record_with_events(
            &mut *tx,
            Actor {
                org_id: Some(author.org_id),
                user_id: Some(author.user_id),
                request_id: author.request_id,
            },
            "conversation.note_added",
            Some(("conversation_note", note.id)),
            json!({"conversation_id": conversation_id, "length": note.body.chars().count()}),
            &[event],
        )
        .await?;
        let answer = answer(note)?;
        if let Some(guard) = guard {
            let stored = guard
                .complete_in(&mut tx, answer.status, &answer.body)
                .await;
            stored.map_err(KeyError::from)?;
        }
        crate::commit(tx).await?;
        Ok::<_, E>(answer)
    })
    .await?;
    if matches!(added, Keyed::Ran(_)) {
        deps.emitter.wake();
    }
    Ok(added)
}
