//! What a `connect` address, copied from a tool's memory, asks for.

use std::mem::{offset_of, size_of};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use rustix::io::Errno;

/// What a copied `connect` address asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Destination {
    /// An Internet address, IPv4-mapped IPv6 as IPv4: the allowlist decides.
    Inet(SocketAddr),
    /// Not governed here (a disconnect, a Unix path): connect with the copy.
    Pass,
    /// A relative Unix path, made absolute through the tool's working
    /// directory: connect with this address instead.
    Rewritten(Vec<u8>),
    /// Refused with this error.
    Refused(Errno),
}

/// The offset of `sun_path` in `sockaddr_un`.
const SUN_PATH: usize = offset_of!(libc::sockaddr_un, sun_path);
/// The room in `sun_path`.
const SUN_PATH_LEN: usize = size_of::<libc::sockaddr_un>() - SUN_PATH;

/// What `addr` (the `addrlen` bytes the tool passed) asks for; `tid` is the
/// calling thread, whose working directory a relative Unix path is in.
/// Addresses too short for their family are refused with EINVAL, as the
/// kernel would.
pub fn classify(addr: &[u8], tid: u32) -> Destination {
    let Some(family) = addr.get(..2).map(|bytes| u16::from_ne_bytes([bytes[0], bytes[1]])) else {
        return Destination::Refused(Errno::INVAL);
    };
    match i32::from(family) {
        libc::AF_INET => inet4(addr).map_or(Destination::Refused(Errno::INVAL), Destination::Inet),
        libc::AF_INET6 => inet6(addr).map_or(Destination::Refused(Errno::INVAL), Destination::Inet),
        libc::AF_UNSPEC => Destination::Pass,
        libc::AF_UNIX => unix(addr.get(SUN_PATH..).unwrap_or_default(), tid),
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

/// An AF_UNIX address from its `sun_path` bytes: an absolute path passes,
/// a relative one is rewritten to `/proc/<tid>/cwd/<path>` (ENAMETOOLONG
/// when that does not fit), an abstract name is refused with EPERM.
/// Landlock does not govern connecting to a Unix socket by path.
fn unix(raw: &[u8], tid: u32) -> Destination {
    match raw.first() {
        // Unnamed: the kernel refuses it by itself.
        None => Destination::Pass,
        Some(0) => Destination::Refused(Errno::PERM),
        Some(b'/') => Destination::Pass,
        Some(_) => {
            let path = raw.split(|&b| b == 0).next().unwrap_or(raw);
            let absolute = [format!("/proc/{tid}/cwd/").as_bytes(), path].concat();
            if absolute.len() >= SUN_PATH_LEN {
                return Destination::Refused(Errno::NAMETOOLONG);
            }
            let mut rewritten = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
            rewritten.extend_from_slice(&absolute);
            rewritten.push(0);
            Destination::Rewritten(rewritten)
        }
    }
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
        assert_eq!(classify(&inet4_bytes([10, 0, 0, 1], 443), 1), Destination::Inet("10.0.0.1:443".parse().unwrap()));
        let v6 = inet6_bytes("2001:db8::1".parse().unwrap(), 80, 28);
        assert_eq!(classify(&v6, 1), Destination::Inet("[2001:db8::1]:80".parse().unwrap()));
        let mapped = inet6_bytes("::ffff:127.0.0.1".parse().unwrap(), 8080, 24);
        assert_eq!(classify(&mapped, 1), Destination::Inet("127.0.0.1:8080".parse().unwrap()));
    }

    #[test]
    fn short_addresses_are_refused_like_the_kernel_does() {
        assert_eq!(classify(&[], 1), Destination::Refused(Errno::INVAL));
        assert_eq!(classify(&inet4_bytes([1, 2, 3, 4], 1)[..15], 1), Destination::Refused(Errno::INVAL));
        let v6 = inet6_bytes(Ipv6Addr::LOCALHOST, 1, 23);
        assert_eq!(classify(&v6, 1), Destination::Refused(Errno::INVAL));
    }

    #[test]
    fn other_families_are_unsupported_and_unspec_passes() {
        assert_eq!(classify(&family(libc::AF_UNSPEC), 1), Destination::Pass);
        assert_eq!(
            classify(&[family(libc::AF_NETLINK), vec![0; 10]].concat(), 1),
            Destination::Refused(Errno::AFNOSUPPORT)
        );
    }

    #[test]
    fn unix_paths_pass_abstract_names_do_not() {
        assert_eq!(classify(&unix_bytes(b"/run/x.sock\0"), 1), Destination::Pass);
        assert_eq!(classify(&unix_bytes(b""), 1), Destination::Pass);
        assert_eq!(classify(&unix_bytes(b"\0abstract"), 1), Destination::Refused(Errno::PERM));
    }

    #[test]
    fn relative_unix_paths_go_through_the_callers_working_directory() {
        let expected = unix_bytes(b"/proc/42/cwd/sock\0");
        assert_eq!(classify(&unix_bytes(b"sock\0junk"), 42), Destination::Rewritten(expected.clone()));
        assert_eq!(classify(&unix_bytes(b"sock"), 42), Destination::Rewritten(expected));
        let long = vec![b'a'; 100];
        assert_eq!(classify(&unix_bytes(&long), 42), Destination::Refused(Errno::NAMETOOLONG));
    }
}
