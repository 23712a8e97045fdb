//! Fuzzes the decoding of a `connect` address copied from a sandboxed
//! tool's memory (hostile bytes of any length): it never panics, an
//! Internet address is only read from a long enough address of its family,
//! and only a disconnect passes unchecked.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rlp::sandbox::net::sockaddr::{Destination, classify};

fuzz_target!(|data: &[u8]| {
    let family = data.get(..2).map(|b| i32::from(u16::from_ne_bytes([b[0], b[1]])));
    match classify(data) {
        Destination::Inet(addr) => {
            let needed = if addr.is_ipv4() && family == Some(libc::AF_INET) { 16 } else { 24 };
            assert!(data.len() >= needed, "{addr} read from {} bytes", data.len());
            assert!(matches!(family, Some(libc::AF_INET | libc::AF_INET6)));
        }
        Destination::Pass => assert_eq!(family, Some(libc::AF_UNSPEC)),
        Destination::Refused(_) => {}
    }
});
