//! The kernel probe's verdict kept between processes, so that a single
//! `rlp tools call` does not make a probe cgroup and build a probe view
//! in a child (milliseconds, most of a short call's own cost) before
//! every call.
//!
//! One file, `$RUNLOOP_HOME/cache/sandbox/kernel`, holding only a verdict
//! in which everything probed was found (a call cgroup a tool is made in
//! or joins, and the namespaces of the tool's world with its view built),
//! and the context it was reached in: the BLAKE3 of everything the
//! probe's outcome depends on ([`context_key`]): this boot, the rlp
//! executable, the process's ids, capabilities, `no_new_privs`, seccomp
//! state and security label, its namespaces, cgroup and mounts, the
//! kernel's namespace limits, the folder views are mounted over and the
//! system entries a view shows. When any of those differs, the kernel is
//! probed again.
//!
//! A verdict with anything missing is never stored: such a machine is
//! probed in every process, as before, so a feature that becomes
//! available is used at once. A sandboxed call that cannot be confined or
//! started removes the file, so a verdict the kernel no longer honours
//! costs that one call (which fails, closed) and is probed afresh by the
//! next process. A file that does not parse, or holds another context's
//! verdict, is ignored.
//!
//! The cache is as trustworthy as the home that holds it: whoever can
//! write it can also write the configuration that turns the sandbox off.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::home::Home;
use crate::sandbox::cgroup::Entry;
use crate::sandbox::world::Namespaces;

/// The first line of the cache file.
const MAGIC: &str = "rlp-kernel-verdict v1";
/// Largest cache file read.
const MAX_CACHE_BYTES: u64 = 512;
/// Largest `/proc` or `/sys` file read into the key.
const MAX_SOURCE_BYTES: u64 = 1 << 20;

/// This boot's identity: without it, no verdict is read or kept.
const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

/// The files beside the process's cgroup and mounts whose content decides
/// what the probe finds and that the key covers; one that cannot be read
/// (no such sysctl, no security module) counts by the reason.
const SOURCES: &[&str] = &[
    "/proc/self/attr/current",
    "/proc/sys/user/max_user_namespaces",
    "/proc/sys/user/max_mnt_namespaces",
    "/proc/sys/user/max_pid_namespaces",
    "/proc/sys/user/max_ipc_namespaces",
    "/proc/sys/kernel/unprivileged_userns_clone",
    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
];

/// The namespaces of the process the key covers.
const NAMESPACES: &[&str] = &["user", "mnt", "pid", "pid_for_children", "ipc", "cgroup"];

/// The lines of `/proc/self/status` the key covers: ids, capabilities,
/// `no_new_privs` and seccomp.
const STATUS_FIELDS: &[&str] = &[
    "Uid:",
    "Gid:",
    "Groups:",
    "CapInh:",
    "CapPrm:",
    "CapEff:",
    "CapBnd:",
    "CapAmb:",
    "NoNewPrivs:",
    "Seccomp:",
    "Seccomp_filters:",
];

/// A verdict in which everything probed was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// How a tool gets into its call cgroup.
    pub entry: Entry,
    /// The namespaces of the tool's world (its view built in them).
    pub namespaces: Namespaces,
}

/// The persisted verdict of one home.
#[derive(Clone, Debug)]
pub(crate) struct KernelCache {
    file: PathBuf,
}

/// The file that keeps the verdict in effect in this process (read from
/// it, or written to it after the probe): removed when a sandboxed call
/// cannot start ([`forget`]).
static KEPT_IN: OnceLock<PathBuf> = OnceLock::new();

impl KernelCache {
    /// The cache of `home`.
    pub(crate) fn new(home: &Home) -> KernelCache {
        KernelCache { file: home.root().join("cache").join("sandbox").join("kernel") }
    }

    /// The verdict stored for `key`, if there is one.
    pub(crate) fn load(&self, key: &blake3::Hash) -> Option<Verdict> {
        // Written 0600: one others may read was not written by rlp.
        let bytes = crate::fsutil::read_private(&self.file, MAX_CACHE_BYTES).ok()?;
        let verdict = parse(std::str::from_utf8(&bytes).ok()?, key)?;
        let _ = KEPT_IN.set(self.file.clone());
        Some(verdict)
    }

    /// Stores `verdict` for `key`, atomically; a home that cannot take it
    /// (read-only, full) only means the next process probes again.
    pub(crate) fn store(&self, key: &blake3::Hash, verdict: Verdict) {
        if let Some(dir) = self.file.parent()
            && crate::fsutil::create_private_dir_all(dir).is_ok()
            && crate::fsutil::write_atomic(&self.file, render(key, verdict).as_bytes(), Some(0o600)).is_ok()
        {
            let _ = KEPT_IN.set(self.file.clone());
        }
    }
}

/// Removes the file that keeps the verdict in effect, if one does: the
/// kernel may not honour it, so the next process probes.
pub(crate) fn forget() {
    if let Some(file) = KEPT_IN.get() {
        let _ = std::fs::remove_file(file);
    }
}

