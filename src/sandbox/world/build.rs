//! Building the view in the child, between the clone and the exec: every
//! string prepared by rlp beforehand, only system calls here — no
//! allocation, no lock ([`crate::process::spawn`]).
//!
//! In the child's new mount namespace (nothing reaches the host's):
//!
//! 1. every mount made private;
//! 2. the host path of each bind opened (`O_PATH`), grants and the private
//!    folder one component at a time, refusing any symbolic link;
//! 3. an empty tmpfs mounted over the temporary folder, the view's root;
//! 4. its folders, the places of the binds, the links, and the read-only
//!    binds;
//! 5. the whole root made read-only, with no set-user-id, recursively, in
//!    one call (device files stay usable: `/dev/null`; Landlock lets the
//!    tool open no other device);
//! 6. the private folder and the grants bound (writable, no set-user-id,
//!    no devices);
//! 7. a fresh `/proc` (read-only) showing the tool its own processes only;
//! 8. `pivot_root` into the root, and the host's tree detached.

use std::ffi::{CStr, CString, c_int, c_uint};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};

use rustix::io::Errno;

use crate::sandbox::child::last_errno;
use crate::sandbox::world::view::{self, DEVICE_LINKS, Entry, Resolve, Shown};

/// `MOUNT_ATTR_RDONLY`, `MOUNT_ATTR_NOSUID`, `MOUNT_ATTR_NODEV` (linux/mount.h).
const ATTR_RDONLY: u64 = 0x1;
const ATTR_NOSUID: u64 = 0x2;
const ATTR_NODEV: u64 = 0x4;
/// `mount_setattr` (the same number on every architecture).
const SYS_MOUNT_SETATTR: libc::c_long = 442;

/// `struct mount_attr` (linux/mount.h, version 0).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// How a host path is opened in the child.
#[derive(Debug)]
struct Open {
    /// The whole path (followed through links).
    path: CString,
    /// Its components, for a walk that refuses links (`None`: follow).
    walk: Option<Vec<CString>>,
    /// Whether the call cannot go on without it (the private folder).
    required: bool,
}

/// One step of the view, in order.
#[derive(Debug)]
enum Step {
    /// A folder of the empty root.
    Folder(CString),
    /// A bind: the opened path `slot` at `target` (`folder`: made as a
    /// folder, else as a file, unless a bind already shows it). A
    /// read-only one is bound before the whole root is made read-only at
    /// once; a `late` one (read-write) after, with `attrs` of its own.
    Bind { slot: usize, target: CString, folder: bool, make: bool, late: bool, attrs: u64 },
    /// A symbolic link at `at` reading `target`.
    Link { target: CString, at: CString },
}

/// The view of one attempt, prepared in rlp for the child.
#[derive(Debug)]
pub(crate) struct ViewSteps {
    /// The temporary folder, over which the root is mounted.
    root: CString,
    opens: Vec<Open>,
    /// The descriptors the child opened (−1: missing), in rlp's memory.
    slots: Vec<AtomicI32>,
    steps: Vec<Step>,
    /// `<root>/proc`.
    proc: CString,
    /// The uid and gid lines of a user namespace (rlp not root).
    user: Option<(CString, CString)>,
}

/// The options of a view's `/proc`: `hidepid=invisible`, so that a process
/// shows only to those who may trace it — once the tool's Landlock domain
/// and its dropped capabilities apply, its own processes, whatever PID
/// namespace it is in, and not the machine's command lines (per mount since
/// Linux 5.8; the view needs 5.12 for `mount_setattr` anyway). The members
/// of the mount's `gid` see every process: it defaults to root's group,
/// which a tool run as root is in, and any group could be joined by a tool
/// that keeps `CAP_SETGID`. `gid=4294967295` is the invalid id `(gid_t)-1`,
/// which no process can be in (`setgroups` and `setgid` refuse it).
const PROC_OPTIONS: &CStr = c"hidepid=invisible,gid=4294967295";

/// `bytes` as a C string; a path with a NUL byte cannot be shown.
fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path holds a NUL byte"))
}

