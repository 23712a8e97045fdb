//! The confinement steps the child takes between the clone and the exec.
//!
//! They run in a `clone(CLONE_VM | CLONE_VFORK)` child that shares rlp's
//! memory ([`crate::process::spawn`]): only system calls on data prepared
//! beforehand, no allocation, no lock. In order:
//!
//! 1. the call's cgroups joined: the pids cgroup (`max_processes`) and
//!    the one its processes are killed with ([`crate::sandbox::lifetime`]),
//!    unless the child was made in that one;
//! 2. the tool's world: in the namespaces the clone made, the filesystem
//!    view built and entered ([`crate::sandbox::world`]);
//! 3. resource limits (core dumps off, `max_memory_bytes`,
//!    `max_processes` without a cgroup);
//! 4. capabilities: a tool run as root keeps root's files and loses the
//!    power to administer the machine (mount, load modules, trace, raise
//!    its limits, reconfigure the network). The few file-ownership
//!    capabilities it keeps are made ambient, and the locked securebit
//!    `SECBIT_NOROOT` stops the exec from granting uid 0 the rest (a
//!    handful of credential changes, where dropping each capability from
//!    the bounding set would take one per capability);
//! 5. `no_new_privs`: no set-user-id program or file capability can give
//!    the tool more rights;
//! 6. the Landlock ruleset;
//! 7. the seccomp filter, whose listener (for a supervised network) goes
//!    to rlp over a socket.

use std::ffi::{CStr, c_int};
use std::os::fd::{AsRawFd, BorrowedFd};

use rustix::io::Errno;

use crate::sandbox::seccomp::{Filter, send_fd};
use crate::sandbox::world::build::ViewSteps;

/// Capabilities a sandboxed tool keeps (when it has them at all, i.e. runs
/// as root): acting on files as their owner would, and changing its own
/// user and group (`no_new_privs` keeps that from gaining anything).
/// CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER, CAP_KILL,
/// CAP_SETGID, CAP_SETUID (linux/capability.h). Not CAP_FSETID (4): without
/// it, writing to a set-user-id file in a grant clears the bit.
const KEPT_CAPABILITIES: &[c_int] = &[0, 1, 2, 3, 5, 6, 7];
/// [`KEPT_CAPABILITIES`] by name, as the call frame records them.
pub(crate) const KEPT_CAPABILITY_NAMES: &[&str] =
    &["chown", "dac_override", "dac_read_search", "fowner", "kill", "setgid", "setuid"];

/// `SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
/// SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED` (linux/securebits.h): an exec gives
/// uid 0 no capability, and the tool can make no more ambient.
const SECURE_BITS: libc::c_ulong = (1 << 0) | (1 << 1) | (1 << 6) | (1 << 7);
/// `PR_SET_SECUREBITS`.
const PR_SET_SECUREBITS: c_int = 28;

/// One resource limit: the resource and its value (soft and hard).
pub(crate) type Limit = (libc::__rlimit_resource_t, u64);

/// What the child applies, borrowed from the parent's prepared
/// [`crate::sandbox::Confinement`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct ChildSteps<'a> {
    /// The `CLONE_NEW*` flags the child is made with (0: none).
    pub namespaces: c_int,
    /// The call cgroup the child is made in (its folder, open), if any.
    pub made_in: Option<BorrowedFd<'a>>,
    /// The `cgroup.procs` files of the call's pids cgroup and of the cgroup
    /// its processes are killed with (when it is not made in that one),
    /// joined first.
    pub cgroups: [Option<&'a CStr>; 2],
    /// The filesystem view, built in the new namespaces.
    pub view: Option<&'a ViewSteps>,
    /// Whether a tool run as root keeps root's file rights
    /// ([`KEPT_CAPABILITIES`]); otherwise it keeps no capability at all.
    pub keep_file_rights: bool,
    /// Resource limits.
    pub limits: &'a [Limit],
    /// The Landlock ruleset, if the kernel has Landlock.
    pub landlock: Option<BorrowedFd<'a>>,
    /// The seccomp filter, if the kernel can load one.
    pub filter: Option<&'a Filter>,
    /// Where the listener of a supervised filter is sent.
    pub listener_to: Option<BorrowedFd<'a>>,
}

/// `struct __user_cap_header_struct` for capget/capset.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: c_int,
}

/// `struct __user_cap_data_struct` (two of them for version 3).
#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `_LINUX_CAPABILITY_VERSION_3`.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;
/// `landlock_restrict_self` (the same number on every architecture).
const SYS_LANDLOCK_RESTRICT_SELF: libc::c_long = 446;

/// `landlock_add_rule` (the same number on every architecture).
const SYS_LANDLOCK_ADD_RULE: libc::c_long = 445;
/// `LANDLOCK_RULE_PATH_BENEATH`.
const RULE_PATH_BENEATH: c_int = 1;
/// `LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR` (ABI 1).
const READ_FILES_AND_FOLDERS: u64 = (1 << 2) | (1 << 3);

/// `struct landlock_path_beneath_attr` (packed, as the kernel declares it).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: c_int,
}

