//! The realtime relay's lease: one row that says which pod numbers and publishes the
//! event outbox now. The claim and the release commit without waiting for their WAL flush:
//! each busy cycle makes both, on every pod, and a flush each made the lease the hot spot of
//! every release's commit. One lost to a crash only leaves the lease to run out or frees it
//! early, and the numbering statement checks the lease itself.

use crate::org_event_seq::Cursors;
use std::time::Duration;
use uuid::Uuid;

/// What a claim found and took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    /// Numbered events wait unpublished (a relay died or its publish failed).
    pub leftovers: bool,
    /// `None`: nothing to do; `Some(false)`: another pod holds the lease; `Some(true)`: this
    /// holder has it now.
    pub claimed: Option<bool>,
    /// While the pod serves its own sockets from the log: an event is past its cursors.
    pub news: bool,
}

/// Takes the lease for `holder` when there is work: outbox rows, or unpublished numbers
/// while `publishing`. It also says whether numbered events wait unpublished, so the usual
/// cycle skips looking for them, and, while `serving` its own sockets from the log, whether
/// any is past `cursors`.
///
/// The outbox is looked at through its primary key, not with `EXISTS`: every row it ever
/// held is deleted by the relay, and until vacuum a sequential scan reads all of them (1 180
/// pages, 4.5 ms, after a drain), while the index scan marks the dead entries it meets and
/// skips them from then on (17 pages). A concurrent claim by another pod makes this UPDATE
/// wait for it and then look at the row again, so one of them gets it.
pub async fn claim(
    conn: &mut sqlx::PgConnection,
    holder: Uuid,
    lease: Duration,
    publishing: bool,
    serving: bool,
    cursors: Cursors<'_>,
) -> Result<Claim, sqlx::Error> {
    let (leftovers, claimed, news): (bool, Option<bool>, bool) = sqlx::query_as(concat!(
        crate::async_commit!(),
        ", w AS (
           SELECT EXISTS (SELECT 1 FROM org_event_seq WHERE published_seq < seq) AS l,
                  (SELECT id FROM event_outbox ORDER BY id LIMIT 1) IS NOT NULL AS o),
         c AS (
           UPDATE relay_lease
           SET holder = $1, locked_until = now() + make_interval(secs => $2)
           WHERE (SELECT (l AND $3) OR o FROM w) AND (locked_until < now() OR holder = $1)
           RETURNING 1)
         SELECT l, CASE WHEN (l AND $3) OR o THEN EXISTS (SELECT 1 FROM c) END,
                $4 AND l AND EXISTS (
                  SELECT 1 FROM org_event_seq s
                  LEFT JOIN UNNEST($5::uuid[], $6::bigint[]) AS d(org_id, seq)
                    ON d.org_id = s.org_id
                  WHERE s.published_seq < s.seq AND s.seq > COALESCE(d.seq, 0))
         FROM w, async_commit"
    ))
    .bind(holder)
    .bind(lease.as_secs_f64())
    .bind(publishing)
    .bind(serving)
    .bind(cursors.orgs)
    .bind(cursors.seqs)
    .fetch_one(conn)
    .await?;
    Ok(Claim {
        leftovers,
        claimed,
        news,
    })
}

/// Extends `holder`'s lease by `lease` while it still holds it.
pub async fn renew<'e>(
    db: impl sqlx::PgExecutor<'e>,
    holder: Uuid,
    lease: Duration,
) -> Result<(), sqlx::Error> {
    sqlx::query(concat!(
        crate::async_commit!(),
        "UPDATE relay_lease SET locked_until = now() + make_interval(secs => $2)
         FROM async_commit WHERE holder = $1 AND locked_until > now()"
    ))
    .bind(holder)
    .bind(lease.as_secs_f64())
    .execute(db)
    .await?;
    Ok(())
}

/// Lets go at once, so the next commit on any pod is relayed without waiting for the lease
/// to run out.
pub async fn release(conn: &mut sqlx::PgConnection, holder: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query(concat!(
        crate::async_commit!(),
        "UPDATE relay_lease SET locked_until = '-infinity'
         FROM async_commit WHERE holder = $1"
    ))
    .bind(holder)
    .execute(conn)
    .await?;
    Ok(())
}
