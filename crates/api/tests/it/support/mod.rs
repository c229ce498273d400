//! What several test modules share beyond requests (those are in `switchboard_testing`).

pub mod alerts;
