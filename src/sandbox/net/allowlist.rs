//! The addresses a supervised tool may connect to: its `net` grants,
//! resolved.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::bundle::capability::NetTarget;

/// The file naming the nameservers a tool's resolver asks.
const RESOLV_CONF: &str = "/etc/resolv.conf";
/// The DNS port; names are resolved over TCP (`RES_OPTIONS=use-vc`).
const DNS_PORT: u16 = 53;
/// The least time between two re-resolutions of the granted names.
const RERESOLVE_EVERY: Duration = Duration::from_secs(1);

/// One address a tool may reach: an IP, and a port (`None`: any).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Reach {
    /// The IP, IPv4-mapped IPv6 addresses stored as IPv4.
    ip: IpAddr,
    /// The port; `None` allows every port.
    port: Option<u16>,
}

impl Reach {
    /// Whether this covers `addr` (already canonical).
    fn covers(&self, addr: SocketAddr) -> bool {
        self.ip == addr.ip() && self.port.is_none_or(|port| port == addr.port())
    }
}

/// A grant naming a host by name.
#[derive(Debug)]
struct Named {
    /// The host name, lower-case ASCII.
    host: String,
    /// The granted port; `None` allows every port.
    port: Option<u16>,
}

/// The addresses of the granted names as last resolved.
#[derive(Debug)]
struct Resolved {
    /// What the names resolved to.
    reach: Vec<Reach>,
    /// When.
    at: Instant,
}

/// The hosts and ports a supervised tool may connect to.
///
/// Grant hosts are lower-case names or IP literals, IPv6 with brackets as
/// [`NetTarget`] writes them (`[::1]`) or without. Names are resolved when
/// the list is made (`localhost` as any name, through the system resolver),
/// and again, at most once a second, when an address misses: a name may
/// resolve differently for the tool a moment later.
#[derive(Debug)]
pub struct Allowlist {
    /// IP literal grants, and the nameservers when a grant names a host.
    fixed: Vec<Reach>,
    /// The grants by name.
    named: Vec<Named>,
    /// What `named` resolved to.
    resolved: Mutex<Resolved>,
}

impl Allowlist {
    /// The list for `grants`, names resolved now. A grant by name also allows
    /// TCP port 53 on the nameservers of /etc/resolv.conf: the tool resolves
    /// names over TCP (the caller sets `RES_OPTIONS=use-vc` for glibc).
    pub fn new(grants: &[NetTarget]) -> Allowlist {
        let mut fixed = Vec::new();
        let mut named = Vec::new();
        for grant in grants {
            let host = grant.host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(&grant.host);
            match host.parse::<IpAddr>() {
                Ok(ip) => fixed.push(Reach { ip: ip.to_canonical(), port: grant.port }),
                Err(_) => named.push(Named { host: host.to_ascii_lowercase(), port: grant.port }),
            }
        }
        if !named.is_empty() {
            let conf = std::fs::read_to_string(RESOLV_CONF).unwrap_or_default();
            fixed.extend(nameservers(&conf).map(|ip| Reach { ip, port: Some(DNS_PORT) }));
        }
        let resolved = Mutex::new(Resolved { reach: resolve(&named), at: Instant::now() });
        Allowlist { fixed, named, resolved }
    }

    /// Whether a tool may connect to `addr` (IPv4-mapped IPv6 compared as IPv4).
    pub fn allows(&self, addr: SocketAddr) -> bool {
        let addr = SocketAddr::new(addr.ip().to_canonical(), addr.port());
        if self.fixed.iter().any(|reach| reach.covers(addr)) {
            return true;
        }
        let mut resolved = self.resolved.lock().unwrap_or_else(PoisonError::into_inner);
        if resolved.reach.iter().any(|reach| reach.covers(addr)) {
            return true;
        }
        if self.named.is_empty() || resolved.at.elapsed() < RERESOLVE_EVERY {
            return false;
        }
        *resolved = Resolved { reach: resolve(&self.named), at: Instant::now() };
        resolved.reach.iter().any(|reach| reach.covers(addr))
    }
}

/// The addresses `named` resolve to now; a name that does not resolve adds none.
fn resolve(named: &[Named]) -> Vec<Reach> {
    let mut reach = Vec::new();
    for name in named {
        let Ok(addrs) = (name.host.as_str(), 0).to_socket_addrs() else { continue };
        for addr in addrs {
            let found = Reach { ip: addr.ip().to_canonical(), port: name.port };
            if !reach.contains(&found) {
                reach.push(found);
            }
        }
    }
    reach
}

/// The `nameserver` addresses of a resolv.conf text.
fn nameservers(conf: &str) -> impl Iterator<Item = IpAddr> + '_ {
    conf.lines().filter_map(|line| {
        let mut words = line.split_whitespace();
        (words.next() == Some("nameserver")).then(|| words.next()?.parse::<IpAddr>().ok()).flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grants(texts: &[&str]) -> Vec<NetTarget> {
        texts.iter().map(|text| text.parse().unwrap()).collect()
    }

    fn addr(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    #[test]
    fn ip_literals_match_their_port_or_any() {
        let list = Allowlist::new(&grants(&["127.0.0.1:8080", "[::1]", "10.0.0.1"]));
        assert!(list.allows(addr("127.0.0.1:8080")));
        assert!(!list.allows(addr("127.0.0.1:8081")));
        assert!(list.allows(addr("[::1]:1")));
        assert!(list.allows(addr("[::1]:65535")));
        assert!(list.allows(addr("10.0.0.1:443")));
        assert!(!list.allows(addr("10.0.0.2:443")));
    }

    #[test]
    fn ipv4_mapped_ipv6_is_compared_as_ipv4() {
        let list = Allowlist::new(&grants(&["127.0.0.1:80"]));
        assert!(list.allows(addr("[::ffff:127.0.0.1]:80")));
        assert!(!list.allows(addr("[::ffff:127.0.0.2]:80")));
        let mapped = Allowlist::new(&grants(&["[::ffff:10.1.2.3]:80"]));
        assert!(mapped.allows(addr("10.1.2.3:80")));
    }

    #[test]
    fn localhost_resolves_like_any_name() {
        let list = Allowlist::new(&grants(&["localhost:9"]));
        assert!(list.allows(addr("127.0.0.1:9")));
        assert!(!list.allows(addr("127.0.0.1:10")));
        assert!(!list.allows(addr("10.9.9.9:9")));
    }

    #[test]
    fn no_grants_allow_nothing() {
        let list = Allowlist::new(&[]);
        assert!(!list.allows(addr("127.0.0.1:53")));
    }

    #[test]
    fn nameservers_are_read_from_resolv_conf_lines() {
        let conf = "# comment\nnameserver 10.0.0.53\nsearch example\nnameserver ::1\nnameserver bogus\nnameserver\n";
        let found: Vec<IpAddr> = nameservers(conf).collect();
        assert_eq!(found, vec!["10.0.0.53".parse::<IpAddr>().unwrap(), "::1".parse().unwrap()]);
    }
}
