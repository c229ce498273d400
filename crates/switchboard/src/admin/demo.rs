//! `switchboard admin seed-demo`: the demo org that `scripts/dev-up.sh` and the Docker smoke
//! test log in with and send webhooks to.
//!
//! Every value (the org id, the passwords, the channel secrets) is derived from
//! `MASTER_ENCRYPTION_KEY` with HMAC-SHA256, so the command keeps no state of its own: it can
//! run on the host or in a throwaway container, any number of times, and prints the same JSON
//! for the same key. Whoever holds that key can already decrypt every channel secret, so
//! deriving the demo's credentials from it discloses nothing new. A run converges: what is
//! missing is created, a password or secret that no longer matches is reset, the rest is
//! left alone.

use anyhow::{Context, bail};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use serde_json::{Map, Value, json};
use sha2::Sha256;
use sqlx::PgPool;
use switchboard_config::Config;
use switchboard_domain::{ChannelKind, Role};
use switchboard_store::connections::{self, NewConnection};
use switchboard_store::crypto::SecretCipher;
use switchboard_store::{StoreError, orgs, users};
use uuid::Uuid;

const ORG_NAME: &str = "Demo Org";

/// Creates or repairs the demo org and returns what `scripts/dev-up.sh` keeps in
/// `.dev/seed.json`: `{org_id, admin, expert, channels: {slack: {name, secrets, id,
/// webhook_url}, …}}`.
pub async fn seed(config: &Config, pool: &PgPool) -> anyhow::Result<Value> {
    let key = config
        .master_key_bytes()
        .context("seed-demo needs MASTER_ENCRYPTION_KEY (32 bytes, base64 or hex)")?;
    // Values derive from the key that encrypts; every listed key still reads.
    let derive = Derive { key };
    let cipher =
        SecretCipher::with_keys(&config.master_keys()).unwrap_or_else(|| SecretCipher::new(&key));

    let org_id = uuid::Builder::from_random_bytes(derive.array("org")).into_uuid();
    orgs::ensure(pool, org_id, ORG_NAME)
        .await
        .context("creating the demo org")?;

    let mut out = Map::new();
    out.insert("org_id".into(), json!(org_id));
    for role in [Role::Admin, Role::Expert] {
        let email = format!("{}@demo.local", role.as_str());
        let password = derive.token(&format!("{}.password", role.as_str()), 16);
        ensure_member(pool, org_id, &email, &password, role)
            .await
            .with_context(|| format!("seeding {email}"))?;
        out.insert(
            role.as_str().to_owned(),
            json!({"email": email, "password": password}),
        );
    }

    let mut channels = Map::new();
    for channel in ChannelKind::ALL {
        let name = format!("demo-{channel}");
        let secrets = derive.secrets(channel);
        let id = ensure_connection(pool, &cipher, org_id, channel, &name, &secrets)
            .await
            .with_context(|| format!("seeding the {channel} connection"))?;
        channels.insert(
            channel.to_string(),
            json!({
                "name": name,
                "secrets": secrets,
                "id": id,
                "webhook_url": config.webhook_url(channel.as_str(), &id.to_string()),
            }),
        );
    }
    out.insert("channels".into(), Value::Object(channels));
    Ok(Value::Object(out))
}

/// The user with this address (created if missing, its password reset if it no longer
/// matches) as a member of the org with this role.
async fn ensure_member(
    pool: &PgPool,
    org_id: Uuid,
    email: &str,
    password: &str,
    role: Role,
) -> anyhow::Result<()> {
    let hash = hash(password).await?;
    let (user, created) = users::create(pool, email, &hash).await?;
    if !created {
        let (current, _) = users::password_of(pool, user.id)
            .await?
            .context("the demo user vanished while being seeded")?;
        let candidate = password.to_owned();
        let matches =
            tokio::task::spawn_blocking(move || users::verify_password(&candidate, &current))
                .await?;
        if !matches {
            users::set_password(pool, user.id, &hash, None).await?;
        }
    }
    users::add_member(pool, org_id, user.id, role).await?;
    Ok(())
}

