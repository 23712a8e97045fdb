//! What rlp undoes when it is interrupted (SIGINT, SIGTERM, SIGHUP): the
//! process groups of the tools it runs are killed and the temporary files it
//! is writing are removed, then the signal takes its default course, so rlp
//! ends as it would have without the handler.
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

/// Installs the handler for SIGINT, SIGTERM and SIGHUP. A signal that is
/// ignored (`nohup`) stays ignored.
pub fn install() -> io::Result<()> {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
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
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(signal, &action, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    INSTALLED.store(true, Ordering::SeqCst);
    Ok(())
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
    for (slots, remove) in [(&FILES, libc::unlink as unsafe extern "C" fn(_) -> _), (&DIRS, libc::rmdir)] {
        for slot in slots {
            let path = slot.load(Ordering::SeqCst);
            if !path.is_null() {
                // SAFETY: unlink and rmdir are async-signal-safe; `path` is a
                // C string that is never freed (see `track_path`).
                unsafe {
                    remove(path);
                }
            }
        }
    }
    // SAFETY: signal and raise are async-signal-safe; the default action of
    // these signals ends the process.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
}

/// Unregisters what it tracks when dropped.
#[derive(Debug)]
pub struct Tracked {
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
pub fn track_group(pgid: i32) -> Tracked {
    let slot = INSTALLED
        .load(Ordering::SeqCst)
        .then(|| GROUPS.iter().position(|s| s.compare_exchange(0, pgid, Ordering::SeqCst, Ordering::SeqCst).is_ok()))
        .flatten();
    Tracked { slot: slot.map(Slot::Group) }
}

/// Has the handler remove the file at `path` until the guard is dropped
/// (drop it once the file is renamed into place, or removed).
pub fn track_file(path: &Path) -> Tracked {
    track_path(&FILES, path)
}

/// Has the handler remove the folder at `path` — if it is empty by then,
/// once tracked files are gone — until the guard is dropped.
pub fn track_dir(path: &Path) -> Tracked {
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
