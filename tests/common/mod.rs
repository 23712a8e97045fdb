//! Helpers shared by the integration tests.

/// Whether process `pid` exists and has not exited: a zombie waiting to be
/// reaped (by init, once its parent is gone) counts as gone.
pub fn process_is_running(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(") ").is_some_and(|(_, state)| !state.starts_with('Z')))
}
