//! Rate limiting of authentication failures, per peer address.
//!
//! Each peer (an IPv4 address, or an IPv6 /64: one host's share of a network) has a budget of
//! `auth_failure_burst` wrong bearer tokens, refilled by one every `auth_failure_interval`
//! (GCRA: one "theoretical arrival time" per peer, no timers). Past it, requests from that
//! peer that do not carry a token already proven there are answered `429` `rate_limited` with
//! `Retry-After` whatever the token (right or wrong reads the same), so guessing stops at the
//! refill rate.
//!
//! A valid token is never slowed: a peer within its budget is not touched at all, and a token
//! that has authenticated from a peer keeps working from it while that peer is limited (an
//! attacker behind the same address gains nothing from it: the tokens it guesses have never
//! succeeded there). A valid token first seen from a peer while that peer is limited waits
//! like a guess would; answering it differently would tell a guesser that its guess was right.
//!
//! Memory is bounded: at most `MAX_PEERS` peers are tracked; entries whose budget is full
//! again and that have no recent success are dropped first. When every entry is still in use,
//! a failure from a new peer is refused (`429`) rather than tracked: failing closed costs a
//! guesser, never a valid token.
//!
//! Not a well-kept crate on purpose: `governor`'s keyed limiter has no way to ask "is this
//! peer limited?" without spending a cell, which the "proven token passes" rule needs, and
//! the GCRA itself is a dozen lines.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Peers tracked at most.
const MAX_PEERS: usize = 65_536;
/// Principals remembered per peer as proven there.
const MAX_PROVEN: usize = 8;
/// How long a success keeps a peer's entry (and its proven principals) alive.
const PROVEN_FOR: Duration = Duration::from_secs(24 * 60 * 60);

/// What to do with one request's authentication outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Go on (the outcome stands: a success passes, a failure is answered `401`).
    Proceed,
    /// Refuse with `429`; retry after this long.
    Limited(Duration),
}

#[derive(Debug)]
struct Peer {
    /// GCRA theoretical arrival time: the peer is limited while `tat - now` exceeds the
    /// burst's worth of intervals.
    tat: Instant,
    /// Principals whose token has authenticated from this peer.
    proven: Vec<String>,
    last_success: Option<Instant>,
}

/// The per-peer failure budget (`auth::Auth` holds one).
#[derive(Debug)]
pub struct AuthFailureLimiter {
    burst: u32,
    interval: Duration,
    peers: Mutex<HashMap<IpAddr, Peer>>,
}

impl AuthFailureLimiter {
    /// `burst` failures at once, one more every `interval`. A zero burst disables the limit.
    pub fn new(burst: u32, interval: Duration) -> Self {
        AuthFailureLimiter {
            burst,
            interval,
            peers: Mutex::new(HashMap::new()),
        }
    }

    /// The key of `ip`: IPv4 (and IPv4-mapped) addresses as they are, IPv6 by /64.
    fn key(ip: IpAddr) -> IpAddr {
        match ip.to_canonical() {
            IpAddr::V6(v6) => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
            v4 => v4,
        }
    }

    /// How long `peer` must still wait, if it is limited at `now`: one more failure would put
    /// it more than the burst's worth of intervals ahead.
    fn wait(&self, peer: &Peer, now: Instant) -> Option<Duration> {
        let allowance = self.interval * self.burst;
        let ahead = peer.tat.saturating_duration_since(now) + self.interval;
        (ahead > allowance).then(|| ahead - allowance)
    }

    /// Judges one request from `ip` that carried a bearer token: `principal` is who it
    /// authenticated as (`None`: a wrong token). A request with no credential at all is no
    /// guess and is not judged.
    pub fn judge(&self, ip: Option<IpAddr>, principal: Option<&str>) -> Verdict {
        self.judge_at(ip, principal, Instant::now())
    }

    fn judge_at(&self, ip: Option<IpAddr>, principal: Option<&str>, now: Instant) -> Verdict {
        let Some(ip) = ip else {
            return Verdict::Proceed;
        };
        if self.burst == 0 {
            return Verdict::Proceed;
        }
        let key = Self::key(ip);
        let mut peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(peer) = peers.get_mut(&key) {
            if let Some(wait) = self.wait(peer, now) {
                let proven = principal.is_some_and(|p| peer.proven.iter().any(|q| q == p));
                if !proven {
                    return Verdict::Limited(wait);
                }
            }
            match principal {
                Some(p) => {
                    if !peer.proven.iter().any(|q| q == p) && peer.proven.len() < MAX_PROVEN {
                        peer.proven.push(p.to_string());
                    }
                    peer.last_success = Some(now);
                }
                None => peer.tat = peer.tat.max(now) + self.interval,
            }
            return Verdict::Proceed;
        }
        if peers.len() >= MAX_PEERS {
            self.forget_idle(&mut peers, now);
        }
        if peers.len() >= MAX_PEERS {
            // Every tracked peer is still in use: a failure from a new one is refused rather
            // than tracked (never a success: those need no entry).
            return match principal {
                Some(_) => Verdict::Proceed,
                None => Verdict::Limited(self.interval),
            };
        }
        let peer = match principal {
            Some(p) => Peer {
                tat: now,
                proven: vec![p.to_string()],
                last_success: Some(now),
            },
            None => Peer {
                tat: now + self.interval,
                proven: Vec::new(),
                last_success: None,
            },
        };
        peers.insert(key, peer);
        Verdict::Proceed
    }

