//! What streamed exports read: sections of text rows from one read-only, repeatable-read
//! transaction, so every section of an export sees the same snapshot. The statements are
//! the tables' own (`customers::export`, `audit::export_sections`); this module only runs
//! them, a row at a time, never a whole result at once.

use crate::StoreError;
use futures::{Stream, TryStreamExt};
use sqlx::{PgPool, Postgres, Transaction};
use uuid::Uuid;

/// One part of an export: a statement whose rows are each one column of text (a JSON
/// record, or a CSV line), and its parameters.
#[derive(Debug, Clone)]
pub struct Section {
    /// The record name (the document's key, NDJSON's `record`).
    pub name: &'static str,
    /// One row per record, its only column `text`.
    pub sql: String,
    /// Bound in order.
    pub params: Vec<Param>,
    /// A JSON document writes this section as one object, not a list.
    pub single: bool,
}

/// A statement parameter (`None` binds SQL null).
#[allow(missing_docs)] // one per SQL type bound
#[derive(Debug, Clone)]
pub enum Param {
    Uuid(Option<Uuid>),
    Uuids(Option<Vec<Uuid>>),
    Text(Option<String>),
    Time(Option<chrono::DateTime<chrono::Utc>>),
    Int(Option<i64>),
}

type TextQuery<'q> = sqlx::query::QueryScalar<'q, Postgres, String, sqlx::postgres::PgArguments>;

impl Param {
    /// `query` with this parameter bound next.
    fn bind_to(self, query: TextQuery<'_>) -> TextQuery<'_> {
        match self {
            Param::Uuid(v) => query.bind(v),
            Param::Uuids(v) => query.bind(v),
            Param::Text(v) => query.bind(v),
            Param::Time(v) => query.bind(v),
            Param::Int(v) => query.bind(v),
        }
    }
}

/// `section`'s statement with its parameters bound.
fn query(section: &Section) -> TextQuery<'_> {
    section
        .params
        .iter()
        .fold(sqlx::query_scalar(&section.sql), |query, param| {
            param.clone().bind_to(query)
        })
}

/// Every row of `section`, read at once (a page, never a whole export).
pub async fn all(db: &PgPool, section: &Section) -> Result<Vec<String>, StoreError> {
    Ok(query(section).fetch_all(db).await?)
}

/// One read-only, repeatable-read transaction that an export's sections are read in.
pub struct Snapshot(Transaction<'static, Postgres>);

impl Snapshot {
    /// Opens the snapshot.
    pub async fn begin(db: &PgPool) -> Result<Snapshot, StoreError> {
        let mut tx = db.begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await?;
        Ok(Snapshot(tx))
    }

    /// The rows of `section`, as Postgres sends them.
    pub fn rows<'a>(
        &'a mut self,
        section: &'a Section,
    ) -> impl Stream<Item = Result<String, StoreError>> + Send + 'a {
        query(section).fetch(&mut *self.0).map_err(StoreError::from)
    }

    /// Ends the snapshot once every section was read.
    pub async fn finish(self) -> Result<(), StoreError> {
        Ok(self.0.commit().await?)
    }
}
