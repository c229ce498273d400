//! The authenticated caller and their org memberships.

use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use switchboard_domain::Role;
use switchboard_store::users::{self, Membership};
use uuid::Uuid;

/// Who is calling, with the orgs they belong to (read fresh from Postgres per request).
#[derive(Debug, Clone)]
pub struct Caller {
    /// The user id from the token.
    pub user_id: Uuid,
    /// Current memberships.
    pub memberships: Vec<Membership>,
}

impl Caller {
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
        match self.role_in(org_id)? {
            Role::Admin => Ok(()),
            Role::Expert => Err(ApiError::forbidden()),
        }
    }

    /// The orgs where the caller is an admin.
    pub fn admin_orgs(&self) -> Vec<Uuid> {
        self.memberships
            .iter()
            .filter(|m| m.role == Role::Admin)
            .map(|m| m.org_id)
            .collect()
    }

    /// Every org the caller belongs to.
    pub fn org_ids(&self) -> Vec<Uuid> {
        self.memberships.iter().map(|m| m.org_id).collect()
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
        let memberships = users::memberships(&state.db, claims.sub).await?;
        Ok(Caller {
            user_id: claims.sub,
            memberships,
        })
    }
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
