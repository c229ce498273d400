//! System mail: what the service itself sends (operators' alerts, invitations and
//! password resets), through the one transport the configuration names, Resend or SMTP
//! ([`switchboard_config::SystemMail`]). A connection's email channel is not this: it
//! answers customers with the connection's own Resend key (`email::outbound`).
//!
//! Nothing here retries or queues: a failed send says whether trying again can help
//! ([`MailError::is_retryable`]) and the caller, which knows what the mail is worth,
//! decides. An unconfigured mailer is still a [`Mailer`], so callers hold one either way,
//! and skip (saying so in the log) when [`Mailer::is_configured`] says no; `/ready` never
//! depends on it.

mod resend;
mod smtp;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use lettre::address::AddressError;
use lettre::message::Mailbox;
use switchboard_config::{Config, MailConfigError, MailTransport, SystemMail};
use url::Url;

/// One message to one recipient.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mail {
    /// `address` or `Name <address>`.
    pub to: String,
    /// One line: line breaks are sent as spaces.
    pub subject: String,
    /// The plain-text body, always sent: the part every client can show.
    pub text: String,
    /// The same content as HTML, sent as an alternative to `text`.
    pub html: Option<String>,
}

/// What the transport said when it took a mail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentMail {
    /// Resend's email `id`, or the SMTP server's acceptance reply (`2.0.0 Ok: queued as
    /// 4ZfT1`, which names its queue id); `None` when the answer carried none.
    pub provider_id: Option<String>,
}

/// The transport a mailer sends through, for logs and errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// Resend's send API.
    Resend,
    /// An SMTP server.
    Smtp,
}

impl fmt::Display for Via {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Via::Resend => "resend",
            Via::Smtp => "smtp",
        })
    }
}