/// `path` below the view's root `root`.
fn under(root: &Path, path: &Path) -> io::Result<CString> {
    c_string(&[view::bytes(root), view::bytes(path)].concat())
}

impl ViewSteps {
    /// The steps that show `entries` in a root mounted over `root` (the
    /// temporary folder), `private` (the call's folder) among them, in a
    /// user namespace mapping rlp's own ids when `user` (rlp is not root).
    pub(crate) fn new(root: &Path, entries: &[Entry], private: &Path, user: bool) -> io::Result<ViewSteps> {
        if root == Path::new("/") {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "the temporary folder is `/`: set TMPDIR"));
        }
        let mut opens = Vec::new();
        let mut steps: Vec<Step> =
            view::folders(entries).iter().map(|f| under(root, f).map(Step::Folder)).collect::<io::Result<_>>()?;
        for entry in entries {
            match entry {
                Entry::Link { path, target } => {
                    steps.push(Step::Link { target: c_string(view::bytes(target))?, at: under(root, path)? });
                }
                Entry::Bind { path, shown, resolve } => {
                    let walk = match resolve {
                        Resolve::Follow => None,
                        Resolve::NoLinks => Some(
                            view::components(path)
                                .into_iter()
                                .map(|c| c_string(view::bytes(Path::new(c))))
                                .collect::<io::Result<_>>()?,
                        ),
                    };
                    opens.push(Open { path: c_string(view::bytes(path))?, walk, required: path == private });
                    let attrs = match shown {
                        Shown::ReadOnly => ATTR_RDONLY | ATTR_NOSUID,
                        Shown::ReadWrite => ATTR_NOSUID | ATTR_NODEV,
                    };
                    steps.push(Step::Bind {
                        slot: opens.len() - 1,
                        target: under(root, path)?,
                        folder: view::is_folder(path),
                        make: !view::inside_a_bind(entries, path),
                        late: *shown != Shown::ReadOnly,
                        attrs,
                    });
                }
            }
        }
        steps.push(Step::Folder(under(root, Path::new("/dev"))?));
        for (at, target) in DEVICE_LINKS {
            steps.push(Step::Link { target: c_string(target.as_bytes())?, at: under(root, Path::new(at))? });
        }
        let user = user.then(|| {
            // SAFETY: getuid and getgid have no failure mode.
            let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
            (CString::new(format!("{uid} {uid} 1")), CString::new(format!("{gid} {gid} 1")))
        });
        let user = match user {
            Some((Ok(uid), Ok(gid))) => Some((uid, gid)),
            _ => None,
        };
        Ok(ViewSteps {
            root: c_string(view::bytes(root))?,
            slots: opens.iter().map(|_| AtomicI32::new(-1)).collect(),
            opens,
            steps,
            proc: under(root, Path::new("/proc"))?,
            user,
        })
    }

    /// In the child: builds the view and moves into it (see the module
    /// docs). The first failure ends the child before it executes anything.
    pub(crate) fn build(&self) -> Result<(), Errno> {
        if let Some((uid, gid)) = &self.user {
            write_file(c"/proc/self/setgroups", b"deny")?;
            write_file(c"/proc/self/uid_map", uid.as_bytes())?;
            write_file(c"/proc/self/gid_map", gid.as_bytes())?;
        }
        mount(None, c"/", None, libc::MS_REC | libc::MS_PRIVATE, None)?;
        for (open, slot) in self.opens.iter().zip(&self.slots) {
            match open.open() {
                Ok(fd) => slot.store(fd, Ordering::SeqCst),
                Err(Errno::NOENT) if !open.required => {}
                Err(e) => return Err(e),
            }
        }
        mount(
            Some(c"tmpfs"),
            &self.root,
            Some(c"tmpfs"),
            libc::MS_NOSUID | libc::MS_NODEV,
            Some(c"mode=0755,size=64k,nr_inodes=4096"),
        )?;
        for step in &self.steps {
            self.prepare(step)?;
        }
        mkdir(&self.proc)?;
        set_attrs(&self.root, ATTR_RDONLY | ATTR_NOSUID, true)?;
        for step in &self.steps {
            if let Step::Bind { slot, target, late: true, attrs, .. } = step {
                self.bind(*slot, target, Some(*attrs))?;
            }
        }
        let proc_flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC | libc::MS_RDONLY;
        mount(Some(c"proc"), &self.proc, Some(c"proc"), proc_flags, Some(PROC_OPTIONS))?;
        pivot_into(&self.root)
    }

    /// The first pass of [`ViewSteps::build`], on the writable root: its
    /// folders, links and the places of binds, and the read-only binds.
    fn prepare(&self, step: &Step) -> Result<(), Errno> {
        match step {
            Step::Folder(path) => mkdir(path),
            Step::Link { target, at } => {
                // SAFETY: two C strings prepared by rlp.
                if unsafe { libc::symlink(target.as_ptr(), at.as_ptr()) } != 0 && last_errno() != Errno::EXIST {
                    return Err(last_errno());
                }
                Ok(())
            }
            Step::Bind { slot, target, folder, make, late, .. } => {
                // A place that cannot be made is not shown.
                if *make {
                    let _ = if *folder { mkdir(target) } else { touch(target) };
                }
                if *late { Ok(()) } else { self.bind(*slot, target, None) }
            }
        }
    }

    /// Binds the opened path `slot` at `target` (with `attrs` set on it and
    /// below); a path that was missing, or a place that could not be made,
    /// is not shown. Any other failure ends the child.
    fn bind(&self, slot: usize, target: &CStr, attrs: Option<u64>) -> Result<(), Errno> {
        let fd = self.slots[slot].load(Ordering::SeqCst);
        if fd < 0 {
            return Ok(());
        }
        let mut source = FdPath::new();
        match mount(Some(source.of(fd)), target, None, libc::MS_BIND | libc::MS_REC, None) {
            Err(Errno::NOENT) => return Ok(()),
            result => result?,
        }
        attrs.map_or(Ok(()), |attrs| set_attrs(target, attrs, true))
    }
}

