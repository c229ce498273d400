//! The deployment under disruption, on real binaries: two pods take the four channels'
//! webhooks at about 100 a second (alternating between them, as a load balancer without
//! stickiness does; a provider retries what was not answered 200) while one pod is killed
//! with SIGKILL and started again, both are restarted one after the other with SIGTERM (a
//! rolling deploy), Postgres restarts, and on a Redis Cluster a master is killed (its replica
//! takes over). Every accepted event becomes exactly one message.
//!
//! It runs on whatever topology `scripts/test.sh` set up: `SB_TOPOLOGY=tls-pooler` makes
//! it TLS Postgres behind PgBouncer in transaction mode with a TLS Redis, and
//! `SB_TOPOLOGY=managed` the same with a 3+3 TLS Redis Cluster (`SB_TEST_REDIS_CLUSTER_CTL`
//! kills the master).

use crate::serve_ready;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::process::Child;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use switchboard_domain::Role;
use switchboard_testing::signing::{self, Signed, secrets};
use switchboard_testing::{TestDb, free_port, pod_env, random_prefix, redis_url, seed_member};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// One `switchboard serve` process that can be killed and started again on its port.
struct Pod {
    vars: HashMap<String, String>,
    child: Option<Child>,
}

impl Pod {
    async fn start(vars: HashMap<String, String>) -> Pod {
        let (child, _) = serve_ready(&vars).await;
        Pod {
            vars,
            child: Some(child),
        }
    }

    fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.vars["PORT"])
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().expect("SIGKILL");
            child.wait().expect("reaped");
        }
    }

    /// SIGTERM, then waits for the drain to finish and the process to exit 0.
    async fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("kill");
        assert!(sent.success());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                assert!(status.success(), "a drained pod exits 0, not {status}");
                return;
            }
            assert!(Instant::now() < deadline, "the pod did not stop on SIGTERM");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn restart(&mut self) {
        let (child, _) = serve_ready(&self.vars).await;
        self.child = Some(child);
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The four channels' connection ids, by channel.
struct Connections {
    ids: HashMap<&'static str, String>,
}

impl Connections {
    /// Event `n`, signed the way its channel's provider signs, and the path it is sent to.
    fn event(&self, n: u64) -> (String, Signed) {
        let customer = n % 20;
        let text = format!("message {n}");
        match n % 4 {
            0 => (
                format!("/webhooks/slack/{}", self.ids["slack"]),
                signing::slack(
                    "slack-signing-secret",
                    &format!("EvTopo{n}"),
                    &format!("U{customer}"),
                    &format!("1700000000.{n:06}"),
                    &text,
                ),
            ),
            1 => {
                let path = format!("/webhooks/whatsapp/{}", self.ids["whatsapp"]);
                let url = format!("https://switchboard.test{path}");
                let signed = signing::twilio(
                    "twilio-token",
                    "AC123",
                    &url,
                    &format!("SM{n:032}"),
                    &format!("whatsapp:+1555000{customer:04}"),
                    &text,
                );
                (path, signed)
            }
            2 => (
                format!("/webhooks/telegram/{}", self.ids["telegram"]),
                signing::telegram(
                    "tg-secret-0123456789",
                    n as i64,
                    9000 + customer as i64,
                    &text,
                ),
            ),
            _ => (
                format!("/webhooks/email/{}", self.ids["email"]),
                signing::email(
                    "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                    &format!("msg_topo_{n}"),
                    &format!("<topo-{n}@example.test>"),
                    &format!("customer{customer}@example.test"),
                    &text,
                ),
            ),
        }
    }
}

/// Sends `signed` until a pod answers 200, alternating pods, as a provider retries.
async fn deliver(http: &reqwest::Client, bases: &[String], path: &str, signed: &Signed, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut attempt = n as usize;
    loop {
        let base = &bases[attempt % bases.len()];
        let mut request = http
            .post(format!("{base}{path}"))
            .timeout(Duration::from_secs(10))
            .body(signed.body.clone());
        for (k, v) in &signed.headers {
            request = request.header(k, v);
        }
        if let Ok(response) = request.send().await {
            if response.status() == 200 {
                return;
            }
        }
        assert!(Instant::now() < deadline, "event {n} was never accepted");
        attempt += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn topology_no_webhook_lost_or_doubled_through_a_kill_a_rolling_restart_a_postgres_restart_and_a_redis_failover()
 {
    let db = TestDb::fresh().await;
    let prefix = random_prefix();
    let agent = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"reply": "on it", "confidence": 0.9, "cost_usd": 0})),
        )
        .mount(&agent)
        .await;
    let pod_vars = |port: u16| {
        let mut vars = pod_env(&db, &redis_url(), &prefix);
        vars.insert("PORT".into(), port.to_string());
        vars.insert("AGENT_URL".into(), agent.uri());
        // What a killed pod held is picked up again within seconds.
        vars.insert("INBOX_GRACE_SECS".into(), "2".into());
        vars.insert("INBOX_LEASE_SECS".into(), "3".into());
        vars.insert("INBOX_SWEEP_INTERVAL_MS".into(), "1000".into());
        vars.insert("DRAIN_DELAY_MS".into(), "300".into());
        vars
    };
    let mut a = Pod::start(pod_vars(free_port())).await;
    let mut b = Pod::start(pod_vars(free_port())).await;
    let bases = vec![a.base(), b.base()];
    let http = switchboard_testing::http();

    let (org, email, password) = seed_member(&db, None, Role::Admin).await;
    let login: Value = http
        .post(format!("{}/auth/login", bases[0]))
        .json(&json!({"email": email, "password": password}))
        .send()
        .await
        .expect("login")
        .json()
        .await
        .expect("json");
    let token = login["token"].as_str().expect("token").to_owned();
    let mut ids = HashMap::new();
    for channel in ["slack", "whatsapp", "telegram", "email"] {
        let created: Value = http
            .post(format!("{}/channel-connections", bases[1]))
            .bearer_auth(&token)
            .json(&json!({"org_id": org, "channel": channel, "name": channel,
                          "secrets": secrets(channel)}))
            .send()
            .await
            .expect("create connection")
            .json()
            .await
            .expect("json");
        ids.insert(channel, created["id"].as_str().expect("id").to_owned());
    }
    let connections = Arc::new(Connections { ids });

    // About 100 webhooks a second, each delivered (retried) by its own task.
    let sent = Arc::new(Mutex::new(0_u64));
    let stop = tokio_util::sync::CancellationToken::new();
    let load = {
        let (stop, sent, bases, http) = (stop.clone(), sent.clone(), bases.clone(), http.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(10));
            let mut tasks = tokio::task::JoinSet::new();
            let mut n = 0_u64;
            while !stop.is_cancelled() {
                tick.tick().await;
                let (path, signed) = connections.event(n);
                let (http, bases) = (http.clone(), bases.clone());
                tasks.spawn(async move { deliver(&http, &bases, &path, &signed, n).await });
                n += 1;
            }
            *sent.lock().expect("lock") = n;
            while let Some(done) = tasks.join_next().await {
                done.expect("delivery task");
            }
        })
    };

    tokio::time::sleep(Duration::from_secs(2)).await;
    a.kill();
    tokio::time::sleep(Duration::from_secs(1)).await;
    a.restart().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Rolling restart: one pod at a time, each drained by SIGTERM.
    a.stop().await;
    a.restart().await;
    b.stop().await;
    b.restart().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    if let Ok(restart) = std::env::var("SB_TEST_PG_RESTART") {
        let status = std::process::Command::new(restart)
            .status()
            .expect("restart Postgres");
        assert!(status.success(), "Postgres restarted");
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    // A Redis master dies under the load; its replica is promoted and the pods carry on.
    let killed_master = std::env::var("SB_TEST_REDIS_CLUSTER_CTL").ok().map(|ctl| {
        let out = std::process::Command::new(&ctl)
            .arg("kill-master")
            .output()
            .expect("kill a Redis master");
        assert!(
            out.status.success(),
            "failover: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        (ctl, String::from_utf8_lossy(&out.stdout).trim().to_owned())
    });
    if killed_master.is_some() {
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    stop.cancel();
    load.await.expect("load finished: every event accepted");
    let n = i64::try_from(*sent.lock().expect("lock")).expect("count");
    assert!(n > 500, "the load ran ({n} events)");

    let processed = db
        .wait_for_count(
            "SELECT count(*) FROM inbound_events WHERE processed_at IS NOT NULL",
            n,
        )
        .await;
    assert_eq!(processed, n, "every accepted event processed");
    assert_eq!(db.count("SELECT count(*) FROM inbound_events").await, n);
    assert_eq!(
        db.count("SELECT count(*) FROM messages WHERE direction = 'inbound'")
            .await,
        n,
        "one message per event"
    );
    assert_eq!(
        db.count(
            "SELECT count(*) FROM messages WHERE direction = 'inbound' AND body LIKE 'message %'"
        )
        .await,
        n
    );
    drop((a, b));
    // The killed node rejoins as a replica, so later tests find a whole cluster.
    if let Some((ctl, port)) = killed_master {
        let status = std::process::Command::new(ctl)
            .args(["restart", &port])
            .status()
            .expect("restart the Redis node");
        assert!(status.success(), "the killed Redis node rejoined");
    }
}