/// Why a mail was not sent. [`MailError::is_retryable`] splits them: the network, a rate
/// limit or a server's own trouble may pass; a refusal or a bad address will not.
#[derive(Debug, thiserror::Error)]
pub enum MailError {
    /// No transport is configured: nothing was tried, and nothing to retry.
    #[error("system mail is not configured (MAIL_FROM with MAIL_RESEND_API_KEY or MAIL_SMTP_URL)")]
    NotConfigured,
    /// An address does not parse. Permanent.
    #[error("`{field}` is not an email address")]
    InvalidAddress {
        /// `to`.
        field: &'static str,
        /// The parser's reason.
        #[source]
        source: AddressError,
    },
    /// The message could not be put together. Permanent.
    #[error("the message cannot be built")]
    Unbuildable(#[source] lettre::error::Error),
    /// The transport could not be reached or did not answer in time (connection refused,
    /// DNS, a TLS handshake, a timeout). Retryable.
    #[error("{via} could not be reached")]
    Unreachable {
        /// Which transport.
        via: Via,
        /// What failed.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The transport asked to try later: Resend's 408, 429 or 5xx, an SMTP 4xx. Retryable.
    #[error("{via} answered {code}, try later: {detail}")]
    Deferred {
        /// Which transport.
        via: Via,
        /// The HTTP status or SMTP reply code.
        code: u16,
        /// The transport's own words.
        detail: String,
        /// How long Resend asked to wait, when it said.
        retry_after: Option<Duration>,
    },
    /// The transport refused the mail: another Resend 4xx, an SMTP 5xx (an unknown mailbox,
    /// a refused login). Permanent.
    #[error("{via} refused the mail with {code}: {detail}")]
    Refused {
        /// Which transport.
        via: Via,
        /// The HTTP status or SMTP reply code.
        code: u16,
        /// The transport's own words.
        detail: String,
    },
    /// The SMTP conversation went wrong on our side of it (no STARTTLS on offer, no
    /// authentication mechanism in common, an answer that does not parse): the same
    /// server will do the same again. Permanent.
    #[error("{via} conversation failed")]
    Protocol {
        /// Which transport.
        via: Via,
        /// What failed.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl MailError {
    /// Whether sending the same mail again may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Unreachable { .. } | Self::Deferred { .. })
    }

    /// How long the transport asked to wait before trying again, when it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Deferred { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// Why [`Mailer::from_config`] failed: each means the configuration cannot send anything.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The `MAIL_*` settings do not hold together (a loaded configuration always does).
    #[error(transparent)]
    Config(#[from] MailConfigError),
    /// `MAIL_FROM` does not parse.
    #[error("MAIL_FROM is not an email address or `Name <address>`")]
    From(#[source] AddressError),
    /// `RESEND_API_BASE` cannot take the `/emails` path.
    #[error("RESEND_API_BASE cannot take a path")]
    ResendBase,
    /// reqwest could not build its client (no TLS provider installed, say).
    #[error("building the Resend HTTP client")]
    Client(#[source] reqwest::Error),
    /// lettre could not set up TLS for the SMTP server.
    #[error("setting up TLS for MAIL_SMTP_URL")]
    SmtpTls(#[source] lettre::transport::smtp::Error),
}

/// The system mailer. Cheap to clone: clones share one HTTP client or SMTP setup.
#[derive(Clone)]
pub struct Mailer {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    from: Mailbox,
    /// `MAIL_FROM` as configured, which Resend is given as is.
    from_text: String,
    transport: Transport,
}

enum Transport {
    Resend(resend::Resend),
    Smtp(smtp::Smtp),
}

impl Mailer {
    /// The mailer the configuration describes: Resend at `RESEND_API_BASE`, or the SMTP
    /// server; each call or step bounded by `OUTBOUND_TIMEOUT_MS`. Not configured when
    /// neither is set. Resend needs the process's rustls provider installed, as every
    /// provider client does.
    pub fn from_config(config: &Config) -> Result<Self, BuildError> {
        match config.system_mail()? {
            None => Ok(Self::not_configured()),
            Some(mail) => Self::new(
                mail,
                &config.channels.resend_api_base,
                config.outbound.timeout,
            ),
        }
    }

    /// A mailer for `mail`, with Resend at `resend_api_base`, bounding each call (Resend)
    /// or each step (SMTP: connect, each command) by `timeout`.
    pub fn new(
        mail: SystemMail,
        resend_api_base: &Url,
        timeout: Duration,
    ) -> Result<Self, BuildError> {
        let from = mail.from.parse::<Mailbox>().map_err(BuildError::From)?;
        let transport = match mail.transport {
            MailTransport::Resend { api_key } => {
                Transport::Resend(resend::Resend::new(resend_api_base, api_key, timeout)?)
            }
            MailTransport::Smtp(server) => {
                Transport::Smtp(smtp::Smtp::new(&server, timeout).map_err(BuildError::SmtpTls)?)
            }
        };
        let inner = Inner {
            from,
            from_text: mail.from,
            transport,
        };
        Ok(Self {
            inner: Some(Arc::new(inner)),
        })
    }

    /// A mailer that sends nothing: every [`Mailer::send`] is [`MailError::NotConfigured`].
    pub fn not_configured() -> Self {
        Self { inner: None }
    }

    /// Whether a transport is configured. Callers check it to skip (and log the skip)
    /// rather than treat an unconfigured mailer as a failure.
    pub fn is_configured(&self) -> bool {
        self.inner.is_some()
    }

    /// The transport, when one is configured.
    pub fn via(&self) -> Option<Via> {
        self.inner.as_ref().map(|i| match i.transport {
            Transport::Resend(_) => Via::Resend,
            Transport::Smtp(_) => Via::Smtp,
        })
    }

    /// Sends one mail, once. Never panics; every failure says whether a retry may help.
    pub async fn send(&self, mail: &Mail) -> Result<SentMail, MailError> {
        let Some(inner) = &self.inner else {
            return Err(MailError::NotConfigured);
        };
        let to = mail
            .to
            .trim()
            .parse::<Mailbox>()
            .map_err(|source| MailError::InvalidAddress {
                field: "to",
                source,
            })?;
        // A line break in a header would end it and start another one.
        let subject = mail.subject.replace(['\r', '\n'], " ");
        match &inner.transport {
            Transport::Resend(api) => {
                api.send(&inner.from_text, mail.to.trim(), &subject, mail)
                    .await
            }
            Transport::Smtp(server) => server.send(&inner.from, to, &subject, mail).await,
        }
    }
}

impl fmt::Debug for Mailer {
    /// The transport and the sender; never a key or a password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.inner {
            None => f.write_str("Mailer(not configured)"),
            Some(inner) => f
                .debug_struct("Mailer")
                .field("via", &self.via())
                .field("from", &inner.from_text)
                .finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::SecretString;

    fn resend_mailer(from: &str) -> Result<Mailer, BuildError> {
        let mail = SystemMail {
            from: from.to_owned(),
            transport: MailTransport::Resend {
                api_key: SecretString::from("re_hidden_key"),
            },
        };
        let base = Url::parse("http://127.0.0.1:9").expect("url");
        Mailer::new(mail, &base, Duration::from_secs(1))
    }

    #[tokio::test]
    async fn an_unconfigured_mailer_sends_nothing_and_says_why() {
        let mailer = Mailer::not_configured();
        assert!(!mailer.is_configured() && mailer.via().is_none());
        let mail = Mail {
            to: "ops@example.com".into(),
            subject: "s".into(),
            text: "t".into(),
            html: None,
        };
        let err = mailer.send(&mail).await.expect_err("not configured");
        assert!(matches!(err, MailError::NotConfigured) && !err.is_retryable());
        assert!(err.to_string().contains("MAIL_FROM"), "{err}");
    }

    #[tokio::test]
    async fn a_bad_recipient_is_permanent_and_a_bad_sender_refuses_the_mailer() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mailer = resend_mailer("Switchboard <ops@example.com>").expect("mailer");
        assert_eq!(mailer.via(), Some(Via::Resend));
        assert!(!format!("{mailer:?}").contains("re_hidden_key"));
        let mail = Mail {
            to: "not an address".into(),
            subject: "s".into(),
            text: "t".into(),
            html: None,
        };
        let err = mailer.send(&mail).await.expect_err("refused");
        assert!(
            matches!(err, MailError::InvalidAddress { field: "to", .. }),
            "{err:?}"
        );
        assert!(!err.is_retryable());
        let err = resend_mailer("ops@@example").expect_err("bad sender");
        assert!(matches!(err, BuildError::From(_)), "{err:?}");
    }
}
