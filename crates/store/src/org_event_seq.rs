//! Each org's event numbering: the last number given (`seq`) and how far the relay
//! published (`published_seq`). The numbers themselves are given in `events`.

use serde_json::Value;
use uuid::Uuid;

/// Per org, the last number a pod already delivered to its own sockets (parallel slices).
#[derive(Debug, Clone, Copy, Default)]
pub struct Cursors<'a> {
    /// The orgs.
    pub orgs: &'a [Uuid],
    /// Their numbers, in the same order.
    pub seqs: &'a [i64],
}

/// One numbered event of the log.
#[derive(Debug, Clone, PartialEq)]
pub struct Numbered {
    /// Its org.
    pub org_id: Uuid,
    /// Its number in the org's log.
    pub seq: i64,
    /// The event name.
    pub event: String,
    /// Its payload.
    pub payload: Value,
}

/// Numbered events not yet published (`published_seq < seq`), oldest first per org: per org
/// at most `per_org` after the greater of `published_seq` and the org's cursor, for at most
/// `orgs` orgs, those after `after` first (so the local fallback goes round them all when
/// more wait). One org's backlog never fills the read: a single `LIMIT` over every org
/// served the first orgs' events and starved the rest. An org whose numbers past its cursor
/// are gone from the log (retention) takes no place in it.
pub async fn unpublished<'e>(
    db: impl sqlx::PgExecutor<'e>,
    cursors: Cursors<'_>,
    after: Uuid,
    orgs: i64,
    per_org: i64,
) -> Result<Vec<Numbered>, sqlx::Error> {
    let rows: Vec<(Uuid, i64, String, Value)> = sqlx::query_as(
        "WITH o AS (
           SELECT s.org_id, GREATEST(s.published_seq, d.seq) AS done
           FROM org_event_seq s
           LEFT JOIN UNNEST($1::uuid[], $2::bigint[]) AS d(org_id, seq) ON d.org_id = s.org_id
           WHERE s.published_seq < s.seq AND s.seq > COALESCE(d.seq, 0)
             AND EXISTS (SELECT 1 FROM events e
                         WHERE e.org_id = s.org_id AND e.seq > GREATEST(s.published_seq, d.seq))
           ORDER BY s.org_id <= $3, s.org_id
           LIMIT $4)
         SELECT o.org_id, e.seq, e.event, e.payload
         FROM o CROSS JOIN LATERAL (
           SELECT seq, event, payload FROM events
           WHERE events.org_id = o.org_id AND events.seq > o.done
           ORDER BY seq LIMIT $5) e
         ORDER BY o.org_id, e.seq",
    )
    .bind(cursors.orgs)
    .bind(cursors.seqs)
    .bind(after)
    .bind(orgs)
    .bind(per_org)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(org_id, seq, event, payload)| Numbered {
            org_id,
            seq,
            event,
            payload,
        })
        .collect())
}

/// Moves the mark past numbers the log no longer holds (retention deleted them while nobody
/// could publish): nobody ever can. True when a mark moved.
pub async fn settle_gone(conn: &mut sqlx::PgConnection) -> Result<bool, sqlx::Error> {
    Ok(sqlx::query(
        "UPDATE org_event_seq s SET published_seq = seq
         WHERE published_seq < seq
           AND NOT EXISTS (
             SELECT 1 FROM events e WHERE e.org_id = s.org_id AND e.seq > s.published_seq)",
    )
    .execute(conn)
    .await?
    .rows_affected()
        > 0)
}

/// One org's run of numbers published in one cycle, unbroken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// The org.
    pub org_id: Uuid,
    /// The first number published.
    pub first: i64,
    /// The last.
    pub last: i64,
}

/// Records how far each org's log is published; true when a mark moved.
///
/// The mark moves only over a gap-free prefix: when the log holds numbers between the mark
/// and a run's first that were not published (a batch numbered behind left-overs the cycle
/// did not read), it stays, and the next cycle publishes from the mark on, repeating these
/// rather than skipping those. Numbers the log no longer holds (retention) cannot be
/// published by anyone and do not hold it back. Committed without waiting for the WAL
/// flush: the mark lost to a crash only makes the next relay publish those events again,
/// which the `seq` lets clients drop.
pub async fn mark_published(
    conn: &mut sqlx::PgConnection,
    runs: &[Run],
) -> Result<bool, sqlx::Error> {
    let orgs: Vec<Uuid> = runs.iter().map(|r| r.org_id).collect();
    let firsts: Vec<i64> = runs.iter().map(|r| r.first).collect();
    let lasts: Vec<i64> = runs.iter().map(|r| r.last).collect();
    let moved = sqlx::query(concat!(
        crate::async_commit!(),
        "
         UPDATE org_event_seq s SET published_seq = t.last
         FROM UNNEST($1::uuid[], $2::bigint[], $3::bigint[]) AS t(org_id, first, last),
              async_commit
         WHERE s.org_id = t.org_id AND s.published_seq < t.last
           AND NOT EXISTS (
             SELECT 1 FROM events e
             WHERE e.org_id = t.org_id AND e.seq > s.published_seq AND e.seq < t.first)"
    ))
    .bind(&orgs)
    .bind(&firsts)
    .bind(&lasts)
    .execute(conn)
    .await?
    .rows_affected();
    Ok(moved > 0)
}
