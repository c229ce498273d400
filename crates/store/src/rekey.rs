//! Which master key holds which stored secret, and moving them all to the current one: the
//! work behind `switchboard admin reencrypt` and the pod's start-up check that every stored
//! secret is under a key it has (a missing key would otherwise surface only as replies
//! dead-lettered one by one, and webhooks refused, long after the deploy).
//!
//! Re-encryption runs online beside the pods. Rows are read in batches in id order, and a
//! batch is written back by one statement that changes a row only while it still holds the
//! ciphertext that was read: a secret a pod wrote meanwhile (a rotated provider token) is
//! never replaced by the older one. Rows already under the current key are not read at
//! all, so running it again finishes at once.

use crate::StoreError;
use crate::crypto::{HEADER_LEN, KeyId, MAGIC, SecretCipher};
use sqlx::PgPool;
use std::collections::BTreeMap;
use uuid::Uuid;

/// A column of secrets sealed by [`SecretCipher`] with its row's `id` (a uuid) as the row.
#[derive(Debug, Clone, Copy)]
pub struct SealedColumn {
    /// The table.
    pub table: &'static str,
    /// The `bytea` column; `NULL` means no secret.
    pub column: &'static str,
}

impl std::fmt::Display for SealedColumn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.table, self.column)
    }
}

/// Every sealed column. A new one belongs here, or re-encryption and the start-up check
/// leave it out: the key-rotation tests hold this list against the schema's `bytea` columns.
pub const SEALED_COLUMNS: &[SealedColumn] = &[SealedColumn {
    table: "channel_connections",
    column: "secrets_ciphertext",
}];

/// How many stored secrets each master key holds, over every sealed column.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Census {
    /// By key id.
    pub by_key: BTreeMap<KeyId, i64>,
    /// Written before key ids: opened by trying each key.
    pub legacy: i64,
}

impl Census {
    /// The key ids that `cipher` does not have, with how many secrets each holds.
    pub fn unknown(&self, cipher: &SecretCipher) -> Vec<(KeyId, i64)> {
        self.by_key
            .iter()
            .filter(|(id, _)| !cipher.knows(**id))
            .map(|(id, n)| (*id, *n))
            .collect()
    }

    /// Secrets not under `cipher`'s current key.
    pub fn not_current(&self, cipher: &SecretCipher) -> i64 {
        let current = cipher.current();
        self.legacy
            + self
                .by_key
                .iter()
                .filter(|(id, _)| **id != current)
                .map(|(_, n)| n)
                .sum::<i64>()
    }
}

/// Counts the stored secrets by key id. One grouped query per column: only the headers
/// leave Postgres.
pub async fn census(pool: &PgPool) -> Result<Census, StoreError> {
    let mut census = Census::default();
    for SealedColumn { table, column } in SEALED_COLUMNS {
        let heads: Vec<(Option<Vec<u8>>, i64)> = sqlx::query_as(&format!(
            "SELECT CASE WHEN substring({column} FROM 1 FOR {magic}) = $1
                    THEN substring({column} FROM 1 FOR {HEADER_LEN}) END, count(*)
             FROM {table} WHERE {column} IS NOT NULL GROUP BY 1",
            magic = MAGIC.len()
        ))
        .bind(&MAGIC[..])
        .fetch_all(pool)
        .await?;
        for (head, n) in heads {
            match head.as_deref().and_then(KeyId::in_header) {
                Some(id) => *census.by_key.entry(id).or_default() += n,
                None => census.legacy += n,
            }
        }
    }
    Ok(census)
}

/// Of the first `sample` stored secrets from before key ids in each column, how many none
/// of `cipher`'s keys opens (a key id names its key; these must be tried). A missing key
/// fails every row it wrote, so a sample finds it without decrypting a whole table at every
/// start; `admin reencrypt` reads them all.
pub async fn unreadable_legacy(
    pool: &PgPool,
    cipher: &SecretCipher,
    sample: i64,
) -> Result<i64, StoreError> {
    let mut unreadable = 0;
    for column in SEALED_COLUMNS {
        let rows = legacy_batch(pool, column, Uuid::nil(), sample).await?;
        unreadable += rows
            .iter()
            .filter(|(id, stored)| {
                KeyId::in_header(stored).is_none() && cipher.open(*id, stored).is_err()
            })
            .count() as i64;
    }
    Ok(unreadable)
}

