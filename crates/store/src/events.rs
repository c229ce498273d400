//! The event log (`events`, `org_event_seq`): per-org sequence numbers that are gap-free and
//! race-free across pods, and the replay read behind `GET /events`.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use uuid::Uuid;

/// One stored event, as `GET /events` returns it.
#[derive(Debug, Clone, Serialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct StoredEvent {
    /// The org's sequence number.
    pub seq: i64,
    /// The Socket.IO event name.
    pub event: String,
    /// Exactly the payload the socket received (it carries `org_id` and `seq`).
    pub data: Value,
    /// When the number was allocated.
    pub created_at: DateTime<Utc>,
}

/// The result of [`append`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// The event's number.
    pub seq: i64,
    /// False when the same event had been stored before (a retried emit); it keeps its
    /// first number.
    pub fresh: bool,
}

/// The payload sent on the wire: the flow's payload with `org_id` and `seq` added (a
/// non-object payload is wrapped as `data`).
pub fn wire_payload(org_id: Uuid, seq: i64, payload: &Value) -> Value {
    let mut object = match payload {
        Value::Object(map) => map.clone(),
        other => {
            let mut map = Map::new();
            map.insert("data".into(), other.clone());
            map
        }
    };
    object.insert("org_id".into(), json!(org_id));
    object.insert("seq".into(), json!(seq));
    Value::Object(object)
}

/// Identifies an event by its name and content: the flows' payloads name the rows they
/// describe (ids, versions), so the same event emitted twice hashes the same.
pub fn dedup_key(event: &str, payload: &Value) -> String {
    let mut hash = Sha256::new();
    hash.update(event.as_bytes());
    hash.update(b"\n");
    hash.update(payload.to_string().as_bytes());
    format!("{event}:{}", hex::encode(hash.finalize()))
}

/// Allocates the org's next number and stores the event; see [`append_batch`].
pub async fn append(
    pool: &PgPool,
    org_id: Uuid,
    event: &str,
    payload: &Value,
) -> Result<Appended, sqlx::Error> {
    let appended = append_batch(pool, org_id, &[(event, payload)]).await?;
    appended
        .into_iter()
        .next()
        .ok_or_else(|| sqlx::Error::Protocol("append_batch returned nothing".into()))
}

/// Stores several events of one org in one transaction and returns their numbers in input
/// order; see [`append_in`].
pub async fn append_batch(
    pool: &PgPool,
    org_id: Uuid,
    events: &[(&str, &Value)],
) -> Result<Vec<Appended>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let out = append_in(&mut tx, org_id, events).await?;
    tx.commit().await?;
    Ok(out)
}

/// Numbers and stores events of one org inside the caller's transaction, in one statement
/// (the relay runs it once per org and batch). The counter row is locked by its upsert, so
/// the org's numbering is serialised and numbers are committed in order. Events stored
/// before (a retried emit, matched by [`dedup_key`]) keep their first number and take none,
/// and so does a repeat inside the batch, so the sequence has no gaps.
pub async fn append_in(
    tx: &mut sqlx::PgConnection,
    org_id: Uuid,
    events: &[(&str, &Value)],
) -> Result<Vec<Appended>, sqlx::Error> {
    let names: Vec<&str> = events.iter().map(|(e, _)| *e).collect();
    let keys: Vec<String> = events.iter().map(|(e, p)| dedup_key(e, p)).collect();
    let payloads: Vec<&Value> = events.iter().map(|(_, p)| *p).collect();
    let rows: Vec<(i64, bool)> = sqlx::query_as(
        "WITH input AS (
           SELECT e, k, p, i FROM UNNEST($2::text[], $3::text[], $4::jsonb[])
                  WITH ORDINALITY AS t(e, k, p, i)),
         known AS (
           SELECT dedup_key, seq FROM events WHERE org_id = $1 AND dedup_key = ANY($3)),
         firsts AS (
           SELECT DISTINCT ON (k) e, k, p, i FROM input
           WHERE k NOT IN (SELECT dedup_key FROM known) ORDER BY k, i),
         counter AS (
           INSERT INTO org_event_seq AS s (org_id, seq, numbered_at)
           SELECT $1, n, now() FROM (SELECT count(*) AS n FROM firsts) c WHERE n > 0
           ON CONFLICT (org_id) DO UPDATE SET seq = s.seq + EXCLUDED.seq, numbered_at = now()
           RETURNING s.seq AS last),
         numbered AS (
           SELECT f.k, f.i, (SELECT last FROM counter) - (SELECT count(*) FROM firsts)
                            + row_number() OVER (ORDER BY f.i) AS seq, f.e, f.p
           FROM firsts f),
         stored AS (
           INSERT INTO events (org_id, seq, event, dedup_key, payload)
           SELECT $1, seq, e, k, p FROM numbered)
         SELECT COALESCE(kn.seq, nb.seq), COALESCE(nb.i = input.i, false)
         FROM input LEFT JOIN known kn ON kn.dedup_key = input.k
                    LEFT JOIN numbered nb ON nb.k = input.k
         ORDER BY input.i",
    )
    .bind(org_id)
    .bind(&names)
    .bind(&keys)
    .bind(&payloads)
    .fetch_all(&mut *tx)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(seq, fresh)| Appended { seq, fresh })
        .collect())
}

