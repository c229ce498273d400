//! Protection of the pod (SPEC §6): rate limits shared across pods by route group, and
//! backpressure. One middleware, outside Socket.IO's layer so handshakes are limited too:
//!
//! ```text
//! /health /ready /metrics ─► always served
//! in-flight slot ─► queue-depth check ─► rate-limit policy of the route group ─► the app
//!      └ 503 backpressure       └ 503 backpressure       └ 429 rate_limit
//! ```
//!
//! Route groups: `/webhooks/{channel}/{id}` per connection (`webhook_{channel}`), counted
//! only for webhooks that verify: one that fails verification, names no connection or does
//! not parse is given back to the connection and counted against the sender's address
//! (`webhook_unverified`, low), and an address over that limit is refused by every pod that
//! saw it refused without a Redis call; `/socket.io/` per client address (`socket`);
//! `POST /auth/login` in its handler (every attempt per address, failures per email and
//! address, and per email alone for addresses that have been failing); everything else per
//! client address (`default`). Addresses are keyed whole for IPv4 and by /64 for IPv6.

pub mod backpressure;
pub mod client_ip;
pub mod limiter;

use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use backpressure::{Backpressure, Shed};
use client_ip::TrustedProxies;
use limiter::{RateLimiter, Verdict};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;
use switchboard_domain::ChannelKind;

/// How long a client refused for backpressure should wait.
const BACKPRESSURE_RETRY_AFTER: Duration = Duration::from_secs(2);

/// The pod's limiter, load gauges and proxy trust.
#[derive(Clone)]
pub struct Protection {
    /// Rate limits.
    pub limiter: RateLimiter,
    /// In-flight and queue-depth limits.
    pub pressure: Backpressure,
    /// Whose `X-Forwarded-For` is believed.
    pub proxies: TrustedProxies,
}

const LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");

/// The client address of `request`.
pub fn client_ip(proxies: &TrustedProxies, request: &Request) -> IpAddr {
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0);
    client_ip_of(proxies, peer, request.headers())
}

/// The client address of a request from `peer` (unknown in tests that call the router
/// directly) with `headers`.
pub fn client_ip_of(
    proxies: &TrustedProxies,
    peer: Option<SocketAddr>,
    headers: &HeaderMap,
) -> IpAddr {
    let peer = peer.map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |p| p.ip());
    proxies.client_ip(peer, headers)
}

/// The answer for a refused request, with `X-RateLimit-*` and `Retry-After`.
pub fn too_many(verdict: &Verdict) -> Response {
    let mut response = ApiError::rate_limited(verdict.retry_after).into_response();
    add_headers(&mut response, verdict);
    response
}

fn add_headers(response: &mut Response, verdict: &Verdict) {
    let headers = response.headers_mut();
    headers.insert(LIMIT, HeaderValue::from(verdict.limit));
    headers.insert(REMAINING, HeaderValue::from(verdict.remaining));
}

fn shed(reason: Shed) -> Response {
    metrics::counter!("backpressure_refusals_total", "reason" => reason.as_str()).increment(1);
    ApiError::unavailable("backpressure", "the server is busy; retry later")
        .with_retry_after(BACKPRESSURE_RETRY_AFTER)
        .into_response()
}

/// The key a client address is limited under: an IPv4 address itself, an IPv6 address's
/// /64 (one subscriber gets a whole /64, so a per-address key would give one client 2^64).
pub fn address_key(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => {
                let s = v6.segments();
                format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
            }
        },
    }
}

/// The route group's policy and subject, or `None` for routes limited elsewhere (login) or
/// not at all.
fn policy_of(path: &str, ip: IpAddr) -> Option<(&'static str, String)> {
    if path == "/auth/login" {
        return None;
    }
    if path.starts_with("/socket.io") {
        return Some(("socket", address_key(ip)));
    }
    if let Some(rest) = path.strip_prefix("/webhooks/") {
        let mut parts = rest.split('/');
        let policy = parts
            .next()
            .and_then(|channel| channel.parse::<ChannelKind>().ok())
            .map(ChannelKind::webhook_policy);
        // Per connection. A path that cannot name one is answered 404 and charged to the
        // sender's address as an unverified webhook (see `protect`).
        let id = parts.next().and_then(|id| id.parse::<uuid::Uuid>().ok());
        if let (Some(policy), Some(id), None) = (policy, id, parts.next()) {
            return Some((policy, id.to_string()));
        }
        return None;
    }
    Some(("default", address_key(ip)))
}

/// A webhook answered this did not show it came from the connection's provider: a failed
/// signature, an unknown connection, a body that does not parse or is too large.
fn unverified(status: StatusCode) -> bool {
    matches!(
        status.as_u16(),
        400 | 401 | 403 | 404 | 405 | 411 | 413 | 415 | 422
    )
}

/// The middleware.
pub async fn protect(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    if matches!(path, "/health" | "/ready" | "/metrics") {
        return next.run(request).await;
    }
    let protection = &state.protection;
    let _slot = match protection.pressure.enter() {
        Ok(slot) => slot,
        Err(reason) => return shed(reason),
    };
    if let Some(reason) = protection.pressure.by_depth(request.method(), path) {
        return shed(reason);
    }
    let ip = client_ip(&protection.proxies, &request);
    // Webhooks: an address whose unverified webhooks went over their limit is refused here,
    // from this pod's memory, before any Redis call or Postgres lookup. Providers send every
    // tenant's genuine webhooks from a few shared addresses, so those never count per address.
    let webhook = path.starts_with("/webhooks/");
    let address = address_key(ip);
    if webhook && let Some(v) = protection.limiter.blocked(UNVERIFIED, &address) {
        return too_many(&v);
    }
    let policy = policy_of(path, ip);
    // The Socket.IO handshake caps sockets per address: it learns the address here.
    let socket = path.starts_with("/socket.io");
    let mut request = request;
    if socket {
        request
            .extensions_mut()
            .insert(switchboard_realtime::ClientAddress(address.clone()));
    }
    let verdict = match &policy {
        Some((policy, subject)) => protection.limiter.check(policy, subject).await,
        None => None,
    };
    if let Some(v) = &verdict
        && !v.allowed
    {
        return too_many(v);
    }
    let mut response = next.run(request).await;
    if webhook && unverified(response.status()) {
        // Not the connection's to pay for: its allowance goes back, the sender's address pays.
        if let Some((policy, subject)) = &policy {
            protection.limiter.refund(policy, subject).await;
        }
        protection.limiter.charge(UNVERIFIED, &address).await;
        return response;
    }
    if let Some(v) = verdict.filter(|v| v.enforced) {
        add_headers(&mut response, &v);
    }
    response
}

/// The per-address policy of webhooks that fail verification.
const UNVERIFIED: &str = "webhook_unverified";
