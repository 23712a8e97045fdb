//! What rlp undoes when a signal ends it: the calls' cgroups and the process
//! groups of the tools it runs are killed and the temporary files and private call folders it made
//! are removed, then the signal takes its default course, so rlp ends as it
//! would have without the handler.
//!
//! Every catchable signal whose default action ends the process is handled
//! ([`FATAL_SIGNALS`] and the real-time signals), except the faults a
//! program raises on itself (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP), whose
//! handlers belong to the Rust runtime and to debuggers. SIGPIPE is special:
//! rlp ignores the SIGPIPE its own write to a closed pipe raises (the write
//! fails with EPIPE, and the command stops quietly), and dies of one sent by
//! another process like of any other fatal signal. What SIGKILL leaves
//! behind, a later rlp sweeps ([`crate::leftovers`]).
//!
//! Work registers what must not outlive it with [`reserve_group`],
//! [`track_kill`], [`track_file`] and [`track_dir`]; the returned [`Tracked`] guard
//! unregisters on drop. The handler only makes async-signal-safe calls
//! (`open` and `write` of `cgroup.kill` through [`crate::kill::kill_cgroup`],
//! `kill` through [`crate::kill::kill_group`], `unlink`, `openat`,
//! `getdents64`, `close`, `rmdir`, `signal`, `raise`) on data prepared
//! beforehand.
//!
//! `rlp` installs the handler at start-up ([`install`]); a library user that
//! embeds the runtime may do the same. Without it, nothing is tracked.

use std::ffi::{CStr, CString, c_char};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, Ordering};

use rustix::fs::{AtFlags, CWD, Mode, OFlags, RawDir, SeekFrom, openat, seek, unlinkat};
use rustix::process::getpid;

use crate::kill::{kill_cgroup, kill_group};

/// Most process groups, files and folders tracked at once; past that, work
/// runs untracked (a tool is still killed at its timeout, a temporary file
/// is still removed on every ordinary error). Room for every call of
/// [`crate::runtime::MAX_CONCURRENT_CALLS`] and the files of the command.
pub(crate) const SLOTS: usize = 1024;

static INSTALLED: AtomicBool = AtomicBool::new(false);
/// Set first thing by the handler of a fatal signal (see [`settle`]).
static ENDING: AtomicBool = AtomicBool::new(false);
/// The exit code a stop (SIGTERM, SIGINT, SIGHUP) ends the process with,
/// once the handler has cleaned up, instead of the signal's own end; -1:
/// none (see [`on_stop_exit`]).
static STOP_CODE: AtomicI32 = AtomicI32::new(-1);
/// What the handler writes on stderr before it exits with [`STOP_CODE`].
static STOP_MESSAGE: AtomicPtr<c_char> = AtomicPtr::new(std::ptr::null_mut());
/// Process groups of running tools (0: a free slot).
static GROUPS: [AtomicI32; SLOTS] = [const { AtomicI32::new(0) }; SLOTS];
/// Temporary files being written, as C strings (null: a free slot).
static FILES: [AtomicPtr<c_char>; SLOTS] = [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];
/// Private temporary folders, removed when empty (after the files).
static DIRS: [AtomicPtr<c_char>; SLOTS] = [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];
/// The `cgroup.kill` files of running calls' cgroups, written `1`.
static KILLS: [AtomicPtr<c_char>; SLOTS] = [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];

/// The standard signals whose default action ends the process and that a
/// handler may catch (besides SIGPIPE, see the module docs).
pub(crate) const FATAL_SIGNALS: [libc::c_int; 16] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGABRT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
    libc::SIGTERM,
    libc::SIGSTKFLT,
    libc::SIGXCPU,
    libc::SIGXFSZ,
    libc::SIGVTALRM,
    libc::SIGPROF,
    libc::SIGIO,
    libc::SIGPWR,
    libc::SIGSYS,
];

/// Installs the handler for every fatal signal (see the module docs). A
/// signal that is ignored (`nohup`) stays ignored.
pub(crate) fn install() -> io::Result<()> {
    let realtime = libc::SIGRTMIN()..=libc::SIGRTMAX();
    for signal in FATAL_SIGNALS.into_iter().chain(realtime) {
        // SAFETY: sigaction with zeroed structs; the handler only reads
        // atomics and calls async-signal-safe functions.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &mut old) != 0 {
                return Err(io::Error::last_os_error());
            }
            if old.sa_sigaction == libc::SIG_IGN {
                continue;
            }
            set_handler(signal, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t, 0)?;
        }
    }
    // Rust ignores SIGPIPE before main; rlp catches it to tell who sent it.
    let pipe = on_pipe as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void);
    set_handler(libc::SIGPIPE, pipe as libc::sighandler_t, libc::SA_SIGINFO)?;
    INSTALLED.store(true, Ordering::SeqCst);
    Ok(())
}

