//! Leftovers of rlp processes that died for good (killed with SIGKILL,
//! power lost): temporary folders whose names carry the pid of the process
//! that made them (`<prefix><pid>-<random>`), removed by a later run once
//! that process no longer exists.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use rustix::io::Errno;
use rustix::process::{Pid, geteuid, test_kill_process};

/// What kind of entry a leftover may be: a sweep removes only that kind,
/// so an entry that merely has a leftover's name is not taken for one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A folder (with what it holds) or a regular file.
    Any,
    /// Only a regular file (a temporary file is never a folder).
    File,
}

/// Removes the entries of `dir` named `<prefix><pid>-…` (for any of
/// `prefixes`) whose process no longer runs. Only entries of `kind` owned
/// by this user are touched; links are never followed.
pub(crate) fn sweep(dir: &Path, prefixes: &[&str], kind: Kind) {
    let me = geteuid().as_raw();
    for path in dead_entries(dir, prefixes) {
        remove_owned(&path, me, kind);
    }
}

/// [`sweep`] in `dir` and in every folder below it (links are not followed).
pub(crate) fn sweep_tree(dir: &Path, prefixes: &[&str], kind: Kind) {
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        sweep(&folder, prefixes, kind);
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

/// Removes a folder with its contents, or any other entry (a link itself,
/// never what it points to), if it is of `kind` and `owner` owns it.
fn remove_owned(path: &Path, owner: u32, kind: Kind) {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.uid() != owner => {}
        // An empty folder (or a cgroup, whose files cannot be removed) goes
        // with one rmdir; anything else with what it holds.
        Ok(meta) if meta.is_dir() && kind == Kind::Any => {
            drop(fs::remove_dir(path).or_else(|_| fs::remove_dir_all(path)));
        }
        Ok(meta) if kind == Kind::Any || meta.is_file() => drop(fs::remove_file(path)),
        _ => {}
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
        sweep(dir.path(), &["rlp-call-"], Kind::Any);
        assert!(!dead.exists());
        assert!(alive.exists() && other.exists());
    }

    #[test]
    fn sweeps_only_the_kind_of_entry_it_is_told() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join(".rlp-~999999999-abc.tmp");
        let file = dir.path().join(".rlp-~999999998-def.tmp");
        let link = dir.path().join(".rlp-~999999997-ghi.tmp");
        fs::create_dir(&folder).unwrap();
        fs::write(folder.join("kept"), "data").unwrap();
        fs::write(&file, "partial").unwrap();
        std::os::unix::fs::symlink(&file, &link).unwrap();
        sweep(dir.path(), &[".rlp-~"], Kind::File);
        assert!(folder.join("kept").exists(), "a folder named like a temporary file is not one");
        assert!(link.symlink_metadata().is_ok(), "a link is never removed as a file");
        assert!(!file.exists());
    }
}
