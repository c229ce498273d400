//! Channel adapters. Each channel is one folder named for its [`ChannelKind`]: its signature
//! check and payload parsing (`inbound.rs`), its provider client (`outbound.rs`) and its
//! property tests. What they share is in [`inbound`], [`outbound`], [`signing`] and this
//! file; the service's own mail, which is no channel, is [`system_mail`].

pub mod agent;
pub mod alert_sinks;
pub mod email;
pub mod inbound;
pub mod outbound;
pub mod signing;
pub mod slack;
pub mod system_mail;
pub mod telegram;
pub mod whatsapp;

#[cfg(test)]
mod new_channel;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod test_support;

pub use inbound::{
    Channel, InboundError, InboundEvent, InboundMessage, InboundRequest, InboundSecrets,
    PreviousSecret, REPLAY_WINDOW_SECS, SignedWith, Verified, cap_text, channel, verify_and_parse,
    verify_and_parse_rotating,
};

use serde_json::Value;
use switchboard_domain::ChannelKind;

/// The provider behind `channel`, by the name its stand-ins answer under: the fake provider
/// APIs of `switchboard demo-providers` and of the tests serve each provider at
/// `/{provider}/…`, and the scripts point the `*_API_BASE` variables there.
pub fn provider(channel: ChannelKind) -> &'static str {
    match channel {
        ChannelKind::Slack => slack::PROVIDER,
        ChannelKind::Whatsapp => whatsapp::PROVIDER,
        ChannelKind::Telegram => telegram::PROVIDER,
        ChannelKind::Email => email::PROVIDER,
    }
}

/// The secret fields each channel's connection must carry (SPEC §9), all non-empty strings.
pub fn secret_fields(channel: ChannelKind) -> &'static [&'static str] {
    inbound::channel(channel).secret_fields()
}

/// The one secret field that verifies the channel's webhooks. When it is replaced, the old
/// value may keep verifying for a while (a rotation's overlap, see
/// [`inbound::InboundSecrets`]), because the provider may still sign with it; every other
/// field is used to call the provider and switches at once.
pub fn inbound_secret_field(channel: ChannelKind) -> &'static str {
    inbound::channel(channel).inbound_secret_field()
}

/// Why a connection's `secrets` cannot be stored. Each names fields, never values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretsError {
    /// Not a JSON object.
    #[error("secrets must be an object")]
    NotAnObject,
    /// Fields the channel needs are absent, empty or not strings.
    #[error("{channel} secrets need non-empty string fields: {}", .fields.join(", "))]
    Missing {
        /// The channel.
        channel: ChannelKind,
        /// The fields.
        fields: Vec<&'static str>,
    },
    /// Fields the channel does not know.
    #[error("unknown {channel} secret fields: {}", .fields.join(", "))]
    Unknown {
        /// The channel.
        channel: ChannelKind,
        /// The fields.
        fields: Vec<String>,
    },
    /// Telegram would refuse the `secret_token`, or it is short enough to guess.
    #[error(
        "secret_token must be {} to 256 characters of A-Z, a-z, 0-9, _ and -",
        telegram::MIN_SECRET_TOKEN_LEN
    )]
    TelegramSecretToken,
    /// The `webhook_secret` is not a Standard Webhooks secret.
    #[error(
        "webhook_secret must be whsec_ followed by the base64 of the signing key (as Resend shows it)"
    )]
    EmailWebhookSecret,
}

/// Checks a connection's `secrets` object: exactly the channel's fields, each a non-empty
/// string.
pub fn validate_secrets(channel: ChannelKind, secrets: &Value) -> Result<(), SecretsError> {
    let Some(object) = secrets.as_object() else {
        return Err(SecretsError::NotAnObject);
    };
    let wanted = secret_fields(channel);
    let missing: Vec<&'static str> = wanted
        .iter()
        .copied()
        .filter(|f| {
            object
                .get(*f)
                .and_then(Value::as_str)
                .is_none_or(|s| s.trim().is_empty())
        })
        .collect();
    if !missing.is_empty() {
        return Err(SecretsError::Missing {
            channel,
            fields: missing,
        });
    }
    let unknown: Vec<String> = object
        .keys()
        .filter(|k| !wanted.contains(&k.as_str()))
        .cloned()
        .collect();
    if !unknown.is_empty() {
        return Err(SecretsError::Unknown {
            channel,
            fields: unknown,
        });
    }
    // Secrets that are present but can never work are refused now, not at every webhook.
    inbound::channel(channel).check_secrets(object)
}

/// Installs the process's rustls crypto provider (ring) if none is: reqwest is built
/// without one, and every client of a third party calls this before it builds its own.
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_are_checked_per_channel() {
        let ok = json!({"signing_secret": "s", "bot_token": "xoxb"});
        assert!(validate_secrets(ChannelKind::Slack, &ok).is_ok());
        let err = validate_secrets(ChannelKind::Slack, &json!({"bot_token": "hunter2"}))
            .expect_err("missing");
        let err = err.to_string();
        assert!(err.contains("signing_secret") && !err.contains("hunter2"));
        assert!(
            validate_secrets(
                ChannelKind::Telegram,
                &json!({"bot_token": "a", "secret_token": "", })
            )
            .is_err()
        );
        assert!(validate_secrets(ChannelKind::Email, &json!([1])).is_err());
        let extra = json!({"bot_token": "a", "secret_token": "b", "oops": "c"});
        assert!(validate_secrets(ChannelKind::Telegram, &extra).is_err());
    }

    #[test]
    fn the_inbound_secret_is_one_of_the_channels_secrets() {
        for channel in [
            ChannelKind::Slack,
            ChannelKind::Whatsapp,
            ChannelKind::Telegram,
            ChannelKind::Email,
        ] {
            assert!(secret_fields(channel).contains(&inbound_secret_field(channel)));
        }
    }

    #[test]
    fn telegram_secret_tokens_must_be_long_and_in_telegrams_alphabet() {
        let tg = |token: &str| {
            validate_secrets(
                ChannelKind::Telegram,
                &json!({"bot_token": "1:abc", "secret_token": token}),
            )
        };
        assert!(tg("abcdefgh_-ABCD12").is_ok());
        for bad in [
            "short",
            "fifteen-chars-x",
            "has spaces in it!!",
            "ünïcode-tokens-xx",
        ] {
            let err = tg(bad).expect_err(bad).to_string();
            assert!(err.contains("secret_token") && !err.contains(bad), "{err}");
        }
        assert!(tg(&"a".repeat(257)).is_err());
    }

    #[test]
    fn email_webhook_secrets_must_be_whsec_base64() {
        let email = |secret: &str| {
            validate_secrets(
                ChannelKind::Email,
                &json!({"webhook_secret": secret, "api_key": "re_1", "from_address": "a@b.c"}),
            )
        };
        assert!(email("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").is_ok());
        for bad in [
            "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "whsec_",
            "whsec_not base64!",
        ] {
            let err = email(bad).expect_err(bad).to_string();
            assert!(err.contains("webhook_secret"), "{err}");
        }
    }
}
