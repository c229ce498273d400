//! The queue item's state machine, in one place: every way an `expert_queue.status` changes
//! is a [`Transition`], and [`Transition::from`] and [`Transition::to`] are the one table of
//! the arrows it may take. The expert's actions, the inbound job (a new item, the customer
//! writing again, a draft arriving), the snooze expiry and the autopilot (its hold, its stop,
//! its send) name their transition; `switchboard_store::expert_queue` renders every status
//! write from it, so a state the table does not allow is never written. Who may act, and the
//! other conditions (the holder, `If-Match`, a current draft), are the callers'.
//!
//! It sits here rather than in `flows`, which decides when each transition happens, because
//! the store, below `flows`, takes it for every write. docs/ARCHITECTURE.md draws the same
//! arrows ("The queue item's state machine"), and a test holds the drawing to this table.

use crate::QueueStatus;
use crate::QueueStatus::{AutoPending, AwaitingClient, Claimed, Pending, Resolved, Snoozed};

/// One way a queue item's status changes (or a new item gets its first one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transition {
    /// F2: the first draft of a conversation without a live item opens one.
    Open,
    /// F2: as [`Transition::Open`], with a draft the org's autopilot admitted.
    OpenOnHold,
    /// An expert takes the item.
    Claim,
    /// Its holder (or an admin) gives it back.
    Unclaim,
    /// An admin gives it to a member.
    Assign,
    /// The draft, or an edited one, is sent (F3).
    Release,
    /// The expert's own reply is sent instead of the draft.
    Respond,
    /// Put aside until a time.
    Snooze,
    /// Closed.
    Resolve,
    /// Brought back to pending by an expert.
    Reopen,
    /// An expert stops the autopilot's hold.
    Stop,
    /// F2: the customer writes again.
    CustomerWrites,
    /// F2: a draft lands for a message no released reply answers yet (it came while the
    /// expert was releasing the previous draft).
    DraftArrives,
    /// F2: a newer draft the autopilot did not admit ends the hold on an older one.
    NewerDraft,
    /// F2: a newer draft the org's autopilot admitted puts the item on hold.
    Hold,
    /// The hold ends without a send: a policy change, a pause, `AUTOPILOT=off` at start, the
    /// hourly cap, or no current draft at `send_at`.
    HoldEnds,
    /// `autopilot-send` sends the held draft at `send_at`, at the version it was admitted at.
    AutopilotSend,
    /// `snooze-expiry`: the snooze time has come.
    SnoozeEnds,
}

impl Transition {
    /// Every transition, in the order docs/ARCHITECTURE.md draws them.
    pub const ALL: [Transition; 18] = [
        Transition::Open,
        Transition::OpenOnHold,
        Transition::Claim,
        Transition::Unclaim,
        Transition::Assign,
        Transition::Release,
        Transition::Respond,
        Transition::Snooze,
        Transition::Resolve,
        Transition::Reopen,
        Transition::Stop,
        Transition::CustomerWrites,
        Transition::DraftArrives,
        Transition::NewerDraft,
        Transition::Hold,
        Transition::HoldEnds,
        Transition::AutopilotSend,
        Transition::SnoozeEnds,
    ];

    /// Its name in the diagram, the audit log's `queue_item.<name>` for an expert's action.
    pub fn name(self) -> &'static str {
        match self {
            Transition::Open => "open",
            Transition::OpenOnHold => "open on hold",
            Transition::Claim => "claim",
            Transition::Unclaim => "unclaim",
            Transition::Assign => "assign",
            Transition::Release => "release",
            Transition::Respond => "respond",
            Transition::Snooze => "snooze",
            Transition::Resolve => "resolve",
            Transition::Reopen => "reopen",
            Transition::Stop => "stop",
            Transition::CustomerWrites => "customer writes",
            Transition::DraftArrives => "draft arrives",
            Transition::NewerDraft => "newer draft",
            Transition::Hold => "hold",
            Transition::HoldEnds => "hold ends",
            Transition::AutopilotSend => "autopilot sends",
            Transition::SnoozeEnds => "snooze ends",
        }
    }

    /// The states it may start from; empty for one that opens a new item.
    pub fn from(self) -> &'static [QueueStatus] {
        match self {
            Transition::Open | Transition::OpenOnHold => &[],
            Transition::Claim => &[Pending, AutoPending],
            Transition::Unclaim => &[Claimed],
            Transition::Assign | Transition::Release | Transition::Respond => {
                &[Pending, AutoPending, Claimed]
            }
            Transition::Snooze => &[Pending, AutoPending, Claimed, AwaitingClient],
            Transition::Resolve => &[Pending, AutoPending, Claimed, AwaitingClient, Snoozed],
            Transition::Reopen => &[AwaitingClient, Snoozed, Resolved],
            Transition::CustomerWrites => &[AwaitingClient, Snoozed, AutoPending],
            Transition::DraftArrives => &[AwaitingClient],
            Transition::Stop
            | Transition::NewerDraft
            | Transition::HoldEnds
            | Transition::AutopilotSend => &[AutoPending],
            Transition::Hold => &[Pending, AwaitingClient],
            Transition::SnoozeEnds => &[Snoozed],
        }
    }

    /// The state it leads to.
    pub fn to(self) -> QueueStatus {
        match self {
            Transition::Claim | Transition::Assign => Claimed,
            Transition::Release | Transition::Respond | Transition::AutopilotSend => AwaitingClient,
            Transition::Snooze => Snoozed,
            Transition::Resolve => Resolved,
            Transition::OpenOnHold | Transition::Hold => AutoPending,
            Transition::Open
            | Transition::Unclaim
            | Transition::Reopen
            | Transition::Stop
            | Transition::CustomerWrites
            | Transition::DraftArrives
            | Transition::NewerDraft
            | Transition::HoldEnds
            | Transition::SnoozeEnds => Pending,
        }
    }

    /// Whether it opens a new item rather than moving one.
    pub fn opens(self) -> bool {
        self.from().is_empty()
    }

    /// Whether it may start from `status`.
    pub fn allows(self, status: QueueStatus) -> bool {
        self.from().contains(&status)
    }
}

