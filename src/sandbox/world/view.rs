//! What a sandboxed tool's filesystem holds: the mount view, as a list of
//! entries, each a host path shown at the same path, read-only or
//! read-write. Nothing else of the host is there.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use crate::sandbox::fs::{FsRule, SYSTEM_DEVICES, SYSTEM_PROGRAMS, SYSTEM_RANDOM};

/// How a path is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Shown {
    /// Read-only, no set-user-id (device files work: `/dev/null`).
    ReadOnly,
    /// Read-write, no set-user-id, no devices: the private folder and the
    /// `fs` grants.
    ReadWrite,
}

/// How the host path of an entry is opened before it is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Resolve {
    /// Following symbolic links (system folders, the tool's program, the
    /// bundle: none of them lies where a tool can write).
    Follow,
    /// Never through a symbolic link, in any component (`fs` grants and
    /// the private folder: a tool could plant a link there).
    NoLinks,
}

/// One thing in the view.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Entry {
    /// The host path `path`, shown at the same path.
    Bind { path: PathBuf, shown: Shown, resolve: Resolve },
    /// A symbolic link at `path` reading `target`, as the host has it
    /// (`/bin` → `usr/bin` on a merged-/usr system).
    Link { path: PathBuf, target: PathBuf },
}

impl Entry {
    /// Where the entry is in the view.
    pub(crate) fn path(&self) -> &Path {
        match self {
            Entry::Bind { path, .. } | Entry::Link { path, .. } => path,
        }
    }
}

/// The view's entries every tool gets: the system's program and library
/// folders (a folder the host has as a symbolic link is shown as that
/// link), `/etc` (of which Landlock lets the tool read only what a program
/// needs), the CPU topology, and the device files `/dev/null`, `/dev/zero`, `/dev/full`, `/dev/random`,
/// `/dev/urandom`. Found once per process; `/proc` is mounted fresh.
pub(crate) fn system_entries() -> &'static [Entry] {
    static ENTRIES: OnceLock<Vec<Entry>> = OnceLock::new();
    ENTRIES.get_or_init(|| {
        let mut entries = Vec::new();
        for path in SYSTEM_PROGRAMS.iter().map(Path::new) {
            match std::fs::symlink_metadata(path) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    if let Ok(target) = std::fs::read_link(path) {
                        entries.push(Entry::Link { path: path.to_path_buf(), target });
                    }
                }
                Ok(_) => entries.push(bind(path, Shown::ReadOnly)),
                Err(_) => {}
            }
        }
        // `/etc` is shown whole, read-only: binding each of the few files a
        // program needs would cost a mount apiece on every call, and Landlock
        // lets the tool read only those (`fs::SYSTEM_CONFIG`) all the same.
        let existing = ["/etc", "/sys/devices/system/cpu"].into_iter().map(Path::new).filter(|p| p.exists());
        entries.extend(existing.map(|path| bind(path, Shown::ReadOnly)));
        let devices = SYSTEM_DEVICES.iter().chain(SYSTEM_RANDOM).map(Path::new).filter(|p| p.exists());
        entries.extend(devices.map(|path| bind(path, Shown::ReadOnly)));
        entries
    })
}

/// The links every view has in `/dev`: the descriptor folder and the
/// standard streams (`/dev/fd/3`, `/dev/stdin`), as a shell expects them.
pub(crate) const DEVICE_LINKS: &[(&str, &str)] = &[
    ("/dev/fd", "/proc/self/fd"),
    ("/dev/stdin", "/proc/self/fd/0"),
    ("/dev/stdout", "/proc/self/fd/1"),
    ("/dev/stderr", "/proc/self/fd/2"),
];

/// A read-only or device entry followed through links.
fn bind(path: &Path, shown: Shown) -> Entry {
    Entry::Bind { path: path.to_path_buf(), shown, resolve: Resolve::Follow }
}

