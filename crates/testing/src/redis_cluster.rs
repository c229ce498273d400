//! A throwaway Redis Cluster a test owns: masters (and replicas) spawned from `redis-server`
//! on free ports and joined with `redis-cli --cluster create`, so cluster behaviour is
//! tested in every topology, not only where `scripts/test.sh` runs one.

use crate::free_port;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A cluster of plaintext nodes on 127.0.0.1; every node is killed on drop.
pub struct RedisCluster {
    dir: PathBuf,
    nodes: BTreeMap<u16, Option<Child>>,
    /// Each node's cluster bus port, kept across restarts (the others' configuration names it).
    bus: BTreeMap<u16, u16>,
}

impl RedisCluster {
    /// Starts `masters` masters with `replicas` replicas each and waits until every slot is
    /// served.
    pub async fn start(masters: usize, replicas: usize) -> RedisCluster {
        let dir = std::env::temp_dir().join(format!(
            "sb-cluster-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).expect("cluster dir");
        let mut cluster = RedisCluster {
            dir,
            nodes: BTreeMap::new(),
            bus: BTreeMap::new(),
        };
        let count = masters * (1 + replicas);
        let mut ports: Vec<u16> = Vec::with_capacity(count);
        while ports.len() < count {
            ports.push(cluster.start_node().await);
        }
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for port in &ports {
            create.arg(format!("127.0.0.1:{port}"));
        }
        let status = create
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("redis-cli on PATH");
        assert!(status.success(), "redis-cli --cluster create");
        cluster.wait_ok(&ports).await;
        if replicas > 0 {
            // A replica takes a moment to sync; a failover before that would lose its slots.
            wait_until(Duration::from_secs(20), || {
                cluster.masters().len() == masters
                    && ports.iter().all(|p| {
                        cli(*p, &["INFO", "replication"]).is_some_and(|i| {
                            i.contains("role:master") || i.contains("master_link_status:up")
                        })
                    })
            })
            .await
            .expect("replicas in sync");
        }
        cluster
    }

    /// Starts one node on a fresh port and waits for its PING. A free port is only free
    /// when it was checked: a parallel test can take it (or a port this cluster picked for
    /// another node's bus) before the node binds, so a node that does not come up is
    /// retried on other ports rather than failing the test.
    async fn start_node(&mut self) -> u16 {
        for _ in 0..5 {
            let port = self.fresh_port();
            self.spawn(port);
            let up = wait_until(Duration::from_secs(5), || {
                cli(port, &["PING"]).is_some_and(|o| o.contains("PONG"))
            })
            .await
            .is_some();
            // A PONG from a server some other test started on the port is not ours.
            let alive = match self.nodes.get_mut(&port) {
                Some(Some(child)) => matches!(child.try_wait(), Ok(None)),
                _ => false,
            };
            if up && alive {
                return port;
            }
            if let Some(Some(mut child)) = self.nodes.remove(&port) {
                let _ = child.kill();
                let _ = child.wait();
            }
            self.bus.remove(&port);
        }
        panic!(
            "no cluster node started after five ports (see {})",
            self.dir.display()
        );
    }

    /// A free port that no node of this cluster uses for clients or for its bus.
    fn fresh_port(&self) -> u16 {
        loop {
            let port = free_port();
            if !self.nodes.contains_key(&port) && !self.bus.values().any(|b| *b == port) {
                return port;
            }
        }
    }

    fn spawn(&mut self, port: u16) {
        let bus = match self.bus.get(&port) {
            Some(bus) => *bus,
            None => {
                let bus = loop {
                    let bus = self.fresh_port();
                    if bus != port {
                        break bus;
                    }
                };
                self.bus.insert(port, bus);
                bus
            }
        };
        let node_dir = self.dir.join(port.to_string());
        std::fs::create_dir_all(&node_dir).expect("node dir");
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args([
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
            ])
            .args(["--cluster-node-timeout", "1000"])
            // The bus port defaults to port + 10000, which nobody checked is free.
            .args(["--cluster-port", &bus.to_string()])
            .args(["--save", "", "--appendonly", "no"])
            // A master otherwise waits 5 s for more replicas before it streams the first sync
            // to one (diskless replication's default): every cluster with replicas paid it.
            .args(["--repl-diskless-sync-delay", "0"])
            .arg("--dir")
            .arg(&node_dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server on PATH (scripts/test.sh installs it)");
        self.nodes.insert(port, Some(child));
    }

    /// The seed URLs (every live node), comma-separated, as `REDIS_CLUSTER_NODES` takes them.
    pub fn seeds(&self) -> String {
        self.live()
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn live(&self) -> Vec<u16> {
        self.nodes
            .iter()
            .filter(|(_, c)| c.is_some())
            .map(|(p, _)| *p)
            .collect()
    }

    /// The ports of the current masters.
    pub fn masters(&self) -> Vec<u16> {
        let Some(nodes) = self
            .live()
            .into_iter()
            .find_map(|p| cli(p, &["CLUSTER", "NODES"]))
        else {
            return Vec::new();
        };
        nodes
            .lines()
            .filter(|l| l.contains("master") && !l.contains("fail"))
            .filter_map(|l| l.split_whitespace().nth(1))
            .filter_map(|addr| addr.split('@').next()?.rsplit(':').next()?.parse().ok())
            .collect()
    }

    /// The port of the master serving `key`'s slot.
    pub fn master_of(&self, key: &str) -> u16 {
        let live = self.live();
        let slot: u16 = live
            .iter()
            .find_map(|p| cli(*p, &["CLUSTER", "KEYSLOT", key]))
            .and_then(|s| s.trim().parse().ok())
            .expect("CLUSTER KEYSLOT");
        let nodes = live
            .iter()
            .find_map(|p| cli(*p, &["CLUSTER", "NODES"]))
            .expect("CLUSTER NODES");
        nodes
            .lines()
            .filter(|l| l.contains("master") && !l.contains("fail"))
            .find_map(|l| {
                let fields: Vec<&str> = l.split_whitespace().collect();
                let serves = fields.iter().skip(8).any(|range| {
                    let (lo, hi) = range.split_once('-').unwrap_or((range, range));
                    matches!((lo.parse::<u16>(), hi.parse::<u16>()), (Ok(lo), Ok(hi)) if (lo..=hi).contains(&slot))
                });
                serves
                    .then(|| fields.get(1)?.split('@').next()?.rsplit(':').next()?.parse().ok())
                    .flatten()
            })
            .expect("a master serves the slot")
    }

    /// SIGKILLs the first master and waits until its replica took over (every slot served
    /// again); returns the killed port.
    pub async fn kill_master(&mut self) -> u16 {
        let port = *self.masters().first().expect("a master");
        self.kill(port).await
    }

    /// SIGKILLs the master on `port` and waits until its replica took over.
    pub async fn kill(&mut self, port: u16) -> u16 {
        let masters = self.masters();
        if let Some(Some(mut child)) = self.nodes.insert(port, None) {
            let _ = child.kill();
            let _ = child.wait();
        }
        // Until the others notice (the node timeout) the cluster still looks whole: wait
        // for a replica to be promoted in the dead master's place.
        wait_until(Duration::from_secs(30), || {
            let now = self.masters();
            now.len() == masters.len() && !now.contains(&port)
        })
        .await
        .unwrap_or_else(|| panic!("no replica replaced master {port}"));
        let live = self.live();
        self.wait_ok(&live).await;
        port
    }

    /// SIGKILLs every node (their cluster configuration stays on disk); returns the ports
    /// for [`RedisCluster::restart`].
    pub fn stop_all(&mut self) -> Vec<u16> {
        let ports = self.live();
        for port in &ports {
            if let Some(Some(mut child)) = self.nodes.insert(*port, None) {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        ports
    }

    /// Starts a killed node again; it rejoins as a replica.
    pub async fn restart(&mut self, port: u16) {
        self.spawn(port);
        wait_until(Duration::from_secs(10), || {
            cli(port, &["PING"]).is_some_and(|o| o.contains("PONG"))
        })
        .await
        .expect("restarted node answers");
    }

    async fn wait_ok(&self, ports: &[u16]) {
        wait_until(Duration::from_secs(30), || {
            ports.iter().all(|p| {
                cli(*p, &["CLUSTER", "INFO"]).is_some_and(|i| {
                    i.contains("cluster_state:ok") && i.contains("cluster_slots_ok:16384")
                })
            })
        })
        .await
        .expect("cluster_state:ok on every node");
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for child in self.nodes.values_mut().filter_map(Option::as_mut) {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `redis-cli -p port args…`, its output when it ran.
pub(crate) fn cli(port: u16, args: &[&str]) -> Option<String> {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .args(args)
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Awaits `done` (a `redis-cli` call or a few), looking every 100 ms: each look spawns
/// processes.
pub(crate) async fn wait_until(limit: Duration, done: impl Fn() -> bool) -> Option<()> {
    crate::try_eventually_every(limit, Duration::from_millis(100), || async {
        done().then_some(())
    })
    .await
}
