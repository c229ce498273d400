//! A throwaway Redis watched by Sentinel that a test owns: a master, a replica and three
//! sentinels spawned from `redis-server` on free ports, so failover behaviour is tested in
//! every topology, not only where `scripts/test.sh` runs one (`SB_TOPOLOGY=sentinel`).

use crate::free_port;
use crate::redis_cluster::wait_until;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The name the sentinels monitor the master under.
pub const SENTINEL_MASTER: &str = "switchboard";

/// A master, its replica and three sentinels, plaintext on 127.0.0.1; all killed on drop.
pub struct RedisSentinel {
    dir: PathBuf,
    nodes: BTreeMap<u16, Option<Child>>,
    sentinels: BTreeMap<u16, Child>,
    /// The password every node and sentinel asks for ([`RedisSentinel::start_with_password`]).
    password: Option<String>,
}

impl RedisSentinel {
    /// Starts the set and waits until every sentinel knows the master, the replica and the
    /// other two sentinels, and the replica is in sync.
    pub async fn start() -> RedisSentinel {
        Self::start_with(None).await
    }

    /// [`RedisSentinel::start`] with `password` asked of every client by the data nodes and
    /// by the sentinels (and used between them), as a set with `requirepass` everywhere is.
    pub async fn start_with_password(password: &str) -> RedisSentinel {
        Self::start_with(Some(password.to_owned())).await
    }

