//! The expert's actions on a queue item, F3 release among them. [`perform`] carries one out
//! in its own transaction: one atomic `UPDATE … WHERE <allowed states> RETURNING` (AA5; the
//! same statement reads the item back as a console row), followed by what the action writes
//! with it: for release and respond the outbound message and its outbox row (SPEC §2, one
//! statement), for every action the audit row and the realtime events (one statement), and
//! the request's answer under its Idempotency-Key; then the commit and [`after_commit`]. The
//! autopilot's release ([`autopilot_release`]) is the same path inside the transaction of
//! `crate::autopilot`'s send.
//!
//! Each action is a [`Transition`] of the queue item's state machine
//! (`switchboard_domain::queue_state`, which holds the states it starts from and the one it
//! leads to; docs/ARCHITECTURE.md draws it). Who may take it:
//!
//! | action   | who                                                        |
//! |----------|------------------------------------------------------------|
//! | claim    | any member; again = no-op                                  |
//! | unclaim  | the holder, or an admin                                    |
//! | assign   | admins; the user a member                                  |
//! | release  | not held by someone else; a draft or a body                |
//! | respond  | not held by someone else                                   |
//! | snooze   | not held by someone else; `until` ahead                    |
//! | resolve  | not held by someone else, or an admin                      |
//! | reopen   | any member; 409 beside a newer live item                   |
//! | stop     | any member                                                 |
//! | (autopilot sends) | `autopilot-send`, at `send_at`, at the version it was admitted at |
//!
//! Every expert action on an auto_pending item stops its hold, since the action leaves that
//! state. An item found in another state answers 409 `conflict` with its `current` state,
//! except a repeated claim by the holder (200, no change). A `CHECK` keeps
//! `status = 'claimed'` and a holder together.
//!
//! What the expert saw is what is sent (SPEC §11): the item's `version` moves with every
//! transition, every new customer message and every new draft, and a request is judged in
//! this order: an Idempotency-Key replay; the state (409 `conflict`); `If-Match` (412
//! `precondition_failed`, with the whole item); for a release without a body, the draft
//! (409 `no_draft`, or `stale_draft` when it answers an older message than the latest). A
//! release or respond retires the draft it sends, and the reply records the customer
//! message it answers, so every customer message is followed by a released reply or its
//! item is pending or claimed (`crates/api/tests/it/f3_release/expert_random.rs` checks this over
//! random interleavings of a customer and two experts on two pods).

use crate::Deps;
use crate::idempotency::{self, Answer, Key, KeyError, Keyed};
use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::PgConnection;
use switchboard_domain::events::{
    AgentMessageSent, MessageCreated, MessageSummary, QueueItemEvent,
};
use switchboard_domain::faults::{Faults, Injected, Step};
use switchboard_domain::queue_state::Transition;
use switchboard_domain::trace;
use switchboard_domain::{Author, DeliveryStatus, Event, QueueStatus, Role};
use switchboard_store::StoreError;
use switchboard_store::audit::{self, Actor as AuditActor};
use switchboard_store::expert_queue::{self, Change, Current, ItemRow, Refusal};
use switchboard_store::message_journey::{self, ClaimedBy, ReleasedBy, Stamp};
use switchboard_store::org_members;
use switchboard_store::outbox::{self, NewReply};
use uuid::Uuid;

use QueueStatus::{AutoPending, Claimed};

/// What an expert (or admin) asks of an item.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Take the item.
    Claim,
    /// Give it back.
    Unclaim,
    /// Give it to a member (admins).
    Assign {
        /// The new holder.
        user_id: Uuid,
    },
    /// Send the draft, or the edited `body` (F3).
    Release {
        /// The edited reply; the draft when absent.
        body: Option<String>,
    },
    /// Send the expert's own reply instead of the draft.
    Respond {
        /// The reply.
        body: String,
    },
    /// Close the item.
    Resolve,
    /// Put it aside until a time.
    Snooze {
        /// When it comes back.
        until: DateTime<Utc>,
    },
    /// Bring it back to pending.
    Reopen,
    /// Stop the autopilot's hold: the item waits for an expert like any other.
    Stop,
}

