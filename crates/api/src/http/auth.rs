//! `POST /auth/login`, `GET /auth/me`, and the two ways a user ends sessions:
//! `POST /auth/logout` (this token: its `jti` on the denylist until it expires) and
//! `POST /auth/logout-all` (every token: the user's token version bumped). Both are rows in
//! Postgres, so they hold on every pod whatever Redis is doing; REST refuses the token at
//! the next request and every pod closes its sockets within seconds (`realtime::sessions`).
//! The rate limits, the hashing turns and the token are here; the password check, the audit
//! rows and the revocations are `switchboard_flows::team::sessions`'.

use crate::auth::Caller;
use crate::error::ErrorBody;
use crate::error::{ApiError, ApiResult};
use crate::extract::{Json, RequestId};
use crate::state::AppState;
use axum::Extension;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::net::SocketAddr;
use std::sync::LazyLock;
use std::time::Duration;
use switchboard_flows::team::sessions::{self, LogIn};
use switchboard_store::users::{self, Membership, User};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The longest email address there can be (RFC 5321 path limit).
const MAX_EMAIL_LEN: usize = 254;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(login))
        .routes(routes!(me))
        .routes(routes!(logout))
        .routes(routes!(logout_all))
}

#[derive(Deserialize, ToSchema)]
struct LoginRequest {
    email: String,
    password: String,
}

#[derive(Serialize, ToSchema)]
pub(crate) struct LoginResponse {
    pub(crate) token: String,
    pub(crate) expires_at: DateTime<Utc>,
    pub(crate) user: User,
}

#[utoipa::path(post, path = "/auth/login", tag = "auth", request_body = LoginRequest,
    responses((status = 200, body = LoginResponse), (status = 400, body = ErrorBody),
        (status = 401, description = "Wrong email or password (`unauthorized`), or a deactivated user (`user_deactivated`)", body = ErrorBody),
        (status = 422, body = ErrorBody), (status = 429, description = "Too many failed logins", body = ErrorBody)))]
async fn login(
    State(state): State<AppState>,
    RequestId(request_id): RequestId,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    body: Result<Json<LoginRequest>, ApiError>,
) -> ApiResult<Response> {
    let limiter = &state.protection.limiter;
    let ip = crate::protection::client_ip_of(
        &state.protection.proxies,
        peer.map(|Extension(ConnectInfo(p))| p),
        &headers,
    );
    let address = crate::protection::address_key(ip);
    // Every attempt counts against the address, a body that does not parse too.
    if let Some(verdict) = limiter.check("login_ip", &address).await
        && !verdict.allowed
    {
        return Ok(crate::protection::too_many(&verdict));
    }
    let Json(body) = body?;
    // No address is longer (RFC 5321); refused before anything is hashed or looked up.
    if body.email.len() > MAX_EMAIL_LEN {
        return Err(ApiError::bad_request(
            "email_too_long",
            format!("email must be at most {MAX_EMAIL_LEN} characters"),
        ));
    }
    let email = body.email.trim().to_lowercase();
    if email.is_empty() || body.password.is_empty() {
        return Err(ApiError::validation("email and password are required"));
    }
    let attempt = match PasswordAttempt::start(&state, &email, &address).await {
        Ok(attempt) => attempt,
        Err(refused) => return Ok(refused),
    };
    let _turn = hashing_turn().await?;
    let (request_id, email_sha256) = (request_id.as_deref(), &attempt.email_sha256);
    let login = sessions::log_in(
        &state.flows,
        request_id,
        &email,
        email_sha256,
        body.password,
    );
    let record = match login.await? {
        LogIn::Accepted(record) => record,
        LogIn::Deactivated => {
            return Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "user_deactivated",
                "this user is deactivated; ask an administrator",
            ));
        }
        LogIn::Refused => {
            attempt.failed(&state).await;
            return Err(ApiError::unauthorized("invalid email or password"));
        }
    };
    attempt.succeeded(&state).await;
    let (token, expires_at) = state
        .jwt
        .issue(record.user.id, record.token_version)
        .map_err(ApiError::internal)?;
    Ok(Json(LoginResponse {
        token,
        expires_at,
        user: record.user,
    })
    .into_response())
}

/// A turn to hash a password. Password hashing is the expensive part of every password
/// endpoint: at most one per core at a time, a short wait for a turn, then 503 rather than a
/// queue that grows with an attack.
pub(crate) async fn hashing_turn() -> ApiResult<tokio::sync::SemaphorePermit<'static>> {
    match tokio::time::timeout(HASHING_WAIT, HASHING.acquire()).await {
        Ok(Ok(turn)) => Ok(turn),
        _ => {
            metrics::counter!("backpressure_refusals_total", "reason" => "password_hashing")
                .increment(1);
            Err(ApiError::unavailable(
                "backpressure",
                "too many password checks at once; retry in a moment",
            )
            .with_retry_after(Duration::from_secs(1)))
        }
    }
}

