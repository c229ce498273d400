//! The product's periodic jobs, one module each: the rules that move a queue item or a reply
//! on time (a snooze running out, a dead letter's retry), the reports, the org's retention
//! window and a customer's erasure, and the expert-queue SLA alert. The scheduler that runs
//! them once per slot across pods is machinery (`switchboard_jobs::scheduler`).

pub mod backlog;
pub mod customer_erasure;
pub mod dead_letters;
pub mod reports;
pub mod retention;
pub mod snooze;
