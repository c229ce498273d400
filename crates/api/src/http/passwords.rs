//! Passwords from the console: a user changes their own (`POST /auth/password`), or sets a
//! new one through a mailed link (`POST /auth/password-reset`, then `…/confirm`).
//!
//! Either way the user's token version is bumped in the transaction that stores the hash,
//! so every session from before ends (REST at the next request, sockets within seconds on
//! every pod); a change returns a fresh token for the session that made it. The current
//! password is checked and the new one hashed here; what is stored, audited and mailed is
//! `switchboard_flows::team::passwords`'.
//!
//! The reset request must not tell who has an account: it answers 202 whatever the address,
//! reads the user and writes its audit row either way, hashes nothing either way, and sends
//! the mail after answering (on the pod's task tracker), so the answer takes the same time.

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{Json, RequestId};
use crate::http::auth::{LoginResponse, hashing_turn};
use crate::state::AppState;
use axum::Extension;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::net::SocketAddr;
use switchboard_flows::team::passwords::{self as flow, ResetAsked};
use switchboard_store::password_resets::Refusal;
use switchboard_store::users;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(change_password))
        .routes(routes!(request_password_reset))
        .routes(routes!(confirm_password_reset))
}

/// 429 when the client's address is over `login_ip`: every password endpoint counts there.
pub(crate) async fn limit_address(
    state: &AppState,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: &HeaderMap,
) -> Result<String, Response> {
    let ip = crate::protection::client_ip_of(
        &state.protection.proxies,
        peer.map(|Extension(ConnectInfo(p))| p),
        headers,
    );
    let address = crate::protection::address_key(ip);
    match state.protection.limiter.check("login_ip", &address).await {
        Some(verdict) if !verdict.allowed => Err(crate::protection::too_many(&verdict)),
        _ => Ok(address),
    }
}

/// 422 unless `password` follows the rules (the CLI's too).
pub(crate) fn check_password(field: &str, password: &str) -> ApiResult<()> {
    match users::password_problem(password) {
        Some(problem) => Err(ApiError::validation(format!("{field}: {problem}"))),
        None => Ok(()),
    }
}

/// Hashes a new password off the executor, within a hashing turn.
pub(crate) async fn hash(password: String) -> ApiResult<String> {
    let _turn = hashing_turn().await?;
    Ok(
        tokio::task::spawn_blocking(move || users::hash_password(&password))
            .await
            .map_err(ApiError::internal)??,
    )
}

#[derive(Deserialize, ToSchema)]
struct ChangePassword {
    current_password: String,
    new_password: String,
}

#[utoipa::path(post, path = "/auth/password", tag = "auth", security(("bearer" = [])), request_body = ChangePassword,
    responses((status = 200, description = "Changed. Every other session of the user is ended \
        (REST at once, sockets within seconds); the token returned carries on this one", body = LoginResponse),
        (status = 401, description = "No valid bearer token (`unauthorized`), or a revoked one (`token_revoked`)", body = ErrorBody),
        (status = 403, description = "`wrong_password`: the current password is not right", body = ErrorBody),
        (status = 422, description = "The new password breaks the rules (at least 8 characters, at most 1024 bytes)", body = ErrorBody),
        (status = 429, description = "Too many attempts from this address", body = ErrorBody)))]
async fn change_password(
    State(state): State<AppState>,
    caller: Caller,
    RequestId(request_id): RequestId,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    Json(body): Json<ChangePassword>,
) -> ApiResult<Response> {
    if let Err(refused) = limit_address(&state, peer, &headers).await {
        return Ok(refused);
    }
    // Wrong guesses at the current password count like failed logins, per user.
    let failures = format!("user:{}", caller.user_id);
    let limiter = &state.protection.limiter;
    if let Some(verdict) = limiter.peek("login_failures", &failures).await
        && !verdict.allowed
    {
        return Ok(crate::protection::too_many(&verdict));
    }
    check_password("new_password", &body.new_password)?;
    let (stored, read_version) = users::password_of(&state.db, caller.user_id)
        .await?
        .ok_or_else(|| ApiError::unauthorized("user no longer exists"))?;
    let turn = hashing_turn().await?;
    let (current, new) = (body.current_password, body.new_password);
    let new_hash = tokio::task::spawn_blocking(move || {
        users::verify_password(&current, &stored)
            .then(|| users::hash_password(&new))
            .transpose()
    })
    .await
    .map_err(ApiError::internal)??;
    drop(turn);
    let Some(new_hash) = new_hash else {
        limiter.charge("login_failures", &failures).await;
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "wrong_password",
            "the current password is not right",
        ));
    };
    limiter.reset("login_failures", &failures).await;
    let (user, version) = flow::change(
        state.team(),
        request_id.as_deref(),
        caller.user_id,
        &new_hash,
        read_version,
    )
    .await?;
    let (token, expires_at) = state
        .jwt
        .issue(caller.user_id, version)
        .map_err(ApiError::internal)?;
    Ok(Json(LoginResponse {
        token,
        expires_at,
        user,
    })
    .into_response())
}

