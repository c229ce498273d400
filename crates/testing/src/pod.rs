//! In-process pods: the real app on `127.0.0.1:0`, several of them on one Postgres + Redis.

use crate::signing::Signed;
use crate::{TestDb, config_from, eventually, http, pod_env, random_prefix, redis_url};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::Duration;
use switchboard_api::{App, Server};
use switchboard_domain::Event;
use uuid::Uuid;

/// One running pod and a client for it (its [`Endpoint`], which it derefs to).
pub struct TestPod {
    /// The running server.
    pub server: Server,
    endpoint: Endpoint,
}

impl std::ops::Deref for TestPod {
    type Target = Endpoint;

    fn deref(&self) -> &Endpoint {
        &self.endpoint
    }
}

/// A pod's address and an HTTP client for it: what a test does with a pod over HTTP,
/// whether the pod runs in the test's process or as the `switchboard` binary. A clone
/// shares the client, for a request a test spawns (`Endpoint::clone(pod)`).
#[derive(Clone)]
pub struct Endpoint {
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
        let base = pod_env(db, redis_url, prefix);
        let mut vars = base.clone();
        tweak(&mut vars);
        crate::one_redis_shape(&base, &mut vars);
        let app = App::build(config_from(&vars)).await.expect("app builds");
        let server = app.start().await.expect("app starts");
        let base = format!("http://{}", server.local_addr());
        TestPod {
            server,
            endpoint: Endpoint::new(base),
        }
    }

    /// Emits `event` for `org` through this pod's emitter, exactly as the flows do after a
    /// commit.
    pub fn emit(&self, org: Uuid, event: Event) {
        self.server.state().flows.emitter.emit(org, event);
    }

    /// Socket.IO connections this pod holds.
    pub fn local_sockets(&self) -> usize {
        self.server.state().realtime.local_sockets()
    }

    /// Awaits this pod holding `n` sockets (`within` at most); whether it did.
    pub async fn sockets_become(&self, n: usize, within: Duration) -> bool {
        crate::try_eventually(within, || async {
            (self.local_sockets() == n).then_some(())
        })
        .await
        .is_some()
    }
}

impl Endpoint {
    /// A client for the pod at `base` (`http://host:port`).
    pub fn new(base: String) -> Endpoint {
        Endpoint {
            base,
            client: http(),
        }
    }

    /// `{base}{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `GET {path}` without credentials.
    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.client
            .get(self.url(path))
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"))
    }

    /// `GET {path}`'s status.
    pub async fn status(&self, path: &str) -> u16 {
        self.get(path).await.status().as_u16()
    }

    /// `GET /metrics`.
    pub async fn metrics(&self) -> String {
        self.get("/metrics")
            .await
            .text()
            .await
            .expect("metrics text")
    }

    /// `GET /ready`: the status and the report.
    pub async fn ready(&self) -> (u16, Value) {
        let r = self.get("/ready").await;
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// Awaits `/ready` answering 200 (30 s at most): after a start (a process still binding
    /// its port refuses the connection meanwhile), or after a dependency came back.
    pub async fn wait_ready(&self) {
        let url = self.url("/ready");
        let what = format!("{} is ready", self.base);
        eventually(&what, Duration::from_secs(30), || async {
            let status = self.client.get(&url).send().await.ok()?.status();
            (status == 200).then_some(())
        })
        .await;
    }

    /// Awaits a `/ready` report that `done` accepts (`within` at most) and returns it, or the
    /// last report when none did: the caller's assertions then say what was wrong.
    pub async fn ready_until(&self, within: Duration, done: impl Fn(&Value) -> bool) -> Value {
        let report = || async { self.ready().await.1 };
        crate::settled(within, report, done).await
    }

    /// A webhook request for `signed`, to add headers to.
    pub fn webhook(&self, path: &str, signed: &Signed) -> reqwest::RequestBuilder {
        let mut request = self.client.post(self.url(path)).body(signed.body.clone());
        for (name, value) in &signed.headers {
            request = request.header(*name, value);
        }
        request
    }

    /// Posts a signed webhook; returns the status and body.
    pub async fn send_webhook(&self, path: &str, signed: &Signed) -> (u16, String) {
        let r = self.webhook(path, signed).send().await.expect("webhook");
        (r.status().as_u16(), r.text().await.unwrap_or_default())
    }

    /// `POST {path}` with a JSON body and without credentials: the status and the JSON body
    /// (`null` when there is none).
    pub async fn post_anonymous(&self, path: &str, body: Value) -> (u16, Value) {
        let r = self.client.post(self.url(path)).json(&body).send().await;
        crate::user::answer(r.unwrap_or_else(|e| panic!("POST {path}: {e}"))).await
    }

    /// `POST /auth/login` as it is: the status and the body.
    pub async fn try_login(&self, email: &str, password: &str) -> (u16, Value) {
        let body = json!({"email": email, "password": password});
        self.post_anonymous("/auth/login", body).await
    }

    /// Logs in and returns the bearer token.
    pub async fn login(&self, email: &str, password: &str) -> String {
        let (status, body) = self.try_login(email, password).await;
        assert_eq!(status, 200, "login as {email}: {body}");
        body["token"].as_str().expect("token").to_owned()
    }

    /// Requests from `client` (an address) through a trusted proxy, which names it in
    /// `X-Forwarded-For`: for the limits kept per client address (the pod must trust
    /// 127.0.0.1, `TRUSTED_PROXIES`).
    pub fn forwarded_for<'a>(&'a self, client: &'a str) -> Forwarded<'a> {
        Forwarded { pod: self, client }
    }
}

/// A pod's requests from one client address behind a proxy (see [`Endpoint::forwarded_for`]).
#[derive(Clone, Copy)]
pub struct Forwarded<'a> {
    pod: &'a Endpoint,
    client: &'a str,
}

impl Forwarded<'_> {
    /// `GET {path}` without credentials.
    pub async fn get(self, path: &str) -> reqwest::Response {
        let r = self.pod.client.get(self.pod.url(path));
        let r = r.header("x-forwarded-for", self.client).send().await;
        r.unwrap_or_else(|e| panic!("GET {path}: {e}"))
    }

    /// `POST /auth/login` as it is: the status and the body.
    pub async fn try_login(self, email: &str, password: &str) -> (u16, Value) {
        let r = self.pod.client.post(self.pod.url("/auth/login"));
        let body = json!({"email": email, "password": password});
        let r = r
            .header("x-forwarded-for", self.client)
            .json(&body)
            .send()
            .await;
        crate::user::answer(r.unwrap_or_else(|e| panic!("POST /auth/login: {e}"))).await
    }

    /// Posts a signed webhook; returns the status and body.
    pub async fn send_webhook(self, path: &str, signed: &Signed) -> (u16, String) {
        let r = self
            .pod
            .webhook(path, signed)
            .header("x-forwarded-for", self.client);
        let r = r
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST {path}: {e}"));
        (r.status().as_u16(), r.text().await.unwrap_or_default())
    }
}
