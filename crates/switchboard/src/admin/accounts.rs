//! `switchboard admin deactivate-user` / `reactivate-user`: an operator's way to lock a user
//! out of every org at once, e.g. someone who left, or a stolen password.
//!
//! Deactivation refuses the user's logins and bumps their token version in one statement, so
//! every token they hold stops working: REST refuses it at the next request and every pod's
//! session check closes their sockets within seconds (the CLI has no Socket.IO adapter to
//! broadcast through, and needs none). Reactivation lets them log in again; tokens from
//! before stay revoked. Each change writes an audit row in its own transaction.

use anyhow::Context;
use serde_json::{Value, json};
use sqlx::PgPool;
use switchboard_store::audit::{self, Actor};
use switchboard_store::users::{self, AccountState};
use uuid::Uuid;

/// Deactivates (`active` false) or reactivates `user_id`; returns the JSON the command prints.
pub async fn set_active(pool: &PgPool, user_id: Uuid, active: bool) -> anyhow::Result<Value> {
    let mut tx = pool.begin().await.context("starting a transaction")?;
    let state: Option<AccountState> = if active {
        users::reactivate(&mut *tx, user_id).await?
    } else {
        users::deactivate(&mut *tx, user_id).await?
    };
    let Some(state) = state else {
        anyhow::bail!("user {user_id} does not exist");
    };
    let action = if active {
        "user.reactivated"
    } else {
        "user.deactivated"
    };
    audit::record(
        &mut *tx,
        Actor {
            org_id: None,
            user_id: None,
            request_id: None,
        },
        action,
        Some(("user", user_id)),
        json!({"via": "cli", "token_version": state.token_version}),
    )
    .await?;
    tx.commit().await.context("committing")?;
    Ok(json!({
        "id": state.id,
        "email": state.email,
        "active": state.deactivated_at.is_none(),
        "deactivated_at": state.deactivated_at,
        "token_version": state.token_version,
    }))
}
