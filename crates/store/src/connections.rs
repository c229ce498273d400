//! Channel connections: an org's provider accounts, with secrets encrypted at rest.

use crate::StoreError;
use crate::crypto::SecretCipher;
use crate::model::ChannelKind;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use sqlx::PgPool;
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

const COLUMNS: &str = "id, org_id, channel, name, settings, created_at, updated_at";

/// Creates a connection, encrypting its secrets. A live connection with the same org,
/// channel and name → [`StoreError::Conflict`].
pub async fn create(
    pool: &PgPool,
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
    .fetch_one(pool)
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

/// A connection's decrypted secrets. Neither `Debug` nor any formatting shows them, and
/// they do not serialize: reaching the values takes an explicit [`Secrets::expose`], so a
/// stray `{:?}` in a log line or an error prints `Secrets(..)`.
pub struct Secrets(Value);

impl Secrets {
    /// Wraps decrypted secrets.
    pub fn new(value: Value) -> Self {
        Self(value)
    }

    /// The secret values, for the one call that needs them (a signature check, an API call).
    pub fn expose(&self) -> &Value {
        &self.0
    }
}

/// Comparing shows nothing (e.g. whether stored secrets are the ones about to be written).
impl PartialEq<Value> for Secrets {
    fn eq(&self, other: &Value) -> bool {
        self.0 == *other
    }
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secrets(..)")
    }
}

/// A live connection together with its decrypted secrets, for the webhook and outbound paths.
pub async fn get_with_secrets(
    pool: &PgPool,
    cipher: &SecretCipher,
    id: Uuid,
) -> Result<Option<(Connection, Secrets)>, StoreError> {
    #[derive(sqlx::FromRow)]
    struct Row {
        #[sqlx(flatten)]
        connection: Connection,
        secrets_ciphertext: Vec<u8>,
    }
    let row: Option<Row> = sqlx::query_as(&format!(
        "SELECT {COLUMNS}, secrets_ciphertext FROM channel_connections
         WHERE id = $1 AND deleted_at IS NULL"
    ))
    .bind(id)
    .fetch_optional(pool)
    .await?;
    let Some(Row {
        connection,
        secrets_ciphertext,
    }) = row
    else {
        return Ok(None);
    };
    let secrets: Value = serde_json::from_slice(&cipher.open(connection.id, &secrets_ciphertext)?)
        .map_err(|_| StoreError::Crypto("decrypted secrets are not JSON"))?;
    Ok(Some((connection, Secrets(secrets))))
}

/// Soft-deletes a live connection; `None` when there was none. Past conversations keep
/// their reference, and the name becomes free again.
pub async fn delete(pool: &PgPool, id: Uuid) -> Result<Option<Connection>, StoreError> {
    Ok(sqlx::query_as(&format!(
        "UPDATE channel_connections SET deleted_at = now(), updated_at = now()
         WHERE id = $1 AND deleted_at IS NULL RETURNING {COLUMNS}"
    ))
    .bind(id)
    .fetch_optional(pool)
    .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_show_in_debug() {
        let secrets = Secrets::new(serde_json::json!({"bot_token": "xoxb-very-secret"}));
        let shown = format!("{secrets:?} {:?}", Some(&secrets));
        assert!(!shown.contains("xoxb-very-secret"), "{shown}");
        assert_eq!(secrets.expose()["bot_token"], "xoxb-very-secret");
    }
}
