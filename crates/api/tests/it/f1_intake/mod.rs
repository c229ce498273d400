//! F1 intake: a webhook verified, deduplicated and committed to the inbox, the inbound job's
//! queue, the inbox's sweeper and parking, what Postgres or Redis lost on the way must not
//! lose; and the channel connections webhooks come through.

mod connection_rotation;
mod connections;
mod inbound_crash;
mod inbound_inbox;
mod inbound_parking;
mod inbound_queue;
mod inbound_redis_loss;
mod webhooks;
