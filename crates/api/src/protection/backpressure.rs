//! Backpressure, apart from rate limits: a pod refuses work it cannot take on with 503
//! `backpressure` and `Retry-After`, rather than queueing it until every request times out.
//!
//! - In flight: at `MAX_IN_FLIGHT` requests being served, the next one is refused at once.
//! - Queue depth: with `BACKPRESSURE_INBOUND_DEPTH` jobs waiting in `channel-inbound`,
//!   webhooks are refused (providers retry later; nothing is lost, nothing is acknowledged
//!   that is not stored); with `BACKPRESSURE_OUTBOUND_DEPTH` waiting in `channel-outbound`,
//!   the actions that send (release, respond, dead-letter retry) are refused.
//!
//! Depths are sampled on a timer (`BACKPRESSURE_SAMPLE_MS`, `sampler.rs`), never per request.
//! `/health`, `/ready` and `/metrics` are never refused.

use axum::http::Method;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use switchboard_config::Config;

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shed {
    /// The pod's in-flight limit.
    InFlight,
    /// `channel-inbound` is past its threshold.
    InboundDepth,
    /// `channel-outbound` is past its threshold.
    OutboundDepth,
}

impl Shed {
    /// The `backpressure_refusals_total` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Shed::InFlight => "in_flight",
            Shed::InboundDepth => "inbound_depth",
            Shed::OutboundDepth => "outbound_depth",
        }
    }
}

struct Inner {
    max_in_flight: usize,
    in_flight: AtomicUsize,
    inbound_limit: usize,
    outbound_limit: usize,
    inbound_depth: AtomicUsize,
    outbound_depth: AtomicUsize,
}

/// The pod's load gauges; cheap to clone.
#[derive(Clone)]
pub struct Backpressure(Arc<Inner>);

/// Holds one in-flight slot until dropped.
pub struct InFlight(Arc<Inner>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Backpressure {
    /// Limits from the configuration.
    pub fn new(config: &Config) -> Self {
        Self(Arc::new(Inner {
            max_in_flight: config.backpressure.max_in_flight,
            in_flight: AtomicUsize::new(0),
            inbound_limit: config.backpressure.inbound_depth,
            outbound_limit: config.backpressure.outbound_depth,
            inbound_depth: AtomicUsize::new(0),
            outbound_depth: AtomicUsize::new(0),
        }))
    }

    /// Takes an in-flight slot, or refuses.
    pub fn enter(&self) -> Result<InFlight, Shed> {
        let now = self.0.in_flight.fetch_add(1, Ordering::Relaxed);
        let guard = InFlight(self.0.clone());
        if self.0.max_in_flight > 0 && now >= self.0.max_in_flight {
            return Err(Shed::InFlight);
        }
        Ok(guard)
    }

    /// Requests in flight now.
    pub fn in_flight(&self) -> usize {
        self.0.in_flight.load(Ordering::Relaxed)
    }

    /// Whether a request to `path` is refused by a queue's depth.
    pub fn by_depth(&self, method: &Method, path: &str) -> Option<Shed> {
        let over =
            |limit: usize, depth: &AtomicUsize| limit > 0 && depth.load(Ordering::Relaxed) >= limit;
        if path.starts_with("/webhooks/") && over(self.0.inbound_limit, &self.0.inbound_depth) {
            return Some(Shed::InboundDepth);
        }
        let sends = *method == Method::POST
            && ((path.starts_with("/expert-queue/")
                && (path.ends_with("/release") || path.ends_with("/respond")))
                || (path.starts_with("/dead-letters/") && path.ends_with("/retry")));
        if sends && over(self.0.outbound_limit, &self.0.outbound_depth) {
            return Some(Shed::OutboundDepth);
        }
        None
    }

    /// The last sampled depths (inbound, outbound).
    pub fn depths(&self) -> (usize, usize) {
        (
            self.0.inbound_depth.load(Ordering::Relaxed),
            self.0.outbound_depth.load(Ordering::Relaxed),
        )
    }

    /// Records the sampled depths (waiting jobs) of both queues.
    pub fn set_depths(&self, inbound: usize, outbound: usize) {
        self.0.inbound_depth.store(inbound, Ordering::Relaxed);
        self.0.outbound_depth.store(outbound, Ordering::Relaxed);
    }
}
