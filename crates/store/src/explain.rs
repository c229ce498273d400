//! One readable line for a failure to reach Postgres, naming the setting that fixes it.
//!
//! A TLS or pooler misconfiguration otherwise surfaces as the driver's nested errors (the
//! same cause printed at every level of the chain) or as a bare pool timeout. Start-up,
//! `switchboard migrate` and `/ready`'s log line all go through [`explain`]; `/ready`'s body
//! carries only [`Cause::setting`], never the driver's text.

use crate::StoreError;

/// What went wrong, as far as the operator's settings are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The server's certificate is not signed by a trusted CA.
    UntrustedCertificate,
    /// The certificate does not name the host the URL connects to.
    WrongHostName,
    /// TLS was required but the server (or pooler) does not offer it.
    NoTlsOnServer,
    /// Any other TLS failure (expired certificate, protocol mismatch, unreadable CA file).
    Tls,
    /// Named prepared statements reached a transaction-mode pooler.
    NamedStatements,
    /// The pooler refused a startup parameter the driver sends.
    StartupParameter,
    /// The server refused the login.
    Login,
    /// Nothing answered at the URL's host and port, or not in time.
    Unreachable,
    /// Anything else: the driver's own message says more.
    Other,
}

impl Cause {
    /// The setting an operator changes for this cause.
    pub fn setting(self) -> Option<&'static str> {
        match self {
            Cause::UntrustedCertificate => Some("DATABASE_TLS_CA"),
            Cause::WrongHostName | Cause::Login | Cause::Unreachable => Some("DATABASE_URL"),
            Cause::NoTlsOnServer | Cause::Tls => Some("DATABASE_TLS"),
            Cause::NamedStatements | Cause::StartupParameter => Some("DATABASE_POOLER"),
            Cause::Other => None,
        }
    }

    fn advice(self) -> &'static str {
        match self {
            Cause::UntrustedCertificate => {
                "the server's TLS certificate is not signed by a trusted CA: set DATABASE_TLS_CA to the CA bundle that signed it (RDS publishes one per region)"
            }
            Cause::WrongHostName => {
                "the server's TLS certificate does not name the host in DATABASE_URL: connect by a name the certificate carries"
            }
            Cause::NoTlsOnServer => {
                "TLS is required but the server does not offer it: enable TLS on the server or pooler, or set DATABASE_TLS=off where the network is private"
            }
            Cause::Tls => {
                "the TLS handshake with Postgres failed: check DATABASE_TLS and DATABASE_TLS_CA"
            }
            Cause::NamedStatements => {
                "a named prepared statement reached a transaction-mode pooler: set DATABASE_POOLER=transaction"
            }
            Cause::StartupParameter => {
                "the pooler refused a startup parameter: set DATABASE_POOLER=transaction (or PgBouncer's ignore_startup_parameters = extra_float_digits)"
            }
            Cause::Login => {
                "Postgres refused the login: check the user and password in DATABASE_URL"
            }
            Cause::Unreachable => {
                "Postgres did not answer: check the host and port in DATABASE_URL, and that it is up"
            }
            Cause::Other => "Postgres failed",
        }
    }
}

/// The sqlx error inside `error`, if any.
fn sqlx_error(error: &StoreError) -> Option<&sqlx::Error> {
    match error {
        StoreError::Sqlx(e) => Some(e),
        StoreError::Migrate(sqlx::migrate::MigrateError::Execute(e))
        | StoreError::Migrate(sqlx::migrate::MigrateError::ExecuteMigration(e, _)) => Some(e),
        _ => None,
    }
}

/// Classifies `error`.
pub fn cause(error: &StoreError) -> Cause {
    let Some(e) = sqlx_error(error) else {
        return Cause::Other;
    };
    // rustls's errors reach sqlx wrapped as I/O errors when the handshake runs inside the
    // stream, so the text decides before the variant does.
    let text = chain_text(e);
    if text.contains("unknownissuer") || text.contains("unknown issuer") {
        return Cause::UntrustedCertificate;
    }
    if text.contains("notvalidforname") || text.contains("not valid for name") {
        return Cause::WrongHostName;
    }
    if text.contains("does not support tls") {
        return Cause::NoTlsOnServer;
    }
    match e {
        sqlx::Error::Tls(_) | sqlx::Error::Configuration(_) => Cause::Tls,
        _ if text.contains("certificate") || text.contains("handshake") => Cause::Tls,
        sqlx::Error::Database(db) => match db.code().as_deref() {
            Some("26000" | "42P05") if text.contains("prepared statement") => {
                Cause::NamedStatements
            }
            Some("28P01" | "28000") => Cause::Login,
            _ if text.contains("unsupported startup parameter") => Cause::StartupParameter,
            _ if text.contains("prepared statement \"sqlx_s_") => Cause::NamedStatements,
            _ => Cause::Other,
        },
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut => Cause::Unreachable,
        _ => Cause::Other,
    }
}

/// Every message of `error`'s source chain, lower-cased.
fn chain_text(error: &sqlx::Error) -> String {
    let mut out = error.to_string();
    let mut current: &dyn std::error::Error = error;
    while let Some(next) = current.source() {
        out.push(' ');
        out.push_str(&next.to_string());
        current = next;
    }
    out.to_ascii_lowercase()
}

/// One line: the advice, then the driver's innermost message (which never holds the URL's
/// password: sqlx does not echo connection strings).
pub fn explain(error: &StoreError) -> String {
    let cause = cause(error);
    let detail = sqlx_error(error).map_or_else(|| error.to_string(), innermost);
    format!("{} ({detail})", cause.advice())
}

/// The last message of `error`'s source chain: the cause itself, stated once.
fn innermost(error: &sqlx::Error) -> String {
    let mut current: &dyn std::error::Error = error;
    while let Some(next) = current.source() {
        current = next;
    }
    current.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_failures_name_their_setting() {
        let untrusted = StoreError::Sqlx(sqlx::Error::Tls(
            "invalid peer certificate: UnknownIssuer".into(),
        ));
        assert_eq!(cause(&untrusted), Cause::UntrustedCertificate);
        let line = explain(&untrusted);
        assert!(line.contains("DATABASE_TLS_CA"), "{line}");
        assert_eq!(line.matches("UnknownIssuer").count(), 1, "{line}");
        let plain = StoreError::Sqlx(sqlx::Error::Tls("server does not support TLS".into()));
        assert_eq!(cause(&plain).setting(), Some("DATABASE_TLS"));
    }

    #[test]
    fn a_handshake_error_inside_an_io_error_is_still_tls() {
        let io = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "invalid peer certificate: certificate not valid for name \"127.0.0.1\"",
        );
        let e = StoreError::Sqlx(sqlx::Error::Io(io));
        assert_eq!(cause(&e), Cause::WrongHostName);
    }

    #[test]
    fn a_pool_timeout_says_where_to_look() {
        let e = StoreError::Sqlx(sqlx::Error::PoolTimedOut);
        assert!(explain(&e).contains("DATABASE_URL"));
    }
}
