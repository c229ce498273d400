//! Reading a message's journey: the steps of its exchange (the customer's message and the
//! replies answering it), from the database alone, for an expert who is asked "I wrote at
//! 10:02 and got the answer at 10:40: what happened?" without a tracing backend.
//!
//! Writing the steps is not here: each is written by the statement whose commit is the step
//! (`switchboard_store::message_journey` lists them), so that the journey never claims what
//! did not commit. What this module adds is the reading of the whole: which message of the
//! exchange each step is about, and how long after the first step it came.

use chrono::{DateTime, Utc};
use serde_json::Value;
use switchboard_domain::JourneyStep;
use switchboard_store::message_journey::{self, Step};
use switchboard_store::{PgPool, StoreError};
use uuid::Uuid;

/// One step of an exchange, as the console shows it.
#[derive(Debug, Clone)]
pub struct JourneyEntry {
    /// What happened.
    pub step: JourneyStep,
    /// When.
    pub at: DateTime<Utc>,
    /// Milliseconds since the exchange's first step (negative when a pod's clock was behind
    /// Postgres').
    pub since_start_ms: i64,
    /// The pod that wrote it.
    pub pod: String,
    /// The message it is about.
    pub message_id: Uuid,
    /// Whether that message is the one asked about (the other is the reply, or the
    /// customer's message it answers).
    pub this_message: bool,
    /// Numbers, ids and user names.
    pub detail: Value,
    /// The trace id, while tracing was on.
    pub trace_id: Option<String>,
}

/// Why a journey cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum JourneyError {
    /// No such message in that conversation of the caller's orgs.
    #[error("message not found")]
    NotFound,
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The journey of message `message_id` of conversation `conversation_id`, when that message
/// belongs to one of `orgs` (the caller's): its exchange's steps in time order.
pub async fn of_message(
    db: &PgPool,
    orgs: &[Uuid],
    conversation_id: Uuid,
    message_id: Uuid,
) -> Result<Vec<JourneyEntry>, JourneyError> {
    let steps = message_journey::exchange(db, orgs, conversation_id, message_id)
        .await?
        .ok_or(JourneyError::NotFound)?;
    Ok(entries(steps, message_id))
}

/// The steps read, each with its offset from the first and whether it is `asked`'s.
fn entries(steps: Vec<Step>, asked: Uuid) -> Vec<JourneyEntry> {
    let start = steps.first().map(|s| s.at);
    steps
        .into_iter()
        .map(|s| JourneyEntry {
            since_start_ms: start.map_or(0, |t| (s.at - t).num_milliseconds()),
            this_message: s.message_id == asked,
            step: s.step,
            at: s.at,
            pod: s.pod,
            message_id: s.message_id,
            detail: s.detail,
            trace_id: s.trace_id,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn step(step: JourneyStep, secs: i64, message_id: Uuid) -> Step {
        Step {
            message_id,
            step,
            at: Utc.timestamp_opt(1_700_000_000 + secs, 0).unwrap(),
            pod: "pod-a".into(),
            detail: Value::Null,
            trace_id: None,
        }
    }

    #[test]
    fn offsets_run_from_the_first_step_and_mark_the_asked_message() {
        let (inbound, reply) = (Uuid::new_v4(), Uuid::new_v4());
        let read = entries(
            vec![
                step(JourneyStep::Received, 0, inbound),
                step(JourneyStep::Drafted, 2, inbound),
                step(JourneyStep::Released, 2268, reply),
            ],
            reply,
        );
        let offsets: Vec<i64> = read.iter().map(|e| e.since_start_ms).collect();
        assert_eq!(offsets, [0, 2000, 2_268_000]);
        let mine: Vec<bool> = read.iter().map(|e| e.this_message).collect();
        assert_eq!(mine, [false, false, true]);
        assert!(entries(Vec::new(), reply).is_empty());
    }
}
