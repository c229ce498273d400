//! Redaction of credentials embedded in connection strings, for logs and error messages.

/// Returns `url` with any password replaced by `***`; input that does not parse as a URL is
/// replaced entirely, since it may be a secret.
pub fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) => {
            if parsed.password().is_some() {
                // Setting a password can only fail for URLs that cannot have one.
                let _ = parsed.set_password(Some("***"));
            }
            parsed.to_string()
        }
        Err(_) => "<unparseable url>".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn hides_password_keeps_the_rest() {
        let shown = redact_url("postgres://app:s3cr3t@db.internal:5432/switchboard");
        assert_eq!(shown, "postgres://app:***@db.internal:5432/switchboard");
        assert!(!shown.contains("s3cr3t"));
    }

    #[test]
    fn leaves_passwordless_urls_alone() {
        assert_eq!(
            redact_url("redis://127.0.0.1:6379"),
            "redis://127.0.0.1:6379"
        );
    }

    #[test]
    fn garbage_is_not_echoed() {
        assert_eq!(redact_url("not a url with hunter2"), "<unparseable url>");
    }
}
