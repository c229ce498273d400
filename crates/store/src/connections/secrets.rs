//! A connection's secrets: the current values, and replaced values that still verify
//! webhooks for a while (a rotation's overlap: the provider may sign with the old value
//! until it has switched).
//!
//! Stored as one encrypted JSON document per connection (`secrets_ciphertext`): the current
//! fields at the top level, exactly as before rotations existed (a pod of an older build
//! reads them unchanged during a deploy), and replaced values under [`PREVIOUS_KEY`]. One
//! document, so a re-encryption under a new master key covers the old values too. When each
//! replaced value expires is not secret: that lives in `previous_secrets_expire_at`, so the
//! API shows it without decrypting anything.

use crate::StoreError;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Where the encrypted document keeps replaced values, by field name.
const PREVIOUS_KEY: &str = "_previous";

/// When each replaced secret stops verifying, by field name: the non-secret half of a
/// rotation (`previous_secrets_expire_at`).
pub type Expiries = BTreeMap<String, DateTime<Utc>>;

/// A connection's decrypted secrets. Neither `Debug` nor any formatting shows them, and
/// they do not serialize: reaching the values takes an explicit [`Secrets::expose`], so a
/// stray `{:?}` in a log line or an error prints `Secrets(..)`.
pub struct Secrets {
    current: Value,
    previous: Vec<PreviousSecret>,
}

/// A replaced secret value and when it stops verifying; `Debug` shows the field and the
/// expiry only.
#[derive(Clone)]
pub struct PreviousSecret {
    field: String,
    value: String,
    expires_at: DateTime<Utc>,
}

impl PreviousSecret {
    /// `field`'s old `value`, verifying until `expires_at`.
    pub fn new(field: &str, value: &str, expires_at: DateTime<Utc>) -> Self {
        Self {
            field: field.to_owned(),
            value: value.to_owned(),
            expires_at,
        }
    }

    /// Which secret field this was the value of.
    pub fn field(&self) -> &str {
        &self.field
    }

    /// The old value, for the one call that needs it (a signature check).
    pub fn expose(&self) -> &str {
        &self.value
    }

    /// From when it no longer verifies.
    pub fn expires_at(&self) -> DateTime<Utc> {
        self.expires_at
    }

    /// Whether it still verifies at `now`.
    pub fn active_at(&self, now: DateTime<Utc>) -> bool {
        now < self.expires_at
    }
}

impl std::fmt::Debug for PreviousSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PreviousSecret({}: .., expires_at: {})",
            self.field, self.expires_at
        )
    }
}

impl Secrets {
    /// Current secrets with nothing replaced.
    pub fn new(current: Value) -> Self {
        Self {
            current,
            previous: Vec::new(),
        }
    }

    /// Current secrets and replaced values (at most one per field: a later one wins).
    pub fn with_previous(current: Value, previous: Vec<PreviousSecret>) -> Self {
        let mut by_field: BTreeMap<String, PreviousSecret> = BTreeMap::new();
        for p in previous {
            by_field.insert(p.field.clone(), p);
        }
        Self {
            current,
            previous: by_field.into_values().collect(),
        }
    }

    /// The current secret values, for the one call that needs them (a signature check, an
    /// API call).
    pub fn expose(&self) -> &Value {
        &self.current
    }

    /// `field`'s replaced value, expired or not (the verifier checks the expiry).
    pub fn previous(&self, field: &str) -> Option<&PreviousSecret> {
        self.previous.iter().find(|p| p.field == field)
    }

    /// Every replaced value kept, expired or not.
    pub fn all_previous(&self) -> &[PreviousSecret] {
        &self.previous
    }

    /// Reads the decrypted document; a replaced value without an expiry is dropped (it
    /// could never be shown as active, so it must not verify either).
    pub(super) fn from_stored(mut document: Value, expiries: &Expiries) -> Self {
        let stored = document
            .as_object_mut()
            .and_then(|fields| fields.remove(PREVIOUS_KEY));
        let previous = match stored {
            Some(Value::Object(values)) => values
                .iter()
                .filter_map(|(field, value)| {
                    Some(PreviousSecret::new(
                        field,
                        value.as_str()?,
                        *expiries.get(field)?,
                    ))
                })
                .collect(),
            _ => Vec::new(),
        };
        Self::with_previous(document, previous)
    }