impl Action {
    /// The action's name in audit rows and logs.
    pub fn name(&self) -> &'static str {
        match self {
            Action::Claim => "claim",
            Action::Unclaim => "unclaim",
            Action::Assign { .. } => "assign",
            Action::Release { .. } => "release",
            Action::Respond { .. } => "respond",
            Action::Resolve => "resolve",
            Action::Snooze { .. } => "snooze",
            Action::Reopen => "reopen",
            Action::Stop => "stop",
        }
    }

    /// The arrow of the state machine the action takes.
    pub fn transition(&self) -> Transition {
        match self {
            Action::Claim => Transition::Claim,
            Action::Unclaim => Transition::Unclaim,
            Action::Assign { .. } => Transition::Assign,
            Action::Release { .. } => Transition::Release,
            Action::Respond { .. } => Transition::Respond,
            Action::Resolve => Transition::Resolve,
            Action::Snooze { .. } => Transition::Snooze,
            Action::Reopen => Transition::Reopen,
            Action::Stop => Transition::Stop,
        }
    }
}

/// Who acts.
#[derive(Debug, Clone)]
pub struct Actor {
    /// The user.
    pub user_id: Uuid,
    /// Their role in the item's org.
    pub role: Role,
    /// The request's `x-request-id`, for the audit row.
    pub request_id: Option<String>,
}

/// Who carries an action out: an expert, or the org's autopilot sending a draft it admitted.
#[derive(Debug, Clone, Copy)]
enum By<'a> {
    Expert(&'a Actor),
    Autopilot {
        /// The rule that admitted the draft, recorded with the release.
        rule: &'a str,
    },
}

impl By<'_> {
    fn user_id(&self) -> Option<Uuid> {
        match self {
            By::Expert(actor) => Some(actor.user_id),
            By::Autopilot { .. } => None,
        }
    }
}

/// Why an action was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    /// The item is not in a state the action allows (or someone else holds it).
    #[error("the item is {} (version {})", .0.status.as_str(), .0.version)]
    Conflict(Current),
    /// The client saw another version (`If-Match`); the item as it is now.
    #[error("the item changed (version {})", .0.version)]
    Precondition(Box<ItemRow>),
    /// A release without a body, and the item holds no draft (it was sent, or none came).
    #[error("the item holds no draft to send")]
    NoDraft(Box<ItemRow>),
    /// A release without a body of a draft that answers an older customer message.
    #[error("the draft answers an older customer message")]
    StaleDraft(Box<ItemRow>),
    /// A reopen while the conversation already has another live item.
    #[error("the conversation already has a live item {live_item_id}")]
    LiveItem {
        /// The item's own state.
        current: Current,
        /// The conversation's live item.
        live_item_id: Uuid,
    },
    /// The item does not exist (any more) in this org.
    #[error("queue item not found")]
    NotFound,
    /// The role may not do this.
    #[error("only an org admin may do this")]
    Forbidden,
    /// The request cannot be carried out as given.
    #[error("{0}")]
    Invalid(&'static str),
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A test's injected fault.
    #[error(transparent)]
    Injected(#[from] Injected),
}

impl From<sqlx::Error> for ActionError {
    fn from(e: sqlx::Error) -> Self {
        ActionError::Store(StoreError::from(e))
    }
}

/// The reply an action queued for delivery.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The outbound message.
    pub message: MessageSummary,
    /// Its outbox row.
    pub outbox_id: Uuid,
}

/// What an action did.
#[derive(Debug, Clone)]
pub struct Done {
    /// The item afterwards, as a console row.
    pub item: ItemRow,
    /// The reply, for release and respond.
    pub reply: Option<Reply>,
    /// False when nothing changed (claiming an item one already holds).
    pub changed: bool,
    /// An expert's action ended the autopilot's hold on the item.
    pub hold_stopped: bool,
    /// The expert's reply follows one the autopilot sent within [`UNDONE_WITHIN`]: that
    /// reply's id (a correction, `autopilot_undone`).
    pub corrects: Option<Uuid>,
}

/// How soon after an autopilot reply an expert's reply counts as correcting it.
pub const UNDONE_WITHIN: std::time::Duration = std::time::Duration::from_secs(600);

/// An expert's request to act on an item, once the caller has checked who may see it.
#[derive(Debug, Clone)]
pub struct Request {
    /// The item's org, the one the actor's role was read in.
    pub org_id: Uuid,
    /// The queue item.
    pub item_id: Uuid,
    /// Who acts, for the rules and the audit row.
    pub actor: Actor,
    /// What they ask, validated.
    pub action: Action,
    /// The version the client saw (`If-Match`): the action applies only to it.
    pub if_match: Option<i32>,
    /// The request's `Idempotency-Key`.
    pub key: Option<Key>,
}

