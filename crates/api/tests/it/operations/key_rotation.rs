//! Keys that rotate: login tokens name their signing key (`kid`) and pods accept every key
//! they list; stored secrets name their master key, `reencrypt` moves them to the first one
//! while pods run, and a pod refuses to start beside a secret it could not read.

use aes_gcm::aead::{Aead, KeyInit, OsRng, Payload};
use aes_gcm::{AeadCore, Aes256Gcm};
use base64::Engine;
use serde_json::json;
use sha2::{Digest, Sha256};
use switchboard_api::{App, StartError};
use switchboard_domain::Role;
use switchboard_store::crypto::{KeyId, SecretCipher};
use switchboard_store::rekey::{self, SEALED_COLUMNS};
use switchboard_testing::signing::{self, SLACK_SECRET};
use switchboard_testing::socket::{self, ConnectError};
use switchboard_testing::{
    JWT_SECRET, MASTER_KEY, TestApp, TestDb, TestPod, config_from, pod_env, random_prefix,
    redis_url, seed_member, user_id,
};
use uuid::Uuid;

const NEW_JWT: &str =
    "new-jwt-secret-fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";
/// 32 bytes of 42.
const NEW_KEY: &str = "KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=";

/// The id the docs tell operators to compute: `printf %s "$SECRET" | sha256sum | cut -c1-8`.
fn kid_of(secret: &str) -> String {
    hex::encode(&Sha256::digest(secret.as_bytes())[..4])
}

fn kid_in(token: &str) -> Option<String> {
    jsonwebtoken::decode_header(token).unwrap().kid
}

fn key(base64: &str) -> [u8; 32] {
    base64::engine::general_purpose::STANDARD
        .decode(base64)
        .unwrap()
        .try_into()
        .unwrap()
}

/// A token as releases before key ids issued it: signed with `secret`, no `kid`.
fn token_without_kid(secret: &str, user: Uuid) -> String {
    let now = chrono::Utc::now().timestamp();
    let claims =
        json!({"sub": user, "iat": now, "exp": now + 600, "ver": 0, "jti": Uuid::new_v4()});
    jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()),
    )
    .unwrap()
}

async fn socket_refused(pod: &TestPod, token: &str) -> bool {
    match socket::connect(pod, Some(json!({ "token": token }))).await {
        Err(ConnectError::Refused(_)) => true,
        Err(_) => false,
        Ok(sock) => {
            sock.close().await;
            false
        }
    }
}

#[tokio::test]
async fn pods_with_a_new_jwt_key_first_accept_old_tokens_and_sign_with_the_new() {
    let rotated = format!("{NEW_JWT},{JWT_SECRET}");
    let mut app = TestApp::builder()
        .pods(2)
        .env("JWT_SECRET", "")
        .env("JWT_SECRETS", &rotated)
        .build()
        .await;
    // A pod not rolled yet signs with the old key alone.
    app.start_pod(&[("JWT_SECRETS", ""), ("JWT_SECRET", JWT_SECRET)])
        .await;
    let (_, email, password) = seed_member(&app.db, None, Role::Expert).await;
    let user = user_id(&app.db, &email).await;
    let old = app.pod(2).login(&email, &password).await;
    assert_eq!(kid_in(&old), Some(kid_of(JWT_SECRET)));
    let new = app.pod(1).login(&email, &password).await;
    assert_eq!(kid_in(&new), Some(kid_of(NEW_JWT)));
    let before_key_ids = token_without_kid(JWT_SECRET, user);

    for i in 0..2 {
        let pod = app.pod(i);
        for token in [&old, &new, &before_key_ids] {
            assert_eq!(pod.as_user(token).me().await.0, 200, "pod {i}");
        }
        socket::connect_with(pod, &old).await.close().await;
    }

    // The old key removed: its tokens end, on REST and on sockets; the new key's go on.
    let new_only = app.start_pod(&[("JWT_SECRETS", NEW_JWT)]).await;
    assert_eq!(new_only.as_user(&new).me().await.0, 200);
    socket::connect_with(new_only, &new).await.close().await;
    for token in [&old, &before_key_ids] {
        let (status, code) = new_only.as_user(token).me().await;
        assert_eq!((status, code), (401, json!("unauthorized")));
        assert!(socket_refused(new_only, token).await, "socket admitted");
    }
}

