//! What an exec tool may touch on the filesystem: the paths and rights of
//! its Landlock ruleset (docs/sandbox.md lists them).
//!
//! - read and execute: the system's program and library folders, the
//!   tool's executable and the interpreters its `#!` line names (with the
//!   installation each lives in, when that is outside the system folders),
//!   and the bundle folder;
//! - read only: the files of `/etc` a program needs (dynamic linker cache,
//!   locale, time zone, certificates, name service), `/proc` and the CPU
//!   topology in `/sys`;
//! - read and write (never execute): `/dev/null`, `/dev/zero` and
//!   `/dev/full`, the call's private folder, and the `fs:` grants the tool
//!   declares.
//!
//! Everything else is denied, for root too.

use std::ffi::OsStr;
use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use landlock::{ABI, Access as _, AccessFs, BitFlags, PathFd};
use rustix::fs::{Mode, OFlags};

/// The `PATH` a tool sees (where its program and interpreters are looked up).
pub(crate) const TOOL_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The Landlock ABI whose rights rlp asks for; older kernels get the subset
/// they know (best-effort compatibility of the `landlock` crate).
pub(crate) const TARGET_ABI: ABI = ABI::V7;

/// What a rule lets the tool do below a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// Read files, list folders, execute programs.
    ReadExec,
    /// Read files and list folders.
    Read,
    /// Read and write a device file (`/dev/null`).
    Device,
    /// Read, write, create, remove and rename; never execute, never make
    /// device nodes.
    ReadWrite,
}

impl Access {
    /// The Landlock rights (for a folder; the crate keeps the file rights
    /// of a rule on a file).
    pub(crate) fn rights(self) -> BitFlags<AccessFs> {
        match self {
            Access::ReadExec => AccessFs::from_read(TARGET_ABI),
            Access::Read => AccessFs::ReadFile | AccessFs::ReadDir,
            Access::Device => AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev,
            Access::ReadWrite => {
                AccessFs::from_all(TARGET_ABI)
                    & !(AccessFs::Execute | AccessFs::MakeChar | AccessFs::MakeBlock | AccessFs::IoctlDev)
            }
        }
    }
}

/// One rule: a path (a folder and what is below it, or a file) and its rights.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FsRule {
    /// The path.
    pub path: PathBuf,
    /// What the tool may do there.
    pub access: Access,
}

/// Folders of programs and libraries, read and executed by every tool.
pub(crate) const SYSTEM_PROGRAMS: &[&str] =
    &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/nix/store"];

/// What of `/etc` a program may need to run, read only: never all of
/// `/etc` (it holds `shadow`, keys and credentials that root could read).
pub(crate) const SYSTEM_CONFIG: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ld.so.preload",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/locale.alias",
    "/etc/locale.conf",
    "/etc/default/locale",
    // Certificates and OpenSSL's settings, never the private keys beside
    // them (`/etc/ssl/private`, `/etc/pki/tls/private`).
    "/etc/ssl/certs",
    "/etc/ssl/cert.pem",
    "/etc/ssl/openssl.cnf",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/pki/tls/certs",
    "/etc/pki/tls/cert.pem",
    "/etc/pki/tls/openssl.cnf",
    "/etc/pki/ca-trust/extracted",
    "/etc/crypto-policies",
    "/etc/resolv.conf",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/passwd",
    "/etc/group",
    "/etc/mime.types",
    "/etc/magic",
    "/etc/alternatives",
    "/etc/os-release",
    "/etc/inputrc",
];

/// What the kernel exposes that programs read about themselves.
const SYSTEM_KERNEL: &[&str] = &["/proc", "/sys/devices/system/cpu"];

/// Device files every program may read and write.
pub(crate) const SYSTEM_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// Device files every program may read.
pub(crate) const SYSTEM_RANDOM: &[&str] = &["/dev/random", "/dev/urandom"];