    /// The document to encrypt and the expiries to store beside it.
    pub(super) fn to_stored(&self) -> (Value, Expiries) {
        let mut document = self.current.clone();
        if let (Some(fields), false) = (document.as_object_mut(), self.previous.is_empty()) {
            let values: Map<String, Value> = self
                .previous
                .iter()
                .map(|p| (p.field.clone(), Value::String(p.value.clone())))
                .collect();
            fields.insert(PREVIOUS_KEY.to_owned(), Value::Object(values));
        }
        let expiries = self
            .previous
            .iter()
            .map(|p| (p.field.clone(), p.expires_at))
            .collect();
        (document, expiries)
    }

    /// Decrypted bytes to secrets.
    pub(super) fn decode(plaintext: &[u8], expiries: &Expiries) -> Result<Self, StoreError> {
        let document: Value = serde_json::from_slice(plaintext)
            .map_err(|_| StoreError::Crypto("decrypted secrets are not JSON"))?;
        Ok(Self::from_stored(document, expiries))
    }
}

/// Comparing shows nothing (e.g. whether stored secrets are the ones about to be written);
/// only the current values count.
impl PartialEq<Value> for Secrets {
    fn eq(&self, other: &Value) -> bool {
        self.current == *other
    }
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secrets(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_never_show_in_debug() {
        let at = Utc::now();
        let secrets = Secrets::with_previous(
            json!({"bot_token": "xoxb-very-secret"}),
            vec![PreviousSecret::new("signing_secret", "old-very-secret", at)],
        );
        let shown = format!(
            "{secrets:?} {:?} {:?}",
            Some(&secrets),
            secrets.all_previous()
        );
        assert!(!shown.contains("very-secret"), "{shown}");
        assert!(shown.contains("signing_secret"), "{shown}");
        assert_eq!(secrets.expose()["bot_token"], "xoxb-very-secret");
    }

    #[test]
    fn the_stored_document_keeps_current_fields_where_they_were() {
        let at = "2026-12-02T10:00:00Z".parse().expect("a time");
        let secrets = Secrets::with_previous(
            json!({"signing_secret": "new", "bot_token": "b"}),
            vec![PreviousSecret::new("signing_secret", "old", at)],
        );
        let (document, expiries) = secrets.to_stored();
        assert_eq!(
            document,
            json!({"signing_secret": "new", "bot_token": "b", "_previous": {"signing_secret": "old"}})
        );
        assert_eq!(
            expiries,
            Expiries::from([("signing_secret".to_owned(), at)])
        );

        let read = Secrets::from_stored(document.clone(), &expiries);
        assert!(read == json!({"signing_secret": "new", "bot_token": "b"}));
        let previous = read.previous("signing_secret").expect("kept");
        assert_eq!((previous.expose(), previous.expires_at()), ("old", at));

        // A value whose expiry is not stored never verifies.
        let orphan = Secrets::from_stored(document, &Expiries::new());
        assert!(orphan.all_previous().is_empty());
        // Without replaced values the document is the current fields alone.
        let plain = Secrets::new(json!({"bot_token": "b"}));
        assert_eq!(
            plain.to_stored(),
            (json!({"bot_token": "b"}), Expiries::new())
        );
    }

    #[test]
    fn one_replaced_value_per_field() {
        let (early, late) = (Utc::now(), Utc::now() + chrono::Duration::hours(1));
        let secrets = Secrets::with_previous(
            json!({}),
            vec![
                PreviousSecret::new("auth_token", "a", early),
                PreviousSecret::new("auth_token", "b", late),
            ],
        );
        assert_eq!(secrets.all_previous().len(), 1);
        let previous = secrets.previous("auth_token").expect("the later one");
        assert_eq!(previous.expose(), "b");
        assert!(previous.active_at(early));
        assert!(!previous.active_at(late));
    }
}
