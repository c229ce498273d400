//! The machinery that runs Switchboard's work, beneath the flows that define it: the apalis
//! queues with their Redis upkeep, the scheduler (one run per slot across all pods, AA2) and
//! every periodic job on it, alerts raised once across pods, request coalescing and the
//! webhook load that background work gives way to.

pub mod alerts;
pub mod coalesce;
pub mod periodic;
pub mod pressure;
pub mod queue;
pub mod redis_check;
pub mod scheduler;