/// Carries out `request` (see the module's doc), `answer` wording what it did: the answer is
/// stored under the request's key in the action's transaction, and a refusal, as the caller
/// words it (`E`), after it, so a retry on any pod gets the same answer. A retry of a key
/// answered already gets that answer back and changes nothing.
pub async fn perform<E>(
    deps: &Deps,
    request: &Request,
    answer: impl FnOnce(&Done) -> Result<Answer, E>,
) -> Result<Keyed<(Done, Answer)>, E>
where
    E: From<ActionError> + From<KeyError> + idempotency::Refusal,
{
    idempotency::keyed(&deps.db, request.key.as_ref(), async |guard| {
        let mut tx = deps.db.begin().await.map_err(ActionError::from)?;
        let done = carry_out(
            &mut tx,
            &deps.faults,
            &deps.pod,
            request.org_id,
            request.item_id,
            By::Expert(&request.actor),
            &request.action,
            request.if_match,
        )
        .await?;
        let answer = answer(&done)?;
        if let Some(guard) = guard {
            guard
                .complete_in(&mut tx, answer.status, &answer.body)
                .await
                .map_err(KeyError::from)?;
        }
        tx.commit().await.map_err(ActionError::from)?;
        if done.changed {
            let injected = deps.faults.check(Step::AfterCommit).await;
            injected.map_err(ActionError::from)?;
        }
        after_commit(deps, &done).await;
        Ok((done, answer))
    })
    .await
}

/// The autopilot's release of item `item_id` inside `tx`: its current draft is sent when
/// the item is still on hold at `admitted_version`, the version its draft was admitted at,
/// so that what the rule saw is what is sent. Any change since (an expert's action, a
/// customer message, a stop, another pod's release of it) refuses it; nothing is committed.
pub async fn autopilot_release(
    tx: &mut PgConnection,
    faults: &Faults,
    pod: &str,
    org_id: Uuid,
    item_id: Uuid,
    admitted_version: i32,
    rule: &str,
) -> Result<Done, ActionError> {
    carry_out(
        tx,
        faults,
        pod,
        org_id,
        item_id,
        By::Autopilot { rule },
        &Action::Release { body: None },
        Some(admitted_version),
    )
    .await
}

