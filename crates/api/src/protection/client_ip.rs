//! The client's address: the socket's peer, or, when the peer is a trusted proxy (the load
//! balancer), the right-most `X-Forwarded-For` entry that is not itself a trusted proxy.
//! Everything left of that entry was written by the client and proves nothing, so it is
//! never believed: a client cannot pick its own rate-limit key.

use axum::http::HeaderMap;
use ipnet::IpNet;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};

/// The configured trusted proxies (`TRUSTED_PROXIES`).
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies(Vec<IpNet>, Untrusted);

/// What to do about `X-Forwarded-For` from a peer that is not a trusted proxy. Behind a load
/// balancer that is the sign of a missing `TRUSTED_PROXIES` (every client then shares the
/// balancer's rate-limit buckets), so production counts it and says so, once a minute.
#[derive(Debug, Clone, Default)]
struct Untrusted {
    warn: bool,
    /// Unix seconds of the last warning.
    last: std::sync::Arc<AtomicU64>,
}

/// An entry of `TRUSTED_PROXIES` that is neither an address nor a CIDR range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("TRUSTED_PROXIES: {0:?} is not an address or CIDR range")]
pub struct InvalidProxy(pub String);

/// How often the missing-setting warning may repeat.
const WARN_EVERY_SECS: u64 = 60;

impl TrustedProxies {
    /// Parses a comma-separated list of addresses and CIDR ranges.
    pub fn parse(list: &str) -> Result<Self, InvalidProxy> {
        let mut nets = Vec::new();
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let net = item
                .parse::<IpNet>()
                .or_else(|_| item.parse::<IpAddr>().map(IpNet::from))
                .map_err(|_| InvalidProxy(item.to_owned()))?;
            nets.push(net);
        }
        Ok(Self(nets, Untrusted::default()))
    }

    /// The same list, counting and warning (once a minute) about `X-Forwarded-For` from
    /// peers it does not trust: production's behaviour.
    pub fn warning_on_untrusted(mut self) -> Self {
        self.1.warn = true;
        self
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|n| n.contains(&ip))
    }

    /// The client address of a request from `peer` with `headers`.
    pub fn client_ip(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if !self.trusts(peer) {
            if self.1.warn && headers.contains_key("x-forwarded-for") {
                self.untrusted_forwarding(peer);
            }
            return peer;
        }
        let entries: Vec<&str> = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .collect();
        let mut client = peer;
        for entry in entries.iter().rev() {
            let Some(ip) = parse_entry(entry) else { break };
            client = ip;
            if !self.trusts(ip) {
                break;
            }
        }
        client
    }
}

impl TrustedProxies {
    fn untrusted_forwarding(&self, peer: IpAddr) {
        metrics::counter!("forwarded_for_untrusted_total").increment(1);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let last = self.1.last.load(Ordering::Relaxed);
        if now.saturating_sub(last) >= WARN_EVERY_SECS
            && self
                .1
                .last
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::warn!(
                %peer,
                "X-Forwarded-For from a peer that is not in TRUSTED_PROXIES: if a load balancer \
                 sits in front, add its address, or every client shares its rate limits"
            );
        }
    }
}

fn parse_entry(entry: &str) -> Option<IpAddr> {
    entry
        .parse::<IpAddr>()
        .ok()
        .or_else(|| entry.parse::<SocketAddr>().ok().map(|s| s.ip()))
}

#[cfg(test)]
impl TrustedProxies {
    fn last_warning(&self) -> u64 {
        self.1.last.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(xff: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in xff {
            h.append("x-forwarded-for", v.parse().expect("header"));
        }
        h
    }

    #[test]
    fn only_trusted_peers_are_believed_and_only_from_the_right() {
        let proxies = TrustedProxies::parse("10.0.0.0/8, 127.0.0.1").expect("parses");
        let lb: IpAddr = "10.1.2.3".parse().expect("ip");
        let outsider: IpAddr = "198.51.100.7".parse().expect("ip");
        let h = headers(&["1.1.1.1, 203.0.113.9", "10.9.9.9"]);
        assert_eq!(
            proxies.client_ip(lb, &h),
            "203.0.113.9".parse::<IpAddr>().expect("ip")
        );
        assert_eq!(proxies.client_ip(outsider, &h), outsider);
        assert_eq!(proxies.client_ip(lb, &HeaderMap::new()), lb);
        assert_eq!(
            proxies.client_ip(lb, &headers(&["junk, 203.0.113.9"])),
            "203.0.113.9".parse::<IpAddr>().expect("ip")
        );
        assert!(TrustedProxies::parse("not-an-ip").is_err());
    }

    #[test]
    fn forwarding_from_an_untrusted_peer_is_noticed_once_a_minute_in_production() {
        let proxies = TrustedProxies::parse("")
            .expect("parses")
            .warning_on_untrusted();
        let lb: IpAddr = "10.1.2.3".parse().expect("ip");
        let h = headers(&["203.0.113.9"]);
        assert_eq!(proxies.last_warning(), 0);
        assert_eq!(proxies.client_ip(lb, &h), lb, "still not believed");
        let first = proxies.last_warning();
        assert!(first > 0, "warned");
        proxies.client_ip(lb, &h);
        assert_eq!(proxies.last_warning(), first, "not again within the minute");
        // Without the production flag nothing is noticed.
        let quiet = TrustedProxies::parse("").expect("parses");
        quiet.client_ip(lb, &h);
        assert_eq!(quiet.last_warning(), 0);
    }
}
