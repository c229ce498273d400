//! The scheduled jobs with behaviour of their own (the sweepers and retention jobs live
//! beside what they sweep): snoozed items coming due, the backlog alert, the agent's shared
//! health, the per-org reports, and the scheduler's and the queues' own housekeeping.

pub mod agent_health;
pub mod backlog;
pub mod housekeeping;
pub mod reports;
pub mod snooze;