/// Up to `limit` events of `org_id` with `seq > after`, in order.
pub async fn after(
    pool: &PgPool,
    org_id: Uuid,
    after: i64,
    limit: i64,
) -> Result<Vec<StoredEvent>, sqlx::Error> {
    let rows: Vec<(i64, String, Value, DateTime<Utc>)> = sqlx::query_as(
        "SELECT seq, event, payload, created_at FROM events
         WHERE org_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
    )
    .bind(org_id)
    .bind(after)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(seq, event, payload, created_at)| StoredEvent {
            seq,
            data: wire_payload(org_id, seq, &payload),
            event,
            created_at,
        })
        .collect())
}

/// The org's last allocated number (0 before its first event).
pub async fn latest_seq(pool: &PgPool, org_id: Uuid) -> Result<i64, sqlx::Error> {
    let seq: Option<i64> = sqlx::query_scalar("SELECT seq FROM org_event_seq WHERE org_id = $1")
        .bind(org_id)
        .fetch_optional(pool)
        .await?;
    Ok(seq.unwrap_or(0))
}

/// Deletes events created before `cutoff`, in batches so no statement holds many locks;
/// returns how many went. The counters stay, so numbering continues where it was.
pub async fn delete_before(pool: &PgPool, cutoff: DateTime<Utc>) -> Result<u64, sqlx::Error> {
    const BATCH: i64 = 5_000;
    let mut total = 0;
    loop {
        let deleted = sqlx::query(
            "DELETE FROM events WHERE (org_id, seq) IN (
               SELECT org_id, seq FROM events WHERE created_at < $1 LIMIT $2)",
        )
        .bind(cutoff)
        .bind(BATCH)
        .execute(pool)
        .await?
        .rows_affected();
        total += deleted;
        if deleted < BATCH.unsigned_abs() {
            return Ok(total);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_payload_adds_org_and_seq() {
        let org = Uuid::new_v4();
        let wire = wire_payload(org, 7, &json!({"id": "q1", "seq": "spoofed"}));
        assert_eq!(wire, json!({"id": "q1", "org_id": org, "seq": 7}));
        assert_eq!(
            wire_payload(org, 1, &json!("x")),
            json!({"data": "x", "org_id": org, "seq": 1})
        );
    }

    #[test]
    fn dedup_key_depends_on_event_and_content() {
        let a = dedup_key("message_created", &json!({"message_id": 1}));
        assert_eq!(a, dedup_key("message_created", &json!({"message_id": 1})));
        assert_ne!(a, dedup_key("message_created", &json!({"message_id": 2})));
        assert_ne!(
            a,
            dedup_key("agent_message_sent", &json!({"message_id": 1}))
        );
        assert!(a.starts_with("message_created:"));
    }
}
