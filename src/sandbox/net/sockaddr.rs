//! What a `connect` address, copied from a tool's memory, asks for.

use std::mem::size_of;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use rustix::io::Errno;

/// What a copied `connect` address asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Destination {
    /// An Internet address, IPv4-mapped IPv6 as IPv4: the allowlist decides.
    Inet(SocketAddr),
    /// A disconnect (`AF_UNSPEC`): connect with the copy.
    Pass,
    /// Refused with this error.
    Refused(Errno),
}

/// What `addr` (the `addrlen` bytes the tool passed) asks for. Addresses
/// too short for their family are refused with EINVAL, as the kernel would.
/// A Unix socket, by path or abstract name, is refused with EACCES:
/// Landlock does not govern connecting to one, and a daemon's socket (a
/// container engine's, the service manager's) can hand out more than any
/// grant; a sandboxed tool has `socketpair` for its own processes.
pub fn classify(addr: &[u8]) -> Destination {
    let Some(family) = addr.get(..2).map(|bytes| u16::from_ne_bytes([bytes[0], bytes[1]])) else {
        return Destination::Refused(Errno::INVAL);
    };
    match i32::from(family) {
        libc::AF_INET => inet4(addr).map_or(Destination::Refused(Errno::INVAL), Destination::Inet),
        libc::AF_INET6 => inet6(addr).map_or(Destination::Refused(Errno::INVAL), Destination::Inet),
        libc::AF_UNSPEC => Destination::Pass,
        libc::AF_UNIX => Destination::Refused(Errno::ACCESS),
        _ => Destination::Refused(Errno::AFNOSUPPORT),
    }
}

/// An AF_INET address: the port and address in network order after the family.
fn inet4(addr: &[u8]) -> Option<SocketAddr> {
    if addr.len() < size_of::<libc::sockaddr_in>() {
        return None;
    }
    let port = u16::from_be_bytes([addr[2], addr[3]]);
    let ip = Ipv4Addr::new(addr[4], addr[5], addr[6], addr[7]);
    Some(SocketAddr::V4(SocketAddrV4::new(ip, port)))
}

/// An AF_INET6 address, IPv4-mapped ones as IPv4. The kernel accepts the
/// RFC 2133 length, without `sin6_scope_id`.
fn inet6(addr: &[u8]) -> Option<SocketAddr> {
    let ip: [u8; 16] = addr.get(8..24)?.try_into().ok()?;
    let port = u16::from_be_bytes([addr[2], addr[3]]);
    let ip = Ipv6Addr::from(ip);
    Some(match ip.to_ipv4_mapped() {
        Some(v4) => SocketAddr::V4(SocketAddrV4::new(v4, port)),
        None => SocketAddr::V6(SocketAddrV6::new(ip, port, 0, 0)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn family(family: i32) -> Vec<u8> {
        (family as u16).to_ne_bytes().to_vec()
    }

    fn inet4_bytes(ip: [u8; 4], port: u16) -> Vec<u8> {
        let mut addr = family(libc::AF_INET);
        addr.extend(port.to_be_bytes());
        addr.extend(ip);
        addr.extend([0; 8]);
        addr
    }

    fn inet6_bytes(ip: Ipv6Addr, port: u16, len: usize) -> Vec<u8> {
        let mut addr = family(libc::AF_INET6);
        addr.extend(port.to_be_bytes());
        addr.extend([0; 4]);
        addr.extend(ip.octets());
        addr.resize(len, 0);
        addr
    }

    fn unix_bytes(path: &[u8]) -> Vec<u8> {
        [family(libc::AF_UNIX), path.to_vec()].concat()
    }

    #[test]
    fn internet_addresses_are_decoded() {
        assert_eq!(classify(&inet4_bytes([10, 0, 0, 1], 443)), Destination::Inet("10.0.0.1:443".parse().unwrap()));
        let v6 = inet6_bytes("2001:db8::1".parse().unwrap(), 80, 28);
        assert_eq!(classify(&v6), Destination::Inet("[2001:db8::1]:80".parse().unwrap()));
        let mapped = inet6_bytes("::ffff:127.0.0.1".parse().unwrap(), 8080, 24);
        assert_eq!(classify(&mapped), Destination::Inet("127.0.0.1:8080".parse().unwrap()));
    }

    #[test]
    fn short_addresses_are_refused_like_the_kernel_does() {
        assert_eq!(classify(&[]), Destination::Refused(Errno::INVAL));
        assert_eq!(classify(&inet4_bytes([1, 2, 3, 4], 80)[..15]), Destination::Refused(Errno::INVAL));
        let v6 = inet6_bytes(Ipv6Addr::LOCALHOST, 1, 23);
        assert_eq!(classify(&v6), Destination::Refused(Errno::INVAL));
    }

    #[test]
    fn other_families_are_unsupported_and_unspec_passes() {
        assert_eq!(classify(&family(libc::AF_UNSPEC)), Destination::Pass);
        assert_eq!(
            classify(&[family(libc::AF_NETLINK), vec![0; 10]].concat()),
            Destination::Refused(Errno::AFNOSUPPORT)
        );
    }

    #[test]
    fn unix_sockets_are_refused_by_path_and_by_name() {
        for path in [&b"/run/x.sock\0"[..], b"sock", b"", b"\0abstract"] {
            assert_eq!(classify(&unix_bytes(path)), Destination::Refused(Errno::ACCESS), "{path:?}");
        }
    }
}
