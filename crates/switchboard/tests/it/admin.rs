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
