//! The tool's world: the namespaces a sandboxed tool runs in and the
//! filesystem it sees (docs/sandbox.md, "The tool's world").
//!
//! Every sandboxed tool is started in new mount and IPC namespaces (and a
//! user namespace mapping only rlp's own ids, when rlp is not root):
//!
//! - its filesystem is an empty read-only root holding only what it is
//!   granted ([`view`]), built by the child before the exec ([`build`]);
//! - System V IPC objects and POSIX message queues are its own;
//! - where rlp can make it no call cgroup to kill
//!   ([`crate::sandbox::lifetime`]), it is also PID 1 of its own PID
//!   namespace: when it ends, the kernel ends every process it started,
//!   however they detach, and it sees only them.
//!
//! Whether this kernel and this user allow it is probed once per process
//! ([`support`]); where they do not, the sandbox says so (a gap that
//! `required` refuses).

pub(crate) mod build;
pub(crate) mod view;

use std::ffi::{c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::sandbox::clone::{exit_with, try_in_child};
use crate::sandbox::world::build::ViewSteps;

/// The namespaces a tool gets: mount and IPC always.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Namespaces {
    /// A user namespace too (mapping rlp's own uid and gid, nothing else):
    /// what lets a user other than root make the others.
    pub user: bool,
    /// A PID namespace too, the tool its PID 1: how the call's processes
    /// end with it where no call cgroup can ([`crate::sandbox::lifetime`]),
    /// and how its signals stay in where Landlock cannot scope them.
    pub pid: bool,
}

impl Namespaces {
    /// The `clone` flags that make them.
    pub(crate) fn clone_flags(self) -> c_int {
        let mut flags = libc::CLONE_NEWNS | libc::CLONE_NEWIPC;
        if self.pid {
            flags |= libc::CLONE_NEWPID;
        }
        if self.user {
            flags |= libc::CLONE_NEWUSER;
        }
        flags
    }

    /// Their names, as the call frame records them.
    pub(crate) fn names(self) -> Vec<String> {
        let named = [("mount", true), ("pid", self.pid), ("ipc", true), ("user", self.user)];
        named.into_iter().filter(|(_, on)| *on).map(|(name, _)| name.to_string()).collect()
    }
}

/// Whether rlp runs as root (the tool then keeps root's file rights, in no
/// user namespace of its own).
pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid has no failure mode.
    unsafe { libc::geteuid() == 0 }
}

/// The temporary folder when `TMPDIR` names none.
const DEFAULT_TEMP: &str = "/tmp";

/// The folder the calls' private folders are made in, after its symbolic
/// links (a sandboxed tool's private folder is opened without following
/// any), the same for the whole process: `$TMPDIR`, or `/tmp` when it is
/// unset or empty (as `mktemp` reads it). A `TMPDIR` that cannot hold them
/// ([`usable_temp`]) is not used: `/tmp` is, with a warning naming
/// `TMPDIR`, so that neither the private folders nor the tool's view (mounted
/// over this folder) end up in the current folder or at `/`.
pub(crate) fn calls_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let temp = match std::env::var_os("TMPDIR").filter(|value| !value.is_empty()) {
            None => PathBuf::from(DEFAULT_TEMP),
            Some(value) => usable_temp(Path::new(&value)).unwrap_or_else(|why| {
                crate::notice::warn(&format!(
                    "TMPDIR (`{}`) {why}; the private folders of exec tools are made in {DEFAULT_TEMP} instead",
                    Path::new(&value).display()
                ));
                PathBuf::from(DEFAULT_TEMP)
            }),
        };
        std::fs::canonicalize(&temp).unwrap_or(temp)
    });
    dir.clone()
}

/// `dir` as a folder for the calls' private folders, or why it cannot be
/// one: it must be an absolute path to a folder other than `/` that this
/// user may write.
fn usable_temp(dir: &Path) -> Result<PathBuf, String> {
    if !dir.is_absolute() {
        return Err("is not an absolute path".to_string());
    }
    let resolved = std::fs::canonicalize(dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => "does not exist".to_string(),
        _ => format!("cannot be used: {e}"),
    })?;
    if !resolved.is_dir() {
        return Err("is not a folder".to_string());
    }
    if resolved == Path::new("/") {
        return Err("is the root folder, over which a tool's view would be mounted".to_string());
    }
    let access = rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK;
    rustix::fs::access(&resolved, access).map_err(|e| format!("is not writable: {e}"))?;
    Ok(resolved)
}

/// The folder over which a view's root is mounted: the folder of the
/// calls' private folders, which exists for certain.
pub(crate) fn root_mount_point() -> PathBuf {
    calls_dir()
}

/// The namespaces this process can give tools (a PID namespace when `pid`),
/// or why it cannot: probed by building an empty view in a child as a call
/// would (once per process: [`crate::sandbox::plan`] keeps the verdict).
pub(crate) fn support(pid: bool) -> Result<Namespaces, String> {
    // Root needs no user namespace; where it lacks the right to mount (a
    // container), one may still give it.
    let tries: &[bool] = if is_root() { &[false, true] } else { &[true] };
    let mut why = String::new();
    for &user in tries {
        match probe(Namespaces { user, pid }) {
            Ok(()) => return Ok(Namespaces { user, pid }),
            Err(e) => why = e,
        }
    }
    Err(why)
}

/// Builds an empty view in a child made with `namespaces`.
fn probe(namespaces: Namespaces) -> Result<(), String> {
    let root = root_mount_point();
    let steps = ViewSteps::new(&root, view::system_entries(), &root, namespaces.user).map_err(|e| e.to_string())?;
    let arg = std::ptr::from_ref(&steps).cast_mut().cast::<c_void>();
    try_in_child(namespaces.clone_flags(), None, probe_child, arg).map_err(|e| e.to_string())
}

/// The probe's child: builds the view, exits with 0 or the errno.
extern "C" fn probe_child(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the ViewSteps `probe` passed, alive in the suspended
    // parent thread's frame until this child exits.
    let steps = unsafe { &*arg.cast::<ViewSteps>() };
    exit_with(steps.build())
}