async fn hash(password: &str) -> anyhow::Result<String> {
    let password = password.to_owned();
    Ok(tokio::task::spawn_blocking(move || users::hash_password(&password)).await??)
}

/// The id of the org's live connection with this channel and name and exactly these
/// secrets; one with other secrets (or secrets this key cannot open) is replaced.
async fn ensure_connection(
    pool: &PgPool,
    cipher: &SecretCipher,
    org_id: Uuid,
    channel: ChannelKind,
    name: &str,
    secrets: &Value,
) -> anyhow::Result<Uuid> {
    // Two runs at once may both find nothing and both create: the loser sees Conflict and
    // looks again.
    for _ in 0..3 {
        let existing = connections::list(pool, &[org_id])
            .await?
            .into_iter()
            .find(|c| c.channel == channel && c.name == name);
        if let Some(connection) = existing {
            match connections::get_with_secrets(pool, cipher, connection.id).await {
                Ok(Some((_, stored))) if stored == *secrets => return Ok(connection.id),
                Ok(None) => continue,
                Ok(Some(_)) | Err(StoreError::Crypto(_)) => {
                    connections::delete(pool, connection.id).await?;
                }
                Err(e) => return Err(e.into()),
            }
        }
        let created = connections::create(
            pool,
            cipher,
            NewConnection {
                org_id,
                channel,
                name,
                secrets,
                settings: &json!({}),
            },
        )
        .await;
        match created {
            Ok(connection) => return Ok(connection.id),
            Err(StoreError::Conflict) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    bail!("the connection kept changing under this command; run it again")
}

/// Deterministic values under the master key, one independent stream per label.
struct Derive {
    key: [u8; 32],
}

impl Derive {
    fn bytes(&self, label: &str, n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n + 32);
        let mut block: u32 = 0;
        while out.len() < n {
            #[allow(clippy::expect_used)] // HMAC takes a key of any length
            let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("any key length");
            mac.update(b"switchboard seed-demo v1\0");
            mac.update(label.as_bytes());
            mac.update(&block.to_be_bytes());
            out.extend_from_slice(&mac.finalize().into_bytes());
            block += 1;
        }
        out.truncate(n);
        out
    }

    fn array<const N: usize>(&self, label: &str) -> [u8; N] {
        let mut out = [0; N];
        out.copy_from_slice(&self.bytes(label, N));
        out
    }

    /// `n` letters and digits.
    fn token(&self, label: &str, n: usize) -> String {
        const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        self.bytes(label, n)
            .iter()
            .map(|b| char::from(ALNUM[usize::from(*b) % ALNUM.len()]))
            .collect()
    }

    /// `n` bytes as lower-case hex.
    fn hex(&self, label: &str, n: usize) -> String {
        self.bytes(label, n)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Secrets of the shape each provider issues, so the webhook paths verify them as
    /// they would real ones.
    fn secrets(&self, channel: ChannelKind) -> Value {
        match channel {
            ChannelKind::Slack => json!({
                "signing_secret": self.hex("slack.signing_secret", 16),
                "bot_token": format!("xoxb-demo-{}", self.token("slack.bot_token", 24)),
            }),
            ChannelKind::Whatsapp => json!({
                "account_sid": format!("AC{}", self.hex("whatsapp.account_sid", 16)),
                "auth_token": self.hex("whatsapp.auth_token", 16),
                "from_number": "whatsapp:+15555550100",
            }),
            ChannelKind::Telegram => {
                let bot = 1_000_000_000
                    + u64::from_be_bytes(self.array("telegram.bot_id")) % 9_000_000_000;
                json!({
                    "bot_token": format!("{bot}:{}", self.token("telegram.bot_token", 35)),
                    "secret_token": self.token("telegram.secret_token", 32),
                })
            }
            ChannelKind::Email => json!({
                "webhook_secret": format!("whsec_{}", STANDARD.encode(self.bytes("email.webhook_secret", 24))),
                "api_key": format!("re_demo_{}", self.token("email.api_key", 24)),
                "from_address": "support@demo.local",
            }),
        }
    }
}
