//! F3 release and delivery: the expert queue's list and actions, what the expert saw is what
//! is sent (SPEC §11), the autopilot sending a hold, the outbox's delivery to each provider
//! (retries, the shared breaker, fenced writes) and the dead letters.

mod autopilot_holds;
mod customer_context;
mod expert;
mod expert_integrity;
mod expert_random;
mod fenced_writes;
mod outbound_breaker;
mod outbound_channels;
mod outbound_dead_letters;
mod outbound_multi_pod;
mod outbound_retries;