/// The entries of one call, in the order they are made (a folder before
/// what is shown inside it): the system's, the program rules (the tool's
/// executable and interpreters, both where they are named and where they
/// lead), the bundle, then the private folder and the `fs` grants
/// read-write. `named` are the paths the tool's program and interpreters
/// are named by (the exec and the kernel's `#!` handling use those);
/// `links` the links between those and what they lead to, shown as links.
pub(crate) fn call_entries(
    rules: &[FsRule],
    named: &[PathBuf],
    links: &[(PathBuf, PathBuf)],
    bundle: &Path,
    private: &Path,
    writable: &[PathBuf],
) -> Vec<Entry> {
    let mut entries: Vec<Entry> = system_entries().to_vec();
    let read_only = rules
        .iter()
        .map(|rule| rule.path.as_path())
        .chain(named.iter().map(PathBuf::as_path))
        .chain(std::iter::once(bundle))
        .filter(|path| !is_shown_by_system(path));
    entries.extend(read_only.map(|path| bind(path, Shown::ReadOnly)));
    let read_write = std::iter::once(private).chain(writable.iter().map(PathBuf::as_path));
    entries.extend(read_write.map(|path| Entry::Bind {
        path: path.to_path_buf(),
        shown: Shown::ReadWrite,
        resolve: Resolve::NoLinks,
    }));
    // A link (the tool's program may name links it planted) never stands
    // where an entry is, or on the way to one: what the view binds stays
    // where it belongs.
    let links: Vec<Entry> = links
        .iter()
        .filter(|(path, _)| !entries.iter().any(|e| e.path().starts_with(path)))
        .map(|(path, target)| Entry::Link { path: path.clone(), target: target.clone() })
        .collect();
    entries.extend(links);
    order(entries)
}

/// Whether `path` is inside what every view shows (`/usr/bin/python3`).
fn is_shown_by_system(path: &Path) -> bool {
    system_entries().iter().any(|entry| matches!(entry, Entry::Bind { .. }) && path.starts_with(entry.path()))
        || SYSTEM_PROGRAMS.iter().any(|dir| path.starts_with(dir))
}

/// Paths that cannot be shown: relative ones, and those with `.` or `..`.
fn is_plain_absolute(path: &Path) -> bool {
    path.is_absolute() && path.components().all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
}

/// The entries sorted so that a folder comes before what lies below it (a
/// bind shows what is below it, so an entry inside it is made after), each
/// path once (the first kind listed wins, read-write over read-only for the
/// same path), without the root itself or a path that is not plain.
fn order(entries: Vec<Entry>) -> Vec<Entry> {
    let mut entries: Vec<Entry> =
        entries.into_iter().filter(|entry| is_plain_absolute(entry.path()) && entry.path() != Path::new("/")).collect();
    // Components sort a folder before its contents; for the same path,
    // read-write (last in `Shown`) first, then dedup keeps it.
    entries.sort_by(|a, b| {
        let key = |e: &Entry| match e {
            Entry::Link { .. } => 0,
            Entry::Bind { shown, .. } => 3 - *shown as u8,
        };
        a.path().components().cmp(b.path().components()).then(key(a).cmp(&key(b)))
    });
    entries.dedup_by(|later, earlier| later.path() == earlier.path());
    // What a bind already shows needs no bind of its own (the tool's
    // program inside its bundle), unless it must be writable.
    let shown_by_bind = |entry: &Entry| {
        !matches!(entry, Entry::Bind { shown: Shown::ReadWrite, .. }) && inside_a_bind(&entries, entry.path())
    };
    let redundant: Vec<bool> = entries.iter().map(shown_by_bind).collect();
    entries.into_iter().zip(redundant).filter(|(_, redundant)| !redundant).map(|(entry, _)| entry).collect()
}

