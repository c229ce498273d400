//! Login tokens (JWT, HS256).

use chrono::{DateTime, Utc};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Token claims: who, issued when, valid until when.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Claims {
    /// The user id.
    pub sub: Uuid,
    /// Issued at (seconds since the epoch).
    pub iat: i64,
    /// Expiry (seconds since the epoch).
    pub exp: i64,
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

    /// Issues a token for `user`; returns it with its expiry.
    pub fn issue(
        &self,
        user: Uuid,
    ) -> Result<(String, DateTime<Utc>), jsonwebtoken::errors::Error> {
        let now = Utc::now().timestamp();
        let claims = Claims {
            sub: user,
            iat: now,
            exp: now.saturating_add(self.ttl_secs),
        };
        let token = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)?;
        let expires = DateTime::from_timestamp(claims.exp, 0).unwrap_or_else(Utc::now);
        Ok((token, expires))
    }

    /// Verifies signature, algorithm and expiry (no leeway).
    pub fn verify(&self, token: &str) -> Result<Claims, jsonwebtoken::errors::Error> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.leeway = 0;
        validation.set_required_spec_claims(&["exp", "sub"]);
        jsonwebtoken::decode::<Claims>(token, &self.decoding, &validation).map(|d| d.claims)
    }
}

impl std::fmt::Debug for JwtKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JwtKeys(..)")
    }
}
