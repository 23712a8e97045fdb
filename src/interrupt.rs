//! What rlp undoes when a signal ends it: the process groups of the tools it
//! runs are killed and the temporary files and private call folders it made
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
//! Work registers what must not outlive it with [`track_group`],
//! [`track_file`] and [`track_dir`]; the returned [`Tracked`] guard
//! unregisters on drop. The handler only makes async-signal-safe calls
//! (`kill`, `unlink`, `rmdir`, `signal`, `raise`) on data prepared beforehand.
//!
//! `rlp` installs the handler at start-up ([`install`]); a library user that
//! embeds the runtime may do the same. Without it, nothing is tracked.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, Ordering};

/// Most process groups and files tracked at once; past that, work runs
/// untracked (a tool is still killed at its timeout, a temporary file is
/// still removed on every ordinary error).
const SLOTS: usize = 64;

static INSTALLED: AtomicBool = AtomicBool::new(false);
/// Process groups of running tools (0: a free slot).
static GROUPS: [AtomicI32; SLOTS] = [const { AtomicI32::new(0) }; SLOTS];
/// Temporary files being written, as C strings (null: a free slot).
static FILES: [AtomicPtr<libc::c_char>; SLOTS] = [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];
/// Private temporary folders, removed when empty (after the files).
static DIRS: [AtomicPtr<libc::c_char>; SLOTS] = [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];

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
    // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler;
    // getpid is async-signal-safe.
    let own = !info.is_null() && unsafe { (*info).si_pid() == libc::getpid() };
    if !own {
        on_signal(signal);
    }
}

extern "C" fn on_signal(signal: libc::c_int) {
    for slot in &GROUPS {
        let pgid = slot.load(Ordering::SeqCst);
        if pgid > 1 {
            // SAFETY: kill is async-signal-safe; a negative pid names a group.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
    }
    for slot in &FILES {
        let path = slot.load(Ordering::SeqCst);
        if !path.is_null() {
            // SAFETY: unlink is async-signal-safe; `path` is a C string that
            // is never freed (see `track_path`).
            unsafe {
                libc::unlink(path);
            }
        }
    }
    for slot in &DIRS {
        let path = slot.load(Ordering::SeqCst);
        if !path.is_null() {
            // SAFETY: `path` is a C string that is never freed (see `track_path`).
            unsafe { remove_tree_at(libc::AT_FDCWD, path, 0) };
        }
    }
    // SAFETY: signal and raise are async-signal-safe; the default action of
    // these signals ends the process.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
}

/// Deepest folder nesting the handler removes; what lies deeper is left
/// for the sweep of a later run ([`crate::leftovers`]).
const MAX_REMOVE_DEPTH: u32 = 8;
/// How many times the handler re-reads a folder it is emptying.
const MAX_REMOVE_PASSES: u32 = 64;

/// Removes `name` (relative to the folder `dirfd`): a file, or a folder
/// with everything in it, never following a link. Only system calls, on a
/// buffer on the stack: safe in a signal handler.
///
/// # Safety
///
/// `name` must be a NUL-terminated string that stays valid for the call.
unsafe fn remove_tree_at(dirfd: libc::c_int, name: *const libc::c_char, depth: u32) {
    // SAFETY (whole body): unlinkat, openat, lseek, getdents64 and close are
    // async-signal-safe system calls; every pointer passed points into
    // `name` (valid by contract) or into `buffer`, which outlives the calls,
    // and each dirent read lies within the bytes getdents64 filled in.
    unsafe {
        if libc::unlinkat(dirfd, name, 0) == 0 {
            return;
        }
        let fd = libc::openat(dirfd, name, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC);
        if fd < 0 {
            return;
        }
        if depth < MAX_REMOVE_DEPTH {
            // u64 elements: dirent64 records are 8-byte aligned.
            let mut buffer = [0u64; 256];
            let size = std::mem::size_of_val(&buffer);
            for _ in 0..MAX_REMOVE_PASSES {
                libc::lseek(fd, 0, libc::SEEK_SET);
                let read = libc::syscall(libc::SYS_getdents64, fd, buffer.as_mut_ptr(), size);
                let Ok(read) = usize::try_from(read) else { break };
                let base = buffer.as_ptr().cast::<u8>();
                let mut offset = 0;
                let mut others = false;
                while offset < read {
                    let entry = base.add(offset).cast::<libc::dirent64>();
                    let entry_name = (*entry).d_name.as_ptr();
                    let dot = *entry_name == b'.' as libc::c_char
                        && (*entry_name.add(1) == 0
                            || (*entry_name.add(1) == b'.' as libc::c_char && *entry_name.add(2) == 0));
                    if !dot {
                        others = true;
                        remove_tree_at(fd, entry_name, depth + 1);
                    }
                    offset += usize::from((*entry).d_reclen);
                }
                if !others {
                    break;
                }
            }
        }
        libc::close(fd);
        libc::unlinkat(dirfd, name, libc::AT_REMOVEDIR);
    }
}

/// Unregisters what it tracks when dropped.
#[derive(Debug)]
pub(crate) struct Tracked {
    slot: Option<Slot>,
}

#[derive(Debug)]
enum Slot {
    Group(usize),
    Path(&'static [AtomicPtr<libc::c_char>; SLOTS], usize),
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

/// Has the handler kill the process group `pgid` until the guard is dropped.
pub(crate) fn track_group(pgid: i32) -> Tracked {
    let slot = INSTALLED
        .load(Ordering::SeqCst)
        .then(|| GROUPS.iter().position(|s| s.compare_exchange(0, pgid, Ordering::SeqCst, Ordering::SeqCst).is_ok()))
        .flatten();
    Tracked { slot: slot.map(Slot::Group) }
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

fn track_path(slots: &'static [AtomicPtr<libc::c_char>; SLOTS], path: &Path) -> Tracked {
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
