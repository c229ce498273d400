//! Login tokens (JWT, HS256). Besides who and until when, a token carries what revokes it:
//! its user's token version when it was issued (`ver`; bumping the user's version ends every
//! session at once) and its own id (`jti`; `POST /auth/logout` puts it on a denylist). Both
//! are required: a token without them could not be revoked, so it is refused as invalid.
//! The header is HS256's own; key rotation adds a `kid` there, the claims stay as they are.

use chrono::{DateTime, Utc};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Token claims: who, issued when, valid until when, and what revokes it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Claims {
    /// The user id.
    pub sub: Uuid,
    /// Issued at (seconds since the epoch).
    pub iat: i64,
    /// Expiry (seconds since the epoch).
    pub exp: i64,
    /// The user's token version at issue (`users.token_version`); older than the user's
    /// current version means revoked.
    pub ver: i64,
    /// This token's id, for the logout denylist.
    pub jti: Uuid,
}

impl Claims {
    /// The expiry as a time (the denylist keeps a logged-out `jti` until then).
    pub fn expires_at(&self) -> DateTime<Utc> {
        DateTime::from_timestamp(self.exp, 0).unwrap_or_else(Utc::now)
    }
}

/// [`Claims`] as decoded, before `ver` and `jti` are required: the expiry is checked first.
#[derive(Deserialize)]
struct RawClaims {
    sub: Uuid,
    iat: i64,
    exp: i64,
    ver: Option<i64>,
    jti: Option<Uuid>,
}

/// Signing and verification keys derived from `JWT_SECRET`.
pub struct JwtKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    ttl_secs: i64,
}

impl JwtKeys {
    /// Keys for the given secret and token lifetime.
    pub fn new(secret: &SecretString, ttl_secs: u64) -> Self {
        let bytes = secret.expose_secret().as_bytes();
        Self {
            encoding: EncodingKey::from_secret(bytes),
            decoding: DecodingKey::from_secret(bytes),
            ttl_secs: i64::try_from(ttl_secs).unwrap_or(i64::MAX / 2),
        }
    }

    /// Issues a new token (a new `jti`) for `user` at their current token `version`;
    /// returns it with its expiry.
    pub fn issue(
        &self,
        user: Uuid,
        version: i64,
    ) -> Result<(String, DateTime<Utc>), jsonwebtoken::errors::Error> {
        let now = Utc::now().timestamp();
        let claims = Claims {
            sub: user,
            iat: now,
            exp: now.saturating_add(self.ttl_secs),
            ver: version,
            jti: Uuid::new_v4(),
        };
        let token = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)?;
        Ok((token, claims.expires_at()))
    }

    /// Verifies signature, algorithm and expiry (no leeway), and that the token carries
    /// `ver` and `jti` (whether they are revoked is Postgres's to say). An expired token is
    /// `ExpiredSignature` whatever it lacks, so its holder is told to log in again.
    pub fn verify(&self, token: &str) -> Result<Claims, jsonwebtoken::errors::Error> {
        use jsonwebtoken::errors::ErrorKind;
        let mut validation = Validation::new(Algorithm::HS256);
        validation.leeway = 0;
        validation.set_required_spec_claims(&["exp", "sub"]);
        let raw = jsonwebtoken::decode::<RawClaims>(token, &self.decoding, &validation)?.claims;
        let ver = raw
            .ver
            .ok_or_else(|| ErrorKind::MissingRequiredClaim("ver".into()))?;
        let jti = raw
            .jti
            .ok_or_else(|| ErrorKind::MissingRequiredClaim("jti".into()))?;
        Ok(Claims {
            sub: raw.sub,
            iat: raw.iat,
            exp: raw.exp,
            ver,
            jti,
        })
    }
}

impl std::fmt::Debug for JwtKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JwtKeys(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> JwtKeys {
        JwtKeys::new(&SecretString::from("x".repeat(64)), 60)
    }

    #[test]
    fn a_token_carries_its_version_and_a_new_id() {
        let keys = keys();
        let user = Uuid::new_v4();
        let (a, _) = keys.issue(user, 7).expect("issue");
        let (b, _) = keys.issue(user, 7).expect("issue");
        let (a, b) = (keys.verify(&a).expect("a"), keys.verify(&b).expect("b"));
        assert_eq!((a.sub, a.ver), (user, 7));
        assert_ne!(a.jti, b.jti);
    }

    #[test]
    fn a_token_without_version_or_id_is_invalid() {
        let keys = keys();
        let now = Utc::now().timestamp();
        let token = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &serde_json::json!({"sub": Uuid::new_v4(), "iat": now, "exp": now + 60}),
            &EncodingKey::from_secret("x".repeat(64).as_bytes()),
        )
        .expect("encode");
        assert!(keys.verify(&token).is_err());
        // Expired, it says so first: its holder logs in again either way.
        let expired = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &serde_json::json!({"sub": Uuid::new_v4(), "iat": now - 120, "exp": now - 60}),
            &EncodingKey::from_secret("x".repeat(64).as_bytes()),
        )
        .expect("encode");
        let error = keys.verify(&expired).expect_err("expired");
        assert_eq!(
            error.kind(),
            &jsonwebtoken::errors::ErrorKind::ExpiredSignature
        );
    }
}