/// Password hashes computed at once: one per core.
static HASHING: LazyLock<tokio::sync::Semaphore> = LazyLock::new(|| {
    tokio::sync::Semaphore::new(std::thread::available_parallelism().map_or(2, usize::from))
});
/// How long a login waits for a hashing turn before it is refused.
const HASHING_WAIT: Duration = Duration::from_secs(1);
/// How long an address counts as failing after its last failed login (the failure
/// window of `login_failures` by default).
const FAILING_FOR: Duration = Duration::from_secs(15 * 60);

#[derive(Serialize, ToSchema)]
struct MeResponse {
    user: User,
    orgs: Vec<Membership>,
}

#[utoipa::path(get, path = "/auth/me", tag = "auth", security(("bearer" = [])),
    responses((status = 200, body = MeResponse),
        (status = 401, description = "No valid bearer token (`unauthorized`), or a revoked one \
            (`token_revoked`)", body = ErrorBody),
        (status = 403, description = "Another org's resource, or the role is too low", body = ErrorBody)))]
async fn me(State(state): State<AppState>, caller: Caller) -> ApiResult<Json<MeResponse>> {
    let user = users::get(&state.db, caller.user_id)
        .await?
        .ok_or_else(|| ApiError::unauthorized("user no longer exists"))?;
    Ok(Json(MeResponse {
        user,
        orgs: caller.memberships,
    }))
}

#[utoipa::path(post, path = "/auth/logout", tag = "auth", security(("bearer" = [])),
    responses((status = 204, description = "This token is revoked: REST refuses it with 401 \
        `token_revoked`, and its sockets are closed within seconds on every pod. The user's other \
        sessions go on."),
        (status = 401, description = "No valid bearer token (`unauthorized`), or one already revoked (`token_revoked`)", body = ErrorBody)))]
async fn logout(
    State(state): State<AppState>,
    caller: Caller,
    RequestId(request_id): RequestId,
) -> ApiResult<StatusCode> {
    let (user_id, jti, expires_at) = (caller.user_id, caller.jti, caller.expires_at);
    sessions::log_out(
        &state.flows,
        request_id.as_deref(),
        user_id,
        jti,
        expires_at,
    )
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/auth/logout-all", tag = "auth", security(("bearer" = [])),
    responses((status = 204, description = "Every token of the user issued so far is revoked (this \
        one too): REST refuses them with 401 `token_revoked`, and their sockets are closed within \
        seconds on every pod."),
        (status = 401, description = "No valid bearer token (`unauthorized`), or a revoked one (`token_revoked`)", body = ErrorBody)))]
async fn logout_all(
    State(state): State<AppState>,
    caller: Caller,
    RequestId(request_id): RequestId,
) -> ApiResult<StatusCode> {
    sessions::log_out_everywhere(state.team(), request_id.as_deref(), caller.user_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The per-email limits on checking an account's password by its email, for login and
/// for anything else that does (accepting an invitation for an existing account).
/// Failures are what count, charged once the password was checked (keys hold a hash of the
/// email, never the text anyone typed): per email and address, so another address
/// hammering an email never locks its owner out, and per email alone, looser, only for
/// addresses that have been failing themselves.
pub(crate) struct PasswordAttempt {
    pub(crate) email_sha256: String,
    pair: String,
    failing: String,
}

impl PasswordAttempt {
    /// Refused (`Err`, the 429 to answer) before anything is hashed when `address` is over
    /// its failures for `email`, or is failing and the email is over its backstop.
    pub(crate) async fn start(
        state: &AppState,
        email: &str,
        address: &str,
    ) -> Result<Self, Response> {
        let limiter = &state.protection.limiter;
        let email_sha256 = hex::encode(Sha256::digest(email.as_bytes()));
        let pair = format!("{email_sha256}:{address}");
        if let Some(verdict) = limiter.peek("login_failures", &pair).await
            && !verdict.allowed
        {
            return Err(crate::protection::too_many(&verdict));
        }
        let failing = format!("login:failing:{address}");
        // Redis away reads as "not failing": the email-only backstop is skipped, the
        // per-pod fallback of the other limits still holds.
        if state.redis.flagged(&failing).await.unwrap_or(false)
            && let Some(verdict) = limiter.peek("login_email", &email_sha256).await
            && !verdict.allowed
        {
            return Err(crate::protection::too_many(&verdict));
        }
        Ok(Self {
            email_sha256,
            pair,
            failing,
        })
    }

    /// A wrong password: charged to both limits, and the address marked failing.
    pub(crate) async fn failed(&self, state: &AppState) {
        let limiter = &state.protection.limiter;
        limiter.charge("login_failures", &self.pair).await;
        limiter.charge("login_email", &self.email_sha256).await;
        if let Err(e) = state.redis.flag(&self.failing, FAILING_FOR).await {
            tracing::debug!(error = %e, "could not mark an address as failing logins");
        }
    }

    /// The right password clears this address's failures for the email (not the email's
    /// own count, which other addresses' failures fill); losing this reset only delays it.
    pub(crate) async fn succeeded(&self, state: &AppState) {
        state
            .protection
            .limiter
            .reset("login_failures", &self.pair)
            .await;
    }
}
