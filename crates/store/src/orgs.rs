//! Orgs (tenants).

use crate::StoreError;
use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;
use uuid::Uuid;

/// An org row.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct Org {
    /// Primary key.
    pub id: Uuid,
    /// Display name.
    pub name: String,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

/// Creates an org.
pub async fn create(pool: &PgPool, name: &str) -> Result<Org, StoreError> {
    sqlx::query_as("INSERT INTO orgs (name) VALUES ($1) RETURNING id, name, created_at")
        .bind(name)
        .fetch_one(pool)
        .await
        .map_err(StoreError::classify)
}

/// Fetches an org by id.
pub async fn get(pool: &PgPool, id: Uuid) -> Result<Option<Org>, StoreError> {
    Ok(
        sqlx::query_as("SELECT id, name, created_at FROM orgs WHERE id = $1")
            .bind(id)
            .fetch_optional(pool)
            .await?,
    )
}
