//! The keys that rotate: the JWT signing secrets (`JWT_SECRETS`, or the one `JWT_SECRET`)
//! and the master keys of the channel secrets (`MASTER_ENCRYPTION_KEYS`, or the one
//! `MASTER_ENCRYPTION_KEY`). Each pair is one list whose first entry signs or encrypts and
//! whose every entry verifies or decrypts, so a new key is put first while the old one still
//! reads what it wrote. The single variable is a one-entry list, so a deployment that sets it
//! changes nothing. Setting both of a pair refuses the start: which would win is a guess, and
//! the one left behind would be a key nobody meant to keep.
//!
//! A list's entries are separated by commas or newlines (a `_FILE` may hold one per line),
//! with the whitespace around each ignored.

use crate::production::{MIN_JWT_SECRET_LEN, Violation};
use crate::{AppEnv, Config};
use base64::Engine;
use secrecy::{ExposeSecret, SecretString};

/// The non-empty entries of a key list, trimmed.
fn entries(list: &SecretString) -> Vec<&str> {
    list.expose_secret()
        .split([',', '\n'])
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect()
}

/// The first pair of positions (1-based) holding equal items.
fn repeated<T: PartialEq>(items: &[T]) -> Option<(usize, usize)> {
    items.iter().enumerate().find_map(|(j, b)| {
        items[..j]
            .iter()
            .position(|a| a == b)
            .map(|i| (i + 1, j + 1))
    })
}

impl Config {
    /// The JWT secrets, the one that signs first. Empty only if neither variable is set,
    /// which refuses the load.
    pub fn jwt_secrets(&self) -> Vec<SecretString> {
        match (&self.auth.jwt_secrets, &self.auth.jwt_secret) {
            (Some(list), _) => entries(list)
                .into_iter()
                .map(|e| SecretString::from(e.to_owned()))
                .collect(),
            (None, Some(one)) => vec![one.clone()],
            (None, None) => Vec::new(),
        }
    }

    /// The decoded AES-256 master keys, the one that encrypts first; empty when neither
    /// variable is set.
    pub fn master_keys(&self) -> Vec<[u8; 32]> {
        let channels = &self.channels;
        match (
            &channels.master_encryption_keys,
            &channels.master_encryption_key,
        ) {
            (Some(list), _) => entries(list)
                .into_iter()
                .filter_map(|e| decode_master_key(e).ok())
                .collect(),
            (None, Some(one)) => decode_master_key(one.expose_secret())
                .ok()
                .into_iter()
                .collect(),
            (None, None) => Vec::new(),
        }
    }

    /// The master key that encrypts, if one is configured.
    pub fn master_key_bytes(&self) -> Option<[u8; 32]> {
        self.master_keys().first().copied()
    }

    /// The JWT secrets shorter than production allows.
    pub(crate) fn weak_jwt_secrets(&self) -> Vec<Violation> {
        if self.app.env != AppEnv::Production {
            return Vec::new();
        }
        let len = |s: &SecretString| s.expose_secret().chars().count();
        match (&self.auth.jwt_secrets, &self.auth.jwt_secret) {
            (Some(_), _) => self
                .jwt_secrets()
                .iter()
                .enumerate()
                .filter(|(_, s)| len(s) < MIN_JWT_SECRET_LEN)
                .map(|(i, s)| Violation::WeakJwtSecrets {
                    entry: i + 1,
                    len: len(s),
                })
                .collect(),
            (None, Some(one)) if len(one) < MIN_JWT_SECRET_LEN => {
                vec![Violation::WeakJwtSecret { len: len(one) }]
            }
            _ => Vec::new(),
        }
    }
}

/// Accepts 32 bytes as standard base64 (44 chars) or hex (64 chars).
fn decode_master_key(text: &str) -> Result<[u8; 32], &'static str> {
    let text = text.trim();
    let bytes = if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        hex::decode(text).map_err(|_| "is not valid hex")?
    } else {
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|_| "must be 32 bytes as base64 or 64 hex characters")?
    };
    bytes
        .try_into()
        .map_err(|_| "must be 32 bytes as base64 or 64 hex characters")
}