    /// Drops entries whose budget is whole again and that have no recent success.
    fn forget_idle(&self, peers: &mut HashMap<IpAddr, Peer>, now: Instant) {
        peers.retain(|_, p| {
            p.tat > now
                || p.last_success
                    .is_some_and(|t| now.saturating_duration_since(t) < PROVEN_FOR)
        });
    }

    /// Peers tracked now (for tests).
    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.peers.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn failures_past_the_burst_are_limited_until_refilled() {
        let l = AuthFailureLimiter::new(3, Duration::from_secs(1));
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(l.judge_at(ip("10.0.0.1"), None, t0), Verdict::Proceed);
        }
        let Verdict::Limited(wait) = l.judge_at(ip("10.0.0.1"), None, t0) else {
            panic!("the fourth failure at once is limited");
        };
        assert_eq!(wait, Duration::from_secs(1));
        // Guesses while limited cost nothing more: the wait does not grow.
        for _ in 0..100 {
            assert!(matches!(
                l.judge_at(ip("10.0.0.1"), None, t0),
                Verdict::Limited(_)
            ));
        }
        // Another peer is untouched; one interval later one more failure is allowed.
        assert_eq!(l.judge_at(ip("10.0.0.2"), None, t0), Verdict::Proceed);
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(l.judge_at(ip("10.0.0.1"), None, t1), Verdict::Proceed);
        assert!(matches!(
            l.judge_at(ip("10.0.0.1"), None, t1),
            Verdict::Limited(_)
        ));
    }

    #[test]
    fn a_proven_token_is_never_slowed_and_a_new_one_is_no_oracle() {
        let l = AuthFailureLimiter::new(2, Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(
            l.judge_at(ip("10.0.0.1"), Some("alice"), t0),
            Verdict::Proceed
        );
        for _ in 0..2 {
            assert_eq!(l.judge_at(ip("10.0.0.1"), None, t0), Verdict::Proceed);
        }
        assert!(matches!(
            l.judge_at(ip("10.0.0.1"), None, t0),
            Verdict::Limited(_)
        ));
        // alice authenticated here before: she goes on.
        for _ in 0..10 {
            assert_eq!(
                l.judge_at(ip("10.0.0.1"), Some("alice"), t0),
                Verdict::Proceed
            );
        }
        // bob's valid token, first seen while the peer is limited, reads like a guess.
        assert!(matches!(
            l.judge_at(ip("10.0.0.1"), Some("bob"), t0),
            Verdict::Limited(_)
        ));
        // bob from anywhere else is untouched.
        assert_eq!(
            l.judge_at(ip("10.0.0.9"), Some("bob"), t0),
            Verdict::Proceed
        );
    }

    #[test]
    fn ipv6_peers_are_keyed_by_their_64_and_mapped_v4_by_the_v4() {
        let l = AuthFailureLimiter::new(1, Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(l.judge_at(ip("2001:db8::1"), None, t0), Verdict::Proceed);
        assert!(matches!(
            l.judge_at(ip("2001:db8::ffff:2"), None, t0),
            Verdict::Limited(_)
        ));
        assert_eq!(
            l.judge_at(ip("2001:db8:0:1::1"), None, t0),
            Verdict::Proceed
        );
        assert_eq!(l.judge_at(ip("192.0.2.7"), None, t0), Verdict::Proceed);
        assert!(matches!(
            l.judge_at(ip("::ffff:192.0.2.7"), None, t0),
            Verdict::Limited(_)
        ));
    }

    #[test]
    fn memory_is_bounded_and_failing_closed_spares_valid_tokens() {
        let l = AuthFailureLimiter::new(1, Duration::from_secs(3600));
        let t0 = Instant::now();
        for i in 0..MAX_PEERS as u32 {
            let a = std::net::Ipv4Addr::from(0x0a00_0000 + i);
            assert_eq!(l.judge_at(Some(a.into()), None, t0), Verdict::Proceed);
        }
        assert_eq!(l.tracked(), MAX_PEERS);
        assert!(matches!(
            l.judge_at(ip("192.0.2.1"), None, t0),
            Verdict::Limited(_)
        ));
        assert_eq!(
            l.judge_at(ip("192.0.2.1"), Some("alice"), t0),
            Verdict::Proceed
        );
        assert_eq!(l.tracked(), MAX_PEERS);
        // Once the budgets are whole again, the entries make room.
        let later = t0 + Duration::from_secs(7200);
        assert_eq!(l.judge_at(ip("192.0.2.1"), None, later), Verdict::Proceed);
        assert_eq!(l.tracked(), 1);
    }

    #[test]
    fn a_zero_burst_or_an_unknown_peer_is_not_limited() {
        let off = AuthFailureLimiter::new(0, Duration::from_secs(1));
        for _ in 0..100 {
            assert_eq!(off.judge(ip("10.0.0.1"), None), Verdict::Proceed);
        }
        let l = AuthFailureLimiter::new(1, Duration::from_secs(1));
        for _ in 0..10 {
            assert_eq!(l.judge(None, None), Verdict::Proceed);
        }
    }
}
