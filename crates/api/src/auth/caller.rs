//! The authenticated caller and their org memberships.
//!
//! A token's signature only says who it was issued to; whether it still works is Postgres's
//! to say, on every request: the statement that reads the caller's memberships also reads
//! the user's token version, deactivation and logged-out tokens, so a revocation holds at
//! the next request on every pod at no extra round trip.

use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::FromRequestParts;
use axum::http::StatusCode;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use chrono::{DateTime, Utc};
use switchboard_domain::Role;
use switchboard_store::audit::Actor;
use switchboard_store::users::{self, Membership, Revocation};
use uuid::Uuid;

/// Who is calling, with the orgs they belong to (read fresh from Postgres per request).
#[derive(Debug, Clone)]
pub struct Caller {
    /// The user id from the token.
    pub user_id: Uuid,
    /// Current memberships.
    pub memberships: Vec<Membership>,
    /// The token's id (`POST /auth/logout` revokes it).
    pub jti: Uuid,
    /// The token's expiry.
    pub expires_at: DateTime<Utc>,
}

impl Caller {
    /// The caller as an admin of `org_id` for the audit row of their action, or 403.
    pub fn admin_actor<'a>(
        &self,
        org_id: Uuid,
        request_id: Option<&'a str>,
    ) -> Result<Actor<'a>, ApiError> {
        self.require_admin(org_id)?;
        Ok(self.actor(org_id, request_id))
    }

    /// The caller as the audit row of an action in `org_id` names them.
    pub fn actor<'a>(&self, org_id: Uuid, request_id: Option<&'a str>) -> Actor<'a> {
        Actor {
            org_id: Some(org_id),
            user_id: Some(self.user_id),
            request_id,
        }
    }

    /// The caller's role in `org_id`, or 403.
    pub fn role_in(&self, org_id: Uuid) -> Result<Role, ApiError> {
        self.memberships
            .iter()
            .find(|m| m.org_id == org_id)
            .map(|m| m.role)
            .ok_or_else(ApiError::forbidden)
    }

    /// 403 unless the caller is an admin of `org_id`.
    pub fn require_admin(&self, org_id: Uuid) -> Result<(), ApiError> {
        self.require(org_id, Role::Admin)
    }

    /// The orgs a request covers, for every handler that lists or acts across orgs: `org`
    /// when given (403 unless the caller holds `role` there, or above), else every org where
    /// they do. One answer for "not yours": 403, also when that leaves no org at all (rather
    /// than an empty 200 that looks like an empty org).
    pub fn scope(&self, org: Option<Uuid>, role: Role) -> Result<Vec<Uuid>, ApiError> {
        let orgs: Vec<Uuid> = match org {
            Some(org) => {
                self.require(org, role)?;
                vec![org]
            }
            None => self
                .memberships
                .iter()
                .filter(|m| m.role.covers(role))
                .map(|m| m.org_id)
                .collect(),
        };
        if orgs.is_empty() {
            return Err(ApiError::forbidden());
        }
        Ok(orgs)
    }

    /// 403 unless the caller holds `role` (or above) in `org_id`.
    pub fn require(&self, org_id: Uuid, role: Role) -> Result<(), ApiError> {
        if self.role_in(org_id)?.covers(role) {
            Ok(())
        } else {
            Err(ApiError::forbidden())
        }
    }
}

/// Extracts the bearer token from an `Authorization` header value.
pub(crate) fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let header = parts
            .headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| ApiError::unauthorized("missing bearer token"))?;
        let token = bearer(header)
            .ok_or_else(|| ApiError::unauthorized("malformed Authorization header"))?;
        let claims = state
            .jwt
            .verify(token)
            .map_err(|_| ApiError::unauthorized("invalid or expired token"))?;
        let standing = users::standing(&state.db, claims.sub)
            .await?
            .ok_or(Revocation::UserGone)
            .map_err(revoked)?;
        let memberships = standing
            .admit(claims.ver, claims.jti)
            .map_err(revoked)?
            .to_vec();
        Ok(Caller {
            user_id: claims.sub,
            memberships,
            jti: claims.jti,
            expires_at: claims.expires_at(),
        })
    }
}

/// 401 `token_revoked`: a correctly signed token that no longer works. A distinct code, so
/// a console can send its user back to the login page saying why instead of retrying.
fn revoked(reason: Revocation) -> ApiError {
    metrics::counter!("auth_revoked_tokens_refused_total", "reason" => reason.as_str())
        .increment(1);
    let message = match reason {
        Revocation::LoggedOut => "this session was logged out: log in again",
        Revocation::Superseded => {
            "this session was ended (logged out everywhere, or a membership was removed): log in again"
        }
        Revocation::Deactivated => "this user is deactivated",
        Revocation::UserGone => "this user no longer exists",
    };
    ApiError::new(StatusCode::UNAUTHORIZED, "token_revoked", message)
}

#[cfg(test)]
mod tests {
    use super::bearer;

    #[test]
    fn parses_bearer() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer "), None);
        assert_eq!(bearer("Bearer"), None);
    }
}