impl Open {
    /// Opens the path (`O_PATH`): followed, or walked one component at a
    /// time without following any link (a link fails with `ELOOP`).
    fn open(&self) -> Result<c_int, Errno> {
        let flags = libc::O_PATH | libc::O_CLOEXEC;
        let Some(walk) = &self.walk else {
            // SAFETY: a C string prepared by rlp.
            let fd = unsafe { libc::open(self.path.as_ptr(), flags) };
            return if fd < 0 { Err(last_errno()) } else { Ok(fd) };
        };
        // SAFETY: a C string literal.
        let mut dir = unsafe { libc::open(c"/".as_ptr(), flags | libc::O_DIRECTORY) };
        if dir < 0 {
            return Err(last_errno());
        }
        for component in walk {
            // SAFETY: a descriptor this child opened and a C string prepared by rlp.
            let next = unsafe { libc::openat(dir, component.as_ptr(), flags | libc::O_NOFOLLOW) };
            let errno = last_errno();
            // SAFETY: closes the descriptor opened above (or at the start).
            unsafe { libc::close(dir) };
            if next < 0 {
                return Err(errno);
            }
            // SAFETY: `stat` is plain data, for which all zeros is a value.
            let mut stat: libc::stat = unsafe { std::mem::zeroed() };
            // SAFETY: fstat writes the struct on this frame.
            if unsafe { libc::fstat(next, &mut stat) } != 0 || stat.st_mode & libc::S_IFMT == libc::S_IFLNK {
                // SAFETY: the descriptor opened just above.
                unsafe { libc::close(next) };
                return Err(Errno::LOOP);
            }
            dir = next;
        }
        Ok(dir)
    }
}

/// `/proc/self/fd/<n>`, written on the stack.
struct FdPath {
    bytes: [u8; 32],
}

impl FdPath {
    fn new() -> FdPath {
        FdPath { bytes: [0; 32] }
    }

