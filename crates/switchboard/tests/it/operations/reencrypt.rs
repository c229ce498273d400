use crate::run;
use serde_json::{Value, json};
use switchboard_domain::ChannelKind;
use switchboard_store::connections::{self, NewConnection};
use switchboard_store::crypto::{KeyId, SecretCipher};
use switchboard_testing::{MASTER_KEY, TestDb, pod_env, random_prefix, redis_url};

/// 32 bytes of 42.
const NEW_KEY: &str = "KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=";
const NEW_KEY_BYTES: [u8; 32] = [42; 32];
/// 32 bytes of 1: a key that never wrote anything.
const STRANGER: &str = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";

#[tokio::test]
async fn reencrypt_moves_every_secret_to_the_first_key_and_says_when_it_cannot() {
    let db = TestDb::fresh().await;
    let pool = db.pool().await;
    let org = switchboard_store::orgs::create(&pool, "Acme")
        .await
        .unwrap();
    let old = SecretCipher::new(&base64_key(MASTER_KEY));
    for n in 0..5 {
        let name = format!("slack-{n}");
        let new = NewConnection {
            org_id: org.id,
            channel: ChannelKind::Slack,
            name: &name,
            secrets: &json!({"signing_secret": "s", "bot_token": format!("xoxb-{n}")}),
            settings: &json!({}),
        };
        connections::create(&pool, &old, new).await.unwrap();
    }
    let mut vars = pod_env(&db, &redis_url(), &random_prefix());
    vars.insert("MASTER_ENCRYPTION_KEY".into(), String::new());
    let mut with_keys = |keys: &str| {
        vars.insert("MASTER_ENCRYPTION_KEYS".into(), keys.to_owned());
        vars.clone()
    };

    let rotated = with_keys(&format!("{NEW_KEY},{MASTER_KEY}"));
    let out = run(&rotated, &["admin", "reencrypt", "--batch-size", "2"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let new_id = KeyId::of(&NEW_KEY_BYTES).to_string();
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        summary,
        json!({
            "key_id": new_id, "rewritten": 5, "changed_meanwhile": 0, "unreadable": 0,
            "by_key": {new_id.as_str(): 5}, "without_key_id": 0, "remaining": 0
        })
    );
    // A progress line per batch of two.
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 3, "{stderr}");
    assert_eq!(
        lines[2],
        "channel_connections.secrets_ciphertext: 5 of 5 read, 5 rewritten, 0 changed meanwhile, 0 unreadable"
    );

    // Again, and with the old key gone: nothing to do.
    for keys in [rotated, with_keys(NEW_KEY)] {
        let out = run(&keys, &["admin", "reencrypt"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            (&summary["rewritten"], &summary["remaining"]),
            (&json!(0), &json!(0))
        );
    }
    // Every secret reads under the new key alone.
    let new = SecretCipher::new(&NEW_KEY_BYTES);
    for connection in connections::list(&pool, &[org.id]).await.unwrap() {
        connections::get_with_secrets(&pool, &new, connection.id)
            .await
            .unwrap()
            .unwrap();
    }

    // Under a list that lacks their key, it fails, says why and touches nothing.
    let out = run(&with_keys(STRANGER), &["admin", "reencrypt"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("5 stored secret(s) are still not under key")
            && stderr.contains("5 open with none of the configured keys"),
        "{stderr}"
    );
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["unreadable"], 5);
    assert_eq!(summary["by_key"], json!({new_id.as_str(): 5}));
}

fn base64_key(text: &str) -> [u8; 32] {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap()
        .try_into()
        .unwrap()
}
