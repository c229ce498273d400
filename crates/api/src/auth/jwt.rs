//! Login tokens (JWT, HS256). Besides who and until when, a token carries what revokes it:
//! its user's token version when it was issued (`ver`; bumping the user's version ends every
//! session at once) and its own id (`jti`; `POST /auth/logout` puts it on a denylist). Both
//! are required: a token without them could not be revoked, so it is refused as invalid.
//!
//! Keys rotate (`JWT_SECRETS`, docs/OPERATIONS.md "Rotating the JWT signing key"): the header
//! names the signing key in `kid`, the first 8 hex digits of the secret's SHA-256, and a token
//! is checked against that key only, so removing a key ends its tokens. A token from before
//! key ids has no `kid` and is checked against every key in order: it was signed with the
//! one secret of its time, which a rotation moves off the first place; any listed key that
//! verifies it signed it.

use chrono::{DateTime, Utc};
use jsonwebtoken::errors::{Error, ErrorKind};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
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

/// One secret of `JWT_SECRETS`, with its id.
struct JwtKey {
    kid: String,
    encoding: EncodingKey,
    decoding: DecodingKey,
}

/// The id of `secret`: the first 8 hex digits of its SHA-256 (`printf %s "$SECRET" |
/// sha256sum | cut -c1-8`). No secret is recovered from it that the signature next to it
/// would not give away as well.
pub fn key_id(secret: &SecretString) -> String {
    let digest = Sha256::digest(secret.expose_secret().as_bytes());
    hex::encode(&digest[..4])
}

/// Signing and verification keys derived from `JWT_SECRETS` (or `JWT_SECRET`).
pub struct JwtKeys {
    /// The first signs; every one verifies.
    keys: Vec<JwtKey>,
    ttl_secs: i64,
}

impl JwtKeys {
    /// Keys for the given secrets, the signing one first, and token lifetime; `None` without
    /// a secret.
    pub fn new(secrets: &[SecretString], ttl_secs: u64) -> Option<Self> {
        let keys: Vec<JwtKey> = secrets
            .iter()
            .map(|secret| {
                let bytes = secret.expose_secret().as_bytes();
                JwtKey {
                    kid: key_id(secret),
                    encoding: EncodingKey::from_secret(bytes),
                    decoding: DecodingKey::from_secret(bytes),
                }
            })
            .collect();
        (!keys.is_empty()).then(|| Self {
            keys,
            ttl_secs: i64::try_from(ttl_secs).unwrap_or(i64::MAX / 2),
        })
    }

    /// The id of the signing key.
    pub fn signing_kid(&self) -> &str {
        &self.keys[0].kid
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
        let signing = &self.keys[0];
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(signing.kid.clone());
        let token = jsonwebtoken::encode(&header, &claims, &signing.encoding)?;
        Ok((token, claims.expires_at()))
    }

    /// Verifies signature (under the key its `kid` names, or any key without one),
    /// algorithm and expiry (no leeway), and that the token carries `ver` and `jti` (whether
    /// they are revoked is Postgres's to say). An expired token is `ExpiredSignature`
    /// whatever it lacks, so its holder is told to log in again.
    pub fn verify(&self, token: &str) -> Result<Claims, Error> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.leeway = 0;
        validation.set_required_spec_claims(&["exp", "sub"]);
        let decode =
            |key: &JwtKey| jsonwebtoken::decode::<RawClaims>(token, &key.decoding, &validation);
        let raw = match jsonwebtoken::decode_header(token)?.kid {
            Some(kid) => {
                let key = self.keys.iter().find(|k| k.kid == kid);
                decode(key.ok_or(ErrorKind::InvalidSignature)?)?.claims
            }
            // Before key ids: the first key whose signature matches decides (a later check,
            // such as the expiry, failing under it is the answer).
            None => {
                self.keys
                    .iter()
                    .map(decode)
                    .find(|r| !matches!(r, Err(e) if e.kind() == &ErrorKind::InvalidSignature))
                    .unwrap_or_else(|| Err(ErrorKind::InvalidSignature.into()))?
                    .claims
            }
        };
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

    fn secret(c: char) -> SecretString {
        SecretString::from(c.to_string().repeat(64))
    }

    fn keys_of(secrets: &[char]) -> JwtKeys {
        let secrets: Vec<SecretString> = secrets.iter().map(|c| secret(*c)).collect();
        JwtKeys::new(&secrets, 60).expect("a key")
    }

    fn keys() -> JwtKeys {
        keys_of(&['x'])
    }

    /// A token as releases before key ids signed it: no `kid`.
    fn without_kid(c: char, exp_in: i64) -> String {
        let now = Utc::now().timestamp();
        let claims = serde_json::json!({
            "sub": Uuid::new_v4(), "iat": now, "exp": now + exp_in, "ver": 0, "jti": Uuid::new_v4()
        });
        let key = EncodingKey::from_secret(c.to_string().repeat(64).as_bytes());
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &key).expect("encode")
    }

    #[test]
    fn the_first_key_signs_and_names_itself() {
        let rotated = keys_of(&['n', 'o']);
        let (token, _) = rotated.issue(Uuid::new_v4(), 0).expect("issue");
        let kid = jsonwebtoken::decode_header(&token).expect("header").kid;
        assert_eq!(kid.as_deref(), Some(key_id(&secret('n')).as_str()));
        assert_eq!(rotated.signing_kid(), key_id(&secret('n')));
        assert_eq!(key_id(&secret('n')).len(), 8);
        assert!(keys_of(&['o', 'n']).verify(&token).is_ok(), "any position");
        assert!(keys_of(&['n']).verify(&token).is_ok());
    }

    #[test]
    fn a_token_is_checked_against_the_key_it_names_only() {
        let (old_token, _) = keys_of(&['o']).issue(Uuid::new_v4(), 0).expect("issue");
        assert!(keys_of(&['n', 'o']).verify(&old_token).is_ok());
        // Its key removed, it is refused, whatever else is listed.
        let error = keys_of(&['n']).verify(&old_token).expect_err("removed");
        assert_eq!(error.kind(), &ErrorKind::InvalidSignature);
        // A kid naming one key with the signature of another is not tried elsewhere.
        let now = Utc::now().timestamp();
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(key_id(&secret('n')));
        let claims = serde_json::json!({
            "sub": Uuid::new_v4(), "iat": now, "exp": now + 60, "ver": 0, "jti": Uuid::new_v4()
        });
        let forged = jsonwebtoken::encode(
            &header,
            &claims,
            &EncodingKey::from_secret("o".repeat(64).as_bytes()),
        )
        .expect("encode");
        assert!(keys_of(&['n', 'o']).verify(&forged).is_err());
    }

    #[test]
    fn a_token_without_kid_is_tried_with_every_key_in_order() {
        let rotated = keys_of(&['n', 'o']);
        assert!(rotated.verify(&without_kid('o', 60)).is_ok(), "second key");
        assert!(rotated.verify(&without_kid('n', 60)).is_ok(), "first key");
        let error = rotated.verify(&without_kid('z', 60)).expect_err("no key");
        assert_eq!(error.kind(), &ErrorKind::InvalidSignature);
        assert!(keys_of(&['n']).verify(&without_kid('o', 60)).is_err());
        // Expired under the second key: told so, not "invalid".
        let error = rotated.verify(&without_kid('o', -10)).expect_err("expired");
        assert_eq!(error.kind(), &ErrorKind::ExpiredSignature);
        assert!(JwtKeys::new(&[], 60).is_none());
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
