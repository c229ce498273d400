//! AES-256-GCM encryption of channel secrets under the master keys (`MASTER_ENCRYPTION_KEYS`,
//! or the one `MASTER_ENCRYPTION_KEY`): the first key encrypts, every listed key decrypts,
//! so a key can be replaced without making a stored secret unreadable (see
//! `switchboard admin reencrypt` and docs/OPERATIONS.md, "Rotating the master key").
//!
//! Stored form: a 12-byte header `v2:<key id>:`, a 12-byte random nonce, then the ciphertext
//! and tag. The key id is the first 8 hex digits of SHA-256 over the key's 32 bytes: it names
//! the key without an operator choosing (so no two keys can be given one name, and a key has
//! the same id whichever variable lists it), and reveals nothing usable about it. The
//! connection id and the header are bound as associated data, so a ciphertext copied onto
//! another row, or given another header, does not decrypt.
//!
//! Ciphertexts written before key ids are the nonce, ciphertext and tag alone. They are
//! recognised by not starting with a header (a random nonce starts with one with probability
//! 2⁻⁶⁴: `v2:` is 2⁻²⁴, eight lowercase hex digits 2⁻³², the colon 2⁻⁸) and opened by trying
//! each key in turn: the tag says which key is the right one, and before key ids there was
//! exactly one.

use crate::StoreError;
use aes_gcm::aead::{Aead, KeyInit, OsRng, Payload};
use aes_gcm::{AeadCore, Aes256Gcm, Nonce};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use uuid::Uuid;

const NONCE_LEN: usize = 12;
/// The first bytes of every ciphertext with a key id.
pub const MAGIC: &[u8; 3] = b"v2:";
/// Hex digits of a key id.
const KEY_ID_LEN: usize = 8;
/// `v2:` + key id + `:`.
pub const HEADER_LEN: usize = MAGIC.len() + KEY_ID_LEN + 1;

/// Which master key sealed a ciphertext: 8 lowercase hex digits of the key's SHA-256.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KeyId([u8; KEY_ID_LEN]);

impl KeyId {
    /// The id of `key`.
    pub fn of(key: &[u8; 32]) -> KeyId {
        let digest = Sha256::digest(key);
        let mut id = [0u8; KEY_ID_LEN];
        id.copy_from_slice(&hex::encode(&digest[..KEY_ID_LEN / 2]).as_bytes()[..KEY_ID_LEN]);
        KeyId(id)
    }

    /// The key id in `stored`'s header; `None` for a ciphertext from before key ids. Reads the
    /// header only, so the first [`HEADER_LEN`] bytes of a row are enough.
    pub fn in_header(stored: &[u8]) -> Option<KeyId> {
        let header = stored.get(..HEADER_LEN)?;
        let (magic, rest) = header.split_at(MAGIC.len());
        let (id, colon) = rest.split_at(KEY_ID_LEN);
        let hex_digit = |b: &u8| b.is_ascii_digit() || (b'a'..=b'f').contains(b);
        if magic != MAGIC || colon != b":" || !id.iter().all(hex_digit) {
            return None;
        }
        id.try_into().ok().map(KeyId)
    }

    /// The key id as text.
    pub fn as_str(&self) -> &str {
        // Only ever built from lowercase hex digits.
        std::str::from_utf8(&self.0).unwrap_or("????????")
    }

    /// The header of a ciphertext sealed under this key.
    pub fn header(&self) -> [u8; HEADER_LEN] {
        let mut header = [b':'; HEADER_LEN];
        header[..MAGIC.len()].copy_from_slice(MAGIC);
        header[MAGIC.len()..MAGIC.len() + KEY_ID_LEN].copy_from_slice(&self.0);
        header
    }
}

impl std::fmt::Display for KeyId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Debug for KeyId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KeyId({})", self.as_str())
    }
}

/// Encrypts under the first of its keys and decrypts under any of them; cheap to clone.
#[derive(Clone)]
pub struct SecretCipher {
    keys: Arc<[(KeyId, Aes256Gcm)]>,
}

impl std::fmt::Debug for SecretCipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretCipher(..)")
    }
}

