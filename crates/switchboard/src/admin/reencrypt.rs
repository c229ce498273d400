//! `switchboard admin reencrypt`: moves every stored secret to the first master key, while
//! the pods keep running (docs/OPERATIONS.md, "Rotating the master key"). The work is
//! `switchboard_store::rekey::reencrypt`; this prints its progress and decides the exit
//! status: success only when no stored secret is left under another key, which is when the
//! other keys may be removed.

use anyhow::{Context, bail};
use serde_json::{Map, Value, json};
use sqlx::PgPool;
use switchboard_config::Config;
use switchboard_store::crypto::SecretCipher;
use switchboard_store::rekey::{self, Progress};

/// Re-encrypts in batches of `batch`, one progress line per batch on stderr; returns the
/// JSON the command prints, and whether anything is left under another key.
pub async fn run(config: &Config, pool: &PgPool, batch: i64) -> anyhow::Result<(Value, bool)> {
    let cipher = SecretCipher::with_keys(&config.master_keys())
        .context("reencrypt needs MASTER_ENCRYPTION_KEY or MASTER_ENCRYPTION_KEYS")?;
    let done = rekey::reencrypt(pool, &cipher, batch, |p| eprintln!("{}", line(p)))
        .await
        .context("re-encrypting")?;
    let census = rekey::census(pool).await.context("counting")?;
    let sum = |f: fn(&Progress) -> i64| done.iter().map(f).sum::<i64>();
    let by_key: Map<String, Value> = census
        .by_key
        .iter()
        .map(|(id, n)| (id.to_string(), json!(n)))
        .collect();
    let remaining = census.not_current(&cipher);
    let out = json!({
        "key_id": cipher.current().to_string(),
        "rewritten": sum(|p| p.rewritten),
        "changed_meanwhile": sum(|p| p.changed_meanwhile),
        "unreadable": sum(|p| p.unreadable),
        "by_key": by_key,
        "without_key_id": census.legacy,
        "remaining": remaining,
    });
    Ok((out, remaining > 0))
}

/// Why secrets are left under another key, for the failing exit.
pub fn left_behind(out: &Value) -> anyhow::Result<()> {
    let (remaining, unreadable) = (&out["remaining"], &out["unreadable"]);
    let mut why = Vec::new();
    if unreadable.as_i64() > Some(0) {
        why.push(format!(
            "{unreadable} open with none of the configured keys (add the key they were written with after the first one, and run again)"
        ));
    }
    if out["changed_meanwhile"].as_i64() > Some(0) {
        why.push(
            "some were written meanwhile under another key: a pod still runs an older key list; finish the roll and run again".into(),
        );
    }
    if why.is_empty() {
        why.push("written meanwhile under another key: run again".into());
    }
    bail!(
        "{remaining} stored secret(s) are still not under key {}: {}",
        out["key_id"].as_str().unwrap_or_default(),
        why.join("; ")
    )
}

/// One progress line.
fn line(p: &Progress) -> String {
    format!(
        "{}: {} of {} read, {} rewritten, {} changed meanwhile, {} unreadable",
        p.column, p.read, p.to_do, p.rewritten, p.changed_meanwhile, p.unreadable
    )
}
