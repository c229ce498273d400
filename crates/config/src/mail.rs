//! System mail: the one sender the service itself writes from (operators' alerts; later
//! invitations and password resets), as opposed to a connection's email channel, which
//! sends with the customer's own Resend key. It goes through Resend or an SMTP server,
//! never both, so nobody has to guess which one sent a message; with neither it is off,
//! and its callers say so in the log instead of failing.
//!
//! `MAIL_SMTP_URL` is read here, once, into [`SmtpServer`]: the URL's scheme and `tls`
//! parameter decide the encryption, and production refuses a plaintext server that is not
//! on this machine (`production.rs`).

use crate::Config;
use percent_encoding::percent_decode_str;
use secrecy::{ExposeSecret, SecretString};
use url::{Host, Url};

/// System mail, when it is configured.
#[derive(Debug, Clone)]
pub struct SystemMail {
    /// `MAIL_FROM`: the sender, `address` or `Name <address>`.
    pub from: String,
    /// How it leaves.
    pub transport: MailTransport,
}

/// The one transport system mail goes through.
#[derive(Debug, Clone)]
pub enum MailTransport {
    /// Resend's `POST {RESEND_API_BASE}/emails` with this key (`MAIL_RESEND_API_KEY`).
    Resend {
        /// The bearer key.
        api_key: SecretString,
    },
    /// An SMTP server (`MAIL_SMTP_URL`).
    Smtp(SmtpServer),
}

/// An SMTP server, as `MAIL_SMTP_URL` names it.
#[derive(Debug, Clone)]
pub struct SmtpServer {
    /// The server's name or address.
    pub host: Host<String>,
    /// The URL's port, else 587 (STARTTLS), 465 (`smtps://`) or 25 (`tls=off`).
    pub port: u16,
    /// How the connection is encrypted.
    pub tls: SmtpTls,
    /// User name and password from the URL, percent-decoded; `None`: no `AUTH`.
    pub credentials: Option<(String, SecretString)>,
}

/// How an SMTP connection is encrypted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmtpTls {
    /// `smtp://` (or `?tls=starttls`): plaintext greeting, then STARTTLS, which the server
    /// must offer; nothing is sent before it.
    StartTls,
    /// `smtps://`: TLS from the first byte.
    Implicit,
    /// `smtp://…?tls=off`: never encrypted; for a relay or a fake on this machine.
    Off,
}