    /// The path of descriptor `fd` (a non-negative number).
    fn of(&mut self, fd: c_int) -> &CStr {
        const PREFIX: &[u8] = b"/proc/self/fd/";
        self.bytes[..PREFIX.len()].copy_from_slice(PREFIX);
        let mut digits = [0u8; 10];
        let mut count = 0;
        let mut rest = fd.unsigned_abs();
        loop {
            digits[count] = b'0' + (rest % 10) as u8;
            count += 1;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        for (i, digit) in digits[..count].iter().rev().enumerate() {
            self.bytes[PREFIX.len() + i] = *digit;
        }
        self.bytes[PREFIX.len() + count] = 0;
        CStr::from_bytes_until_nul(&self.bytes).unwrap_or(c"/")
    }
}

/// `mount(2)` with optional source, type and data.
fn mount(
    source: Option<&CStr>,
    target: &CStr,
    kind: Option<&CStr>,
    flags: libc::c_ulong,
    data: Option<&CStr>,
) -> Result<(), Errno> {
    let ptr = |s: Option<&CStr>| s.map_or(std::ptr::null(), CStr::as_ptr);
    // SAFETY: C strings prepared by rlp (or null where the call allows it).
    let result = unsafe { libc::mount(ptr(source), target.as_ptr(), ptr(kind), flags, ptr(data).cast()) };
    if result != 0 { Err(last_errno()) } else { Ok(()) }
}

/// `mount_setattr(2)`: sets `attrs` on the mount at `target` (and, when
/// `recursive`, on every mount below it).
fn set_attrs(target: &CStr, attrs: u64, recursive: bool) -> Result<(), Errno> {
    let attr = MountAttr { attr_set: attrs, attr_clr: 0, propagation: 0, userns_fd: 0 };
    let flags: c_uint = if recursive { libc::AT_RECURSIVE as c_uint } else { 0 };
    // SAFETY: a C string prepared by rlp and a struct on this frame whose
    // size is passed along.
    let result = unsafe {
        libc::syscall(
            SYS_MOUNT_SETATTR,
            libc::AT_FDCWD,
            target.as_ptr(),
            flags,
            &raw const attr,
            size_of::<MountAttr>(),
        )
    };
    if result != 0 { Err(last_errno()) } else { Ok(()) }
}

/// `mkdir(path, 0755)`; one that exists is fine.
fn mkdir(path: &CStr) -> Result<(), Errno> {
    // SAFETY: a C string prepared by rlp.
    if unsafe { libc::mkdir(path.as_ptr(), 0o755) } != 0 && last_errno() != Errno::EXIST {
        return Err(last_errno());
    }
    Ok(())
}

/// Makes an empty file at `path` (the place of a file bind).
fn touch(path: &CStr) -> Result<(), Errno> {
    // SAFETY: a C string prepared by rlp; the descriptor is closed at once.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC, 0o644) };
    if fd < 0 {
        return Err(last_errno());
    }
    // SAFETY: the descriptor opened above.
    unsafe { libc::close(fd) };
    Ok(())
}

/// Writes `bytes` to the file at `path` (a `/proc` control file).
fn write_file(path: &CStr, bytes: &[u8]) -> Result<(), Errno> {
    // SAFETY: a C string literal; the descriptor is closed before returning.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(last_errno());
        }
        let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        let errno = last_errno();
        libc::close(fd);
        if written != bytes.len() as isize {
            return Err(errno);
        }
    }
    Ok(())
}

/// Makes `root` the root of this mount namespace and detaches the host's
/// tree (`pivot_root(".", ".")`, then unmounting the old root under it).
fn pivot_into(root: &CStr) -> Result<(), Errno> {
    // SAFETY: chdir, pivot_root and umount2 on C strings prepared by rlp or
    // literals.
    unsafe {
        if libc::chdir(root.as_ptr()) != 0 {
            return Err(last_errno());
        }
        if libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c".".as_ptr()) != 0 {
            return Err(last_errno());
        }
        if libc::umount2(c".".as_ptr(), libc::MNT_DETACH) != 0 {
            return Err(last_errno());
        }
        if libc::chdir(c"/".as_ptr()) != 0 {
            return Err(last_errno());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_paths_are_written_in_place() {
        let mut path = FdPath::new();
        assert_eq!(path.of(0), c"/proc/self/fd/0");
        assert_eq!(path.of(7), c"/proc/self/fd/7");
        assert_eq!(path.of(1234567), c"/proc/self/fd/1234567");
    }
}