/// Installs `handler` for `signal`, restarting interrupted system calls.
fn set_handler(signal: libc::c_int, handler: libc::sighandler_t, flags: libc::c_int) -> io::Result<()> {
    // SAFETY: sigaction with a zeroed struct filled in here; the handlers
    // only read atomics and call async-signal-safe functions.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler;
        action.sa_flags = flags | libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(signal, &action, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// SIGPIPE: one that rlp's own write raised (the kernel names rlp as the
/// sender) is ignored — the write fails with EPIPE instead; one that another
/// process sent is fatal.
extern "C" fn on_pipe(signal: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler.
    let sender = (!info.is_null()).then(|| unsafe { (*info).si_pid() });
    if sender != Some(getpid().as_raw_nonzero().get()) {
        on_signal(signal);
    }
}

extern "C" fn on_signal(signal: libc::c_int) {
    ENDING.store(true, Ordering::SeqCst);
    for path in KILLS.iter().filter_map(slot_path) {
        kill_cgroup(path);
    }
    for slot in &GROUPS {
        kill_group(slot.load(Ordering::SeqCst));
    }
    for path in FILES.iter().filter_map(slot_path) {
        let _ = unlinkat(CWD, path, AtFlags::empty());
    }
    for path in DIRS.iter().filter_map(slot_path) {
        remove_tree_at(CWD, path, 0);
    }
    let code = STOP_CODE.load(Ordering::SeqCst);
    if code >= 0 && [libc::SIGTERM, libc::SIGINT, libc::SIGHUP].contains(&signal) {
        if let Some(message) = slot_path(&STOP_MESSAGE) {
            let bytes = message.to_bytes();
            // SAFETY: write and _exit are async-signal-safe; the message
            // is a static C string.
            unsafe { libc::write(libc::STDERR_FILENO, bytes.as_ptr().cast(), bytes.len()) };
        }
        // SAFETY: as above.
        unsafe { libc::_exit(code) };
    }
    // SAFETY: signal and raise are async-signal-safe; the default action of
    // these signals ends the process.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
}

/// Makes a stop (SIGTERM, SIGINT or SIGHUP) end the process with exit code
/// `code` and `message` on stderr, once the handler has cleaned up, rather
/// than by the signal: for a command whose verdict is known as it runs
/// (a replay server: whether every call matched its recording). Called
/// again as the verdict changes.
pub(crate) fn on_stop_exit(code: u8, message: &'static CStr) {
    STOP_MESSAGE.store(message.as_ptr().cast_mut(), Ordering::SeqCst);
    STOP_CODE.store(i32::from(code), Ordering::SeqCst);
}

/// Returns at once, unless a fatal signal is being handled on another
/// thread: then it waits for the handler to end the process (the handler
/// re-raises the signal once the tools are killed and the files removed).
/// Called before the command prints its outcome and exits, so an interrupted
/// command always ends by its signal, never with an exit code of its own
/// (e.g. the error of the tool the handler just killed).
pub(crate) fn settle() {
    while ENDING.load(Ordering::SeqCst) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// The path a slot of [`FILES`], [`DIRS`] or [`KILLS`] holds, if any.
fn slot_path(slot: &AtomicPtr<c_char>) -> Option<&'static CStr> {
    let path = slot.load(Ordering::SeqCst);
    // SAFETY: a slot holds null or a C string from `CString::into_raw` that
    // is never freed (see `track_path`).
    (!path.is_null()).then(|| unsafe { CStr::from_ptr(path) })
}

/// Deepest folder nesting the handler removes; what lies deeper is left
/// for the sweep of a later run ([`crate::leftovers`]).
const MAX_REMOVE_DEPTH: u32 = 8;
/// How many times the handler re-reads a folder it is emptying.
const MAX_REMOVE_PASSES: u32 = 64;

/// Removes `name` (relative to the folder `dirfd`): a file, or a folder
/// with everything in it, never following a link. Only system calls, on a
/// buffer on the stack: safe in a signal handler.
fn remove_tree_at(dirfd: BorrowedFd<'_>, name: &CStr, depth: u32) {
    if unlinkat(dirfd, name, AtFlags::empty()).is_ok() {
        return;
    }
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let Ok(dir) = openat(dirfd, name, flags, Mode::empty()) else { return };
    if depth < MAX_REMOVE_DEPTH {
        let mut buffer = [MaybeUninit::<u8>::uninit(); 2048];
        for _ in 0..MAX_REMOVE_PASSES {
            if seek(&dir, SeekFrom::Start(0)).is_err() {
                break;
            }
            let mut entries = RawDir::new(dir.as_fd(), &mut buffer);
            let mut others = false;
            while let Some(Ok(entry)) = entries.next() {
                let entry_name = entry.file_name();
                if entry_name != c"." && entry_name != c".." {
                    others = true;
                    remove_tree_at(dir.as_fd(), entry_name, depth + 1);
                }
            }
            if !others {
                break;
            }
        }
    }
    drop(dir);
    let _ = unlinkat(dirfd, name, AtFlags::REMOVEDIR);
}

/// Unregisters what it tracks when dropped.
#[derive(Debug)]
pub(crate) struct Tracked {
    slot: Option<Slot>,
}

#[derive(Debug)]
enum Slot {
    Group(usize),
    Path(&'static [AtomicPtr<c_char>; SLOTS], usize),
}

impl Drop for Tracked {
    fn drop(&mut self) {
        match self.slot {
            Some(Slot::Group(i)) => GROUPS[i].store(0, Ordering::SeqCst),
            // The string stays allocated: the handler may be reading it on
            // another thread. A process writes few temporary files.
            Some(Slot::Path(slots, i)) => slots[i].store(std::ptr::null_mut(), Ordering::SeqCst),
            None => {}
        }
    }
}

/// What a reserved slot of [`GROUPS`] holds until its group exists (the
/// handler kills no group for it: see [`kill_group`]).
const RESERVED: i32 = -1;

/// Reserves a slot for the process group a child is about to lead; the
/// child fills it in itself ([`Tracked::group_slot`]) once it leads the
/// group and before it executes anything. The slot is taken before the
/// process exists, so a signal that another thread of rlp handles while
/// the spawning thread has yet to learn the child's pid still finds the
/// group. The handler kills the group until the guard is dropped.
pub(crate) fn reserve_group() -> Tracked {
    let slot = INSTALLED
        .load(Ordering::SeqCst)
        .then(|| {
            GROUPS.iter().position(|s| s.compare_exchange(0, RESERVED, Ordering::SeqCst, Ordering::SeqCst).is_ok())
        })
        .flatten();
    Tracked { slot: slot.map(Slot::Group) }
}

impl Tracked {
    /// The slot of [`reserve_group`] that the group leader stores its pid
    /// into (an atomic store: safe between a `clone(CLONE_VM)` and the
    /// exec). `None` when nothing is tracked.
    pub(crate) fn group_slot(&self) -> Option<&'static AtomicI32> {
        match self.slot {
            Some(Slot::Group(i)) => Some(&GROUPS[i]),
            _ => None,
        }
    }
}

/// Has the handler kill the cgroup whose `cgroup.kill` is at `path` until
/// the guard is dropped.
pub(crate) fn track_kill(path: &CStr) -> Tracked {
    track_path(&KILLS, Path::new(std::ffi::OsStr::from_bytes(path.to_bytes())))
}

/// Has the handler remove the file at `path` until the guard is dropped
/// (drop it once the file is renamed into place, or removed).
pub(crate) fn track_file(path: &Path) -> Tracked {
    track_path(&FILES, path)
}

/// Creates a new temporary file `<prefix><random>.tmp` (mode 0600) in `dir`,
/// tracked from before it exists: whenever a fatal signal arrives, no file
/// is left behind. Keep the guard until the file is renamed into place.
pub(crate) fn temp_file_in(dir: &Path, prefix: &str) -> io::Result<(tempfile::NamedTempFile, Tracked)> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut tracked = Tracked { slot: None };
    let file = tempfile::Builder::new().prefix(prefix).suffix(".tmp").make_in(dir, |path| {
        tracked = track_file(path);
        std::fs::OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).open(path)
    })?;
    Ok((file, tracked))
}

/// Has the handler remove the folder at `path`, with everything in it,
/// until the guard is dropped.
pub(crate) fn track_dir(path: &Path) -> Tracked {
    track_path(&DIRS, path)
}

fn track_path(slots: &'static [AtomicPtr<c_char>; SLOTS], path: &Path) -> Tracked {
    if !INSTALLED.load(Ordering::SeqCst) {
        return Tracked { slot: None };
    }
    let Ok(c_path) = CString::new(path.as_os_str().as_bytes()) else { return Tracked { slot: None } };
    let raw = c_path.into_raw();
    let slot = slots
        .iter()
        .position(|s| s.compare_exchange(std::ptr::null_mut(), raw, Ordering::SeqCst, Ordering::SeqCst).is_ok());
    if slot.is_none() {
        // SAFETY: `raw` came from `into_raw` above and was never shared.
        drop(unsafe { CString::from_raw(raw) });
    }
    Tracked { slot: slot.map(|i| Slot::Path(slots, i)) }
}
