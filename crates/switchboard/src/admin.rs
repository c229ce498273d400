//! `switchboard admin …`: bootstrap orgs and users, lock users out, and move stored
//! secrets to a new master key, from the command line.

mod accounts;
mod audit_export;
mod demo;
mod reencrypt;

use anyhow::{Context, bail};
use clap::Subcommand;
use switchboard_config::{AppEnv, Config};
use switchboard_domain::Role;
use switchboard_store::{orgs, users};
use uuid::Uuid;

/// Admin subcommands.
#[derive(Subcommand)]
pub enum AdminCommand {
    /// Create an org; prints `{"id": …, "name": …}`.
    CreateOrg {
        /// The org's display name.
        #[arg(long)]
        name: String,
    },
    /// Create a user (or reuse the one with this email) and make them a member of an org;
    /// prints `{"id": …, "email": …, "org_id": …, "role": …, "created": bool}`.
    CreateUser {
        /// The org to join.
        #[arg(long)]
        org: Uuid,
        /// Login address.
        #[arg(long)]
        email: String,
        /// Password (at least 8 characters); ignored when the user already exists.
        #[arg(long)]
        password: String,
        /// `admin` or `expert`.
        #[arg(long, value_parser = ["admin", "expert"])]
        role: String,
    },
    /// Create (or bring back) the demo org of the local stacks: an admin, an expert and one
    /// connection per channel. Its passwords and secrets derive from `MASTER_ENCRYPTION_KEY`,
    /// so every run prints the same JSON and changes nothing that is already right.
    SeedDemo,
    /// Deactivate a user: their logins are refused and every token they hold stops working
    /// (REST at once, sockets within seconds); prints `{"id", "email", "active": false,
    /// "deactivated_at", "token_version"}`.
    DeactivateUser {
        /// The user's id.
        #[arg(long)]
        user: Uuid,
    },
    /// Let a deactivated user log in again (their old tokens stay revoked); prints the same
    /// object with `"active": true`.
    ReactivateUser {
        /// The user's id.
        #[arg(long)]
        user: Uuid,
    },
    /// Write the audit log of the whole deployment (or of `--org`) to stdout, oldest first,
    /// as NDJSON (one JSON object per line) or CSV with a header line; streamed, so any size
    /// fits. Filters combine.
    AuditExport {
        /// One org's rows only.
        #[arg(long)]
        org: Option<Uuid>,
        /// Rows of this user.
        #[arg(long)]
        actor: Option<Uuid>,
        /// Rows of this action (`customer.erased`, …).
        #[arg(long)]
        action: Option<String>,
        /// From this time (RFC 3339, inclusive).
        #[arg(long)]
        since: Option<chrono::DateTime<chrono::Utc>>,
        /// Before this time (RFC 3339, exclusive).
        #[arg(long)]
        until: Option<chrono::DateTime<chrono::Utc>>,
        /// `ndjson` or `csv`.
        #[arg(long, default_value = "ndjson", value_parser = ["ndjson", "csv"])]
        format: String,
    },
    /// Rewrite every stored secret that is not under the first master key with it, online,
    /// in batches (one progress line each on stderr); prints `{"key_id", "rewritten",
    /// "changed_meanwhile", "unreadable", "by_key", "without_key_id", "remaining"}` and fails
    /// unless `remaining` is 0. Safe to run again.
    Reencrypt {
        /// Rows read and rewritten per statement.
        #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(i64).range(1..=10_000))]
        batch_size: i64,
    },
}

/// Runs one admin command against the configured database.
pub async fn run(config: &Config, command: AdminCommand) -> anyhow::Result<()> {
    let pool = switchboard_store::connect_lazy(config)?;
    let out = match command {
        AdminCommand::CreateOrg { name } => {
            let name = name.trim();
            if name.is_empty() || name.chars().count() > 200 {
                bail!("--name must be 1 to 200 characters");
            }
            let org = orgs::create(&pool, name).await.context("creating org")?;
            serde_json::json!({"id": org.id, "name": org.name})
        }
        AdminCommand::CreateUser {
            org,
            email,
            password,
            role,
        } => {
            let role: Role = role.parse().map_err(|()| anyhow::anyhow!("bad role"))?;
            let email = email.trim().to_owned();
            if !email.contains('@') || email.len() > 254 {
                bail!("--email must be an email address of at most 254 characters");
            }
            if let Some(problem) = users::password_problem(&password) {
                bail!("--password: {problem}");
            }
            if orgs::get(&pool, org).await?.is_none() {
                bail!("org {org} does not exist");
            }
            let hash =
                tokio::task::spawn_blocking(move || users::hash_password(&password)).await??;
            let (user, created) = users::create(&pool, &email, &hash).await?;
            users::add_member(&pool, org, user.id, role).await?;
            serde_json::json!({
                "id": user.id, "email": user.email, "org_id": org, "role": role, "created": created
            })
        }
        AdminCommand::DeactivateUser { user } => accounts::set_active(&pool, user, false).await?,
        AdminCommand::ReactivateUser { user } => accounts::set_active(&pool, user, true).await?,
        AdminCommand::AuditExport {
            org,
            actor,
            action,
            since,
            until,
            format,
        } => {
            let filter = switchboard_store::audit::Filter {
                orgs: org.map(|org| vec![org]),
                actor,
                action,
                since,
                until,
            };
            let result = audit_export::run(&pool, &filter, &format).await;
            pool.close().await;
            return result;
        }
        AdminCommand::Reencrypt { batch_size } => {
            let (out, left_behind) = reencrypt::run(config, &pool, batch_size).await?;
            pool.close().await;
            println!("{out}");
            if left_behind {
                return reencrypt::left_behind(&out);
            }
            return Ok(());
        }
        AdminCommand::SeedDemo => {
            // The demo org has well-known users with printed passwords and demo channel
            // secrets: it exists only where DEMO_MODE says demos are wanted, never in
            // production (where DEMO_MODE is refused at start anyway).
            if config.app.env == AppEnv::Production {
                bail!(
                    "seed-demo refuses to run with APP_ENV=production: it creates users whose passwords it prints"
                );
            }
            if !config.app.demo_mode {
                bail!("seed-demo needs DEMO_MODE=true (the development default)");
            }
            let seed = demo::seed(config, &pool).await;
            pool.close().await;
            // Pretty: people read it (and the shell scripts pick values out line by line).
            println!("{}", serde_json::to_string_pretty(&seed?)?);
            return Ok(());
        }
    };
    pool.close().await;
    println!("{out}");
    Ok(())
}