    async fn start_with(password: Option<String>) -> RedisSentinel {
        let dir = std::env::temp_dir().join(format!(
            "sb-sentinel-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).expect("sentinel dir");
        let mut set = RedisSentinel {
            dir,
            nodes: BTreeMap::new(),
            sentinels: BTreeMap::new(),
            password,
        };
        let master = set.start_node(None).await;
        set.start_node(Some(master)).await;
        for _ in 0..3 {
            set.start_sentinel(master).await;
        }
        set.wait_whole(master).await;
        set
    }

    /// The sentinels as `REDIS_SENTINELS` takes them (bare `host:port`).
    pub fn sentinels(&self) -> String {
        self.sentinels
            .keys()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The port of the node the sentinels name as the master now.
    pub fn master(&self) -> u16 {
        self.named_master().expect("a sentinel names the master")
    }

    fn named_master(&self) -> Option<u16> {
        self.sentinels.keys().find_map(|p| {
            let out = self.cli(
                *p,
                &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", SENTINEL_MASTER],
            )?;
            out.lines().nth(1)?.trim().parse().ok()
        })
    }

    /// `SENTINEL FAILOVER`: the replica is promoted and the old master becomes its replica.
    /// Returns once the new master writes and the old one follows it in sync; returns the
    /// new master's port.
    pub async fn failover(&mut self) -> u16 {
        let old = self.master();
        let sentinel = *self.sentinels.keys().next().expect("a sentinel");
        // Right after a previous failover the sentinels refuse another for a while: ask
        // again until one starts.
        wait_until(Duration::from_secs(30), || {
            self.cli(sentinel, &["SENTINEL", "FAILOVER", SENTINEL_MASTER])
                .is_some_and(|o| o.contains("OK"))
        })
        .await
        .expect("SENTINEL FAILOVER starts");
        let new = self.wait_promoted(old).await;
        self.wait_whole(new).await;
        new
    }

    /// SIGKILLs the master and returns (its port, the promoted replica's port) once the
    /// sentinels named the replica and it writes.
    pub async fn kill_master(&mut self) -> (u16, u16) {
        let old = self.master();
        if let Some(Some(mut child)) = self.nodes.insert(old, None) {
            let _ = child.kill();
            let _ = child.wait();
        }
        let new = self.wait_promoted(old).await;
        (old, new)
    }

    /// Starts a killed node again; the sentinels make it a replica of the current master.
    pub async fn restart(&mut self, port: u16) {
        self.spawn_node(port, None);
        let master = self.master();
        self.wait_whole(master).await;
    }

    async fn wait_promoted(&self, old: u16) -> u16 {
        let promoted = || {
            self.named_master()
                .filter(|port| *port != old)
                .filter(|port| {
                    self.cli(*port, &["ROLE"])
                        .is_some_and(|r| r.starts_with("master"))
                })
        };
        wait_until(Duration::from_secs(30), || promoted().is_some())
            .await
            .unwrap_or_else(|| panic!("the sentinels promoted no replica in place of {old}"));
        promoted().unwrap_or_else(|| panic!("the master promoted in place of {old} went away"))
    }

    /// Until every live node follows `master` in sync and every sentinel knows the master,
    /// the live replicas and the other sentinels.
    async fn wait_whole(&self, master: u16) {
        let live: Vec<u16> = self.live();
        let replicas = live.len() - 1;
        let others = self.sentinels.len() - 1;
        wait_until(Duration::from_secs(30), || {
            let synced = live.iter().filter(|p| **p != master).all(|p| {
                self.cli(*p, &["INFO", "replication"]).is_some_and(|i| {
                    i.contains(&format!("master_port:{master}"))
                        && i.contains("master_link_status:up")
                })
            });
            synced
                && self.sentinels.keys().all(|s| {
                    self.cli(*s, &["SENTINEL", "MASTER", SENTINEL_MASTER])
                        .is_some_and(|out| {
                            let fields: Vec<&str> = out.lines().map(str::trim).collect();
                            let field = |name: &str| {
                                fields
                                    .iter()
                                    .position(|f| *f == name)
                                    .and_then(|i| fields.get(i + 1))
                                    .copied()
                            };
                            field("port") == Some(master.to_string().as_str())
                                && field("num-slaves") == Some(replicas.to_string().as_str())
                                && field("num-other-sentinels") == Some(others.to_string().as_str())
                                && field("flags") == Some("master")
                        })
                })
        })
        .await
        .expect("the sentinel set settles: nodes in sync, every sentinel knows them all");
    }

    fn live(&self) -> Vec<u16> {
        self.nodes
            .iter()
            .filter(|(_, c)| c.is_some())
            .map(|(p, _)| *p)
            .collect()
    }

    /// One data node on a fresh port (a replica of `master` when given), once it answers.
    async fn start_node(&mut self, master: Option<u16>) -> u16 {
        for _ in 0..5 {
            let port = free_port();
            if self.nodes.contains_key(&port) || self.sentinels.contains_key(&port) {
                continue;
            }
            self.spawn_node(port, master);
            if self.answers(port).await {
                return port;
            }
            if let Some(Some(mut child)) = self.nodes.remove(&port) {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        panic!(
            "no Redis node started after five ports (see {})",
            self.dir.display()
        );
    }

    fn spawn_node(&mut self, port: u16, master: Option<u16>) {
        let node_dir = self.dir.join(port.to_string());
        std::fs::create_dir_all(&node_dir).expect("node dir");
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(["--repl-diskless-sync-delay", "0"])
            .arg("--dir")
            .arg(&node_dir);
        if let Some(master) = master {
            cmd.args(["--replicaof", "127.0.0.1", &master.to_string()]);
        }
        if let Some(pw) = &self.password {
            cmd.args(["--requirepass", pw, "--masterauth", pw]);
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server on PATH (scripts/test.sh installs it)");
        self.nodes.insert(port, Some(child));
    }

    async fn start_sentinel(&mut self, master: u16) {
        for _ in 0..5 {
            let port = free_port();
            if self.nodes.contains_key(&port) || self.sentinels.contains_key(&port) {
                continue;
            }
            // A sentinel rewrites its file with what it learns, so each has its own.
            let conf = self.dir.join(format!("sentinel-{port}.conf"));
            std::fs::write(
                &conf,
                format!(
                    "port {port}\nbind 127.0.0.1\ndir {dir}\n\
                     sentinel monitor {SENTINEL_MASTER} 127.0.0.1 {master} 2\n\
                     sentinel down-after-milliseconds {SENTINEL_MASTER} 1000\n\
                     sentinel failover-timeout {SENTINEL_MASTER} 2000\n\
                     sentinel parallel-syncs {SENTINEL_MASTER} 1\n{auth}",
                    dir = self.dir.display(),
                    auth = self.password.as_ref().map_or(String::new(), |pw| format!(
                        "requirepass {pw}\nsentinel auth-pass {SENTINEL_MASTER} {pw}\nsentinel sentinel-pass {pw}\n"
                    )),
                ),
            )
            .expect("sentinel.conf");
            let child = Command::new("redis-server")
                .arg(&conf)
                .arg("--sentinel")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server on PATH");
            self.sentinels.insert(port, child);
            if self.answers(port).await {
                return;
            }
            if let Some(mut child) = self.sentinels.remove(&port) {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        panic!(
            "no sentinel started after five ports (see {})",
            self.dir.display()
        );
    }

    /// `redis-cli` to `port`, with the set's password when it has one.
    fn cli(&self, port: u16, args: &[&str]) -> Option<String> {
        match &self.password {
            Some(pw) => {
                let mut with = vec!["-a", pw, "--no-auth-warning"];
                with.extend_from_slice(args);
                crate::redis_cluster::cli(port, &with)
            }
            None => crate::redis_cluster::cli(port, args),
        }
    }

    /// Whether the process this set spawned on `port` answers PING (and is still ours).
    async fn answers(&mut self, port: u16) -> bool {
        let up = wait_until(Duration::from_secs(5), || {
            self.cli(port, &["PING"])
                .is_some_and(|o| o.contains("PONG"))
        })
        .await
        .is_some();
        let child = match self.nodes.get_mut(&port) {
            Some(Some(child)) => Some(child),
            _ => self.sentinels.get_mut(&port),
        };
        up && child.is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }
}

impl Drop for RedisSentinel {
    fn drop(&mut self) {
        let sentinels = self.sentinels.values_mut();
        for child in self
            .nodes
            .values_mut()
            .filter_map(Option::as_mut)
            .chain(sentinels)
        {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
