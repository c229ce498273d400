//! Everything the server keeps, as text to search: a data-only dump of a test database, and
//! every key and value under a Redis key prefix (on each master of a Redis Cluster).

use crate::{TestDb, redis_client, redis_cluster_nodes, redis_url};
use std::fmt::Write as _;

/// `pg_dump --data-only` of `db` (every table, every row), through Postgres itself. Uses
/// the one in `SB_TEST_PG_BINDIR` (set by `scripts/test.sh`) when it is there, else
/// `pg_dump` on `PATH`.
pub fn pg_data(db: &TestDb) -> String {
    let pg_dump = std::env::var("SB_TEST_PG_BINDIR")
        .map(|dir| format!("{dir}/pg_dump"))
        .ok()
        .filter(|path| std::path::Path::new(path).exists())
        .unwrap_or_else(|| "pg_dump".into());
    let out = std::process::Command::new(&pg_dump)
        .args(["--data-only", "--no-owner", "--dbname", &db.direct_url])
        .output()
        .unwrap_or_else(|e| panic!("{pg_dump}: {e}"));
    assert!(
        out.status.success(),
        "pg_dump failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("pg_dump writes UTF-8")
}

/// Every key under `prefix` with its whole value, whatever its type (strings, hashes,
/// lists, sets, sorted sets with scores, streams), read by SCAN on every node that holds
/// keys: each master of the test run's cluster, or its one Redis.
pub async fn redis_data(prefix: &str) -> String {
    let nodes: Vec<String> = match redis_cluster_nodes() {
        Some(seeds) => seeds.split(',').map(str::to_owned).collect(),
        None => vec![redis_url()],
    };
    let mut out = String::new();
    for node in nodes {
        let mut conn = redis_client(&node)
            .get_multiplexed_async_connection()
            .await
            .expect("redis");
        let mut cursor = 0u64;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(format!("{prefix}*"))
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut conn)
                .await
                .expect("SCAN");
            for key in keys {
                let kind: String = redis::cmd("TYPE")
                    .arg(&key)
                    .query_async(&mut conn)
                    .await
                    .expect("TYPE");
                let read = match kind.as_str() {
                    "string" => redis::cmd("GET").arg(&key).clone(),
                    "hash" => redis::cmd("HGETALL").arg(&key).clone(),
                    "list" => redis::cmd("LRANGE").arg(&key).arg(0).arg(-1).clone(),
                    "set" => redis::cmd("SMEMBERS").arg(&key).clone(),
                    "zset" => redis::cmd("ZRANGE")
                        .arg(&key)
                        .arg(0)
                        .arg(-1)
                        .arg("WITHSCORES")
                        .clone(),
                    "stream" => redis::cmd("XRANGE").arg(&key).arg("-").arg("+").clone(),
                    // Expired between SCAN and TYPE.
                    _ => {
                        let _ = writeln!(out, "{key} ({kind})");
                        continue;
                    }
                };
                let value: redis::Value = read.query_async(&mut conn).await.expect("read key");
                let _ = writeln!(out, "{key} ({kind}): {}", text(&value));
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    out
}

/// A Redis reply as text: bulk strings decoded (lossily), nested replies flattened.
fn text(value: &redis::Value) -> String {
    match value {
        redis::Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        redis::Value::Int(n) => n.to_string(),
        redis::Value::Double(d) => d.to_string(),
        redis::Value::Array(items) | redis::Value::Set(items) => {
            items.iter().map(text).collect::<Vec<_>>().join(" ")
        }
        redis::Value::Map(pairs) => pairs
            .iter()
            .map(|(k, v)| format!("{} {}", text(k), text(v)))
            .collect::<Vec<_>>()
            .join(" "),
        other => format!("{other:?}"),
    }
}