/// A rule every tool gets, with its path held open (`O_PATH`) for the life
/// of the process, so that a call's ruleset is built without a lookup.
#[derive(Debug)]
pub(crate) struct SystemRule {
    /// The rule.
    pub rule: FsRule,
    /// The path, open.
    pub fd: PathFd,
}

/// The rules every tool gets (those of its paths that exist here), found
/// and opened once.
pub(crate) fn system_rules() -> &'static [SystemRule] {
    static RULES: OnceLock<Vec<SystemRule>> = OnceLock::new();
    RULES.get_or_init(|| {
        let groups: [(&[&str], Access); 5] = [
            (SYSTEM_PROGRAMS, Access::ReadExec),
            (SYSTEM_CONFIG, Access::Read),
            (SYSTEM_KERNEL, Access::Read),
            (SYSTEM_DEVICES, Access::Device),
            (SYSTEM_RANDOM, Access::Read),
        ];
        groups
            .into_iter()
            .flat_map(|(paths, access)| paths.iter().map(move |p| FsRule { path: PathBuf::from(p), access }))
            .filter_map(|rule| PathFd::new(&rule.path).ok().map(|fd| SystemRule { rule, fd }))
            .collect()
    })
}

/// Whether `path` lies in one of the system program folders.
fn is_system_program(path: &Path) -> bool {
    SYSTEM_PROGRAMS.iter().any(|dir| path.starts_with(dir))
}

/// Opens the folder (or file) at the absolute `path` as `O_PATH`, one
/// component at a time, following no symbolic link: a link anywhere on the
/// way fails with `ELOOP`. How a grant is opened, so that a link a tool
/// planted inside a folder it may write never widens what it is granted.
pub(crate) fn open_without_links(path: &Path) -> io::Result<OwnedFd> {
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut dir = rustix::fs::open("/", flags | OFlags::DIRECTORY, Mode::empty())?;
    for component in path.components() {
        match component {
            Component::RootDir => {}
            Component::Normal(name) => {
                let next = rustix::fs::openat(&dir, name, flags, Mode::empty())?;
                if rustix::fs::fstat(&next)?.st_mode & libc::S_IFMT == libc::S_IFLNK {
                    return Err(io::Error::from_raw_os_error(libc::ELOOP));
                }
                dir = next;
            }
            _ => return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a plain absolute path")),
        }
    }
    Ok(dir)
}

/// The first symbolic link on the way to `path` (itself included), and
/// where it leads: what [`open_without_links`] refuses, for the message.
pub(crate) fn first_link(path: &Path) -> Option<(PathBuf, PathBuf)> {
    let mut ancestors: Vec<&Path> = path.ancestors().collect();
    ancestors.reverse();
    ancestors.into_iter().find_map(|at| {
        let meta = std::fs::symlink_metadata(at).ok()?;
        if !meta.file_type().is_symlink() {
            return None;
        }
        Some((at.to_path_buf(), std::fs::read_link(at).ok()?))
    })
}

/// Most `#!` interpreters followed, as the kernel does (it stops at 4).
const MAX_INTERPRETERS: usize = 4;
/// The longest `#!` line read (the kernel reads 256 bytes).
const SHEBANG_BYTES: usize = 256;

/// What a tool's program needs beyond the system folders.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ProgramRules {
    /// The executable itself and, for a script, each interpreter its `#!`
    /// line names, with that interpreter's library tree: where their
    /// symbolic links lead.
    pub rules: Vec<FsRule>,
    /// The executable and the interpreters as they are named (by the
    /// command, by a `#!` line), outside the system folders: the exec and
    /// the kernel open them there.
    pub named: Vec<PathBuf>,
    /// The symbolic links met on the way from a named path to what it
    /// leads to, past the first (`venv/bin/python3` → `~/.pyenv/…/python3`
    /// → `python3.11`), outside the system folders, each with its target:
    /// a view that shows the named link as it is (inside a granted folder)
    /// must show the rest of the chain too.
    pub links: Vec<(PathBuf, PathBuf)>,
}

