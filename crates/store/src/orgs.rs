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
        .map_err(StoreError::from)
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

/// An org's settings.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct OrgSettings {
    /// The org.
    pub id: Uuid,
    /// Display name.
    pub name: String,
    /// IANA time zone its daily and weekly reports are cut in (default `UTC`).
    pub time_zone: String,
}

/// An org's settings.
pub async fn settings(pool: &PgPool, id: Uuid) -> Result<Option<OrgSettings>, StoreError> {
    Ok(
        sqlx::query_as("SELECT id, name, time_zone FROM orgs WHERE id = $1")
            .bind(id)
            .fetch_optional(pool)
            .await?,
    )
}

/// Sets an org's time zone (the caller has checked the name); `None` when the org is gone.
pub async fn set_time_zone(
    pool: &PgPool,
    id: Uuid,
    time_zone: &str,
) -> Result<Option<OrgSettings>, StoreError> {
    sqlx::query_as("UPDATE orgs SET time_zone = $2 WHERE id = $1 RETURNING id, name, time_zone")
        .bind(id)
        .bind(time_zone)
        .fetch_optional(pool)
        .await
        .map_err(StoreError::from)
}
