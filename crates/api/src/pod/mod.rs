//! One pod, from configuration to shutdown. `switchboard serve` runs these steps in order
//! (its `main.rs` shows them):
//!
//! 1. [`App::build`]: the checks ([`checks`]: production invariants, the AA9 connection
//!    budget, schedules, proxies), then the pools and the state ([`assemble`]);
//! 2. [`App::bind`]: the API listener and `/metrics`;
//! 3. [`Bound::spawn_background`]: the realtime relay and watchdog, the queue promoters, the
//!    inbound and outbound workers, the delivery gauges, the scheduler with every periodic job
//!    and the load sampler ([`background`]);
//! 4. [`Bound::serve`]: HTTP (REST, webhooks, Socket.IO, the console) with the drain armed;
//! 5. [`Server::run_until_signal`]: SIGTERM drains, then waits for the jobs in hand within
//!    the shutdown budget and closes the pools ([`run`]).
//!
//! Tests use [`App::start`], steps 2–4 in one call.

pub mod assemble;
mod background;
mod checks;
pub mod run;

pub use assemble::{App, StartError};
pub use run::{Bound, Server};
