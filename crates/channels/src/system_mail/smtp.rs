//! System mail through an SMTP server with lettre. Each send opens its own connection
//! (no pool: system mail is rare, and a pooled connection the server has closed is one
//! more way to fail). Reply codes classify as RFC 5321 defines them: 4xx is transient,
//! 5xx permanent; the tests of this with a real conversation are in the API's integration
//! tests (`mailer.rs`), against `switchboard_testing::FakeSmtp`.

use std::time::Duration;

use lettre::message::header::ContentType;
use lettre::message::{Mailbox, MultiPart};
use lettre::transport::smtp::Error as SmtpError;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use secrecy::ExposeSecret;
use switchboard_config::{SmtpServer, SmtpTls};

use super::{Mail, MailError, SentMail, Via};

pub(super) struct Smtp {
    transport: AsyncSmtpTransport<Tokio1Executor>,
}

impl Smtp {
    /// TLS is verified against the system roots, with the host name the URL gave.
    /// `timeout` bounds the connection and each command's answer.
    pub(super) fn new(server: &SmtpServer, timeout: Duration) -> Result<Self, SmtpError> {
        let host = server.host_name();
        // "Dangerous" only in that it starts without TLS: the TLS the URL asked for is set
        // right below.
        let builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&host)
            .port(server.port)
            .timeout(Some(timeout));
        let builder = match server.tls {
            SmtpTls::StartTls => builder.tls(Tls::Required(TlsParameters::new(host)?)),
            SmtpTls::Implicit => builder.tls(Tls::Wrapper(TlsParameters::new(host)?)),
            SmtpTls::Off => builder.tls(Tls::None),
        };
        let builder = match &server.credentials {
            Some((user, password)) => builder.credentials(Credentials::new(
                user.clone(),
                password.expose_secret().to_owned(),
            )),
            None => builder,
        };
        Ok(Self {
            transport: builder.build(),
        })
    }

    pub(super) async fn send(
        &self,
        from: &Mailbox,
        to: Mailbox,
        subject: &str,
        mail: &Mail,
    ) -> Result<SentMail, MailError> {
        let builder = Message::builder()
            .from(from.clone())
            .to(to)
            .subject(subject);
        let message = match &mail.html {
            None => builder
                .header(ContentType::TEXT_PLAIN)
                .body(mail.text.clone()),
            Some(html) => builder.multipart(MultiPart::alternative_plain_html(
                mail.text.clone(),
                html.clone(),
            )),
        }
        .map_err(MailError::Unbuildable)?;
        let reply = self.transport.send(message).await.map_err(classify)?;
        let text = reply.message().collect::<Vec<_>>().join(" ");
        let text = text.trim();
        Ok(SentMail {
            provider_id: (!text.is_empty()).then(|| text.to_owned()),
        })
    }
}

/// A reply code says it all: 4xx may pass, 5xx will not. Without one, the network (or
/// TLS, or a timeout) failed, which may pass too; what is left is the conversation itself
/// going wrong (no STARTTLS offered, no common login mechanism), which will not.
fn classify(error: SmtpError) -> MailError {
    if let Some(code) = error.status() {
        let code = u16::from(code);
        let detail = std::error::Error::source(&error)
            .map_or_else(|| error.to_string(), ToString::to_string);
        return if error.is_transient() {
            MailError::Deferred {
                via: Via::Smtp,
                code,
                detail,
                retry_after: None,
            }
        } else {
            MailError::Refused {
                via: Via::Smtp,
                code,
                detail,
            }
        };
    }
    let source = Box::new(error);
    if source.is_client() || source.is_response() {
        MailError::Protocol {
            via: Via::Smtp,
            source,
        }
    } else {
        MailError::Unreachable {
            via: Via::Smtp,
            source,
        }
    }
}