/// The rules a tool's program needs beyond the system folders (see
/// [`ProgramRules`]).
pub(crate) fn program_rules(command: &Path) -> ProgramRules {
    let mut rules: Vec<FsRule> = Vec::new();
    let mut named: Vec<PathBuf> = Vec::new();
    let mut links: Vec<(PathBuf, PathBuf)> = Vec::new();
    let mut program = command.to_path_buf();
    for depth in 0..=MAX_INTERPRETERS {
        let real = std::fs::canonicalize(&program).unwrap_or_else(|_| program.clone());
        if !real.is_file() {
            break;
        }
        let mut found = Vec::new();
        // A system program named from elsewhere (a virtual environment's
        // `bin/python`) is shown there: it needs a rule of its own.
        if !is_system_program(&real) || !is_system_program(&program) {
            found.push(FsRule { path: real.clone(), access: Access::ReadExec });
        }
        if !is_system_program(&program) && !named.contains(&program) {
            named.push(program.clone());
            for link in link_chain(&program).into_iter().skip(1) {
                if !is_system_program(&link.0) && !links.contains(&link) {
                    links.push(link);
                }
            }
        }
        if depth > 0 {
            // Both where the interpreter was named (a virtual environment's
            // `bin/python`) and where it really is.
            for named in [&program, &real] {
                if !is_system_program(named) {
                    found.extend(library_rules(named));
                }
            }
        }
        for rule in found {
            if !rules.contains(&rule) {
                rules.push(rule);
            }
        }
        match interpreter(&real) {
            Some(next) => program = next,
            None => break,
        }
    }
    ProgramRules { rules, named, links }
}

/// Most links followed from one named path (the kernel's own limit is 40).
const MAX_LINK_HOPS: usize = 40;

/// The symbolic links from `path` on, each with its target as written,
/// until a path that is not a link (or a loop's worth of hops).
fn link_chain(path: &Path) -> Vec<(PathBuf, PathBuf)> {
    let mut chain = Vec::new();
    let mut at = path.to_path_buf();
    while chain.len() < MAX_LINK_HOPS {
        let is_link = std::fs::symlink_metadata(&at).is_ok_and(|meta| meta.file_type().is_symlink());
        let Some(target) = is_link.then(|| std::fs::read_link(&at).ok()).flatten() else { break };
        let next = at.parent().map_or_else(|| target.clone(), |folder| folder.join(&target));
        chain.push((at, target));
        at = next;
    }
    chain
}

/// What an interpreter in `<prefix>/bin` loads from its installation:
/// `<prefix>/lib` and `<prefix>/lib64` (read and execute), and a virtual
/// environment's `<prefix>/pyvenv.cfg` (read). Never the whole prefix: for
/// `~/.local/bin/tool` that would be much of a home folder. Each only where
/// it stays inside the installation after its symbolic links (`lib64` →
/// `lib` does; `lib` → `/` does not) and is [`trusted`]: a tool that could
/// plant an installation would otherwise be handed what its links name.
fn library_rules(interpreter: &Path) -> Vec<FsRule> {
    let prefix = interpreter
        .parent()
        .filter(|folder| folder.file_name() == Some(OsStr::new("bin")))
        .and_then(Path::parent)
        .filter(|prefix| *prefix != Path::new("/"));
    let Some(prefix) = prefix else { return Vec::new() };
    let Ok(real_prefix) = std::fs::canonicalize(prefix) else { return Vec::new() };
    [("lib", Access::ReadExec), ("lib64", Access::ReadExec), ("pyvenv.cfg", Access::Read)]
        .into_iter()
        .filter_map(|(name, access)| {
            let real = std::fs::canonicalize(prefix.join(name)).ok()?;
            (real.starts_with(&real_prefix) && trusted(&real)).then_some(FsRule { path: real, access })
        })
        .collect()
}

/// Whether the file or folder at `path` may be handed to a tool as part of
/// an interpreter's installation: owned by root or by the user running rlp,
/// and writable by no one else (its group or others).
fn trusted(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no failure mode.
    let me = unsafe { libc::geteuid() };
    std::fs::metadata(path).is_ok_and(|meta| (meta.uid() == 0 || meta.uid() == me) && meta.mode() & 0o022 == 0)
}

