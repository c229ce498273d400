//! Rows written straight to the database, for tests whose subject starts after them: a
//! member to log in as, queue items waiting for an expert.

use crate::TestDb;
use serde_json::Value;
use switchboard_domain::Role;
use uuid::Uuid;

/// Creates an org (or uses `org`) and a member with `role`; returns (org id, email, password).
pub async fn seed_member(db: &TestDb, org: Option<Uuid>, role: Role) -> (Uuid, String, String) {
    let pool = db.pool().await;
    let org_id = match org {
        Some(id) => id,
        None => {
            switchboard_store::orgs::create(&pool, "Test Org")
                .await
                .expect("org")
                .id
        }
    };
    let email = format!("{}@example.test", Uuid::new_v4().simple());
    let password = "correct horse battery".to_owned();
    let hash = switchboard_store::users::hash_password(&password).expect("hash");
    let (user, _) = switchboard_store::users::create(&pool, &email, &hash)
        .await
        .expect("user");
    switchboard_store::users::add_member(&pool, org_id, user.id, role)
        .await
        .expect("member");
    pool.close().await;
    (org_id, email, password)
}

/// The id of the user with `email`.
pub async fn user_id(db: &TestDb, email: &str) -> Uuid {
    let pool = db.pool().await;
    let id = sqlx::query_scalar("SELECT id FROM users WHERE lower(email) = lower($1)")
        .bind(email)
        .fetch_one(&pool)
        .await
        .expect("user id");
    pool.close().await;
    id
}

/// Seeds `n` pending expert-queue items for `org` on its Slack connection `connection` (each
/// with its customer, conversation, inbound message and draft), created one millisecond
/// apart, the newest now; returns their ids, oldest first.
pub async fn seed_queue_items(db: &TestDb, org: Uuid, connection: Uuid, n: i64) -> Vec<Uuid> {
    let reply_to = serde_json::json!({"channel": "C1", "thread_ts": "1.5"});
    seed_items(db, org, "slack", connection, reply_to, n).await
}

/// A pending queue item on `conn` of `channel` (customer, conversation, inbound message
/// with `reply_to`, draft "It ships tomorrow."), for tests where the inbound flow is not the
/// subject.
pub async fn seed_item(db: &TestDb, org: Uuid, channel: &str, conn: Uuid, reply_to: Value) -> Uuid {
    seed_items(db, org, channel, conn, reply_to, 1).await[0]
}

async fn seed_items(
    db: &TestDb,
    org: Uuid,
    channel: &str,
    conn: Uuid,
    reply_to: Value,
    n: i64,
) -> Vec<Uuid> {
    let pool = db.pool().await;
    let tag = Uuid::new_v4().simple().to_string();
    let ids: Vec<Uuid> = sqlx::query_scalar(
        "WITH cu AS (
           INSERT INTO customers (org_id, channel, external_id, display_name)
           SELECT $1, $2::channel_kind, $4 || '-' || i, 'Customer ' || i
           FROM generate_series(1, $6) i
           RETURNING id, external_id
         ), conv AS (
           INSERT INTO conversations (org_id, customer_id, channel, connection_id)
           SELECT $1, cu.id, $2::channel_kind, $3 FROM cu RETURNING id, customer_id
         ), msg AS (
           INSERT INTO messages (org_id, conversation_id, direction, author, body, channel,
                                 channel_message_id, reply_to)
           SELECT $1, conv.id, 'inbound', 'customer', 'Where is my order?', $2::channel_kind,
                  conv.id::text, $5
           FROM conv RETURNING id, conversation_id
         ), d AS (
           INSERT INTO drafts (org_id, conversation_id, message_id, body, confidence)
           SELECT $1, conversation_id, id, 'It ships tomorrow.', 0.8 FROM msg
           RETURNING id, conversation_id, message_id, body, confidence
         )
         INSERT INTO expert_queue (org_id, conversation_id, draft_id, draft_message_id, draft_body,
                                   draft_confidence, created_at, updated_at)
         SELECT $1, d.conversation_id, d.id, d.message_id, d.body, d.confidence,
                clock_timestamp() - (($6 - row_number() OVER ()) || ' ms')::interval,
                clock_timestamp() - (($6 - row_number() OVER ()) || ' ms')::interval
         FROM d
         RETURNING id",
    )
    .bind(org)
    .bind(channel)
    .bind(conn)
    .bind(tag)
    .bind(reply_to)
    .bind(n)
    .fetch_all(&pool)
    .await
    .unwrap();
    let ordered: Vec<Uuid> = sqlx::query_scalar(
        "SELECT id FROM expert_queue WHERE id = ANY($1) ORDER BY created_at, id",
    )
    .bind(&ids)
    .fetch_all(&pool)
    .await
    .unwrap();
    pool.close().await;
    ordered
}
