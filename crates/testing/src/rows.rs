//! What the tests read back or emit: an outbox row with its message, and realtime events
//! of the shapes the flows emit, each told apart by a fresh id.

use crate::TestDb;
use serde_json::Value;
use switchboard_domain::events::{
    AgentMessageSent, MessageCreated, MessageSummary, QueueItemEvent,
};
use switchboard_domain::{Author, DeliveryStatus, Event, QueueStatus};
use uuid::Uuid;

/// One outbox row with its message, as the tests check them.
#[derive(Debug, sqlx::FromRow)]
pub struct Delivery {
    pub outbox_status: String,
    pub attempts: i32,
    pub parts: Value,
    pub provider_id: Option<String>,
    pub delivery_status: Option<String>,
    pub provider_message_id: Option<String>,
    pub delivered: bool,
    pub delivery_error: Option<String>,
}

/// Outbox row `outbox_id` and its message.
pub async fn delivery(db: &TestDb, outbox_id: Uuid) -> Delivery {
    let pool = db.pool().await;
    let row = sqlx::query_as(
        "SELECT o.status AS outbox_status, o.attempts, o.parts, o.provider_id, m.delivery_status,
                m.provider_message_id, m.delivered_at IS NOT NULL AS delivered, m.delivery_error
         FROM outbox o JOIN messages m ON m.id = o.message_id WHERE o.id = $1",
    )
    .bind(outbox_id)
    .fetch_one(&pool)
    .await
    .unwrap();
    pool.close().await;
    row
}

/// Awaits outbox row `outbox_id` in `status` (30 s at most); then the row.
pub async fn wait_outbox(db: &TestDb, outbox_id: Uuid, status: &str) -> Delivery {
    let sql =
        format!("SELECT count(*) FROM outbox WHERE id = '{outbox_id}' AND status = '{status}'");
    db.wait_for_count(&sql, 1).await;
    delivery(db, outbox_id).await
}

/// What a test that sent `n` webhooks through a disruption ([`crate::Load`]) checks once
/// they were all accepted: every event processed (while the backlog drains: see
/// [`TestDb::wait_while_moving`]), and each stored once as one inbound message.
pub async fn assert_each_event_once(db: &TestDb, n: i64) {
    let processed = "SELECT count(*) FROM inbound_events WHERE processed_at IS NOT NULL";
    assert_eq!(
        db.wait_while_moving(processed, n).await,
        n,
        "every accepted event processed"
    );
    assert_eq!(db.count("SELECT count(*) FROM inbound_events").await, n);
    let messages = "SELECT count(*) FROM messages WHERE direction = 'inbound'";
    assert_eq!(db.count(messages).await, n, "one message per event");
}

/// `message_created` for message `id` (of a conversation of its own).
pub fn message_created(id: Uuid) -> Event {
    Event::MessageCreated(MessageCreated {
        conversation_id: Uuid::new_v4(),
        message_id: id,
    })
}

/// `queue_item_updated` for item `id` at `version`.
pub fn queue_item_updated(id: Uuid, version: i32) -> Event {
    Event::QueueItemUpdated(QueueItemEvent {
        id,
        conversation_id: Uuid::new_v4(),
        status: QueueStatus::Pending,
        version,
        claimed_by: None,
        flagged_for_review: false,
        send_at: None,
        autopilot_rule: None,
    })
}

/// `agent_message_sent` for reply `id`.
pub fn agent_message_sent(id: Uuid) -> Event {
    Event::AgentMessageSent(AgentMessageSent {
        queue_item_id: Uuid::new_v4(),
        conversation_id: Uuid::new_v4(),
        message: MessageSummary {
            id,
            author: Author::Agent,
            body: "Happy to help!".into(),
            delivery_status: Some(DeliveryStatus::Queued),
            created_at: chrono::Utc::now(),
        },
    })
}