/// A slack connection of `org` stored as releases before key ids stored it: nonce and
/// ciphertext under `key`, no header.
async fn insert_without_key_id(db: &TestDb, org: Uuid, key: &[u8; 32]) -> Uuid {
    let id = Uuid::new_v4();
    let cipher = Aes256Gcm::new_from_slice(key).unwrap();
    let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
    let plaintext = serde_json::to_vec(&signing::secrets("slack")).unwrap();
    let payload = Payload {
        msg: &plaintext,
        aad: id.as_bytes(),
    };
    let mut stored = nonce.to_vec();
    stored.extend(cipher.encrypt(&nonce, payload).unwrap());
    sqlx::query(
        "INSERT INTO channel_connections (id, org_id, channel, name, secrets_ciphertext)
         VALUES ($1, $2, 'slack', 'before-key-ids', $3)",
    )
    .bind(id)
    .bind(org)
    .bind(stored)
    .execute(&db.pool().await)
    .await
    .unwrap();
    id
}

/// Slack webhooks to each of `connections` through `pod` verify: the pod read their secrets.
async fn webhooks_verify(pod: &TestPod, connections: &[Uuid]) {
    for conn in connections {
        let event = Uuid::new_v4().simple().to_string();
        let signed = signing::slack(SLACK_SECRET, &event, "U1", "1700000000.000100", "hi");
        let path = format!("/webhooks/slack/{conn}");
        assert_eq!(pod.send_webhook(&path, &signed).await.0, 200, "{path}");
    }
}

#[tokio::test]
async fn secrets_under_the_old_key_stay_readable_and_reencrypt_moves_them_to_the_new() {
    let old = key(MASTER_KEY);
    let new = key(NEW_KEY);
    // Before the rotation: the old key alone, and one secret from before key ids.
    let app = TestApp::builder().build().await;
    let org = app.org().await;
    let before_key_ids = insert_without_key_id(&app.db, org.id, &old).await;
    let db = app.stop().await;

    // The new key first, the old one still listed, on two pods.
    let rotated = format!("{NEW_KEY},{MASTER_KEY}");
    let app = TestApp::builder()
        .db(db)
        .pods(2)
        .env("MASTER_ENCRYPTION_KEY", "")
        .env("MASTER_ENCRYPTION_KEYS", &rotated)
        .build()
        .await;
    let old_ones = [org.conns["slack"], before_key_ids];
    for i in 0..2 {
        webhooks_verify(app.pod(i), &old_ones).await;
    }
    // What is written now is sealed under the new key.
    let fresh = app
        .pod(1)
        .as_user(&org.token)
        .create_connection_with(org.id, "slack", "after", signing::secrets("slack"))
        .await;
    let pool = app.db.pool().await;
    let stored: Vec<u8> =
        sqlx::query_scalar("SELECT secrets_ciphertext FROM channel_connections WHERE id = $1")
            .bind(fresh)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(stored.starts_with(format!("v2:{}:", KeyId::of(&new)).as_bytes()));
    let census = rekey::census(&pool).await.unwrap();
    assert_eq!(census.legacy, 1);
    assert_eq!(census.by_key[&KeyId::of(&old)], 4);
    assert_eq!(census.by_key[&KeyId::of(&new)], 1);

    // Re-encrypt while the pods run, two rows per statement.
    let cipher = SecretCipher::with_keys(&[new, old]).unwrap();
    let mut reports = Vec::new();
    let done = rekey::reencrypt(&pool, &cipher, 2, |p| reports.push(p.clone()))
        .await
        .unwrap();
    assert_eq!(reports.len(), 3, "{reports:?}");
    let totals = &done[0];
    assert_eq!(totals.column, "channel_connections.secrets_ciphertext");
    assert_eq!((totals.to_do, totals.read, totals.rewritten), (5, 5, 5));
    assert_eq!((totals.changed_meanwhile, totals.unreadable), (0, 0));
    let census = rekey::census(&pool).await.unwrap();
    assert_eq!(census.legacy, 0);
    assert_eq!(census.by_key.len(), 1);
    assert_eq!(census.by_key[&KeyId::of(&new)], 6);
    for i in 0..2 {
        webhooks_verify(app.pod(i), &old_ones).await;
    }
    // Again: nothing left to do, nothing read.
    let mut again = 0;
    let done = rekey::reencrypt(&pool, &cipher, 2, |_| again += 1)
        .await
        .unwrap();
    assert_eq!((done[0].to_do, done[0].rewritten, again), (0, 0, 0));

    // The old key removed: every secret is still read.
    let db = app.stop().await;
    let app = TestApp::builder()
        .db(db)
        .env("MASTER_ENCRYPTION_KEY", "")
        .env("MASTER_ENCRYPTION_KEYS", NEW_KEY)
        .build()
        .await;
    webhooks_verify(app.pod(0), &[old_ones[0], old_ones[1], fresh]).await;
}

