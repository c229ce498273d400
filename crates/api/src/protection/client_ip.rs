//! The client's address: the socket's peer, or, when the peer is a trusted proxy (the load
//! balancer), the right-most `X-Forwarded-For` entry that is not itself a trusted proxy.
//! Everything left of that entry was written by the client and proves nothing, so it is
//! never believed: a client cannot pick its own rate-limit key.

use axum::http::HeaderMap;
use ipnet::IpNet;
use std::net::{IpAddr, SocketAddr};

/// The configured trusted proxies (`TRUSTED_PROXIES`).
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    /// Parses a comma-separated list of addresses and CIDR ranges.
    pub fn parse(list: &str) -> Result<Self, String> {
        let mut nets = Vec::new();
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let net = item
                .parse::<IpNet>()
                .or_else(|_| item.parse::<IpAddr>().map(IpNet::from))
                .map_err(|_| {
                    format!("TRUSTED_PROXIES: {item:?} is not an address or CIDR range")
                })?;
            nets.push(net);
        }
        Ok(Self(nets))
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|n| n.contains(&ip))
    }

    /// The client address of a request from `peer` with `headers`.
    pub fn client_ip(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if !self.trusts(peer) {
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

fn parse_entry(entry: &str) -> Option<IpAddr> {
    entry
        .parse::<IpAddr>()
        .ok()
        .or_else(|| entry.parse::<SocketAddr>().ok().map(|s| s.ip()))
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
}
