//! Helpers shared by the integration tests. Each test crate compiles this
//! module on its own and uses only some of it.
#![allow(dead_code)]

/// Whether process `pid` exists and has not exited: a zombie waiting to be
/// reaped (by init, once its parent is gone) counts as gone.
pub fn process_is_running(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(") ").is_some_and(|(_, state)| !state.starts_with('Z')))
}

/// `len` pseudo-random bytes (xorshift64 from `seed`): incompressible,
/// rarely valid UTF-8, and the same on every run.
pub fn noise(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        })
        .collect()
}
