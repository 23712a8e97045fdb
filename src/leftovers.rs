//! Leftovers of rlp processes that died for good (killed with SIGKILL,
//! power lost): temporary folders whose names carry the pid of the process
//! that made them (`<prefix><pid>-<random>`), removed by a later run once
//! that process no longer exists.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use rustix::io::Errno;
use rustix::process::{Pid, geteuid, test_kill_process};

/// Removes the entries of `dir` named `<prefix><pid>-…` (for any of
/// `prefixes`) whose process no longer runs. Only folders and files owned
/// by this user are touched; links are never followed.
pub(crate) fn sweep(dir: &Path, prefixes: &[&str]) {
    let me = geteuid().as_raw();
    for path in dead_entries(dir, prefixes) {
        remove_owned(&path, me);
    }
}

/// [`sweep`] in `dir` and in every folder below it (links are not followed).
pub(crate) fn sweep_tree(dir: &Path, prefixes: &[&str]) {
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        sweep(&folder, prefixes);
        let Ok(entries) = fs::read_dir(&folder) else { continue };
        let below = entries.filter_map(Result::ok).filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()));
        folders.extend(below.map(|entry| entry.path()));
    }
}

/// The entries of `dir` named `<prefix><pid>-…` (for any of `prefixes`)
/// whose process no longer runs.
pub(crate) fn dead_entries(dir: &Path, prefixes: &[&str]) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else { return Vec::new() };
    entries
        .filter_map(Result::ok)
        .filter(|entry| {
            let name = entry.file_name();
            let rest = name.to_str().and_then(|n| prefixes.iter().find_map(|p| n.strip_prefix(p)));
            let pid = rest.and_then(|rest| rest.split_once('-')).and_then(|(pid, _)| pid.parse::<i32>().ok());
            pid.is_some_and(|pid| !process_exists(pid))
        })
        .map(|entry| entry.path())
        .collect()
}

/// Whether a process with this pid exists (signal 0 checks without sending).
pub(crate) fn process_exists(pid: i32) -> bool {
    pid > 0 && Pid::from_raw(pid).is_some_and(|pid| matches!(test_kill_process(pid), Ok(()) | Err(Errno::PERM)))
}

/// Removes a folder with its contents, or a file, if `owner` owns it.
fn remove_owned(path: &Path, owner: u32) {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.uid() != owner => {}
        // An empty folder (or a cgroup, whose files cannot be removed) goes
        // with one rmdir; anything else with what it holds.
        Ok(meta) if meta.is_dir() => {
            if fs::remove_dir(path).is_err() {
                drop(fs::remove_dir_all(path));
            }
        }
        Ok(_) => drop(fs::remove_file(path)),
        Err(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweeps_only_what_dead_processes_left() {
        let dir = tempfile::tempdir().unwrap();
        let dead = dir.path().join("rlp-call-999999999-abc");
        let alive = dir.path().join(format!("rlp-call-{}-def", std::process::id()));
        let other = dir.path().join("rlp-call-notapid");
        for path in [&dead, &alive, &other] {
            fs::create_dir(path).unwrap();
            fs::write(path.join("call.json"), "{}").unwrap();
        }
        sweep(dir.path(), &["rlp-call-"]);
        assert!(!dead.exists());
        assert!(alive.exists() && other.exists());
    }
}