/// Lets the tool read the `/proc` its view mounted fresh (rlp's rule for
/// `/proc` names the host's, which the view does not show).
fn allow_fresh_proc(ruleset: BorrowedFd<'_>) -> Result<(), Errno> {
    // SAFETY: open on a literal; the rule is read from this frame; the
    // descriptor is closed before returning.
    unsafe {
        let proc = libc::open(c"/proc".as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC);
        if proc < 0 {
            return Err(last_errno());
        }
        let rule = PathBeneathAttr { allowed_access: READ_FILES_AND_FOLDERS, parent_fd: proc };
        let added = libc::syscall(SYS_LANDLOCK_ADD_RULE, ruleset.as_raw_fd(), RULE_PATH_BENEATH, &raw const rule, 0);
        let errno = last_errno();
        libc::close(proc);
        if added != 0 {
            return Err(errno);
        }
    }
    Ok(())
}

/// The errno of the last failed call.
///
/// Never panics: should errno read 0 it is `EIO` (a child between the clone
/// and the exec shares rlp's memory and must not unwind).
pub(crate) fn last_errno() -> Errno {
    match std::io::Error::last_os_error().raw_os_error() {
        Some(raw) if raw > 0 => Errno::from_raw_os_error(raw),
        _ => Errno::IO,
    }
}

/// Moves the calling process into the cgroup whose `cgroup.procs` is
/// `procs` (writing `0` names the writer).
pub(crate) fn join_cgroup(procs: &CStr) -> Result<(), Errno> {
    // SAFETY: open, write and close on a C string and a byte string that
    // outlive the calls; the descriptor is closed before returning.
    unsafe {
        let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(last_errno());
        }
        let written = libc::write(fd, b"0".as_ptr().cast(), 1);
        let errno = last_errno();
        libc::close(fd);
        if written != 1 {
            return Err(errno);
        }
    }
    Ok(())
}

impl ChildSteps<'_> {
    /// The flags `clone` makes the child's namespaces with.
    pub(crate) fn clone_flags(&self) -> c_int {
        self.namespaces
    }

    /// Applies every step (see the module docs); the first failure ends
    /// the child before it executes anything.
    pub(crate) fn apply(&self) -> Result<(), Errno> {
        for procs in self.cgroups.into_iter().flatten() {
            join_cgroup(procs)?;
        }
        if let Some(view) = self.view {
            view.build()?;
        }
        for &(resource, value) in self.limits {
            let limit = libc::rlimit { rlim_cur: value, rlim_max: value };
            // SAFETY: setrlimit reads the struct on this frame.
            if unsafe { libc::setrlimit(resource, &limit) } != 0 {
                return Err(last_errno());
            }
        }
        self.drop_capabilities()?;
        // SAFETY: prctl with integer arguments only.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(last_errno());
        }
        if let (Some(ruleset), Some(_)) = (self.landlock, self.view) {
            allow_fresh_proc(ruleset)?;
        }
        if let Some(ruleset) = self.landlock {
            // SAFETY: a raw system call on a descriptor the parent keeps open
            // until the child has executed the tool.
            if unsafe { libc::syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset.as_raw_fd(), 0) } != 0 {
                return Err(last_errno());
            }
        }
        if let Some(filter) = self.filter
            && let Some(listener) = filter.install()?
        {
            let sent = match self.listener_to {
                Some(socket) => send_fd(socket, listener),
                None => Err(Errno::INVAL),
            };
            // SAFETY: the listener was just made in this child and is closed
            // once; rlp holds its own copy (in flight on the socket).
            unsafe { libc::close(listener) };
            sent?;
        }
        Ok(())
    }

    /// Leaves the tool [`KEPT_CAPABILITIES`] at most (none unless
    /// `keep_file_rights`), through the exec (see the module docs). Without
    /// capabilities (not root, in no user namespace), there is nothing to
    /// lose and nothing changes.
    fn drop_capabilities(&self) -> Result<(), Errno> {
        let mut header = CapHeader { version: CAPABILITY_VERSION_3, pid: 0 };
        let mut data = [CapData { effective: 0, permitted: 0, inheritable: 0 }; 2];
        let kept_mask = match self.keep_file_rights {
            true => KEPT_CAPABILITIES.iter().fold(0u32, |mask, &cap| mask | (1 << cap)),
            false => 0,
        };
        // SAFETY: capget, capset and prctl read and write the structs on this
        // frame (laid out as the kernel's version-3 structs) or take integers.
        unsafe {
            if libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) != 0 {
                return Err(last_errno());
            }
            if data.iter().all(|d| d.permitted == 0) {
                return Ok(());
            }
            let kept = data[0].permitted & kept_mask;
            data[0].inheritable = kept;
            data[1].inheritable = 0;
            if libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) != 0 {
                return Err(last_errno());
            }
            if libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 {
                return Err(last_errno());
            }
            for &cap in KEPT_CAPABILITIES.iter().filter(|&&cap| kept & (1 << cap) != 0) {
                if libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_RAISE, cap, 0, 0) != 0 {
                    return Err(last_errno());
                }
            }
            if libc::prctl(PR_SET_SECUREBITS, SECURE_BITS, 0, 0, 0) != 0 {
                return Err(last_errno());
            }
        }
        Ok(())
    }
}
