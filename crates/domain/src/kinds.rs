//! Enumerations shared by the schema and the rest of the code.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// An enum whose variants each have one spelling in the schema, the API and the events: the
/// spelling is written once, next to the variant, and `ALL`, `as_str`, `Display`, `FromStr`,
/// serde and sqlx (as the SQL type after `in`) all follow it. A stored spelling never
/// changes: old pods read it during a deploy.
macro_rules! spelled {
    ($(#[$meta:meta])* pub enum $name:ident in $sql:literal { $($(#[$vmeta:meta])* $variant:ident = $text:literal,)+ }) => {
        $(#[$meta])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, sqlx::Type,
        )]
        #[sqlx(type_name = $sql)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] #[sqlx(rename = $text)] $variant,)+
        }

        // By hand: `derive(utoipa::ToSchema)` does not see a `rename` whose value comes from
        // the macro, and would document the variants' Rust names.
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::schema::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .enum_values(Some([$($text),+]))
                    .into()
            }
        }

        impl utoipa::ToSchema for $name {}

        impl $name {
            /// Every variant, in a stable order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// Every spelling, in the order of [`Self::ALL`].
            pub const SPELLINGS: &'static [&'static str] = &[$($text),+];

            /// The one spelling.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = ();

            fn from_str(s: &str) -> Result<Self, ()> {
                $name::ALL.iter().copied().find(|v| v.as_str() == s).ok_or(())
            }
        }
    };
}

pub(crate) use spelled;

spelled! {
    /// Where an outbound reply stands: `outbox.status`, `messages.delivery_status` and the
    /// `delivery_status` of `message_status_updated`.
    pub enum DeliveryStatus in "text" {
        /// Waiting for its first attempt.
        Queued = "queued",
        /// Every part was accepted by the provider.
        Sent = "sent",
        /// An attempt failed; another is due (`outbox.next_attempt_at`).
        Retry = "retry",
        /// Its attempts ran out; a dead letter retries it later.
        Failed = "failed",
        /// Given up: the dead-letter retries ran out, or no retry can help.
        Dead = "dead",
    }
}

spelled! {
    /// A dead letter's state (`channel_failures.status`). Its `retrying` is the dead letter's
    /// own word; the reply it retries is [`DeliveryStatus::Retry`] meanwhile.
    pub enum DeadLetterStatus in "text" {
        /// Waiting for its next automatic retry.
        Queued = "queued",
        /// Handed back to the dispatch job.
        Retrying = "retrying",
        /// No retry left; an admin may retry it.
        Dead = "dead",
        /// A retry delivered it.
        Resolved = "resolved",
    }
}

spelled! {
    /// Where an inbound event stands (computed from its row, for `GET /inbound-events`).
    pub enum InboundStatus in "text" {
        /// Waiting for its job (or for its next attempt after a failure).
        Pending = "pending",
        /// A job holds its lease right now.
        Processing = "processing",
        /// Fully handled.
        Processed = "processed",
        /// Failed `INBOX_MAX_ATTEMPTS` times; waits for an admin's replay.
        Parked = "parked",
    }
}

spelled! {
    /// A step of a message's journey (`message_journey.step`, whose `CHECK` lists these), in
    /// the order an exchange goes through them: the rank breaks ties between steps that one
    /// statement wrote at the same instant.
    pub enum JourneyStep in "text" {
        /// The webhook reached a pod (the pod's clock at the request's arrival).
        Received = "received",
        /// Its inbox row committed: what the provider's 2xx promises.
        Committed = "committed",
        /// A `channel-inbound` job took the event off the queue (one per attempt).
        Queued = "queued",
        /// The agent's draft (or the fallback) was stored.
        Drafted = "drafted",
        /// The draft reached the queue item experts see.
        Shown = "shown",
        /// An expert took the item (or an admin gave it to one).
        Claimed = "claimed",
        /// The reply was released: by an expert, or by the autopilot under a rule.
        Released = "released",
        /// One provider call's outcome.
        Attempt = "attempt",
        /// Every part of the reply was accepted.
        Delivered = "delivered",
        /// The delivery round failed for good: a dead letter, or dead.
        DeadLettered = "dead_lettered",
    }
}

spelled! {
    /// Who wrote a message (`messages.author`, cast to `message_author` in SQL).
    pub enum Author in "message_author" {
        /// The customer, through their channel.
        Customer = "customer",
        /// The agent: its draft, released unedited by an expert.
        Agent = "agent",
        /// An expert's own or edited words.
        Expert = "expert",
    }
}

spelled! {
    /// A scheduled report's kind (`reports.kind`, `GET /reports?kind=`).
    pub enum ReportKind in "text" {
        /// The previous local day's activity.
        DailySummary = "daily_summary",
        /// The previous seven local days' activity.
        WeeklyReport = "weekly_report",
        /// Items flagged for review, now.
        ReviewSummary = "review_summary",
    }
}