impl SecretCipher {
    /// A cipher with one 32-byte key.
    pub fn new(key: &[u8; 32]) -> Self {
        Self {
            keys: Arc::new([(KeyId::of(key), Aes256Gcm::new(key.into()))]),
        }
    }

    /// A cipher that encrypts under `keys[0]` and decrypts under any of `keys`; `None`
    /// without a key.
    pub fn with_keys(keys: &[[u8; 32]]) -> Option<Self> {
        if keys.is_empty() {
            return None;
        }
        let keys = keys
            .iter()
            .map(|key| (KeyId::of(key), Aes256Gcm::new(key.into())))
            .collect();
        Some(Self { keys })
    }

    /// The id of the key that encrypts.
    pub fn current(&self) -> KeyId {
        self.keys[0].0
    }

    /// Whether `id` is one of this cipher's keys.
    pub fn knows(&self, id: KeyId) -> bool {
        self.keys.iter().any(|(k, _)| *k == id)
    }

    /// Whether `stored` is sealed under the key that encrypts (nothing to re-encrypt).
    pub fn is_current(&self, stored: &[u8]) -> bool {
        KeyId::in_header(stored) == Some(self.current())
    }

    /// Encrypts `plaintext` for the row `id` under the first key.
    pub fn seal(&self, id: Uuid, plaintext: &[u8]) -> Result<Vec<u8>, StoreError> {
        let (key_id, cipher) = &self.keys[0];
        let header = key_id.header();
        let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
        let sealed = cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: plaintext,
                    aad: &associated(id, &header),
                },
            )
            .map_err(|_| StoreError::Crypto("encryption failed"))?;
        let mut out = Vec::with_capacity(HEADER_LEN + NONCE_LEN + sealed.len());
        out.extend_from_slice(&header);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    /// Decrypts what [`SecretCipher::seal`] produced for the same row, under whichever key
    /// sealed it; a ciphertext from before key ids is tried with every key.
    pub fn open(&self, id: Uuid, stored: &[u8]) -> Result<Vec<u8>, StoreError> {
        let Some(key_id) = KeyId::in_header(stored) else {
            return self
                .keys
                .iter()
                .find_map(|(_, cipher)| decrypt(cipher, id.as_bytes(), stored).ok())
                .ok_or(StoreError::Crypto(
                    "decryption failed (no master key opens it, or the row was tampered with)",
                ));
        };
        let Some((_, cipher)) = self.keys.iter().find(|(k, _)| *k == key_id) else {
            return Err(StoreError::Crypto(
                "sealed under a master key id that no configured key has",
            ));
        };
        let (header, rest) = stored.split_at(HEADER_LEN);
        decrypt(cipher, &associated(id, header), rest)
    }
}

/// The associated data of a ciphertext with a header: the row's id, then the header.
fn associated(id: Uuid, header: &[u8]) -> Vec<u8> {
    let mut aad = Vec::with_capacity(16 + header.len());
    aad.extend_from_slice(id.as_bytes());
    aad.extend_from_slice(header);
    aad
}

