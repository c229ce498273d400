//! Channel connections as org admins change them: each change with its audit row in one
//! transaction, then every pod's cache of the connection is told (a webhook that raced a
//! create may have remembered its id as unknown; a changed secret must verify everywhere).

use crate::Deps;
use async_trait::async_trait;
use serde_json::{Value, json};
use switchboard_domain::ChannelKind;
use switchboard_store::StoreError;
use switchboard_store::audit::{self, Actor};
use switchboard_store::connections::{self, Changes, Connection, NewConnection, Secrets};
use switchboard_store::crypto::SecretCipher;
use uuid::Uuid;

/// The pods' caches of connections, which a committed change must reach.
#[async_trait]
pub trait Cache: Send + Sync {
    /// Every pod forgets connection `id`, known or remembered as unknown.
    async fn invalidate(&self, id: Uuid);
}

/// Why a change was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    /// Another live connection of the org and channel has the name.
    #[error("a {channel} connection named {name:?} already exists")]
    NameTaken {
        /// The channel.
        channel: ChannelKind,
        /// The name asked for.
        name: String,
    },
    /// No such live connection.
    #[error("no such channel connection")]
    NotFound,
    /// Postgres, or the secrets' encryption.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The store's unique-name refusal, as the name it was about.
fn name_taken(error: StoreError, channel: ChannelKind, name: &str) -> ConnectionError {
    match error {
        StoreError::Conflict => ConnectionError::NameTaken {
            channel,
            name: name.to_owned(),
        },
        other => other.into(),
    }
}

/// A new connection, its secrets sealed with `cipher` (the caller validated them).
pub async fn create(
    deps: &Deps,
    cipher: &SecretCipher,
    cache: &dyn Cache,
    actor: Actor<'_>,
    new: NewConnection<'_>,
) -> Result<Connection, ConnectionError> {
    let (channel, name) = (new.channel, new.name);
    let mut tx = deps.begin().await?;
    let connection = connections::create(&mut *tx, cipher, new)
        .await
        .map_err(|e| name_taken(e, channel, name))?;
    audit::record(
        &mut *tx,
        actor,
        "channel_connection.created",
        Some(("channel_connection", connection.id)),
        json!({"channel": channel, "name": connection.name}),
    )
    .await?;
    crate::commit(tx).await?;
    cache.invalidate(connection.id).await;
    Ok(connection)
}

/// What an update writes, planned from the connection as locked.
#[derive(Debug)]
pub struct Change {
    /// The new name.
    pub name: Option<String>,
    /// The new settings, replacing the stored ones whole.
    pub settings: Option<Value>,
    /// Every secret to store, current and replaced (always written, so a replaced value
    /// past its expiry goes with any update).
    pub secrets: Secrets,
    /// What the audit row says of the change (never a secret's value).
    pub audit: Value,
}

/// Changes connection `id` as `plan` decides from it and its secrets, read under the row's
/// lock until the commit, so two admins' changes apply one after the other. A refusal of
/// `plan` rolls back: nothing is written.
pub async fn update<E>(
    deps: &Deps,
    cipher: &SecretCipher,
    cache: &dyn Cache,
    actor: Actor<'_>,
    id: Uuid,
    plan: impl FnOnce(&Connection, &Secrets) -> Result<Change, E>,
) -> Result<Connection, E>
where
    E: From<ConnectionError>,
{
    let mut tx = deps.begin().await.map_err(ConnectionError::from)?;
    let (connection, stored) = connections::lock_with_secrets(&mut tx, cipher, id)
        .await
        .map_err(ConnectionError::from)?
        .ok_or(ConnectionError::NotFound)?;
    let change = plan(&connection, &stored)?;
    let changes = Changes {
        name: change.name.as_deref(),
        settings: change.settings.as_ref(),
        secrets: Some(&change.secrets),
    };
    let name = change.name.as_deref().unwrap_or_default();
    let updated = connections::update(&mut tx, cipher, id, changes)
        .await
        .map_err(|e| name_taken(e, connection.channel, name))?
        .ok_or(ConnectionError::NotFound)?;
    let target = Some(("channel_connection", id));
    audit::record(
        &mut *tx,
        actor,
        "channel_connection.updated",
        target,
        change.audit,
    )
    .await
    .map_err(ConnectionError::from)?;
    crate::commit(tx).await.map_err(ConnectionError::from)?;
    cache.invalidate(id).await;
    Ok(updated)
}

/// Deletes connection `id` (soft: past conversations keep their reference).
pub async fn delete(
    deps: &Deps,
    cache: &dyn Cache,
    actor: Actor<'_>,
    id: Uuid,
) -> Result<Connection, ConnectionError> {
    let mut tx = deps.begin().await?;
    let deleted = connections::delete(&mut *tx, id)
        .await?
        .ok_or(ConnectionError::NotFound)?;
    let target = Some(("channel_connection", deleted.id));
    audit::record(
        &mut *tx,
        actor,
        "channel_connection.deleted",
        target,
        json!({}),
    )
    .await?;
    crate::commit(tx).await?;
    cache.invalidate(id).await;
    Ok(deleted)
}
