//! A throwaway `redis-server` a test can stop and restart, for failure tests that must not
//! disturb the Redis other tests share.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A Redis server owned by one test; killed on drop.
pub struct RedisServer {
    /// Its port on 127.0.0.1.
    pub port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts `redis-server` on a free port and waits until it answers.
    pub async fn start() -> RedisServer {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("sb-redis-{port}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("redis dir");
        let mut server = RedisServer {
            port,
            dir,
            child: None,
        };
        server.restart().await;
        server
    }

    /// The URL of this server.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Starts the server again on the same port (after [`RedisServer::stop`]).
    pub async fn restart(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server on PATH (scripts/test.sh installs it)");
        self.child = Some(child);
        let client = redis::Client::open(self.url()).expect("url");
        let answers = crate::try_eventually_every(
            Duration::from_secs(5),
            Duration::from_millis(50),
            || async {
                let mut conn = client.get_multiplexed_async_connection().await.ok()?;
                let pong: redis::RedisResult<String> =
                    redis::cmd("PING").query_async(&mut conn).await;
                pong.ok()
            },
        )
        .await;
        assert!(
            answers.is_some(),
            "redis-server did not start on {}",
            self.port
        );
    }

    /// Kills the server (SIGKILL) and waits for it to exit.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A port nothing listens on right now, below Linux's ephemeral range (32768 and up): a
/// port from that range can become the local end of some outgoing connection between being
/// picked and being bound by the server it is for.
pub fn free_port() -> u16 {
    for _ in 0..1000 {
        let port = 10_000 + (uuid::Uuid::new_v4().as_u128() % 22_000) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}