/// Whether any transition moves an item from `from` to `to` (`None`: a new item).
pub fn allowed(from: Option<QueueStatus>, to: QueueStatus) -> bool {
    Transition::ALL.iter().any(|t| {
        t.to() == to
            && match from {
                None => t.opens(),
                Some(s) => t.allows(s),
            }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The states in the columns below, a new item (`new`) first.
    const COLUMNS: [Option<QueueStatus>; 7] = [
        None,
        Some(Pending),
        Some(AutoPending),
        Some(Claimed),
        Some(AwaitingClient),
        Some(Snoozed),
        Some(Resolved),
    ];

    /// Every transition against every state it might start from: `x` allowed, `.` refused.
    ///                                       new pend auto claim await snooze resolved
    const BY_TRANSITION: &[(Transition, &str, QueueStatus)] = &[
        (Transition::Open, "x......", Pending),
        (Transition::OpenOnHold, "x......", AutoPending),
        (Transition::Claim, ".xx....", Claimed),
        (Transition::Unclaim, "...x...", Pending),
        (Transition::Assign, ".xxx...", Claimed),
        (Transition::Release, ".xxx...", AwaitingClient),
        (Transition::Respond, ".xxx...", AwaitingClient),
        (Transition::Snooze, ".xxxx..", Snoozed),
        (Transition::Resolve, ".xxxxx.", Resolved),
        (Transition::Reopen, "....xxx", Pending),
        (Transition::Stop, "..x....", Pending),
        (Transition::CustomerWrites, "..x.xx.", Pending),
        (Transition::DraftArrives, "....x..", Pending),
        (Transition::NewerDraft, "..x....", Pending),
        (Transition::Hold, ".x..x..", AutoPending),
        (Transition::HoldEnds, "..x....", Pending),
        (Transition::AutopilotSend, "..x....", AwaitingClient),
        (Transition::SnoozeEnds, ".....x.", Pending),
    ];

    /// Every arrow between two states, whatever causes it: a row is where an item is (in the
    /// columns' order above), a column where it goes (the same order, without `new`).
    ///                        pend auto claim await snooze resolved
    const ARROWS: [&str; 7] = [
        "xx....", // new
        ".xxxxx", // pending
        "x.xxxx", // auto_pending
        "x.xxxx", // claimed
        "xx..xx", // awaiting_client
        "x....x", // snoozed
        "x.....", // resolved
    ];

    #[test]
    fn every_transition_starts_only_where_the_table_says() {
        let rows: Vec<Transition> = BY_TRANSITION.iter().map(|r| r.0).collect();
        assert_eq!(rows, Transition::ALL);
        for (t, row, to) in BY_TRANSITION {
            assert_eq!(t.to(), *to, "{} leads to {}", t.name(), t.to().as_str());
            for (from, cell) in COLUMNS.iter().zip(row.chars()) {
                let allowed = match from {
                    None => t.opens(),
                    Some(s) => t.allows(*s),
                };
                assert_eq!(
                    allowed,
                    cell == 'x',
                    "{} from {}",
                    t.name(),
                    from.map_or("new", QueueStatus::as_str)
                );
            }
        }
    }

    #[test]
    fn every_arrow_between_two_states_is_allowed_or_refused_as_the_table_says() {
        for (from, row) in COLUMNS.iter().zip(ARROWS) {
            assert_eq!(row.len(), QueueStatus::ALL.len());
            for (to, cell) in COLUMNS[1..].iter().flatten().zip(row.chars()) {
                assert_eq!(
                    allowed(*from, *to),
                    cell == 'x',
                    "{} -> {}",
                    from.map_or("new", QueueStatus::as_str),
                    to.as_str()
                );
            }
        }
    }

    #[test]
    fn names_are_distinct() {
        let names: std::collections::BTreeSet<_> =
            Transition::ALL.iter().map(|t| t.name()).collect();
        assert_eq!(names.len(), Transition::ALL.len());
    }

    /// The arrows of docs/ARCHITECTURE.md's drawing, one a line: `<from>, … ──<name>──► <to>`.
    fn drawn() -> Vec<(String, Vec<String>, String)> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/ARCHITECTURE.md");
        let doc = std::fs::read_to_string(path).expect("docs/ARCHITECTURE.md");
        let start = doc
            .find("**The queue item's state machine**")
            .expect("the state machine's section");
        let block = doc[start..].split("```").nth(1).expect("its drawing");
        block
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|line| {
                let (from, rest) = line.split_once(" ──").expect("`from ──name──► to`");
                let (name, to) = rest.split_once("──► ").expect("`from ──name──► to`");
                let from = from.split(", ").map(str::to_owned).collect();
                (name.to_owned(), from, to.trim().to_owned())
            })
            .collect()
    }

    #[test]
    fn the_architecture_drawing_shows_every_arrow_and_no_other() {
        let table: Vec<(String, Vec<String>, String)> = Transition::ALL
            .iter()
            .map(|t| {
                let from = if t.opens() {
                    vec!["new".to_owned()]
                } else {
                    t.from().iter().map(|s| s.as_str().to_owned()).collect()
                };
                (t.name().to_owned(), from, t.to().as_str().to_owned())
            })
            .collect();
        assert_eq!(drawn(), table);
    }
}