/// Why the `MAIL_*` settings cannot work. Never shows a value: the URL carries a password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MailConfigError {
    /// Both transports are set.
    #[error(
        "MAIL_RESEND_API_KEY and MAIL_SMTP_URL are both set: system mail goes through one of them"
    )]
    BothTransports,
    /// A transport is set without a sender.
    #[error("MAIL_FROM must be set with {0}")]
    NoSender(&'static str),
    /// `MAIL_FROM` is not an address.
    #[error("MAIL_FROM must be an email address or `Name <address>`")]
    BadSender,
    /// `MAIL_SMTP_URL` does not parse as this module reads it.
    #[error("MAIL_SMTP_URL {0}")]
    SmtpUrl(&'static str),
}

impl SmtpServer {
    /// Reads `smtp://[user:password@]host[:port][?tls=starttls|off]` or
    /// `smtps://[user:password@]host[:port]`. Anything else is refused rather than ignored:
    /// a misspelt `tls` parameter must not quietly change the encryption.
    pub fn parse(url: &str) -> Result<Self, MailConfigError> {
        let bad = MailConfigError::SmtpUrl;
        let url = Url::parse(url).map_err(|_| bad("is not a URL"))?;
        let mut tls_param = None;
        for (key, value) in url.query_pairs() {
            match key.as_ref() {
                "tls" if tls_param.is_none() => tls_param = Some(value.into_owned()),
                "tls" => return Err(bad("sets tls twice")),
                _ => return Err(bad("takes no parameter but tls")),
            }
        }
        let tls = match (url.scheme(), tls_param.as_deref()) {
            ("smtp", None | Some("starttls")) => SmtpTls::StartTls,
            ("smtp", Some("off")) => SmtpTls::Off,
            ("smtp", Some(_)) => return Err(bad("takes tls=starttls or tls=off")),
            ("smtps", None) => SmtpTls::Implicit,
            ("smtps", Some(_)) => return Err(bad("is TLS already with smtps:// (no tls=)")),
            _ => return Err(bad("must start with smtp:// or smtps://")),
        };
        if !matches!(url.path(), "" | "/") || url.fragment().is_some() {
            return Err(bad("takes no path"));
        }
        // `smtp:` is not a scheme the URL standard knows, so an IPv4 address comes back as
        // a name; read it as the address it is (production's loopback rule needs it).
        let host = match url.host() {
            Some(Host::Domain("")) | None => return Err(bad("names no host")),
            Some(Host::Domain(name)) => name
                .parse::<std::net::Ipv4Addr>()
                .map_or_else(|_| Host::Domain(name.to_owned()), Host::Ipv4),
            Some(host) => host.to_owned(),
        };
        let port = url.port().unwrap_or(match tls {
            SmtpTls::StartTls => 587,
            SmtpTls::Implicit => 465,
            SmtpTls::Off => 25,
        });
        let decode = |s: &str| {
            percent_decode_str(s)
                .decode_utf8()
                .map(|s| s.into_owned())
                .map_err(|_| bad("has a user name or password that is not UTF-8"))
        };
        let credentials = match (url.username(), url.password()) {
            ("", None) => None,
            ("", Some(_)) => return Err(bad("has a password but no user name")),
            (_, None) => return Err(bad("has a user name but no password")),
            (user, Some(password)) => Some((decode(user)?, decode(password)?.into())),
        };
        Ok(Self {
            host,
            port,
            tls,
            credentials,
        })
    }

    /// The host as a resolver takes it (an IPv6 address without its brackets).
    pub fn host_name(&self) -> String {
        match &self.host {
            Host::Domain(name) => name.clone(),
            Host::Ipv4(ip) => ip.to_string(),
            Host::Ipv6(ip) => ip.to_string(),
        }
    }

    /// Whether mail and the password would cross a network in clear: no TLS to a server
    /// that is not this machine.
    pub fn plaintext_beyond_this_machine(&self) -> bool {
        self.tls == SmtpTls::Off && !crate::production::is_this_machine(&self.host)
    }
}

impl SystemMail {
    /// Whether it goes over SMTP in clear to a server that is not this machine.
    pub fn plaintext_beyond_this_machine(&self) -> bool {
        matches!(&self.transport, MailTransport::Smtp(s) if s.plaintext_beyond_this_machine())
    }
}

impl Config {
    /// System mail's settings: `None` when neither transport is set. Checked at load, so
    /// a loaded configuration answers `Ok`.
    pub fn system_mail(&self) -> Result<Option<SystemMail>, MailConfigError> {
        let (var, transport) = match (&self.mail.resend_api_key, &self.mail.smtp_url) {
            (Some(_), Some(_)) => return Err(MailConfigError::BothTransports),
            (None, None) => return Ok(None),
            (Some(key), None) => (
                "MAIL_RESEND_API_KEY",
                MailTransport::Resend {
                    api_key: key.clone(),
                },
            ),
            (None, Some(url)) => (
                "MAIL_SMTP_URL",
                MailTransport::Smtp(SmtpServer::parse(url.expose_secret())?),
            ),
        };
        let from = self.mail.from.as_deref().map(str::trim).unwrap_or_default();
        if from.is_empty() {
            return Err(MailConfigError::NoSender(var));
        }
        // The whole syntax is the mailer's (it parses it with the message builder); an
        // address without its `@` is caught here, at load, in every process.
        if !from.contains('@') {
            return Err(MailConfigError::BadSender);
        }
        Ok(Some(SystemMail {
            from: from.to_owned(),
            transport,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Violation;
    use std::collections::HashMap;
    use std::path::PathBuf;

    fn load(env: &str, pairs: &[(&str, &str)]) -> Result<Config, crate::ConfigError> {
        let mut vars: HashMap<String, String> = [
            ("APP_ENV", env),
            (
                "DATABASE_URL",
                "postgres://localhost/db?sslmode=verify-full",
            ),
            ("REDIS_URL", "rediss://cache"),
            ("JWT_SECRET", &"j".repeat(64)),
            (
                "MASTER_ENCRYPTION_KEY",
                "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
            ),
            ("SENTRY_DSN", "https://key@sentry.example/1"),
            ("PUBLIC_BASE_URL", "https://switchboard.example.com"),
        ]
        .iter()
        .chain(pairs)
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        vars.retain(|_, v| !v.is_empty());
        let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../config"));
        crate::load_from(&vars, &dir)
    }

    fn refusal(pairs: &[(&str, &str)]) -> String {
        load("test", pairs).expect_err("refused").to_string()
    }

    fn smtp(url: &str) -> SmtpServer {
        SmtpServer::parse(url).expect(url)
    }

    #[test]
    fn mail_is_off_without_a_transport() {
        let c = load("test", &[]).expect("loads");
        assert!(c.system_mail().expect("valid").is_none());
        // A sender alone turns nothing on.
        let c = load("test", &[("MAIL_FROM", "ops@example.com")]).expect("loads");
        assert!(c.system_mail().expect("valid").is_none());
    }

    #[test]
    fn mail_refuses_both_transports_and_a_missing_sender() {
        let both = refusal(&[
            ("MAIL_FROM", "ops@example.com"),
            ("MAIL_RESEND_API_KEY", "re_secret_key"),
            ("MAIL_SMTP_URL", "smtp://u:hunter2@mail.example.com"),
        ]);
        assert!(
            both.contains("MAIL_RESEND_API_KEY and MAIL_SMTP_URL are both set"),
            "{both}"
        );
        assert!(!both.contains("re_secret_key") && !both.contains("hunter2"));
        let no_from = refusal(&[("MAIL_RESEND_API_KEY", "re_key")]);
        assert!(
            no_from.contains("MAIL_FROM must be set with MAIL_RESEND_API_KEY"),
            "{no_from}"
        );
        let no_from = refusal(&[("MAIL_SMTP_URL", "smtp://mail.example.com")]);
        assert!(
            no_from.contains("MAIL_FROM must be set with MAIL_SMTP_URL"),
            "{no_from}"
        );
        let bad_from = refusal(&[("MAIL_FROM", "ops"), ("MAIL_RESEND_API_KEY", "re_key")]);
        assert!(bad_from.contains("MAIL_FROM must be an email address"));
    }

    #[test]
    fn mail_reads_resend_and_its_key_from_a_file() {
        let path = std::env::temp_dir().join(format!("sb-mail-key-{}", std::process::id()));
        std::fs::write(&path, "re_from_file\n").expect("write");
        let c = load(
            "test",
            &[
                ("MAIL_FROM", "Switchboard <ops@example.com>"),
                ("MAIL_RESEND_API_KEY_FILE", &path.display().to_string()),
            ],
        )
        .expect("loads");
        let _ = std::fs::remove_file(path);
        let mail = c.system_mail().expect("valid").expect("configured");
        assert_eq!(mail.from, "Switchboard <ops@example.com>");
        let MailTransport::Resend { api_key } = mail.transport else {
            panic!("resend");
        };
        assert_eq!(api_key.expose_secret(), "re_from_file");
    }

    #[test]
    fn mail_smtp_urls_say_their_encryption_port_and_login() {
        let s = smtp("smtp://alerts%40example.com:p%3Ass@mail.example.com");
        assert_eq!((s.host_name().as_str(), s.port), ("mail.example.com", 587));
        assert_eq!(s.tls, SmtpTls::StartTls);
        let (user, password) = s.credentials.expect("login");
        assert_eq!(
            (user.as_str(), password.expose_secret()),
            ("alerts@example.com", "p:ss")
        );
        let s = smtp("smtps://mail.example.com");
        assert_eq!(
            (s.tls, s.port, s.credentials.is_none()),
            (SmtpTls::Implicit, 465, true)
        );
        let s = smtp("smtp://127.0.0.1?tls=off");
        assert_eq!((s.tls, s.port), (SmtpTls::Off, 25));
        assert_eq!(s.host, Host::<String>::Ipv4([127, 0, 0, 1].into()));
        let s = smtp("smtp://[::1]:2525/?tls=starttls");
        assert_eq!(
            (s.host_name().as_str(), s.port, s.tls),
            ("::1", 2525, SmtpTls::StartTls)
        );
    }

    #[test]
    fn mail_smtp_urls_that_could_be_misread_are_refused() {
        for (url, why) in [
            ("mail.example.com:587", "must start with smtp://"),
            ("https://mail.example.com", "must start with smtp://"),
            (
                "smtp://mail.example.com?tls=none",
                "takes tls=starttls or tls=off",
            ),
            (
                "smtp://mail.example.com?tsl=off",
                "takes no parameter but tls",
            ),
            ("smtps://mail.example.com?tls=off", "is TLS already"),
            ("smtp://mail.example.com/helo.example", "takes no path"),
            (
                "smtp://user@mail.example.com",
                "has a user name but no password",
            ),
            (
                "smtp://:secret@mail.example.com",
                "has a password but no user name",
            ),
            ("smtp:///?tls=off", "names no host"),
        ] {
            let err = SmtpServer::parse(url).expect_err(url).to_string();
            assert!(
                err.starts_with("MAIL_SMTP_URL ") && err.contains(why),
                "{url}: {err}"
            );
        }
    }

    #[test]
    fn production_mail_refuses_plaintext_smtp_beyond_this_machine() {
        let with = |url: &str| {
            let pairs = [("MAIL_FROM", "ops@example.com"), ("MAIL_SMTP_URL", url)];
            load("production", &pairs).expect(url).static_violations()
        };
        assert_eq!(
            with("smtp://relay.internal?tls=off"),
            vec![Violation::PlaintextSmtp]
        );
        assert_eq!(
            with("smtp://10.0.0.7:25?tls=off"),
            vec![Violation::PlaintextSmtp]
        );
        for url in [
            "smtp://localhost:25?tls=off",
            "smtp://127.0.0.1:1025?tls=off",
            "smtp://[::1]?tls=off",
            "smtp://u:p@smtp.example.com",
            "smtps://u:p@smtp.example.com",
        ] {
            assert_eq!(with(url), vec![], "{url}");
        }
        let line = Violation::PlaintextSmtp.to_string();
        assert!(line.starts_with("MAIL_SMTP_URL must"), "{line}");
    }
}
