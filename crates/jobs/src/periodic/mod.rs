//! The machinery's periodic jobs, one module each: sweepers that re-drive what a dead pod
//! left, expiries, upkeep and the health probes (the schedule of each is `SCHEDULE_{JOB}`;
//! the pod lists them, with the product's jobs from `switchboard_flows::periodic`, in
//! `api::scheduled`).

pub mod agent_health;
pub mod events_retention;
pub mod housekeeping;
pub mod idempotency_expiry;
pub mod inbox_retention;
pub mod inbox_sweeper;
pub mod outbox_sweeper;
pub mod queue_alert;
