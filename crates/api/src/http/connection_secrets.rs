//! What `PATCH /channel-connections/{id}` does to a connection (issue 26: "connection secrets
//! that rotate"): checks the request and computes the next secrets from the stored ones, so
//! the handler in `connections` only locks, writes, audits and invalidates. Pure, so each
//! rule is tested here.
//!
//! A leaked secret used to mean deleting the connection, which changes its webhook URL. Now
//! any secret field can be replaced in place. The one that verifies webhooks
//! ([`inbound_secret_field`]) gets an overlap: its replaced value keeps verifying until
//! `previous_secret_expires_in_secs` from now (default a day, at most 30 days, 0 for none),
//! because the provider signs with the old value until it has been switched, and webhooks
//! refused meanwhile would be lost or retried for hours. The fields used to call the
//! provider (bot tokens, API keys) switch at once: the provider accepts the new one as soon
//! as it is issued. At most one replaced value per field: replacing the secret again makes
//! the value it replaces the previous one, and the older one stops verifying at once.

use crate::error::ApiError;
use chrono::{DateTime, Duration, SubsecRound, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use switchboard_channels::{inbound_secret_field, secret_fields, validate_secrets};
use switchboard_store::connections::{Connection, PreviousSecret, Secrets};
use utoipa::ToSchema;

/// How long a replaced inbound secret verifies when the request does not say.
pub(crate) const DEFAULT_OVERLAP_SECS: u64 = 24 * 60 * 60;
/// The longest overlap a request may ask for: a replaced secret, possibly leaked, must not
/// verify indefinitely.
pub(crate) const MAX_OVERLAP_SECS: u64 = 30 * 24 * 60 * 60;

/// A change to a connection; every field is optional, and at least one must be given.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ConnectionUpdate)]
pub(crate) struct UpdateRequest {
    /// A new display name, 1 to 200 characters. The webhook URL does not change.
    name: Option<String>,
    /// New non-secret settings: an object that replaces the stored one whole.
    #[schema(value_type = Option<Object>)]
    settings: Option<Value>,
    /// Secret fields to replace, any of the channel's (slack `signing_secret`, `bot_token`;
    /// whatsapp `account_sid`, `auth_token`, `from_number`; telegram `bot_token`,
    /// `secret_token`; email `webhook_secret`, `api_key`, `from_address`), each a non-empty
    /// string; the fields left out keep their values. A new webhook-verifying secret (slack
    /// `signing_secret`, whatsapp `auth_token`, telegram `secret_token`, email
    /// `webhook_secret`) does not end the old one at once: see
    /// `previous_secret_expires_in_secs`. Every other field switches at once.
    #[schema(value_type = Option<Object>)]
    secrets: Option<Value>,
    /// How long (seconds, 0 to 2592000, default 86400) the replaced webhook-verifying secret
    /// keeps verifying webhooks alongside the new one; 0 ends it at once (a leaked secret).
    /// Without a new value for that secret, re-sets the expiry of the previous one still
    /// verifying (0 ends it now); 422 when there is none.
    #[schema(maximum = 2_592_000)]
    previous_secret_expires_in_secs: Option<u64>,
}

/// One of a connection's secret fields as the API shows it: the name and which values are
/// active until when, never a value.
#[derive(Serialize, ToSchema)]
pub(crate) struct SecretField {
    /// The field, as named in `secrets`.
    name: &'static str,
    /// Whether it verifies the channel's webhooks (a replaced value keeps verifying until
    /// `previous_expires_at`); the other fields are used to call the provider and are
    /// replaced at once.
    verifies_webhooks: bool,
    /// Until when the value this field had before its last replacement still verifies
    /// webhooks, alongside the current one; `null` when only the current value is active.
    previous_expires_at: Option<DateTime<Utc>>,
}

/// `connection`'s secret fields as of `now`.
pub(crate) fn secret_fields_of(connection: &Connection, now: DateTime<Utc>) -> Vec<SecretField> {
    let inbound = inbound_secret_field(connection.channel);
    secret_fields(connection.channel)
        .iter()
        .map(|&name| SecretField {
            name,
            verifies_webhooks: name == inbound,
            previous_expires_at: connection
                .previous_secrets_expire_at
                .get(name)
                .copied()
                .filter(|at| now < *at),
        })
        .collect()
}

/// What the update writes, and what its audit entry says.
#[derive(Debug)]
pub(crate) struct Plan {
    /// The new name, trimmed.
    pub name: Option<String>,
    /// The new settings.
    pub settings: Option<Value>,
    /// The secrets to store: always written, so a replaced value past its expiry is dropped
    /// by any update.
    pub secrets: Secrets,
    /// `name`, `settings`, `secrets.{field}` and `previous_secrets_expire_at` for what
    /// actually changed (a value sent again unchanged is not a change).
    pub changed: Vec<String>,
}

impl Plan {
    /// The audit entry's details: what changed and which replaced secrets verify until
    /// when; never a value.
    pub(crate) fn audit_details(&self) -> Value {
        let previous: Map<String, Value> = self
            .secrets
            .all_previous()
            .iter()
            .map(|p| (p.field().to_owned(), json!(p.expires_at())))
            .collect();
        json!({"changed": self.changed, "previous_secrets_expire_at": previous})
    }
}

/// Checks `body` against `connection` and its `stored` secrets and computes the update;
/// every refusal is a 422 that names fields, never values.
pub(crate) fn plan(
    connection: &Connection,
    stored: &Secrets,
    body: Value,
    now: DateTime<Utc>,
) -> Result<Plan, ApiError> {
    let request: UpdateRequest =
        serde_json::from_value(body).map_err(|e| ApiError::validation(e.to_string()))?;
    if request.name.is_none()
        && request.settings.is_none()
        && request.secrets.is_none()
        && request.previous_secret_expires_in_secs.is_none()
    {
        return Err(ApiError::validation(
            "nothing to change: give name, settings, secrets or previous_secret_expires_in_secs",
        ));
    }
    let mut changed = Vec::new();
    let name = match request.name {
        Some(name) => {
            let name = name.trim();
            if name.is_empty() || name.chars().count() > 200 {
                return Err(ApiError::validation("name must be 1 to 200 characters"));
            }
            if name != connection.name {
                changed.push("name".to_owned());
            }
            Some(name.to_owned())
        }
        None => None,
    };
    if let Some(settings) = &request.settings {
        if !settings.is_object() {
            return Err(ApiError::validation("settings must be an object"));
        }
        if *settings != connection.settings {
            changed.push("settings".to_owned());
        }
    }
    let channel = connection.channel;
    let mut current = stored.expose().clone();
    if let Some(replacements) = request.secrets {
        let Value::Object(replacements) = replacements else {
            return Err(ApiError::validation("secrets must be an object"));
        };
        if replacements.is_empty() {
            return Err(ApiError::validation(format!(
                "secrets must name at least one of the {channel} secret fields: {}",
                secret_fields(channel).join(", ")
            )));
        }
        let fields = current
            .as_object_mut()
            .ok_or_else(|| ApiError::internal(StoredSecretsNotAnObject))?;
        for (field, value) in replacements {
            if fields.get(&field) != Some(&value) {
                changed.push(format!("secrets.{field}"));
            }
            fields.insert(field, value);
        }
        validate_secrets(channel, &current).map_err(|e| ApiError::validation(e.to_string()))?;
    }
    let overlap = match request.previous_secret_expires_in_secs {
        Some(secs) if secs > MAX_OVERLAP_SECS => {
            return Err(ApiError::validation(format!(
                "previous_secret_expires_in_secs must be 0 to {MAX_OVERLAP_SECS} (30 days)"
            )));
        }
        // Bounded above, so this fits.
        Some(secs) => Some(Duration::seconds(secs.try_into().unwrap_or(i64::MAX))),
        None => None,
    };
    let field = inbound_secret_field(channel);
    let now = now.trunc_subsecs(0);
    let replaced = stored.expose().get(field).and_then(Value::as_str);
    let still_verifying = stored.previous(field).filter(|p| p.active_at(now));
    let previous = if replaced.is_some() && current.get(field) != stored.expose().get(field) {
        // The inbound secret is replaced: the value it had verifies for the overlap.
        let overlap = overlap.unwrap_or(Duration::seconds(DEFAULT_OVERLAP_SECS as i64));
        replaced.map(|old| PreviousSecret::new(field, old, now + overlap))
    } else if let Some(overlap) = overlap {
        // Only the overlap of the value replaced before changes.
        let Some(previous) = still_verifying else {
            return Err(ApiError::validation(format!(
                "previous_secret_expires_in_secs applies to a replaced {field}: give \
                 secrets.{field}, or use it while a previous {field} still verifies (none does)"
            )));
        };
        Some(PreviousSecret::new(field, previous.expose(), now + overlap))
    } else {
        still_verifying.cloned()
    }
    .filter(|p| p.active_at(now));
    let before = still_verifying.map(PreviousSecret::expires_at);
    if previous.as_ref().map(PreviousSecret::expires_at) != before {
        changed.push("previous_secrets_expire_at".to_owned());
    }
    Ok(Plan {
        name,
        settings: request.settings,
        secrets: Secrets::with_previous(current, previous.into_iter().collect()),
        changed,
    })
}

/// A stored secrets document that is not an object: not something a request can fix.
#[derive(Debug, thiserror::Error)]
#[error("the stored secrets of this connection are not a JSON object")]
struct StoredSecretsNotAnObject;

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_domain::ChannelKind;
    use uuid::Uuid;

    fn now() -> DateTime<Utc> {
        "2026-12-01T10:00:00Z".parse().expect("a time")
    }

    fn slack() -> (Connection, Secrets) {
        let connection = Connection {
            id: Uuid::nil(),
            org_id: Uuid::nil(),
            channel: ChannelKind::Slack,
            name: "support".into(),
            settings: json!({}),
            created_at: now(),
            updated_at: now(),
            previous_secrets_expire_at: Default::default(),
        };
        let secrets = Secrets::new(json!({"signing_secret": "old", "bot_token": "xoxb-old"}));
        (connection, secrets)
    }

    fn refused(body: Value) -> String {
        let (connection, stored) = slack();
        let error = plan(&connection, &stored, body.clone(), now()).expect_err("refused");
        let body = error.body();
        assert_eq!(body["code"], "validation_failed", "{body}");
        body["message"].as_str().expect("a message").to_owned()
    }

    #[test]
    fn a_new_signing_secret_keeps_the_old_one_for_the_overlap() {
        let (connection, stored) = slack();
        let body =
            json!({"secrets": {"signing_secret": "new"}, "previous_secret_expires_in_secs": 60});
        let plan = plan(&connection, &stored, body, now()).expect("accepted");
        assert_eq!(plan.secrets.expose()["signing_secret"], "new");
        assert_eq!(plan.secrets.expose()["bot_token"], "xoxb-old", "kept");
        let previous = plan
            .secrets
            .previous("signing_secret")
            .expect("a previous value");
        assert_eq!(previous.expose(), "old");
        assert_eq!(previous.expires_at(), now() + Duration::seconds(60));
        assert_eq!(
            plan.changed,
            ["secrets.signing_secret", "previous_secrets_expire_at"]
        );
        let details = plan.audit_details().to_string();
        assert!(
            !details.contains("old\"") && !details.contains("new"),
            "{details}"
        );
    }

    #[test]
    fn the_overlap_defaults_to_a_day_and_zero_means_none() {
        let (connection, stored) = slack();
        let body = json!({"secrets": {"signing_secret": "new"}});
        let plan1 = plan(&connection, &stored, body, now()).expect("accepted");
        let expires = plan1
            .secrets
            .previous("signing_secret")
            .expect("a previous value")
            .expires_at();
        assert_eq!(expires, now() + Duration::days(1));

        let body =
            json!({"secrets": {"signing_secret": "new"}, "previous_secret_expires_in_secs": 0});
        let plan2 = plan(&connection, &stored, body, now()).expect("accepted");
        assert!(plan2.secrets.all_previous().is_empty());
    }

    #[test]
    fn outbound_tokens_switch_at_once_and_keep_a_running_overlap() {
        let (connection, _) = slack();
        let later = now() + Duration::hours(1);
        let stored = Secrets::with_previous(
            json!({"signing_secret": "new", "bot_token": "xoxb-old"}),
            vec![PreviousSecret::new("signing_secret", "old", later)],
        );
        let body = json!({"secrets": {"bot_token": "xoxb-new"}});
        let plan = plan(&connection, &stored, body, now()).expect("accepted");
        assert_eq!(plan.secrets.expose()["bot_token"], "xoxb-new");
        assert!(plan.secrets.previous("bot_token").is_none());
        assert_eq!(
            plan.secrets
                .previous("signing_secret")
                .expect("a previous value")
                .expires_at(),
            later
        );
        assert_eq!(plan.changed, ["secrets.bot_token"]);
    }

    #[test]
    fn the_overlap_can_be_ended_or_reset_without_a_new_secret() {
        let (connection, _) = slack();
        let stored = Secrets::with_previous(
            json!({"signing_secret": "new", "bot_token": "b"}),
            vec![PreviousSecret::new(
                "signing_secret",
                "old",
                now() + Duration::hours(1),
            )],
        );
        let end = json!({"previous_secret_expires_in_secs": 0});
        let ended = plan(&connection, &stored, end, now()).expect("accepted");
        assert!(ended.secrets.all_previous().is_empty());
        assert_eq!(ended.changed, ["previous_secrets_expire_at"]);
        let reset = json!({"previous_secret_expires_in_secs": 10});
        let reset = plan(&connection, &stored, reset, now()).expect("accepted");
        let previous = reset
            .secrets
            .previous("signing_secret")
            .expect("a previous value");
        assert_eq!(
            (previous.expose(), previous.expires_at()),
            ("old", now() + Duration::seconds(10))
        );
    }

    #[test]
    fn expired_previous_values_are_dropped_by_the_next_write() {
        let (connection, _) = slack();
        let stored = Secrets::with_previous(
            json!({"signing_secret": "new", "bot_token": "b"}),
            vec![PreviousSecret::new("signing_secret", "old", now())],
        );
        let plan = plan(&connection, &stored, json!({"name": "renamed"}), now()).expect("accepted");
        assert!(plan.secrets.all_previous().is_empty());
        assert_eq!(plan.changed, ["name"], "an expired value was not active");
        let message = refused_with(&stored, json!({"previous_secret_expires_in_secs": 5}));
        assert!(message.contains("none does"), "{message}");
    }

    fn refused_with(stored: &Secrets, body: Value) -> String {
        let (connection, _) = slack();
        let error = plan(&connection, stored, body, now()).expect_err("refused");
        error.body()["message"]
            .as_str()
            .expect("a message")
            .to_owned()
    }

    #[test]
    fn the_same_value_again_changes_nothing() {
        let (connection, stored) = slack();
        let body = json!({"name": " support ", "secrets": {"signing_secret": "old"}});
        let plan = plan(&connection, &stored, body, now()).expect("accepted");
        assert!(plan.changed.is_empty(), "{:?}", plan.changed);
        assert!(plan.secrets.all_previous().is_empty());
    }

    #[test]
    fn bad_requests_are_refused_naming_fields_never_values() {
        assert!(refused(json!({})).contains("nothing to change"));
        assert!(
            refused(json!({"secret": {"signing_secret": "x"}})).contains("unknown field `secret`")
        );
        assert!(refused(json!({"name": "  "})).contains("name"));
        assert!(refused(json!({"settings": [1]})).contains("settings"));
        assert!(refused(json!({"secrets": "hunter2"})).contains("secrets must be an object"));
        assert!(refused(json!({"secrets": {}})).contains("signing_secret, bot_token"));
        let unknown = refused(json!({"secrets": {"api_key": "hunter2"}}));
        assert!(
            unknown.contains("api_key") && !unknown.contains("hunter2"),
            "{unknown}"
        );
        let empty = refused(json!({"secrets": {"bot_token": ""}}));
        assert!(empty.contains("bot_token"), "{empty}");
        let too_long = refused(
            json!({"secrets": {"signing_secret": "x"}, "previous_secret_expires_in_secs": MAX_OVERLAP_SECS + 1}),
        );
        assert!(too_long.contains("30 days"), "{too_long}");
        assert!(refused(json!({"previous_secret_expires_in_secs": -1})).contains("-1"));
        let without = refused(json!({"previous_secret_expires_in_secs": 60}));
        assert!(without.contains("secrets.signing_secret"), "{without}");
    }

    #[test]
    fn secret_fields_show_names_and_active_expiries_only() {
        let (mut connection, _) = slack();
        let later = now() + Duration::hours(1);
        connection
            .previous_secrets_expire_at
            .insert("signing_secret".into(), later);
        let shown = serde_json::to_value(secret_fields_of(&connection, now())).expect("serializes");
        assert_eq!(
            shown,
            json!([
                {"name": "signing_secret", "verifies_webhooks": true, "previous_expires_at": later},
                {"name": "bot_token", "verifies_webhooks": false, "previous_expires_at": null},
            ])
        );
        let expired =
            serde_json::to_value(secret_fields_of(&connection, later)).expect("serializes");
        assert_eq!(expired[0]["previous_expires_at"], Value::Null);
    }
}