spelled! {
    /// A scheduled job (`cron_runs.job`, `SCHEDULE_{JOB}` with `-` as `_`).
    pub enum JobName in "text" {
        /// Re-enqueues inbox events the queue lost.
        InboxSweeper = "inbox-sweeper",
        /// Re-pushes outbox rows the queue lost.
        OutboxSweeper = "outbox-sweeper",
        /// Retries dead letters.
        DeadLetters = "dead-letters",
        /// Deletes old processed inbox events.
        InboxRetention = "inbox-retention",
        /// Deletes old realtime events.
        EventsRetention = "events-retention",
        /// Deletes expired `Idempotency-Key` records.
        IdempotencyExpiry = "idempotency-expiry",
        /// Vacuums the queues' Redis keys.
        QueueUpkeep = "queue-upkeep",
        /// Deletes old `cron_runs` rows.
        SchedulerPrune = "scheduler-prune",
        /// Brings snoozed items back.
        SnoozeResurface = "snooze-resurface",
        /// Alerts on an inbound backlog.
        BacklogAlert = "backlog-alert",
        /// Probes the agent and shares its health.
        AgentHealth = "agent-health",
        /// Opens and resolves the queue alert (inbox backlog, recent failures).
        QueueAlert = "queue-alert",
        /// Stores each org's daily summary.
        DailySummary = "daily-summary",
        /// Stores each org's weekly report.
        WeeklyReport = "weekly-report",
        /// Stores each org's review summary.
        ReviewSummary = "review-summary",
        /// Customer erasures that a pod began and did not finish (killed, or a reply of theirs
        /// was being sent), taken up again.
        CustomerErasure = "customer-erasure",
        /// Deletes what is older than each org's retention window.
        OrgRetention = "org-retention",
        /// Sends the drafts the autopilot holds once their hold is over.
        AutopilotSend = "autopilot-send",
    }
}

/// The messaging channels Switchboard speaks (`channel_kind` in the schema).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, sqlx::Type, utoipa::ToSchema,
)]
#[sqlx(type_name = "channel_kind", rename_all = "lowercase")]
#[serde(rename_all = "lowercase")]
pub enum ChannelKind {
    /// Slack Events API.
    Slack,
    /// WhatsApp through Twilio.
    Whatsapp,
    /// Telegram Bot API.
    Telegram,
    /// Email through Resend.
    Email,
}

impl ChannelKind {
    /// Every channel, in a stable order.
    pub const ALL: [ChannelKind; 4] = [
        ChannelKind::Slack,
        ChannelKind::Whatsapp,
        ChannelKind::Telegram,
        ChannelKind::Email,
    ];

    /// The lowercase name used in URLs, keys and JSON.
    pub const fn as_str(self) -> &'static str {
        match self {
            ChannelKind::Slack => "slack",
            ChannelKind::Whatsapp => "whatsapp",
            ChannelKind::Telegram => "telegram",
            ChannelKind::Email => "email",
        }
    }

    /// The rate-limit policy the channel's verified webhooks are counted under, per
    /// connection (`RATE_LIMIT_WEBHOOK_{CHANNEL}`).
    pub const fn webhook_policy(self) -> &'static str {
        match self {
            ChannelKind::Slack => "webhook_slack",
            ChannelKind::Whatsapp => "webhook_whatsapp",
            ChannelKind::Telegram => "webhook_telegram",
            ChannelKind::Email => "webhook_email",
        }
    }
}

impl fmt::Display for ChannelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ChannelKind {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ChannelKind::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or(())
    }
}

/// A member's role in an org (`member_role`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, sqlx::Type, utoipa::ToSchema,
)]
#[sqlx(type_name = "member_role", rename_all = "lowercase")]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Manages the org: connections, members.
    Admin,
    /// Reviews and releases replies.
    Expert,
}

impl Role {
    /// Whether this role may do what `needed` may: an admin does everything an expert does.
    pub fn covers(self, needed: Role) -> bool {
        self == Role::Admin || self == needed
    }
}

impl FromStr for Role {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "admin" => Ok(Role::Admin),
            "expert" => Ok(Role::Expert),
            _ => Err(()),
        }
    }
}

/// An expert-queue item's state (`queue_status`). The transitions between them are listed
/// in docs/ARCHITECTURE.md ("The queue item's state machine").
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, sqlx::Type, utoipa::ToSchema,
)]
#[sqlx(type_name = "queue_status", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum QueueStatus {
    /// Waiting for an expert.
    Pending,
    /// The autopilot admitted its draft, which sends itself at `send_at` unless an expert,
    /// the customer or a pause stops it first (then it is pending).
    AutoPending,
    /// An expert holds it (`claimed_by`).
    Claimed,
    /// A reply went out; waiting for the customer.
    AwaitingClient,
    /// Put aside until `snoozed_until`.
    Snoozed,
    /// Done; a new customer message opens a new item.
    Resolved,
}

impl QueueStatus {
    /// Every state, in a stable order.
    pub const ALL: [QueueStatus; 6] = [
        QueueStatus::Pending,
        QueueStatus::AutoPending,
        QueueStatus::Claimed,
        QueueStatus::AwaitingClient,
        QueueStatus::Snoozed,
        QueueStatus::Resolved,
    ];

    /// The schema's and the API's name.
    pub fn as_str(self) -> &'static str {
        match self {
            QueueStatus::Pending => "pending",
            QueueStatus::AutoPending => "auto_pending",
            QueueStatus::Claimed => "claimed",
            QueueStatus::AwaitingClient => "awaiting_client",
            QueueStatus::Snoozed => "snoozed",
            QueueStatus::Resolved => "resolved",
        }
    }
}

impl FromStr for QueueStatus {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        QueueStatus::ALL
            .into_iter()
            .find(|q| q.as_str() == s)
            .ok_or(())
    }
}

impl Role {
    /// The schema's and the API's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Expert => "expert",
        }
    }
}