#[tokio::test]
async fn the_start_refuses_secrets_under_a_key_it_lacks_naming_how_many() {
    let old = key(MASTER_KEY);
    let app = TestApp::builder().build().await;
    let org = app.org().await;
    insert_without_key_id(&app.db, org.id, &old).await;
    let db = app.stop().await;

    let mut vars = pod_env(&db, &redis_url(), &random_prefix());
    vars.insert("MASTER_ENCRYPTION_KEY".into(), String::new());
    vars.insert("MASTER_ENCRYPTION_KEYS".into(), NEW_KEY.into());
    let lines = match App::build(config_from(&vars)).await {
        Err(StartError::Violations(lines)) => lines,
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("started without the key of 5 stored secrets"),
    };
    let unknown = format!(
        "4 stored secret(s) are encrypted under master key id(s) {} (4) that MASTER_ENCRYPTION_KEYS does not list",
        KeyId::of(&old)
    );
    assert!(lines.iter().any(|l| l.starts_with(&unknown)), "{lines:?}");
    let before = "1 stored secret(s) from before key ids (of the first 200 checked) open with none of the keys in MASTER_ENCRYPTION_KEYS";
    assert!(lines.iter().any(|l| l.starts_with(before)), "{lines:?}");

    // Listed again, second, the old key lets it start.
    vars.insert(
        "MASTER_ENCRYPTION_KEYS".into(),
        format!("{NEW_KEY},{MASTER_KEY}"),
    );
    let pod = TestPod::start_with(&db, &redis_url(), &random_prefix(), |v| v.extend(vars)).await;
    pod.server.begin_shutdown();
}

#[tokio::test]
async fn every_bytea_column_is_a_sealed_column() {
    let db = TestDb::fresh().await;
    let columns: Vec<(String, String)> = sqlx::query_as(
        "SELECT table_name::text, column_name::text FROM information_schema.columns
         WHERE table_schema = 'public' AND data_type = 'bytea' AND table_name <> '_sqlx_migrations'
         ORDER BY 1, 2",
    )
    .fetch_all(&db.pool().await)
    .await
    .unwrap();
    // One-way hashes (of single-use tokens, of erased customers' inbox keys): nothing to
    // decrypt, so nothing to re-encrypt.
    const HASHES: [(&str, &str); 3] = [
        ("inbound_tombstones", "dedup_sha256"),
        ("invitations", "token_sha256"),
        ("password_resets", "token_sha256"),
    ];
    let mut sealed: Vec<(String, String)> = SEALED_COLUMNS
        .iter()
        .map(|c| (c.table.to_owned(), c.column.to_owned()))
        .chain(
            HASHES
                .iter()
                .map(|(t, c)| ((*t).to_owned(), (*c).to_owned())),
        )
        .collect();
    sealed.sort();
    assert_eq!(
        columns, sealed,
        "a bytea column that holds secrets belongs in switchboard_store::rekey::SEALED_COLUMNS \
         (or reencrypt and the start-up check leave it out), a hash of a token in HASHES"
    );
}
