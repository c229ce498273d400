//! The deployment under disruption, on real binaries: two pods take the four channels'
//! webhooks at about 100 a second (alternating between them, as a load balancer without
//! stickiness does; a provider retries what was not answered 200) while one pod is killed
//! with SIGKILL and started again, both are restarted one after the other with SIGTERM (a
//! rolling deploy), Postgres restarts, and on a Redis Cluster or Sentinel a master is killed
//! (its replica takes over; Sentinel's is failed over on purpose first). Every accepted event becomes exactly one message.
//!
//! It runs on whatever topology `scripts/test.sh` set up: `SB_TOPOLOGY=tls-pooler` makes
//! it TLS Postgres behind PgBouncer in transaction mode with a TLS Redis, and
//! `SB_TOPOLOGY=managed` the same with a 3+3 TLS Redis Cluster (`SB_TEST_REDIS_CLUSTER_CTL`
//! kills the master), and `SB_TOPOLOGY=sentinel` with a TLS master, replica and three
//! sentinels (`SB_TEST_REDIS_SENTINEL_CTL` fails the master over, then kills the new one).

use crate::{exited, process_env, serve_ready, sigterm};
use serde_json::json;
use std::collections::HashMap;
use std::process::Child;
use std::time::Duration;
use switchboard_testing::fakes::agent_answering;
use switchboard_testing::rows::assert_each_event_once;
use switchboard_testing::signing::{
    self, SLACK_SECRET, Signed, TELEGRAM_SECRET, WHATSAPP_TOKEN, WHSEC,
};
use switchboard_testing::{Endpoint, Load, Org, TestDb, random_prefix};
use wiremock::ResponseTemplate;

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
            crate::sigkill(&mut child);
        }
    }

    /// SIGTERM, then waits for the drain to finish and the process to exit 0.
    async fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        sigterm(&child);
        let status = exited(&mut child, Duration::from_secs(30)).await;
        assert!(status.success(), "a drained pod exits 0, not {status}");
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

/// Event `n` to `org`'s connections, signed the way its channel's provider signs, and the
/// path it is sent to: the four channels in turn, from 20 customers.
fn event(org: &Org, n: u64) -> (String, Signed) {
    let customer = n % 20;
    let text = format!("message {n}");
    match n % 4 {
        0 => (
            format!("/webhooks/slack/{}", org.conns["slack"]),
            signing::slack(
                SLACK_SECRET,
                &format!("EvTopo{n}"),
                &format!("U{customer}"),
                &format!("1700000000.{n:06}"),
                &text,
            ),
        ),
        1 => {
            let path = format!("/webhooks/whatsapp/{}", org.conns["whatsapp"]);
            let url = format!("https://switchboard.test{path}");
            let signed = signing::whatsapp(
                WHATSAPP_TOKEN,
                "AC123",
                &url,
                &format!("SM{n:032}"),
                &format!("whatsapp:+1555000{customer:04}"),
                &text,
            );
            (path, signed)
        }
        2 => (
            format!("/webhooks/telegram/{}", org.conns["telegram"]),
            signing::telegram(TELEGRAM_SECRET, n as i64, 9000 + customer as i64, &text),
        ),
        _ => (
            format!("/webhooks/email/{}", org.conns["email"]),
            signing::email(
                WHSEC,
                &format!("msg_topo_{n}"),
                &format!("<topo-{n}@example.test>"),
                &format!("customer{customer}@example.test"),
                &text,
            ),
        ),
    }
}

#[tokio::test]
async fn topology_no_webhook_lost_or_doubled_through_a_kill_a_rolling_restart_a_postgres_restart_and_a_redis_failover()
 {
    let db = TestDb::fresh().await;
    let prefix = random_prefix();
    let agent = agent_answering(
        ResponseTemplate::new(200)
            .set_body_json(json!({"reply": "on it", "confidence": 0.9, "cost_usd": 0})),
    )
    .await;
    let pod_vars = || {
        let mut vars = process_env(&db, &prefix);
        vars.insert("AGENT_URL".into(), agent.uri());
        // What a killed pod held is picked up again within seconds.
        vars.insert("INBOX_GRACE_SECS".into(), "2".into());
        vars.insert("INBOX_LEASE_SECS".into(), "3".into());
        vars.insert("INBOX_SWEEP_INTERVAL_MS".into(), "1000".into());
        // What failed while Postgres restarted is retried within seconds too, not after the
        // default 30 s (which the 30 s wait for every event to be processed barely covered).
        vars.insert("INBOX_RETRY_BASE_SECS".into(), "1".into());
        vars.insert("DRAIN_DELAY_MS".into(), "300".into());
        vars
    };
    let mut a = Pod::start(pod_vars()).await;
    let mut b = Pod::start(pod_vars()).await;
    let bases = vec![a.base(), b.base()];
    let org = Org::create(&db, &Endpoint::new(bases[0].clone())).await;

    // About 100 webhooks a second, each delivered (retried) by its own task.
    let load = Load::start(bases, move |n| event(&org, n));

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
    // A Redis master dies under the load; its replica is promoted and the pods carry on. With
    // Sentinel, first a planned `SENTINEL FAILOVER` (the old master lives on as a replica).
    let ctl = |var: &str, args: &[&str]| {
        let ctl = std::env::var(var).ok()?;
        let out = std::process::Command::new(&ctl)
            .args(args)
            .output()
            .expect("run the Redis control script");
        assert!(
            out.status.success(),
            "{var} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some((ctl, String::from_utf8_lossy(&out.stdout).trim().to_owned()))
    };
    if ctl("SB_TEST_REDIS_SENTINEL_CTL", &["failover"]).is_some() {
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    let killed_master = ctl("SB_TEST_REDIS_CLUSTER_CTL", &["kill-master"])
        .or_else(|| ctl("SB_TEST_REDIS_SENTINEL_CTL", &["kill-master"]));
    if killed_master.is_some() {
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    let n = load.stop().await;
    assert!(n > 500, "the load ran ({n} events)");

    assert_each_event_once(&db, n).await;
    assert_eq!(
        db.count(
            "SELECT count(*) FROM messages WHERE direction = 'inbound' AND body LIKE 'message %'"
        )
        .await,
        n
    );
    drop((a, b));
    // The killed node rejoins as a replica, so later tests find a whole cluster or set.
    if let Some((ctl, port)) = killed_master {
        let status = std::process::Command::new(ctl)
            .args(["restart", &port])
            .status()
            .expect("restart the Redis node");
        assert!(status.success(), "the killed Redis node rejoined");
    }
}
