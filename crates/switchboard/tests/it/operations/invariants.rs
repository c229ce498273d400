use crate::run;
use std::collections::HashMap;
use switchboard_testing::{TestDb, pod_env, random_prefix, redis_url};

const STRONG: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef-prod";

fn production(db: &TestDb) -> HashMap<String, String> {
    let mut vars = pod_env(db, &redis_url(), &random_prefix());
    vars.insert("APP_ENV".into(), "production".into());
    vars.insert("JWT_SECRET".into(), STRONG.into());
    vars.insert(
        "SENTRY_DSN".into(),
        "https://public@sentry.invalid/1".into(),
    );
    // Production verifies TLS unless told otherwise; the plain topology's servers have none.
    if !vars["DATABASE_URL"].contains("sslmode=") {
        vars.insert("DATABASE_TLS".into(), "off".into());
    }
    if vars["REDIS_URL"].starts_with("redis://") {
        vars.insert("REDIS_TLS".into(), "off".into());
    }
    vars
}

#[tokio::test]
async fn each_production_invariant_refuses_start_before_binding() {
    let db = TestDb::fresh().await;
    type Tweak = Box<dyn Fn(&mut HashMap<String, String>)>;
    let cases: Vec<(&str, Tweak)> = vec![
        (
            "DEMO_MODE must be off",
            Box::new(|v| {
                v.insert("DEMO_MODE".into(), "true".into());
            }),
        ),
        (
            "JWT_SECRET must be at least 64",
            Box::new(|v| {
                v.insert("JWT_SECRET".into(), "short-secret".into());
            }),
        ),
        (
            "MASTER_ENCRYPTION_KEY must be set",
            Box::new(|v| {
                v.remove("MASTER_ENCRYPTION_KEY");
            }),
        ),
        (
            "SENTRY_DSN must be set",
            Box::new(|v| {
                v.remove("SENTRY_DSN");
            }),
        ),
        (
            "REDIS_URL or REDIS_CLUSTER_NODES must be set",
            Box::new(|v| {
                v.remove("REDIS_URL");
            }),
        ),
        (
            "REDIS_URL is plaintext",
            Box::new(|v| {
                v.insert("REDIS_URL".into(), "redis://127.0.0.1:1".into());
                v.remove("REDIS_TLS");
            }),
        ),
        (
            "connection budget exceeded",
            Box::new(|v| {
                v.insert("DB_POOL_SIZE".into(), "50".into());
                v.insert("EXPECTED_PODS".into(), "1000".into());
            }),
        ),
    ];
    for (expected, tweak) in cases {
        let port = switchboard_testing::free_port();
        let mut vars = production(&db);
        vars.insert("PORT".into(), port.to_string());
        tweak(&mut vars);
        let out = run(&vars, &["serve"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{expected}: {stderr}");
        let lines: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains("refusing to start"))
            .collect();
        assert_eq!(
            lines.len(),
            1,
            "exactly one violation line for {expected}: {stderr}"
        );
        assert!(lines[0].contains(expected), "{expected}: {stderr}");
        assert!(
            !stderr.contains(STRONG) && !stderr.contains("public@"),
            "no secrets in: {stderr}"
        );
    }
}

/// Production's default, `verify`, against a Postgres that has no TLS: one line that names
/// the setting, from `serve` and from `migrate`, with no password and no repetition.
#[tokio::test]
async fn verify_against_a_server_without_tls_names_the_setting_once() {
    let db = TestDb::fresh().await;
    let mut vars = production(&db);
    if vars["DATABASE_URL"].contains("sslmode=") {
        return; // The TLS topology's server has TLS: nothing to refuse.
    }
    vars.remove("DATABASE_TLS");
    let url = vars["DATABASE_URL"].replace("postgres@", "postgres:hunter2@");
    vars.insert("DATABASE_URL".into(), url);
    vars.insert("PORT".into(), switchboard_testing::free_port().to_string());
    let out = run(&vars, &["serve"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("refusing to start"))
        .collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].contains("DATABASE_TLS=off"), "{stderr}");
    assert_eq!(
        lines[0].matches("does not support TLS").count(),
        1,
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2"), "{stderr}");

    let out = run(&vars, &["migrate"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("DATABASE_TLS=off"), "{stderr}");
    assert_eq!(
        stderr.matches("does not support TLS").count(),
        1,
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2"), "{stderr}");
}

#[tokio::test]
async fn all_violations_are_listed_at_once() {
    let db = TestDb::fresh().await;
    let mut vars = production(&db);
    vars.insert("DEMO_MODE".into(), "true".into());
    vars.remove("SENTRY_DSN");
    let out = run(&vars, &["serve"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(
        stderr
            .lines()
            .filter(|l| l.contains("refusing to start"))
            .count(),
        2,
        "{stderr}"
    );
}

#[tokio::test]
async fn invalid_configuration_exits_with_a_clear_message() {
    let db = TestDb::fresh().await;
    let mut vars = production(&db);
    vars.insert("PORT".into(), "seventy".into());
    let out = run(&vars, &["serve"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("PORT"));
}
