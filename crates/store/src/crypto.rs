//! AES-256-GCM encryption of channel secrets under `MASTER_ENCRYPTION_KEY`.
//!
//! Stored form: a 12-byte random nonce followed by the ciphertext and tag. The connection id
//! is bound as associated data, so a ciphertext copied onto another row does not decrypt.

use crate::StoreError;
use aes_gcm::aead::{Aead, KeyInit, OsRng, Payload};
use aes_gcm::{AeadCore, Aes256Gcm, Nonce};
use uuid::Uuid;

const NONCE_LEN: usize = 12;

/// Encrypts and decrypts secrets; cheap to clone.
#[derive(Clone)]
pub struct SecretCipher {
    cipher: Aes256Gcm,
}

impl std::fmt::Debug for SecretCipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretCipher(..)")
    }
}

impl SecretCipher {
    /// A cipher for the given 32-byte key.
    pub fn new(key: &[u8; 32]) -> Self {
        Self {
            cipher: Aes256Gcm::new(key.into()),
        }
    }

    /// Encrypts `plaintext` for the row `id`.
    pub fn seal(&self, id: Uuid, plaintext: &[u8]) -> Result<Vec<u8>, StoreError> {
        let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
        let mut out = nonce.to_vec();
        let sealed = self
            .cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: plaintext,
                    aad: id.as_bytes(),
                },
            )
            .map_err(|_| StoreError::Crypto("encryption failed"))?;
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    /// Decrypts what [`SecretCipher::seal`] produced for the same row.
    pub fn open(&self, id: Uuid, stored: &[u8]) -> Result<Vec<u8>, StoreError> {
        if stored.len() <= NONCE_LEN {
            return Err(StoreError::Crypto("ciphertext too short"));
        }
        let (nonce, sealed) = stored.split_at(NONCE_LEN);
        self.cipher
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: sealed,
                    aad: id.as_bytes(),
                },
            )
            .map_err(|_| StoreError::Crypto("decryption failed (wrong key or tampered row)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_binding() {
        let cipher = SecretCipher::new(&[7u8; 32]);
        let id = Uuid::new_v4();
        let sealed = cipher.seal(id, b"{\"bot_token\":\"xoxb\"}").expect("seal");
        assert!(!sealed.windows(4).any(|w| w == b"xoxb"));
        assert_eq!(
            cipher.open(id, &sealed).expect("open"),
            b"{\"bot_token\":\"xoxb\"}"
        );
        assert!(
            cipher.open(Uuid::new_v4(), &sealed).is_err(),
            "bound to its row"
        );
        assert!(
            SecretCipher::new(&[8u8; 32]).open(id, &sealed).is_err(),
            "wrong key"
        );
    }
}