/// The folders to make in the view's empty root so every entry has a place:
/// each ancestor of an entry that is neither an entry itself nor below a
/// bound folder (what a bind shows is already there), parents first.
pub(crate) fn folders(entries: &[Entry]) -> Vec<PathBuf> {
    let mut folders: Vec<PathBuf> = Vec::new();
    for entry in entries {
        let mut ancestors: Vec<&Path> = entry.path().ancestors().skip(1).filter(|a| *a != Path::new("/")).collect();
        ancestors.reverse();
        for ancestor in ancestors {
            if entries.iter().any(|e| ancestor.starts_with(e.path())) {
                break;
            }
            if !folders.iter().any(|f| f == ancestor) {
                folders.push(ancestor.to_path_buf());
            }
        }
    }
    folders
}

/// Whether the entry at `path` is below another entry of `entries` that is
/// a bind (so its place exists in what that bind shows).
pub(crate) fn inside_a_bind(entries: &[Entry], path: &Path) -> bool {
    entries.iter().any(|e| matches!(e, Entry::Bind { .. }) && e.path() != path && path.starts_with(e.path()))
}

/// `path` as bytes (for the C strings of the child's steps).
pub(crate) fn bytes(path: &Path) -> &[u8] {
    path.as_os_str().as_bytes()
}

/// The components of a plain absolute path, for a walk that opens each.
pub(crate) fn components(path: &Path) -> Vec<&OsStr> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect()
}

/// Whether the host shows `path` as a folder (a missing one counts as one:
/// nothing is shown for it).
pub(crate) fn is_folder(path: &Path) -> bool {
    std::fs::metadata(path).map(|m| m.is_dir()).unwrap_or(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ro(path: &str) -> Entry {
        Entry::Bind { path: path.into(), shown: Shown::ReadOnly, resolve: Resolve::Follow }
    }

    fn rw(path: &str) -> Entry {
        Entry::Bind { path: path.into(), shown: Shown::ReadWrite, resolve: Resolve::NoLinks }
    }

    #[test]
    fn entries_come_parents_first_once_each_read_write_winning() {
        let entries = order(vec![rw("/w/data"), ro("/w"), ro("/w/data"), ro("/a/../etc"), ro("/"), ro("relative")]);
        assert_eq!(entries, vec![ro("/w"), rw("/w/data")]);
    }

    #[test]
    fn a_link_never_stands_where_an_entry_is_or_on_the_way_to_one() {
        let links = [
            (PathBuf::from("/home"), PathBuf::from("/etc")),
            (PathBuf::from("/home/u/data"), PathBuf::from("/")),
            (PathBuf::from("/opt/py/bin/python3"), PathBuf::from("python3.11")),
        ];
        let rules = [FsRule { path: "/opt/py/bin/python3.11".into(), access: crate::sandbox::fs::Access::ReadExec }];
        let entries =
            call_entries(&rules, &[], &links, Path::new("/b"), Path::new("/tmp/rlp-call-1"), &["/home/u/data".into()]);
        let shown_links: Vec<&Path> =
            entries.iter().filter(|e| matches!(e, Entry::Link { .. })).map(Entry::path).collect();
        assert!(shown_links.contains(&Path::new("/opt/py/bin/python3")), "{shown_links:?}");
        assert!(!shown_links.iter().any(|p| p.starts_with("/home")), "{shown_links:?}");
        assert!(entries.contains(&rw("/home/u/data")));
    }

    #[test]
    fn folders_are_made_only_where_no_bind_shows_them() {
        let entries = order(vec![ro("/home/u/agents/demo"), rw("/home/u/agents/demo/data"), rw("/tmp/rlp-call-1")]);
        assert_eq!(folders(&entries), ["/home", "/home/u", "/home/u/agents", "/tmp"].map(PathBuf::from).to_vec());
        assert!(inside_a_bind(&entries, Path::new("/home/u/agents/demo/data")));
        assert!(!inside_a_bind(&entries, Path::new("/tmp/rlp-call-1")));
    }
}