/// Up to `limit` rows of `column` after `after` whose value does not start like a header.
async fn legacy_batch(
    pool: &PgPool,
    SealedColumn { table, column }: &SealedColumn,
    after: Uuid,
    limit: i64,
) -> Result<Vec<(Uuid, Vec<u8>)>, StoreError> {
    Ok(sqlx::query_as(&format!(
        "SELECT id, {column} FROM {table}
         WHERE id > $1 AND {column} IS NOT NULL AND substring({column} FROM 1 FOR {magic}) <> $2
         ORDER BY id LIMIT $3",
        magic = MAGIC.len()
    ))
    .bind(after)
    .bind(&MAGIC[..])
    .bind(limit)
    .fetch_all(pool)
    .await?)
}

/// Where the re-encryption of one column stands.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Progress {
    /// `table.column`.
    pub column: String,
    /// Secrets not under the current key when the column's run began.
    pub to_do: i64,
    /// Rows read so far.
    pub read: i64,
    /// Rewritten under the current key.
    pub rewritten: i64,
    /// Replaced by another writer between the read and the write, so left as that writer
    /// put them (a pod seals under its own first key: run again if pods still had another).
    pub changed_meanwhile: i64,
    /// No configured key opens them: left as they are.
    pub unreadable: i64,
}

/// Rewrites every stored secret that is not under `cipher`'s current key with it, `batch`
/// rows per statement; calls `report` after each batch. Returns each column's totals.
pub async fn reencrypt(
    pool: &PgPool,
    cipher: &SecretCipher,
    batch: i64,
    mut report: impl FnMut(&Progress),
) -> Result<Vec<Progress>, StoreError> {
    let header = cipher.current().header();
    let mut done = Vec::with_capacity(SEALED_COLUMNS.len());
    for sealed in SEALED_COLUMNS {
        let SealedColumn { table, column } = sealed;
        let not_current =
            format!("{column} IS NOT NULL AND substring({column} FROM 1 FOR {HEADER_LEN}) <> $1");
        let to_do: i64 =
            sqlx::query_scalar(&format!("SELECT count(*) FROM {table} WHERE {not_current}"))
                .bind(&header[..])
                .fetch_one(pool)
                .await?;
        let mut progress = Progress {
            column: sealed.to_string(),
            to_do,
            ..Progress::default()
        };
        let mut after = Uuid::nil();
        loop {
            let rows: Vec<(Uuid, Vec<u8>)> = sqlx::query_as(&format!(
                "SELECT id, {column} FROM {table} WHERE {not_current} AND id > $2
                 ORDER BY id LIMIT $3"
            ))
            .bind(&header[..])
            .bind(after)
            .bind(batch.max(1))
            .fetch_all(pool)
            .await?;
            let Some((last, _)) = rows.last() else { break };
            after = *last;
            progress.read += rows.len() as i64;
            let (mut ids, mut old, mut new) = (Vec::new(), Vec::new(), Vec::new());
            for (id, stored) in rows {
                let Ok(plain) = cipher.open(id, &stored) else {
                    progress.unreadable += 1;
                    continue;
                };
                new.push(cipher.seal(id, &plain)?);
                ids.push(id);
                old.push(stored);
            }
            let written = sqlx::query(&format!(
                "UPDATE {table} AS t SET {column} = v.new
                 FROM unnest($1::uuid[], $2::bytea[], $3::bytea[]) AS v(id, old, new)
                 WHERE t.id = v.id AND t.{column} = v.old"
            ))
            .bind(&ids)
            .bind(&old)
            .bind(&new)
            .execute(pool)
            .await?
            .rows_affected() as i64;
            progress.rewritten += written;
            progress.changed_meanwhile += ids.len() as i64 - written;
            report(&progress);
        }
        done.push(progress);
    }
    Ok(done)
}