fn render(key: &blake3::Hash, verdict: Verdict) -> String {
    let entry = match verdict.entry {
        Entry::AtBirth => "at-birth",
        Entry::Join => "join",
    };
    let user = if verdict.namespaces.user { "user" } else { "no-user" };
    let pid = if verdict.namespaces.pid { "pid" } else { "no-pid" };
    crate::kept::render(MAGIC, key, &[&format!("cgroup {entry}"), &format!("world {user} {pid}")])
}

fn parse(text: &str, key: &blake3::Hash) -> Option<Verdict> {
    let [cgroup, world] = crate::kept::verdict_lines(text, MAGIC, key)?;
    let entry = match cgroup {
        "cgroup at-birth" => Entry::AtBirth,
        "cgroup join" => Entry::Join,
        _ => return None,
    };
    let (user, pid) = world.strip_prefix("world ")?.split_once(' ')?;
    let user = match user {
        "user" => true,
        "no-user" => false,
        _ => return None,
    };
    let pid = match pid {
        "pid" => true,
        "no-pid" => false,
        _ => return None,
    };
    Some(Verdict { entry, namespaces: Namespaces { user, pid } })
}

/// The BLAKE3 of everything the probe's outcome depends on (see the module
/// docs) and of `probed`, what this process found without a child (the
/// Landlock ABI, seccomp); `None` where part of it cannot be read, and the
/// verdict is then neither read nor stored.
pub(crate) fn context_key(probed: &str, mount_point: &Path, system_entries: &str) -> Option<blake3::Hash> {
    let mut hasher = blake3::Hasher::new();
    let mut field = |name: &str, value: &[u8]| {
        hasher.update(name.as_bytes());
        hasher.update(&(value.len() as u64).to_le_bytes());
        hasher.update(value);
    };
    field("magic", MAGIC.as_bytes());
    field("version", env!("CARGO_PKG_VERSION").as_bytes());
    field("probed", probed.as_bytes());
    let exe = std::fs::metadata("/proc/self/exe").ok()?;
    let exe_identity =
        [exe.dev(), exe.ino(), exe.size(), exe.mtime() as u64, exe.mtime_nsec() as u64, exe.ctime() as u64];
    field("exe", &exe_identity.map(u64::to_le_bytes).concat());
    let status = crate::fsutil::read_text_limited(Path::new("/proc/self/status"), MAX_SOURCE_BYTES).ok()?;
    for line in status.lines().filter(|line| STATUS_FIELDS.iter().any(|name| line.starts_with(name))) {
        field("status", line.as_bytes());
    }
    for namespace in NAMESPACES {
        let link = std::fs::read_link(format!("/proc/self/ns/{namespace}")).ok()?;
        field(namespace, link.as_os_str().as_encoded_bytes());
    }
    field(BOOT_ID, &crate::fsutil::read_limited(Path::new(BOOT_ID), MAX_SOURCE_BYTES).ok()?);
    // The process's cgroup and mounts, as the sandbox read them for itself.
    let (cgroups, mounts) = crate::sandbox::cgroup::sources()?;
    field("/proc/self/cgroup", cgroups.as_bytes());
    field("/proc/self/mountinfo", mounts.as_bytes());
    for source in SOURCES {
        match crate::fsutil::read_limited(Path::new(source), MAX_SOURCE_BYTES) {
            Ok(bytes) => field(source, &bytes),
            Err(e) => field(source, format!("\0unreadable: {e}").as_bytes()),
        }
    }
    field("mount point", mount_point.as_os_str().as_encoded_bytes());
    field("system entries", system_entries.as_bytes());
    Some(hasher.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> blake3::Hash {
        blake3::Hash::from_bytes([byte; 32])
    }

    #[test]
    fn a_verdict_reads_back_only_under_its_own_key() {
        let verdict = Verdict { entry: Entry::AtBirth, namespaces: Namespaces { user: true, pid: false } };
        let text = render(&key(1), verdict);
        assert_eq!(parse(&text, &key(1)), Some(verdict));
        assert_eq!(parse(&text, &key(2)), None);
        let join = Verdict { entry: Entry::Join, namespaces: Namespaces { user: false, pid: true } };
        assert_eq!(parse(&render(&key(1), join), &key(1)), Some(join));
    }

    #[test]
    fn a_damaged_file_is_ignored() {
        let text = render(&key(1), Verdict { entry: Entry::Join, namespaces: Namespaces { user: false, pid: false } });
        for damaged in [
            text.replace("v1", "v0"),
            text.replace("cgroup join", "cgroup maybe"),
            text.replace("world no-user", "world nobody"),
            text.replace("no-pid", "pid extra"),
            format!("{text}more\n"),
            text.trim_end().to_string(),
            String::new(),
        ] {
            assert_eq!(parse(&damaged, &key(1)), None, "{damaged:?}");
        }
    }

    #[test]
    fn the_key_depends_on_what_this_process_found_and_the_view() {
        let base = context_key("landlock 7", Path::new("/tmp"), "entries").unwrap();
        assert_eq!(context_key("landlock 7", Path::new("/tmp"), "entries"), Some(base));
        assert_ne!(context_key("landlock 6", Path::new("/tmp"), "entries"), Some(base));
        assert_ne!(context_key("landlock 7", Path::new("/var/tmp"), "entries"), Some(base));
        assert_ne!(context_key("landlock 7", Path::new("/tmp"), "other entries"), Some(base));
    }
}
