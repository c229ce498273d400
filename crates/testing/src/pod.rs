//! In-process pods: the real app on `127.0.0.1:0`, several of them on one Postgres + Redis.

use crate::{TestDb, config_from, http, pod_env, random_prefix, redis_url};
use serde_json::{Value, json};
use std::collections::HashMap;
use switchboard_api::{App, Server};
use switchboard_domain::Role;
use uuid::Uuid;

/// One running pod and a client for it.
pub struct TestPod {
    /// The running server.
    pub server: Server,
    /// `http://127.0.0.1:{port}`.
    pub base: String,
    /// HTTP client.
    pub client: reqwest::Client,
}

impl TestPod {
    /// A pod on `db` and the shared test Redis under `prefix`.
    pub async fn start(db: &TestDb, prefix: &str) -> TestPod {
        Self::start_with(db, &redis_url(), prefix, |_| {}).await
    }

    /// A pod on a fresh database and prefix, for tests that need only one.
    pub async fn single() -> (TestPod, TestDb) {
        let db = TestDb::fresh().await;
        let pod = Self::start(&db, &random_prefix()).await;
        (pod, db)
    }

    /// [`TestPod::single`] with extra or changed environment variables.
    pub async fn single_with(
        tweak: impl FnOnce(&mut HashMap<String, String>),
    ) -> (TestPod, TestDb) {
        let db = TestDb::fresh().await;
        let pod = Self::start_with(&db, &redis_url(), &random_prefix(), tweak).await;
        (pod, db)
    }

    /// A pod with extra or changed environment variables.
    pub async fn start_with(
        db: &TestDb,
        redis_url: &str,
        prefix: &str,
        tweak: impl FnOnce(&mut HashMap<String, String>),
    ) -> TestPod {
        let mut vars = pod_env(db, redis_url, prefix);
        tweak(&mut vars);
        let app = App::build(config_from(&vars)).await.expect("app builds");
        let server = app.start().await.expect("app starts");
        let base = format!("http://{}", server.local_addr());
        TestPod {
            server,
            base,
            client: http(),
        }
    }

    /// `{base}{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Logs in and returns the bearer token.
    pub async fn login(&self, email: &str, password: &str) -> String {
        let response = self
            .client
            .post(self.url("/auth/login"))
            .json(&json!({"email": email, "password": password}))
            .send()
            .await
            .expect("login request");
        assert_eq!(response.status(), 200, "login as {email}");
        let body: Value = response.json().await.expect("json");
        body["token"].as_str().expect("token").to_owned()
    }
}

/// Creates an org (or uses `org`) and a member with `role`; returns (org id, email, password).
pub async fn seed_member(db: &TestDb, org: Option<Uuid>, role: Role) -> (Uuid, String, String) {
    let pool = db.pool().await;
    let org_id = match org {
        Some(id) => id,
        None => {
            switchboard_store::orgs::create(&pool, "Test Org")
                .await
                .expect("org")
                .id
        }
    };
    let email = format!("{}@example.test", Uuid::new_v4().simple());
    let password = "correct horse battery".to_owned();
    let hash = switchboard_store::users::hash_password(&password).expect("hash");
    let (user, _) = switchboard_store::users::create(&pool, &email, &hash)
        .await
        .expect("user");
    switchboard_store::users::add_member(&pool, org_id, user.id, role)
        .await
        .expect("member");
    pool.close().await;
    (org_id, email, password)
}
