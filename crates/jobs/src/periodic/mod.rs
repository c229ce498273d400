//! Every periodic job the scheduler runs, one module each (the schedule of each is
//! `SCHEDULE_{JOB}`; the pod lists them in `api::scheduled`).

pub mod agent_health;
pub mod backlog;
pub mod customer_erasure;
pub mod dead_letters;
pub mod events_retention;
pub mod housekeeping;
pub mod idempotency_expiry;
pub mod inbox_retention;
pub mod inbox_sweeper;
pub mod outbox_sweeper;
pub mod queue_alert;
pub mod reports;
pub mod retention;
pub mod snooze;