/// Opens `nonce || ciphertext+tag`.
fn decrypt(cipher: &Aes256Gcm, aad: &[u8], stored: &[u8]) -> Result<Vec<u8>, StoreError> {
    if stored.len() <= NONCE_LEN {
        return Err(StoreError::Crypto("ciphertext too short"));
    }
    let (nonce, sealed) = stored.split_at(NONCE_LEN);
    cipher
        .decrypt(Nonce::from_slice(nonce), Payload { msg: sealed, aad })
        .map_err(|_| StoreError::Crypto("decryption failed (wrong key or tampered row)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: [u8; 32] = [7u8; 32];
    const NEW: [u8; 32] = [8u8; 32];
    const SECRET: &[u8] = b"{\"bot_token\":\"xoxb\"}";

    /// The stored form before key ids, as the code of that time wrote it.
    fn legacy_seal(key: &[u8; 32], id: Uuid, plaintext: &[u8]) -> Vec<u8> {
        let cipher = Aes256Gcm::new(key.into());
        let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
        let mut out = nonce.to_vec();
        let payload = Payload {
            msg: plaintext,
            aad: id.as_bytes(),
        };
        out.extend_from_slice(&cipher.encrypt(&nonce, payload).expect("seal"));
        out
    }

    #[test]
    fn round_trip_and_binding() {
        let cipher = SecretCipher::new(&OLD);
        let id = Uuid::new_v4();
        let sealed = cipher.seal(id, SECRET).expect("seal");
        assert!(!sealed.windows(4).any(|w| w == b"xoxb"));
        assert_eq!(cipher.open(id, &sealed).expect("open"), SECRET);
        assert!(
            cipher.open(Uuid::new_v4(), &sealed).is_err(),
            "bound to its row"
        );
        assert!(
            SecretCipher::new(&NEW).open(id, &sealed).is_err(),
            "wrong key"
        );
    }

    #[test]
    fn the_key_id_travels_with_the_ciphertext() {
        let id = Uuid::new_v4();
        let rotated = SecretCipher::with_keys(&[NEW, OLD]).expect("keys");
        let sealed = rotated.seal(id, SECRET).expect("seal");
        let kid = KeyId::in_header(&sealed).expect("a header");
        assert_eq!(kid, KeyId::of(&NEW));
        assert_eq!(kid.as_str().len(), 8);
        assert!(sealed.starts_with(format!("v2:{kid}:").as_bytes()));
        assert!(rotated.is_current(&sealed));
        // Whichever listed key sealed it opens it, in any order.
        let under_old = SecretCipher::new(&OLD).seal(id, SECRET).expect("seal");
        assert!(!rotated.is_current(&under_old));
        for cipher in [
            &rotated,
            &SecretCipher::with_keys(&[OLD, NEW]).expect("keys"),
        ] {
            assert_eq!(cipher.open(id, &sealed).expect("new"), SECRET);
            assert_eq!(cipher.open(id, &under_old).expect("old"), SECRET);
        }
        // The header is bound: another key id on the same bytes does not open.
        let mut relabelled = sealed.clone();
        relabelled[3..11].copy_from_slice(KeyId::of(&OLD).as_str().as_bytes());
        assert!(rotated.open(id, &relabelled).is_err());
    }

    #[test]
    fn a_ciphertext_from_before_key_ids_still_opens() {
        let id = Uuid::new_v4();
        let legacy = legacy_seal(&OLD, id, SECRET);
        assert_eq!(KeyId::in_header(&legacy), None);
        assert_eq!(
            SecretCipher::new(&OLD).open(id, &legacy).expect("one key"),
            SECRET
        );
        // After a new key was put first, the old one still opens it.
        let rotated = SecretCipher::with_keys(&[NEW, OLD]).expect("keys");
        assert_eq!(rotated.open(id, &legacy).expect("second key"), SECRET);
        assert!(!rotated.is_current(&legacy));
        assert!(SecretCipher::new(&NEW).open(id, &legacy).is_err());
    }

    #[test]
    fn an_unknown_key_id_is_an_error_that_says_so() {
        let id = Uuid::new_v4();
        let sealed = SecretCipher::new(&OLD).seal(id, SECRET).expect("seal");
        let error = SecretCipher::new(&NEW)
            .open(id, &sealed)
            .expect_err("unknown");
        assert!(
            error
                .to_string()
                .contains("master key id that no configured key has"),
            "{error}"
        );
        let without = SecretCipher::new(&NEW);
        assert!(!without.knows(KeyId::of(&OLD)));
        assert!(SecretCipher::with_keys(&[]).is_none());
    }

    #[test]
    fn only_a_whole_header_is_one() {
        assert_eq!(KeyId::in_header(b"v2:0123abcd"), None, "too short");
        assert_eq!(KeyId::in_header(b"v2:0123ABCD:"), None, "upper case");
        assert_eq!(KeyId::in_header(b"v3:0123abcd:"), None);
        assert_eq!(KeyId::in_header(b"v2:0123abcd;"), None);
        let id = KeyId::in_header(b"v2:0123abcd:").expect("header");
        assert_eq!(id.header(), *b"v2:0123abcd:");
        // The id is SHA-256's first four bytes, so an operator can compute it:
        // `base64 -d <<<"$KEY" | sha256sum | cut -c1-8`.
        assert_eq!(KeyId::of(&[0u8; 32]).as_str(), "66687aad");
    }
}