/// One action inside `tx`, by an expert or the autopilot, with its journey step (a claim's
/// `claimed`, a reply's `released`, written by pod `pod`); nothing is committed.
#[allow(clippy::too_many_arguments)] // the action and where it runs
async fn carry_out(
    tx: &mut PgConnection,
    faults: &Faults,
    pod: &str,
    org_id: Uuid,
    item_id: Uuid,
    by: By<'_>,
    action: &Action,
    if_match: Option<i32>,
) -> Result<Done, ActionError> {
    let admin = matches!(by, By::Expert(a) if a.role == Role::Admin);
    let expert = match by {
        By::Expert(actor) => Some(actor),
        By::Autopilot { .. } => None,
    };
    let holder = match action {
        Action::Claim => by.user_id(),
        Action::Assign { user_id } => {
            if !admin {
                return Err(ActionError::Forbidden);
            }
            if !org_members::is_member(&mut *tx, org_id, *user_id).await? {
                return Err(ActionError::Invalid("user_id is not a member of this org"));
            }
            Some(*user_id)
        }
        _ => None,
    };
    let reply = match action {
        Action::Release { body } => body.as_deref(),
        Action::Respond { body } => Some(body.as_str()),
        _ => None,
    };
    // Admins may unclaim or resolve what someone else holds; nobody releases it for them.
    // An item on hold has no holder, and the autopilot sends only those.
    let guard = match action {
        Action::Unclaim | Action::Resolve if admin => None,
        Action::Assign { .. } | Action::Reopen | Action::Stop => None,
        _ => by.user_id(),
    };
    let needs_reply = matches!(action, Action::Release { .. } | Action::Respond { .. });
    let transition = Change {
        org_id,
        id: item_id,
        transition: match by {
            By::Expert(_) => action.transition(),
            By::Autopilot { .. } => Transition::AutopilotSend,
        },
        holder,
        snoozed_until: match action {
            Action::Snooze { until } => Some(*until),
            _ => None,
        },
        not_held_by_other_than: guard,
        reply,
        needs_reply,
        if_match,
    };
    let updated = if *action == Action::Reopen {
        reopen(tx, &transition).await?
    } else {
        expert_queue::transition(&mut *tx, &transition).await?
    };
    let Some(updated) = updated else {
        return refused(tx, &transition, by.user_id(), action).await;
    };
    faults.check(Step::AfterTransition).await?;
    let item = &updated.item;
    // An expert's action on an item on hold stops the hold (the autopilot's own release
    // ends it by sending).
    let hold_stopped = updated.was == AutoPending && expert.is_some();

    let mut events = vec![Event::QueueItemUpdated(QueueItemEvent {
        id: item.id,
        conversation_id: item.conversation_id,
        status: item.status,
        version: item.version,
        claimed_by: item.claimed_by,
        flagged_for_review: item.flagged_for_review,
        send_at: item.send_at,
        autopilot_rule: item.autopilot_rule.clone(),
    })];
    let trace_id = trace::current().map(|t| t.trace_id());
    let stamp = Stamp {
        pod,
        trace_id: trace_id.as_deref(),
    };
    if let Some(user_id) = holder.filter(|_| item.status == Claimed) {
        let by = ClaimedBy {
            user_id,
            assigned_by: match action {
                Action::Assign { .. } => by.user_id(),
                _ => None,
            },
        };
        message_journey::claimed(&mut *tx, item.id, by, stamp).await?;
    }
    let mut reply_out = None;
    let mut corrects = None;
    if needs_reply {
        if expert.is_some() {
            corrects =
                outbox::recent_autopilot_reply(&mut *tx, item.conversation_id, UNDONE_WITHIN)
                    .await?;
        }
        let body = updated.reply.clone().unwrap_or_default();
        let author = match action {
            Action::Release { body: None } => Author::Agent,
            Action::Release { body: Some(b) } if Some(b) == updated.draft.as_ref() => Author::Agent,
            _ => Author::Expert,
        };
        // The id is chosen here and `created_at` is the transaction's time, so the events
        // below name the message without reading it back.
        let message_id = Uuid::new_v4();
        let inserted = outbox::insert_reply(
            &mut *tx,
            NewReply {
                message_id,
                conversation_id: item.conversation_id,
                author,
                user_id: by.user_id(),
                body: &body,
                answers: updated.answers,
            },
        )
        .await?;
        // The release is a trace of its own (the request's), linked to the event's.
        trace::link(&tracing::Span::current(), inserted.answers_trace.as_ref());
        let released_by = match by {
            By::Expert(actor) => ReleasedBy::User(actor.user_id),
            By::Autopilot { rule } => ReleasedBy::Autopilot { rule },
        };
        let made_of = match (action, author) {
            (Action::Release { .. }, Author::Agent) => "draft",
            (Action::Release { .. }, _) => "edited",
            _ => "own",
        };
        message_journey::released(&mut *tx, message_id, released_by, made_of, stamp).await?;
        let outbox_id = inserted.outbox_id;
        faults.check(Step::AfterOutbox).await?;
        let summary = MessageSummary {
            id: message_id,
            author,
            body,
            delivery_status: Some(DeliveryStatus::Queued),
            created_at: updated.at,
        };
        events.push(Event::MessageCreated(MessageCreated {
            conversation_id: item.conversation_id,
            message_id,
        }));
        events.push(Event::AgentMessageSent(AgentMessageSent {
            queue_item_id: item.id,
            conversation_id: item.conversation_id,
            message: summary.clone(),
        }));
        reply_out = Some(Reply {
            message: summary,
            outbox_id,
        });
    }
    let mut details = json!({"to": item.status.as_str(), "version": item.version});
    if let Some(r) = &reply_out {
        details["message_id"] = json!(r.message.id);
        details["outbox_id"] = json!(r.outbox_id);
        // What the reports page counts (`report_metrics`): what the reply was made of, and
        // the deadline it was released against (a later customer message moves it).
        details["reply"] = json!(match action {
            Action::Release { .. } if r.message.author == Author::Agent => "draft",
            Action::Release { .. } => "edited",
            _ => "own",
        });
        details["sla_due_at"] = json!(item.sla_due_at);
    }
    if let Action::Assign { user_id } = action {
        details["assignee"] = json!(user_id);
    }
    if let By::Autopilot { rule } = by {
        details["by"] = json!("autopilot");
        details["rule"] = json!(rule);
    }
    if hold_stopped {
        details["hold_stopped"] = json!(true);
    }
    audit::record_with_events(
        &mut *tx,
        AuditActor {
            org_id: Some(org_id),
            user_id: by.user_id(),
            request_id: expert.and_then(|a| a.request_id.as_deref()),
        },
        &format!("queue_item.{}", action.name()),
        Some(("expert_queue", item_id)),
        details,
        &events,
    )
    .await?;
    faults.check(Step::AfterEvents).await?;
    Ok(Done {
        item: updated.item,
        reply: reply_out,
        changed: true,
        hold_stopped,
        corrects,
    })
}

