//! Who is on the other end: the client's IP address, for every per-address rule (the
//! wrong-token budget, upload slots, `/metrics`' loopback rule).
//!
//! It is the TCP peer, unless that peer is one of the `trusted_proxies` (the farm's nginx):
//! then it is the address that proxy saw, read from `X-Forwarded-For` right to left (each hop
//! appends the address it saw), skipping further trusted hops. Entries left of the first
//! untrusted address are the client's own words and are never read; an unreadable entry
//! stops the walk at the last trusted hop (that proxy's address is then the client's). With
//! no trusted proxies (the default) the header is ignored entirely.
//!
//! [`resolve`] runs first on every request and puts a [`ClientIp`] in its extensions.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::Response;
use ipnet::IpNet;

/// The client's address as [`resolve`] decided it (canonical: no IPv4-mapped IPv6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientIp(pub IpAddr);

/// The request's [`ClientIp`], when it came over TCP.
pub fn client_ip(extensions: &axum::http::Extensions) -> Option<IpAddr> {
    extensions.get::<ClientIp>().map(|c| c.0)
}

/// The reverse proxies whose `X-Forwarded-For` is believed (cheap to clone).
#[derive(Clone, Debug, Default)]
pub struct TrustedProxies(Arc<Vec<IpNet>>);

impl TrustedProxies {
    pub fn new(nets: Vec<IpNet>) -> Self {
        TrustedProxies(Arc::new(nets))
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|n| n.contains(&ip))
    }

    /// The client behind `peer` given the request's `headers`.
    pub fn client_ip(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let mut ip = peer.to_canonical();
        if !self.trusts(ip) {
            return ip;
        }
        for value in headers.get_all("x-forwarded-for").iter().rev() {
            let Ok(value) = value.to_str() else {
                return ip;
            };
            for item in value.rsplit(',') {
                let Ok(hop) = item.trim().parse::<IpAddr>() else {
                    return ip;
                };
                let hop = hop.to_canonical();
                if !self.trusts(hop) {
                    return hop;
                }
                ip = hop;
            }
        }
        ip
    }
}

/// Middleware: inserts the request's [`ClientIp`].
pub async fn resolve(
    State(trusted): State<TrustedProxies>,
    mut req: Request,
    next: Next,
) -> Response {
    if let Some(ConnectInfo(addr)) = req.extensions().get::<ConnectInfo<SocketAddr>>().copied() {
        let ip = trusted.client_ip(addr.ip(), req.headers());
        req.extensions_mut().insert(ClientIp(ip));
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use vidforge_core::config::parse_net;

    fn xff(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append("x-forwarded-for", HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn only_a_trusted_peer_is_believed_and_only_from_the_right() {
        let t = TrustedProxies::new(vec![
            parse_net("127.0.0.1").unwrap(),
            parse_net("10.0.0.0/8").unwrap(),
        ]);
        // An untrusted peer: the header is the client's word, ignored.
        assert_eq!(
            t.client_ip(ip("192.0.2.9"), &xff(&["203.0.113.1"])),
            ip("192.0.2.9")
        );
        // Through the proxy: the address it saw; what the client wrote left of it is not read.
        assert_eq!(
            t.client_ip(ip("127.0.0.1"), &xff(&["6.6.6.6, 203.0.113.1"])),
            ip("203.0.113.1")
        );
        // Two trusted hops (a load balancer in 10/8, then nginx), several header lines.
        assert_eq!(
            t.client_ip(
                ip("127.0.0.1"),
                &xff(&["6.6.6.6", "198.51.100.4, 10.1.2.3"])
            ),
            ip("198.51.100.4")
        );
        // No header, garbage, or only trusted hops: the last trusted hop.
        assert_eq!(t.client_ip(ip("127.0.0.1"), &xff(&[])), ip("127.0.0.1"));
        assert_eq!(
            t.client_ip(ip("127.0.0.1"), &xff(&["unknown"])),
            ip("127.0.0.1")
        );
        assert_eq!(
            t.client_ip(ip("127.0.0.1"), &xff(&["10.9.9.9"])),
            ip("10.9.9.9")
        );
        // IPv4-mapped addresses are the IPv4 address.
        assert_eq!(
            t.client_ip(ip("::ffff:127.0.0.1"), &xff(&["::ffff:203.0.113.7"])),
            ip("203.0.113.7")
        );
        // Nobody trusted (the default): the peer, whatever the header says.
        assert_eq!(
            TrustedProxies::default().client_ip(ip("127.0.0.1"), &xff(&["203.0.113.1"])),
            ip("127.0.0.1")
        );
    }

    #[test]
    fn entries_are_addresses_or_ranges() {
        assert!(parse_net("127.0.0.1").unwrap().contains(&ip("127.0.0.1")));
        assert!(parse_net("10.0.0.0/8").unwrap().contains(&ip("10.200.0.1")));
        assert!(parse_net("::1").unwrap().contains(&ip("::1")));
        assert!(parse_net("fd00::/8").unwrap().contains(&ip("fd12::1")));
        assert!(parse_net("nginx").is_none());
        assert!(parse_net("10.0.0.0/33").is_none());
    }
}
