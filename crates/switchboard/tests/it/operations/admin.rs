use crate::run;
use serde_json::Value;
use switchboard_testing::{TestDb, pod_env, random_prefix, redis_url};

#[tokio::test]
async fn admin_commands_print_one_json_object_with_the_id() {
    let db = TestDb::fresh().await;
    let vars = pod_env(&db, &redis_url(), &random_prefix());

    let out = run(&vars, &["admin", "create-org", "--name", "Acme"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let org: Value = serde_json::from_slice(&out.stdout).unwrap();
    let org_id = org["id"].as_str().unwrap().to_owned();

    let args = |email: &'static str, role: &'static str| {
        vec![
            "admin",
            "create-user",
            "--org",
            "",
            "--email",
            email,
            "--password",
            "long enough",
            "--role",
            role,
        ]
    };
    let mut a = args("Ada@Example.test", "admin");
    a[3] = &org_id;
    let out = run(&vars, &a);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let user: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(user["id"].as_str().is_some());
    assert_eq!(user["role"], "admin");
    assert_eq!(user["created"], true);

    // Again with the same address (any case): the same user, not a second one.
    let mut again = args("ada@example.test", "expert");
    again[3] = &org_id;
    let out = run(&vars, &again);
    let second: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(second["id"], user["id"]);
    assert_eq!(second["created"], false);

    let pool = db.pool().await;
    let users: i64 = sqlx::query_scalar("SELECT count(*) FROM users")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(users, 1);
    let hash: String = sqlx::query_scalar("SELECT password_hash FROM users")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(hash.starts_with("$argon2id$") && !hash.contains("long enough"));
}

#[tokio::test]
async fn bad_admin_input_fails_and_writes_nothing() {
    let db = TestDb::fresh().await;
    let vars = pod_env(&db, &redis_url(), &random_prefix());
    let missing_org = uuid::Uuid::new_v4().to_string();
    let cases: Vec<Vec<&str>> = vec![
        vec!["admin", "create-org", "--name", "  "],
        vec![
            "admin",
            "create-user",
            "--org",
            &missing_org,
            "--email",
            "a@b.c",
            "--password",
            "long enough",
            "--role",
            "admin",
        ],
        vec![
            "admin",
            "create-user",
            "--org",
            &missing_org,
            "--email",
            "a@b.c",
            "--password",
            "long enough",
            "--role",
            "owner",
        ],
        vec![
            "admin",
            "create-user",
            "--org",
            "not-a-uuid",
            "--email",
            "a@b.c",
            "--password",
            "long enough",
            "--role",
            "admin",
        ],
    ];
    for args in cases {
        let out = run(&vars, &args);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(!out.stderr.is_empty(), "{args:?} says why");
    }
    let pool = db.pool().await;
    let n: i64 =
        sqlx::query_scalar("SELECT (SELECT count(*) FROM orgs) + (SELECT count(*) FROM users)")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(n, 0);
}

#[tokio::test]
async fn seed_demo_is_idempotent_and_its_values_work() {
    let db = TestDb::fresh().await;
    let prefix = random_prefix();
    let mut vars = pod_env(&db, &redis_url(), &prefix);

    // Refused in production and without DEMO_MODE, with nothing written.
    let mut production = vars.clone();
    production.insert("APP_ENV".into(), "production".into());
    production.insert("DEMO_MODE".into(), "true".into());
    let out = run(&production, &["admin", "seed-demo"]);
    assert!(!out.status.success());
    let out = run(&vars, &["admin", "seed-demo"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("DEMO_MODE=true"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(db.count("SELECT count(*) FROM orgs").await, 0);
    vars.insert("DEMO_MODE".into(), "true".into());

    let seed = |vars| {
        let out = run(vars, &["admin", "seed-demo"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let first = seed(&vars);
    // The second run finds everything in place and prints exactly the same.
    assert_eq!(seed(&vars), first);
    let counts = "SELECT (SELECT count(*) FROM orgs) * 100 + (SELECT count(*) FROM users) * 10
                 + (SELECT count(*) FROM channel_connections WHERE deleted_at IS NULL)";
    assert_eq!(db.count(counts).await, 124);

    // A password changed by hand is reset to the printed one; nothing else changes.
    let pool = db.pool().await;
    sqlx::query("UPDATE users SET password_hash = 'x' WHERE email = 'expert@demo.local'")
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(seed(&vars), first);
    assert_eq!(db.count(counts).await, 124);

    let demo: Value = serde_json::from_str(&first).unwrap();
    let org = demo["org_id"].as_str().unwrap();
    let slack = &demo["channels"]["slack"];
    let id = slack["id"].as_str().unwrap();
    assert_eq!(
        slack["webhook_url"],
        format!("https://switchboard.test/webhooks/slack/{id}")
    );
    for channel in ["whatsapp", "telegram", "email"] {
        assert!(
            demo["channels"][channel]["id"].as_str().is_some(),
            "{channel}"
        );
    }

    // The printed credentials are the real ones: both users log in, and a webhook signed
    // with the printed Slack secret is accepted and stored for the demo org.
    let pod = switchboard_testing::TestPod::start(&db, &prefix).await;
    for role in ["admin", "expert"] {
        pod.login(
            demo[role]["email"].as_str().unwrap(),
            demo[role]["password"].as_str().unwrap(),
        )
        .await;
    }
    let signed = switchboard_testing::signing::slack(
        slack["secrets"]["signing_secret"].as_str().unwrap(),
        "EvDemo1",
        "U1",
        "1700000000.000100",
        "hello from the demo",
    );
    let path = format!("/webhooks/slack/{id}");
    assert_eq!(pod.send_webhook(&path, &signed).await.0, 200);
    let stored = db
        .wait_for_count(
            &format!("SELECT count(*) FROM inbound_events WHERE org_id = '{org}'"),
            1,
        )
        .await;
    assert_eq!(stored, 1);
    pod.server.begin_shutdown();
}

#[tokio::test]
async fn deactivate_user_ends_every_session_and_reactivate_lets_them_log_in_again() {
    let db = TestDb::fresh().await;
    let prefix = random_prefix();
    let vars = pod_env(&db, &redis_url(), &prefix);
    let json_of = |args: &[&str]| {
        let out = run(&vars, args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let org = json_of(&["admin", "create-org", "--name", "Acme"]);
    let org = org["id"].as_str().unwrap().to_owned();
    let user = json_of(&[
        "admin",
        "create-user",
        "--org",
        &org,
        "--email",
        "leaver@example.test",
        "--password",
        "long enough",
        "--role",
        "expert",
    ]);
    let id = user["id"].as_str().unwrap().to_owned();

    let pod = switchboard_testing::TestPod::start(&db, &prefix).await;
    let token = pod.login("leaver@example.test", "long enough").await;
    let sock = switchboard_testing::socket::connect_with(&pod, &token).await;
    let me = |token: String| {
        let pod = &pod;
        async move { pod.as_user(&token).me().await }
    };
    let login = |password: &'static str| {
        let (client, url) = (pod.client.clone(), pod.url("/auth/login"));
        async move {
            let r = client
                .post(url)
                .json(&serde_json::json!({"email": "leaver@example.test", "password": password}))
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            (status, r.json::<Value>().await.unwrap())
        }
    };
    assert_eq!(me(token.clone()).await.0, 200);

    let out = json_of(&["admin", "deactivate-user", "--user", &id]);
    assert_eq!(out["id"], id.as_str());
    assert_eq!(out["active"], false);
    assert!(out["deactivated_at"].is_string());
    assert_eq!(me(token.clone()).await, (401, Value::from("token_revoked")));
    // The CLI broadcasts nothing: the pod's own session check closes the socket.
    assert!(
        pod.sockets_become(0, std::time::Duration::from_secs(5))
            .await,
        "a deactivated user's socket stayed open"
    );
    let (status, body) = login("long enough").await;
    assert_eq!(
        (status, &body["code"]),
        (401, &Value::from("user_deactivated"))
    );
    // A wrong password does not learn that the account exists, let alone its state.
    let (status, body) = login("wrong password").await;
    assert_eq!((status, &body["code"]), (401, &Value::from("unauthorized")));

    let out = json_of(&["admin", "reactivate-user", "--user", &id]);
    assert_eq!(out["active"], true);
    assert!(out["deactivated_at"].is_null());
    let (status, body) = login("long enough").await;
    assert_eq!(status, 200);
    let fresh = body["token"].as_str().unwrap().to_owned();
    assert_eq!(me(fresh).await.0, 200);
    assert_eq!(
        me(token).await,
        (401, Value::from("token_revoked")),
        "tokens from before the deactivation stay revoked"
    );
    assert_eq!(
        db.count(&format!(
            "SELECT count(*) FROM audit_log WHERE target_id = '{id}'
             AND action IN ('user.deactivated', 'user.reactivated')"
        ))
        .await,
        2
    );

    // An unknown user is an error that says so, and changes nothing.
    let out = run(
        &vars,
        &[
            "admin",
            "deactivate-user",
            "--user",
            &uuid::Uuid::new_v4().to_string(),
        ],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
    sock.close().await;
    pod.server.begin_shutdown();
}

#[tokio::test]
async fn audit_export_writes_the_deployments_audit_log_as_ndjson_or_csv() {
    let db = TestDb::fresh().await;
    let vars = pod_env(&db, &redis_url(), &random_prefix());
    let pool = db.pool().await;
    let orgs: Vec<uuid::Uuid> =
        sqlx::query_scalar("INSERT INTO orgs (name) VALUES ('A'), ('B') RETURNING id")
            .fetch_all(&pool)
            .await
            .unwrap();
    sqlx::query(
        "INSERT INTO audit_log (org_id, action, details)
         SELECT o, a, '{\"note\": \"=1+1, \\\"quoted\\\"\"}'::jsonb
         FROM UNNEST($1::uuid[]) o, UNNEST(ARRAY['x.one', 'x.two']) a",
    )
    .bind(&orgs)
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;

    let out = run(&vars, &["admin", "audit-export"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 4, "the whole deployment");
    assert!(
        rows.windows(2)
            .all(|w| w[0]["id"].as_i64() < w[1]["id"].as_i64())
    );

    let org = orgs[1].to_string();
    let out = run(
        &vars,
        &[
            "admin",
            "audit-export",
            "--org",
            &org,
            "--action",
            "x.two",
            "--format",
            "csv",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].starts_with("id,created_at,org_id"));
    assert!(
        lines[1].contains(&org) && lines[1].contains("\"x.two\""),
        "{text}"
    );
    assert!(
        lines[1].contains("\"\"quoted\\\"\"\""),
        "quotes are doubled: {text}"
    );

    for bad in [
        vec!["admin", "audit-export", "--format", "xml"],
        vec![
            "admin",
            "audit-export",
            "--since",
            "2026-02-01T00:00:00Z",
            "--until",
            "2026-01-01T00:00:00Z",
        ],
        vec!["admin", "audit-export", "--org", "not-a-uuid"],
    ] {
        let out = run(&vars, &bad);
        assert!(!out.status.success(), "{bad:?} was accepted");
        assert!(out.stdout.is_empty(), "{bad:?} wrote rows");
    }
}