/// A reopen inside a savepoint: reopening a resolved item while the conversation has a
/// newer live one breaks the one-live-item index (AA5), and the failed statement must not
/// abort the caller's transaction, which then reads what to answer.
async fn reopen(
    tx: &mut PgConnection,
    transition: &Change<'_>,
) -> Result<Option<expert_queue::Transitioned>, ActionError> {
    use sqlx::Connection;
    let mut savepoint = tx.begin().await?;
    match expert_queue::transition(&mut *savepoint, transition).await {
        Ok(updated) => {
            savepoint.commit().await?;
            Ok(updated)
        }
        Err(StoreError::Conflict) => {
            savepoint.rollback().await?;
            let current = expert_queue::current(&mut *tx, transition.org_id, transition.id)
                .await?
                .ok_or(ActionError::NotFound)?;
            let live_item_id = expert_queue::live_sibling(&mut *tx, transition.id)
                .await?
                .ok_or(ActionError::Conflict(current))?;
            Err(ActionError::LiveItem {
                current,
                live_item_id,
            })
        }
        Err(e) => Err(e.into()),
    }
}

/// Explains why a transition matched no row: the item is gone, in another state (a
/// conflict carrying its state now), at another version than the client saw, or without a
/// current draft to send; except that claiming an item one already holds (a repeated click)
/// is a success that changes nothing.
async fn refused(
    tx: &mut PgConnection,
    transition: &Change<'_>,
    user_id: Option<Uuid>,
    action: &Action,
) -> Result<Done, ActionError> {
    let refusal = expert_queue::explain(&mut *tx, transition)
        .await?
        .ok_or(ActionError::NotFound)?;
    if let Refusal::State(current) = &refusal {
        if *action == Action::Claim
            && current.status == Claimed
            && current.claimed_by.is_some()
            && current.claimed_by == user_id
            && transition.if_match.is_none_or(|v| v == current.version)
        {
            let item = expert_queue::get(&mut *tx, transition.id)
                .await?
                .ok_or(ActionError::NotFound)?;
            return Ok(Done {
                item,
                reply: None,
                changed: false,
                hold_stopped: false,
                corrects: None,
            });
        }
    }
    if let Refusal::State(current) = refusal {
        return Err(ActionError::Conflict(current));
    }
    let item = Box::new(
        expert_queue::get(&mut *tx, transition.id)
            .await?
            .ok_or(ActionError::NotFound)?,
    );
    Err(match refusal {
        Refusal::State(current) => ActionError::Conflict(current),
        Refusal::Version => ActionError::Precondition(item),
        Refusal::NoDraft => ActionError::NoDraft(item),
        Refusal::StaleDraft => ActionError::StaleDraft(item),
    })
}

/// After the commit: push the reply's `channel-outbound` job (the outbox sweeper covers a
/// failed push) and wake the realtime relay.
pub async fn after_commit(deps: &Deps, done: &Done) {
    if !done.changed {
        return;
    }
    if done.hold_stopped {
        metrics::counter!("autopilot_holds_stopped_total", "by" => "expert").increment(1);
    }
    if let (Some(undone), Some(reply)) = (done.corrects, &done.reply) {
        metrics::counter!("autopilot_undone_total").increment(1);
        let org = done.item.org_id.to_string();
        let message = format!(
            "an expert wrote to the customer of conversation {} within 10 minutes of the autopilot's reply {undone}",
            done.item.conversation_id
        );
        deps.alerts
            .raise_alert(switchboard_jobs::alerts::Alert {
                kind: switchboard_domain::alerts::AlertKind::AutopilotUndone,
                scope: &org,
                org_id: Some(done.item.org_id),
                message: &message,
                details: json!({
                    "conversation_id": done.item.conversation_id,
                    "autopilot_message_id": undone,
                    "expert_message_id": reply.message.id,
                }),
            })
            .await;
    }
    if let Some(reply) = &done.reply {
        if let Err(e) = deps.outbound.push_rows(&[reply.outbox_id]).await {
            tracing::warn!(outbox_id = %reply.outbox_id, error = %e, "could not push the outbound job; the outbox sweeper will");
        }
    }
    deps.emitter.wake();
}