#[derive(Deserialize, ToSchema)]
struct ResetRequest {
    email: String,
}

#[utoipa::path(post, path = "/auth/password-reset", tag = "auth", request_body = ResetRequest,
    responses((status = 202, description = "The same answer whether or not the address has an \
        account: if it has, a link to `#/reset/<token>` is mailed, working once within an hour (at \
        most `RATE_LIMIT_PASSWORD_RESET` mails per address)"),
        (status = 422, description = "Not an email address", body = ErrorBody),
        (status = 429, description = "Too many requests from this address", body = ErrorBody)))]
async fn request_password_reset(
    State(state): State<AppState>,
    RequestId(request_id): RequestId,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    body: Result<Json<ResetRequest>, ApiError>,
) -> ApiResult<Response> {
    if let Err(refused) = limit_address(&state, peer, &headers).await {
        return Ok(refused);
    }
    let Json(body) = body?;
    let email = body.email.trim().to_lowercase();
    if !crate::http::invitations::plausible_email(&email) {
        return Err(ApiError::validation("email must be an email address"));
    }
    let email_sha256 = hex::encode(Sha256::digest(email.as_bytes()));
    // Counted for every address, known or not, so the limit says nothing either.
    let allowed = state
        .protection
        .limiter
        .check("password_reset", &email_sha256)
        .await
        .is_none_or(|v| v.allowed);
    let asked = ResetAsked {
        email: &email,
        email_sha256: &email_sha256,
        allowed,
    };
    flow::request_reset(state.team(), request_id.as_deref(), asked).await?;
    Ok(StatusCode::ACCEPTED.into_response())
}

#[derive(Deserialize, ToSchema)]
struct ResetConfirm {
    token: String,
    new_password: String,
}

#[utoipa::path(post, path = "/auth/password-reset/confirm", tag = "auth", request_body = ResetConfirm,
    responses((status = 204, description = "The password is set and every session of the user ended; they log in with it"),
        (status = 404, description = "`reset_not_found`: no such link", body = ErrorBody),
        (status = 410, description = "`reset_used` (each link works once) or `reset_expired` (after an hour)", body = ErrorBody),
        (status = 422, description = "The new password breaks the rules", body = ErrorBody),
        (status = 429, description = "Too many attempts from this address", body = ErrorBody)))]
async fn confirm_password_reset(
    State(state): State<AppState>,
    RequestId(request_id): RequestId,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    body: Result<Json<ResetConfirm>, ApiError>,
) -> ApiResult<Response> {
    if let Err(refused) = limit_address(&state, peer, &headers).await {
        return Ok(refused);
    }
    let Json(body) = body?;
    check_password("new_password", &body.new_password)?;
    let new_hash = hash(body.new_password).await?;
    let token = &body.token;
    flow::confirm_reset(state.team(), request_id.as_deref(), token, &new_hash).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// A reset link that cannot be used, as the client is told.
pub(crate) fn refused(refusal: Refusal) -> ApiError {
    match refusal {
        Refusal::Unknown => ApiError::new(
            StatusCode::NOT_FOUND,
            "reset_not_found",
            "this reset link is not valid: ask for a new one",
        ),
        Refusal::Used => ApiError::new(
            StatusCode::GONE,
            "reset_used",
            "this reset link was used already: ask for a new one",
        ),
        Refusal::Expired => ApiError::new(
            StatusCode::GONE,
            "reset_expired",
            "this reset link has expired (links work for an hour): ask for a new one",
        ),
    }
}
