//! Resend's `email.received` webhook carries an email's metadata only: the body is fetched
//! with the connection's own API key (the HTTP client is `channels::email::received`).

use super::JobError;
use switchboard_channels::email::received::{FetchError, ReceivedEmails};
use switchboard_store::crypto::SecretCipher;
use switchboard_store::{PgPool, connections};
use url::Url;
use uuid::Uuid;

/// Fetches received emails' bodies with their connection's key; cheap to clone.
#[derive(Clone, Debug)]
pub struct EmailBodies {
    client: ReceivedEmails,
    cipher: SecretCipher,
}

impl EmailBodies {
    /// A fetcher against `base` (`RESEND_API_BASE`), decrypting connection secrets with
    /// `cipher`.
    pub fn new(base: Url, cipher: SecretCipher) -> Self {
        Self {
            client: ReceivedEmails::new(base),
            cipher,
        }
    }

    /// The plain-text body of received email `email_id` of connection `connection_id`; a
    /// deleted connection, or one without a key, is a refusal no retry fixes.
    pub(super) async fn fetch(
        &self,
        db: &PgPool,
        connection_id: Uuid,
        email_id: &str,
    ) -> Result<String, JobError> {
        let Some((_, secrets)) =
            connections::get_with_secrets(db, &self.cipher, connection_id).await?
        else {
            return Err(JobError::EmailBody(FetchError::Refused(
                "the email connection was deleted".into(),
            )));
        };
        let Some(api_key) = secrets.expose()["api_key"].as_str() else {
            return Err(JobError::EmailBody(FetchError::Refused(
                "the email connection has no api_key".into(),
            )));
        };
        self.client
            .fetch(api_key, email_id)
            .await
            .map_err(JobError::EmailBody)
    }
}
