//! Channel connections: an org's provider accounts, with secrets encrypted at rest.

mod secrets;

pub use secrets::{Expiries, PreviousSecret, Secrets};

use crate::StoreError;
use crate::crypto::SecretCipher;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use sqlx::types::Json;
use sqlx::{PgConnection, PgExecutor, PgPool};
use switchboard_domain::ChannelKind;
use uuid::Uuid;

/// A connection without its secrets: the only shape the API ever returns.
#[derive(Debug, Clone, Serialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct Connection {
    /// Primary key; part of the webhook URL.
    pub id: Uuid,
    /// Owning org.
    pub org_id: Uuid,
    /// Which provider.
    pub channel: ChannelKind,
    /// Admin-chosen name, unique per org and channel among live connections.
    pub name: String,
    /// Non-secret settings.
    pub settings: Value,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
    /// Which replaced secrets may still verify webhooks, and until when: names and times,
    /// never values (those are in the encrypted document, see [`Secrets`]). Expired entries
    /// stay until the next write; compare with the time before showing one as active.
    #[serde(skip)]
    pub previous_secrets_expire_at: Json<Expiries>,
}

/// What is needed to create a connection.
#[derive(Debug)]
pub struct NewConnection<'a> {
    /// Owning org.
    pub org_id: Uuid,
    /// Which provider.
    pub channel: ChannelKind,
    /// Display name.
    pub name: &'a str,
    /// The secrets object, already validated for the channel.
    pub secrets: &'a Value,
    /// Non-secret settings.
    pub settings: &'a Value,
}

const COLUMNS: &str =
    "id, org_id, channel, name, settings, created_at, updated_at, previous_secrets_expire_at";

/// Creates a connection, encrypting its secrets. A live connection with the same org,
/// channel and name → [`StoreError::Conflict`].
pub async fn create<'e>(
    db: impl PgExecutor<'e>,
    cipher: &SecretCipher,
    new: NewConnection<'_>,
) -> Result<Connection, StoreError> {
    let id = Uuid::new_v4();
    let plaintext =
        serde_json::to_vec(new.secrets).map_err(|e| StoreError::Unexpected(e.to_string()))?;
    let sealed = cipher.seal(id, &plaintext)?;
    sqlx::query_as(&format!(
        "INSERT INTO channel_connections (id, org_id, channel, name, secrets_ciphertext, settings)
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING {COLUMNS}"
    ))
    .bind(id)
    .bind(new.org_id)
    .bind(new.channel)
    .bind(new.name)
    .bind(sealed)
    .bind(new.settings)
    .fetch_one(db)
    .await
    .map_err(StoreError::from)
}

/// Live connections of the given orgs, newest first.
pub async fn list(pool: &PgPool, org_ids: &[Uuid]) -> Result<Vec<Connection>, StoreError> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM channel_connections
         WHERE org_id = ANY($1) AND deleted_at IS NULL ORDER BY created_at DESC, id"
    ))
    .bind(org_ids)
    .fetch_all(pool)
    .await?)
}

/// A live connection by id.
pub async fn get(pool: &PgPool, id: Uuid) -> Result<Option<Connection>, StoreError> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM channel_connections WHERE id = $1 AND deleted_at IS NULL"
    ))
    .bind(id)
    .fetch_optional(pool)
    .await?)
}

/// A connection row with its encrypted secrets.
#[derive(sqlx::FromRow)]
struct Sealed {
    #[sqlx(flatten)]
    connection: Connection,
    secrets_ciphertext: Vec<u8>,
}

impl Sealed {
    fn open(self, cipher: &SecretCipher) -> Result<(Connection, Secrets), StoreError> {
        let plaintext = cipher.open(self.connection.id, &self.secrets_ciphertext)?;
        let secrets = Secrets::decode(&plaintext, &self.connection.previous_secrets_expire_at)?;
        Ok((self.connection, secrets))
    }
}

/// A live connection together with its decrypted secrets, for the webhook and outbound paths.
pub async fn get_with_secrets(
    pool: &PgPool,
    cipher: &SecretCipher,
    id: Uuid,
) -> Result<Option<(Connection, Secrets)>, StoreError> {
    let row: Option<Sealed> = sqlx::query_as(&format!(
        "SELECT {COLUMNS}, secrets_ciphertext FROM channel_connections
         WHERE id = $1 AND deleted_at IS NULL"
    ))
    .bind(id)
    .fetch_optional(pool)
    .await?;
    row.map(|row| row.open(cipher)).transpose()
}

/// [`get_with_secrets`] in `tx`, with the row locked until it ends: for a change computed
/// from what is stored (a rotation keeps the value it replaces), so two admins' changes
/// apply one after the other and neither is lost.
pub async fn lock_with_secrets(
    tx: &mut PgConnection,
    cipher: &SecretCipher,
    id: Uuid,
) -> Result<Option<(Connection, Secrets)>, StoreError> {
    let row: Option<Sealed> = sqlx::query_as(&format!(
        "SELECT {COLUMNS}, secrets_ciphertext FROM channel_connections
         WHERE id = $1 AND deleted_at IS NULL FOR UPDATE"
    ))
    .bind(id)
    .fetch_optional(&mut *tx)
    .await?;
    row.map(|row| row.open(cipher)).transpose()
}

/// What [`update`] writes; `None` keeps what is stored.
#[derive(Debug, Default)]
pub struct Changes<'a> {
    /// Display name (unique per org and channel among live connections).
    pub name: Option<&'a str>,
    /// Non-secret settings, replaced whole.
    pub settings: Option<&'a Value>,
    /// Every secret, current and replaced, replaced whole (see [`Secrets`]).
    pub secrets: Option<&'a Secrets>,
}

/// Updates a live connection (locked by [`lock_with_secrets`] in the same `tx`); `None`
/// when there is none. A name taken by another live connection → [`StoreError::Conflict`].
pub async fn update(
    tx: &mut PgConnection,
    cipher: &SecretCipher,
    id: Uuid,
    changes: Changes<'_>,
) -> Result<Option<Connection>, StoreError> {
    let (sealed, expiries) = match changes.secrets {
        Some(secrets) => {
            let (document, expiries) = secrets.to_stored();
            let plaintext =
                serde_json::to_vec(&document).map_err(|e| StoreError::Unexpected(e.to_string()))?;
            (Some(cipher.seal(id, &plaintext)?), Some(Json(expiries)))
        }
        None => (None, None),
    };
    Ok(sqlx::query_as(&format!(
        "UPDATE channel_connections
         SET name = COALESCE($2, name), settings = COALESCE($3, settings),
             secrets_ciphertext = COALESCE($4, secrets_ciphertext),
             previous_secrets_expire_at = COALESCE($5, previous_secrets_expire_at),
             updated_at = now()
         WHERE id = $1 AND deleted_at IS NULL RETURNING {COLUMNS}"
    ))
    .bind(id)
    .bind(changes.name)
    .bind(changes.settings)
    .bind(sealed)
    .bind(expiries)
    .fetch_optional(&mut *tx)
    .await?)
}

/// Soft-deletes a live connection; `None` when there was none. Past conversations keep
/// their reference, and the name becomes free again.
pub async fn delete<'e>(
    db: impl PgExecutor<'e>,
    id: Uuid,
) -> Result<Option<Connection>, StoreError> {
    Ok(sqlx::query_as(&format!(
        "UPDATE channel_connections SET deleted_at = now(), updated_at = now()
         WHERE id = $1 AND deleted_at IS NULL RETURNING {COLUMNS}"
    ))
    .bind(id)
    .fetch_optional(db)
    .await?)
}