/// The rules of both pairs, one line in `broken` per broken rule; never a key's value.
pub(crate) fn check(c: &Config, broken: &mut Vec<String>) {
    match (&c.auth.jwt_secret, &c.auth.jwt_secrets) {
        (Some(_), Some(_)) => broken.push(
            "set JWT_SECRET or JWT_SECRETS, not both (JWT_SECRETS lists every key, the signing one first)"
                .into(),
        ),
        (None, None) => broken.push("missing auth.jwt_secret (set JWT_SECRET or JWT_SECRETS)".into()),
        (None, Some(list)) => {
            let listed = entries(list);
            if listed.is_empty() {
                broken.push("JWT_SECRETS lists no secret".into());
            }
            if let Some((i, j)) = repeated(&listed) {
                broken.push(format!("JWT_SECRETS lists one secret twice (entries {i} and {j})"));
            }
        }
        (Some(_), None) => {}
    }
    let channels = &c.channels;
    match (&channels.master_encryption_key, &channels.master_encryption_keys) {
        (Some(_), Some(_)) => broken.push(
            "set MASTER_ENCRYPTION_KEY or MASTER_ENCRYPTION_KEYS, not both (MASTER_ENCRYPTION_KEYS lists every key, the encrypting one first)"
                .into(),
        ),
        (Some(one), None) => {
            if let Err(m) = decode_master_key(one.expose_secret()) {
                broken.push(format!("MASTER_ENCRYPTION_KEY {m}"));
            }
        }
        (None, Some(list)) => {
            let listed = entries(list);
            if listed.is_empty() {
                broken.push("MASTER_ENCRYPTION_KEYS lists no key".into());
            }
            let mut keys = Vec::new();
            for (i, entry) in listed.iter().enumerate() {
                match decode_master_key(entry) {
                    Ok(key) => keys.push(key),
                    Err(m) => broken.push(format!("MASTER_ENCRYPTION_KEYS entry {} {m}", i + 1)),
                }
            }
            // The same key twice, as hex and as base64 say, is a list that meant two keys.
            if let Some((i, j)) = repeated(&keys) {
                broken.push(format!(
                    "MASTER_ENCRYPTION_KEYS lists one key twice (entries {i} and {j})"
                ));
            }
        }
        (None, None) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::path::PathBuf;

    const STRONG: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    const OTHER: &str = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";
    /// Bytes 0..32, as base64 and as hex.
    const KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
    const KEY_HEX: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
    /// 32 bytes of 7.
    const KEY2: &str = "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=";

    fn load(pairs: &[(&str, &str)]) -> Result<Config, crate::ConfigError> {
        let vars: HashMap<String, String> = [
            ("APP_ENV", "test"),
            ("DATABASE_URL", "postgres://localhost/db"),
        ]
        .iter()
        .chain(pairs)
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../config"));
        crate::load_from(&vars, &dir)
    }

    fn refused(pairs: &[(&str, &str)]) -> String {
        load(pairs).expect_err("refused").to_string()
    }

    fn exposed(secrets: Vec<SecretString>) -> Vec<String> {
        secrets
            .iter()
            .map(|s| s.expose_secret().to_owned())
            .collect()
    }

    #[test]
    fn one_secret_is_a_one_key_list() {
        let one = load(&[("JWT_SECRET", "alone"), ("MASTER_ENCRYPTION_KEY", KEY)]).expect("loads");
        assert_eq!(exposed(one.jwt_secrets()), ["alone"]);
        let listed =
            load(&[("JWT_SECRETS", "alone"), ("MASTER_ENCRYPTION_KEYS", KEY)]).expect("loads");
        assert_eq!(exposed(listed.jwt_secrets()), ["alone"]);
        assert_eq!(one.master_keys(), listed.master_keys());
        assert_eq!(one.master_key_bytes().map(|k| k[31]), Some(31));
        // An empty variable is an unset one.
        let c = load(&[("JWT_SECRET", ""), ("JWT_SECRETS", "a")]).expect("loads");
        assert_eq!(exposed(c.jwt_secrets()), ["a"]);
    }

    #[test]
    fn lists_take_commas_or_newlines_the_first_in_use() {
        let c = load(&[
            ("JWT_SECRETS", " new-secret ,\nold-secret\n\n"),
            ("MASTER_ENCRYPTION_KEYS", &format!("{KEY2},\n {KEY_HEX}")),
        ])
        .expect("loads");
        assert_eq!(exposed(c.jwt_secrets()), ["new-secret", "old-secret"]);
        let keys = c.master_keys();
        assert_eq!(keys.len(), 2);
        assert_eq!((keys[0][0], keys[1][31]), (7, 31));
        assert_eq!(c.master_key_bytes(), Some([7u8; 32]));
    }

    #[test]
    fn lists_are_read_from_files_too() {
        let path = std::env::temp_dir().join(format!("sb-keys-{}", std::process::id()));
        std::fs::write(&path, format!("{KEY2}\n{KEY}\n")).expect("write");
        let c = load(&[
            ("JWT_SECRET", "x"),
            ("MASTER_ENCRYPTION_KEYS_FILE", &path.display().to_string()),
        ])
        .expect("loads");
        assert_eq!(c.master_keys().len(), 2);
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn both_of_a_pair_refuse_the_start() {
        let err = refused(&[("JWT_SECRET", "a"), ("JWT_SECRETS", "b,a")]);
        assert!(
            err.contains("set JWT_SECRET or JWT_SECRETS, not both"),
            "{err}"
        );
        let err = refused(&[
            ("JWT_SECRET", "a"),
            ("MASTER_ENCRYPTION_KEY", KEY),
            ("MASTER_ENCRYPTION_KEYS", KEY),
        ]);
        assert!(
            err.contains("set MASTER_ENCRYPTION_KEY or MASTER_ENCRYPTION_KEYS, not both"),
            "{err}"
        );
        let err = refused(&[]);
        assert!(err.contains("set JWT_SECRET or JWT_SECRETS"), "{err}");
    }

    #[test]
    fn a_bad_list_names_the_entry_never_the_value() {
        let cases = [
            (("JWT_SECRETS", " , "), "JWT_SECRETS lists no secret"),
            (
                ("JWT_SECRETS", "same,other,same"),
                "JWT_SECRETS lists one secret twice (entries 1 and 3)",
            ),
            (
                ("MASTER_ENCRYPTION_KEYS", ","),
                "MASTER_ENCRYPTION_KEYS lists no key",
            ),
            (
                ("MASTER_ENCRYPTION_KEYS", "not-a-key-at-all"),
                "MASTER_ENCRYPTION_KEYS entry 1 must be 32 bytes",
            ),
            (
                ("MASTER_ENCRYPTION_KEYS", &format!("{KEY2},{KEY},{KEY_HEX}")),
                "MASTER_ENCRYPTION_KEYS lists one key twice (entries 2 and 3)",
            ),
        ];
        for ((var, value), expected) in cases {
            let mut pairs = vec![(var, value)];
            if var != "JWT_SECRETS" {
                pairs.push(("JWT_SECRET", "x"));
            }
            let err = refused(&pairs);
            assert!(err.contains(expected), "{var}={value}: {err}");
            assert!(
                !err.contains("not-a-key-at-all") && !err.contains("same"),
                "{err}"
            );
        }
    }

    #[test]
    fn production_wants_every_jwt_secret_long() {
        let production = |pairs: &[(&str, &str)]| {
            let mut all = vec![
                ("APP_ENV", "production"),
                ("REDIS_URL", "rediss://localhost"),
                ("MASTER_ENCRYPTION_KEYS", KEY),
                ("SENTRY_DSN", "https://key@sentry.example/1"),
                ("PUBLIC_BASE_URL", "https://switchboard.example.com"),
            ];
            all.extend_from_slice(pairs);
            load(&all).expect("loads").static_violations()
        };
        assert_eq!(
            production(&[("JWT_SECRETS", &format!("{STRONG},{OTHER}"))]),
            vec![]
        );
        let v = production(&[("JWT_SECRETS", &format!("{STRONG},short-old-one"))]);
        assert_eq!(v, vec![Violation::WeakJwtSecrets { entry: 2, len: 13 }]);
        assert_eq!(
            v[0].to_string(),
            "JWT_SECRETS entry 2 must be at least 64 characters in production (it has 13)"
        );
        let v = production(&[("JWT_SECRET", "short")]);
        assert_eq!(v, vec![Violation::WeakJwtSecret { len: 5 }]);
        // Neither master key variable set.
        let v = load(&[
            ("APP_ENV", "production"),
            ("JWT_SECRETS", STRONG),
            ("REDIS_URL", "rediss://localhost"),
            ("SENTRY_DSN", "https://key@sentry.example/1"),
            ("PUBLIC_BASE_URL", "https://switchboard.example.com"),
        ])
        .expect("loads")
        .static_violations();
        assert_eq!(v, vec![Violation::NoMasterKey]);
    }
}
