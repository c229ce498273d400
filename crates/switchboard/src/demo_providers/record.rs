//! What the fake providers received, kept in this process's memory (a demo tool, not a
//! pod: nothing here is shared or durable), and the faults a demo or a test asks them to
//! answer with.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};

/// The oldest calls are forgotten past this many.
const KEEP: usize = 10_000;

/// One request a fake provider (or the fake agent) received.
#[derive(Debug, Clone, Serialize)]
pub struct Call {
    /// Increasing from 1, for `?after=`.
    pub seq: u64,
    /// When it arrived.
    pub at: DateTime<Utc>,
    /// `slack`, `whatsapp`, `telegram`, `email`, `agent`, `email-fetch`, or an alert sink:
    /// `alert-slack`, `alert-pagerduty`, `alert-webhook`.
    pub kind: String,
    /// The request path.
    pub path: String,
    /// The recipient (Slack channel, WhatsApp number, Telegram chat, email address).
    pub to: Option<String>,
    /// The message text.
    pub text: Option<String>,
    /// Resend's `Idempotency-Key`.
    pub idempotency_key: Option<String>,
    /// True when Resend answered a repeated key with the first email (no new email).
    pub replayed: bool,
    /// What the fake answered.
    pub status: u16,
    /// The request body as JSON (a form becomes an object); credentials are not kept.
    pub body: Value,
    /// What an alert sink was told, read out of the request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alert: Option<AlertSeen>,
}

/// An incident change as an alert sink received it.
#[derive(Debug, Clone, Serialize)]
pub struct AlertSeen {
    /// `trigger` or `resolve` (PagerDuty also knows `acknowledge`).
    pub action: String,
    /// The alert kind (`agent_failing`, …), when the request says.
    pub kind: Option<String>,
    /// `info`, `warning` or `critical`, when the request says (a resolve often does not).
    pub severity: Option<String>,
    /// Which instance (`agent`, an org id, a job name).
    pub scope: Option<String>,
    /// The incident's one line.
    pub summary: Option<String>,
}

impl AlertSeen {
    /// `trigger agent_failing (agent): …`, the call's `text`.
    pub fn line(&self) -> String {
        let mut line = self.action.clone();
        if let Some(kind) = &self.kind {
            line.push(' ');
            line.push_str(kind);
        }
        if let Some(scope) = &self.scope {
            line.push_str(&format!(" ({scope})"));
        }
        if let Some(summary) = &self.summary {
            line.push_str(": ");
            line.push_str(summary);
        }
        line
    }
}

/// A fault to inject: answer `status` to the next `count` calls of `kind` (all, if absent).
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Fault {
    /// Which fake: `slack`, `whatsapp`, `telegram`, `email`, `agent` (its chats and its
    /// health probe), `alert-slack`, `alert-pagerduty` or `alert-webhook`.
    pub kind: String,
    /// The HTTP status to answer with (e.g. 503, or 400 for a permanent refusal).
    pub status: u16,
    /// How many calls; every call until cleared when absent.
    pub count: Option<u32>,
}

#[derive(Default)]
struct Inner {
    calls: VecDeque<Call>,
    next_seq: u64,
    faults: HashMap<String, Fault>,
    /// Bodies of the emails the simulator sent, by Resend email id, for the Received emails
    /// API (Resend's webhook carries metadata only).
    inbound_emails: HashMap<String, String>,
    /// Resend `Idempotency-Key` → the email id first answered.
    resend_keys: HashMap<String, String>,
    /// PagerDuty `dedup_key` → what its trigger said, to show a resolve (which says only
    /// the key).
    pagerduty_triggers: HashMap<String, AlertSeen>,
}

/// The shared record; cheap to lock, never held across an await.
#[derive(Default)]
pub struct Recorder(Mutex<Inner>);

impl Recorder {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a call (with `seq` and `at` filled in) and returns its number.
    pub fn push(&self, mut call: Call) -> u64 {
        let mut inner = self.lock();
        inner.next_seq += 1;
        call.seq = inner.next_seq;
        call.at = Utc::now();
        if inner.calls.len() == KEEP {
            inner.calls.pop_front();
        }
        inner.calls.push_back(call);
        inner.next_seq
    }

    /// Calls after `after`, optionally of one kind.
    pub fn calls(&self, kind: Option<&str>, after: u64) -> (Vec<Call>, u64) {
        let inner = self.lock();
        let calls = inner
            .calls
            .iter()
            .filter(|c| c.seq > after && kind.is_none_or(|k| c.kind == k))
            .cloned()
            .collect();
        (calls, inner.next_seq)
    }

    /// Forgets every call and fault (numbers keep increasing).
    pub fn clear(&self) {
        let mut inner = self.lock();
        inner.calls.clear();
        inner.faults.clear();
    }

    /// Sets (or with `status` 0, clears) the fault of one kind.
    pub fn set_fault(&self, fault: Fault) {
        let mut inner = self.lock();
        if fault.status == 0 {
            inner.faults.remove(&fault.kind);
        } else {
            inner.faults.insert(fault.kind.clone(), fault);
        }
    }

    /// The status a call of `kind` must fail with, if a fault is set (and uses it up).
    pub fn take_fault(&self, kind: &str) -> Option<u16> {
        let mut inner = self.lock();
        let fault = inner.faults.get_mut(kind)?;
        let status = fault.status;
        match &mut fault.count {
            Some(0) => {
                inner.faults.remove(kind);
                return None;
            }
            Some(n) => *n -= 1,
            None => {}
        }
        Some(status)
    }

    /// Keeps an inbound email's body for the Received emails API.
    pub fn store_email(&self, email_id: &str, text: &str) {
        self.lock()
            .inbound_emails
            .insert(email_id.to_owned(), text.to_owned());
    }

    /// The body of an email the simulator sent.
    pub fn email(&self, email_id: &str) -> Option<String> {
        self.lock().inbound_emails.get(email_id).cloned()
    }

    /// The email id for a Resend idempotency key: `(id, true)` when the key was seen.
    pub fn resend_key(&self, key: Option<&str>, fresh_id: String) -> (String, bool) {
        let Some(key) = key else {
            return (fresh_id, false);
        };
        let mut inner = self.lock();
        match inner.resend_keys.get(key) {
            Some(id) => (id.clone(), true),
            None => {
                inner.resend_keys.insert(key.to_owned(), fresh_id.clone());
                (fresh_id, false)
            }
        }
    }

    /// The status a fault of `kind` answers while it holds, without using it up: the
    /// agent's health probe reads it, so a counted fault stays the chats'.
    pub fn fault_status(&self, kind: &str) -> Option<u16> {
        let inner = self.lock();
        let fault = inner.faults.get(kind)?;
        (fault.count != Some(0)).then_some(fault.status)
    }

    /// Keeps what a PagerDuty trigger said, for its resolve.
    pub fn keep_pagerduty_trigger(&self, dedup_key: &str, alert: &AlertSeen) {
        let mut inner = self.lock();
        if inner.pagerduty_triggers.len() >= KEEP {
            inner.pagerduty_triggers.clear();
        }
        inner
            .pagerduty_triggers
            .insert(dedup_key.to_owned(), alert.clone());
    }

    /// What the trigger with this `dedup_key` said.
    pub fn pagerduty_trigger(&self, dedup_key: &str) -> Option<AlertSeen> {
        self.lock().pagerduty_triggers.get(dedup_key).cloned()
    }
}