/// The interpreter a script's `#!` line names (`/usr/bin/env NAME` is
/// looked up in the tool's `PATH`), or `None` for a binary.
fn interpreter(program: &Path) -> Option<PathBuf> {
    let mut head = [0u8; SHEBANG_BYTES];
    let mut file = std::fs::File::open(program).ok()?;
    let read = file.read(&mut head).ok()?;
    let line = head[..read].strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())];
    let mut words = line.split(|b| b.is_ascii_whitespace()).filter(|w| !w.is_empty());
    let first = Path::new(OsStr::from_bytes(words.next()?));
    if first.file_name() != Some(OsStr::new("env")) {
        return Some(first.to_path_buf());
    }
    let name = words.find(|w| !w.starts_with(b"-"))?;
    TOOL_PATH.split(':').map(|dir| Path::new(dir).join(OsStr::from_bytes(name))).find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn executable(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn the_system_rules_hold_what_programs_need_and_never_all_of_etc() {
        let rules: Vec<&FsRule> = system_rules().iter().map(|r| &r.rule).collect();
        let find = |p: &str| rules.iter().find(|r| r.path == Path::new(p)).map(|r| r.access);
        assert_eq!(find("/usr"), Some(Access::ReadExec));
        assert_eq!(find("/etc/ld.so.cache"), Some(Access::Read));
        assert_eq!(find("/dev/null"), Some(Access::Device));
        assert_eq!(find("/etc"), None);
        assert!(rules.iter().all(|r| !r.path.starts_with("/etc/shadow")));
    }

    #[test]
    fn a_script_brings_its_interpreter_and_the_interpreters_library_tree() {
        let dir = tempfile::tempdir().unwrap();
        let real = |p: &Path| std::fs::canonicalize(p).unwrap();
        let python = dir.path().join("py/bin/python9");
        executable(&python, "\x7fELF");
        std::fs::create_dir_all(dir.path().join("py/lib/python9")).unwrap();
        std::fs::write(dir.path().join("py/secret.txt"), "no").unwrap();
        let tool = dir.path().join("tools/run.py");
        executable(&tool, &format!("#!{} -u\nprint(1)\n", python.display()));
        assert_eq!(
            program_rules(&tool).rules,
            vec![
                FsRule { path: real(&tool), access: Access::ReadExec },
                FsRule { path: real(&python), access: Access::ReadExec },
                FsRule { path: real(&dir.path().join("py/lib")), access: Access::ReadExec },
            ]
        );
        // A system interpreter needs nothing beyond the system rules.
        let shell = dir.path().join("tool.sh");
        executable(&shell, "#!/usr/bin/env sh\necho\n");
        assert_eq!(program_rules(&shell).rules, vec![FsRule { path: real(&shell), access: Access::ReadExec }]);
        assert!(interpreter(&shell).is_some_and(|sh| sh.ends_with("sh") && is_system_program(&sh)));
    }

    #[test]
    fn an_interpreter_never_brings_its_home_or_a_folder() {
        let dir = tempfile::tempdir().unwrap();
        let real = |p: &Path| std::fs::canonicalize(p).unwrap();
        // ~/bin/interp, ~/.local/bin/interp: the file, never the home.
        let home_interp = dir.path().join("home/bin/interp");
        executable(&home_interp, "\x7fELF");
        let tool = dir.path().join("tool");
        executable(&tool, &format!("#!{}\n", home_interp.display()));
        assert_eq!(
            program_rules(&tool).rules,
            vec![
                FsRule { path: real(&tool), access: Access::ReadExec },
                FsRule { path: real(&home_interp), access: Access::ReadExec },
            ]
        );
        // `#!/` names a folder: nothing is added (the exec fails anyway).
        executable(&tool, "#!/ x\n");
        assert_eq!(program_rules(&tool).rules, vec![FsRule { path: real(&tool), access: Access::ReadExec }]);
    }
}
