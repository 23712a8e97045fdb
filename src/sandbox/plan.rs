//! The sandbox of one exec tool: worked out before its call is recorded (so
//! the call frame says what applies), then made anew for each attempt
//! around that attempt's private folder.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Once, OnceLock};

use landlock::{
    Access as _, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope,
};
use rustix::net::{AddressFamily, SocketFlags, SocketType, socketpair};

use crate::bundle::capability::{Capability, NetTarget, expand_home};
use crate::bundle::pointer::Pointer;
use crate::bundle::servers::Server;
use crate::bundle::tools::Tool;
use crate::event::SandboxRecord;
use crate::sandbox::SandboxMode;
use crate::sandbox::child::{ChildSteps, KEPT_CAPABILITY_NAMES, Limit};
use crate::sandbox::fs::{Access, FsRule, TARGET_ABI, first_link, open_without_links, program_rules, system_rules};
use crate::sandbox::kernel_cache::{self, KernelCache};
use crate::sandbox::lifetime::{self, KillCgroup, Lifetime};
use crate::sandbox::net::{Allowlist, Supervisor};
use crate::sandbox::pids::{self, PidsCgroup};
use crate::sandbox::seccomp::{self, Filter, NetFilter};
use crate::sandbox::world::build::ViewSteps;
use crate::sandbox::world::{self, Namespaces, view};

/// What a tool is granted, from its tools.json entry and the policy.
#[derive(Clone, Debug)]
pub(crate) struct Grants<'a> {
    /// The executable (absolute).
    pub command: &'a Path,
    /// The bundle folder (read only).
    pub bundle: &'a Path,
    /// The `fs:` directories the tool declares (read-write), `~/…` expanded.
    pub fs: Vec<PathBuf>,
    /// The `net:` targets the tool declares.
    pub net: Vec<NetTarget>,
    /// `max_memory_bytes`.
    pub max_memory_bytes: Option<u64>,
    /// `max_processes`.
    pub max_processes: Option<u64>,
}

impl<'a> Grants<'a> {
    /// What `tool` (run as `command`, from the bundle at `bundle`) declares:
    /// by the time it runs, every declared capability is granted.
    pub(crate) fn of(tool: &Tool, command: &'a Path, bundle: &'a Path) -> Grants<'a> {
        let mut grants = Grants::declared(&tool.capabilities, command, bundle);
        grants.max_memory_bytes = tool.max_memory_bytes;
        grants.max_processes = tool.max_processes;
        grants
    }

    /// What an MCP server on stdio (run as `command`) declares in its
    /// `capabilities`: by the time it starts, each of its tools was exposed,
    /// and they declare the same. Limits are per call, not per server.
    pub(crate) fn of_server(server: &Server, command: &'a Path, bundle: &'a Path) -> Grants<'a> {
        Grants::declared(&server.capabilities, command, bundle)
    }

    /// The `fs:` and `net:` grants of `declared`, without limits.
    fn declared(declared: &[(Pointer, Capability)], command: &'a Path, bundle: &'a Path) -> Grants<'a> {
        let declared = || declared.iter().map(|(_, cap)| cap);
        Grants {
            command,
            bundle,
            fs: declared()
                // A `~/…` grant without a usable home is not granted
                // (`fs_covers`), so the tool is not exposed and never runs.
                .filter_map(|cap| if let Capability::Fs(dir) = cap { expand_home(dir).ok() } else { None })
                .collect(),
            net: declared()
                .filter_map(|cap| if let Capability::Net(t) = cap { Some(t.clone()) } else { None })
                .collect(),
            max_memory_bytes: None,
            max_processes: None,
        }
    }
}

/// The network a tool gets.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Network {
    /// No Internet socket at all.
    None,
    /// TCP to the granted hosts and ports only (connects checked by rlp).
    Allow(Vec<NetTarget>),
    /// Unconfined (sandbox off, or the kernel cannot check connects).
    Unrestricted,
}

/// What the kernel offers, probed once per process.
#[derive(Clone, Debug)]
struct Kernel {
    /// The Landlock ABI (0: none).
    landlock_abi: u32,
    /// seccomp filters can be loaded.
    filter: bool,
    /// seccomp user notification works (rlp can check connects).
    user_notif: bool,
    /// The namespaces a tool can be given, or why none can.
    world: Result<Namespaces, String>,
    /// Calls can have a cgroup to kill.
    kill_cgroup: bool,
}

/// What the kernel offers, probed once per process.
static KERNEL: OnceLock<Kernel> = OnceLock::new();

fn kernel() -> &'static Kernel {
    KERNEL.get_or_init(|| probe(&Direct::now()))
}

/// What a process finds without a child: cheap enough to ask every time,
/// and part of the context a kept verdict is valid in.
struct Direct {
    landlock_abi: u32,
    seccomp: seccomp::Availability,
}

impl Direct {
    fn now() -> Direct {
        Direct { landlock_abi: landlock_abi(), seccomp: seccomp::available() }
    }

    /// As the cache's key covers it.
    fn describe(&self) -> String {
        let Direct { landlock_abi, seccomp } = self;
        format!("landlock {landlock_abi} seccomp {} {}", seccomp.filter, seccomp.user_notif)
    }

    /// The kernel, with what the children of the probe found.
    fn with(&self, kill_cgroup: bool, world: Result<Namespaces, String>) -> Kernel {
        Kernel {
            landlock_abi: self.landlock_abi,
            filter: self.seccomp.filter,
            user_notif: self.seccomp.user_notif,
            world,
            kill_cgroup,
        }
    }
}

/// Probes the kernel: a probe cgroup, then a view built in a child.
fn probe(direct: &Direct) -> Kernel {
    let kill_cgroup = lifetime::cgroup_available();
    direct.with(kill_cgroup, tool_world(kill_cgroup, direct.landlock_abi, world::support))
}

/// The kernel as a verdict kept in `cache` for this context says, or as
/// probed (and then kept, where everything was found).
fn cached_or_probed(cache: &KernelCache) -> Kernel {
    let direct = Direct::now();
    let key = kernel_cache::context_key(
        &direct.describe(),
        &world::root_mount_point(),
        &format!("{:?}", view::system_entries()),
    );
    let Some(key) = key else { return probe(&direct) };
    let complete = |namespaces: &Namespaces| complete_with_a_cgroup(*namespaces, direct.landlock_abi);
    if let Some(kept) = cache.load(&key)
        && complete(&kept.namespaces)
        && lifetime::adopt(kept.entry)
    {
        return direct.with(true, Ok(kept.namespaces));
    }
    let kernel = probe(&direct);
    if let (true, Ok(namespaces), Some(entry)) = (kernel.kill_cgroup, &kernel.world, lifetime::entry())
        && complete(namespaces)
    {
        cache.store(&key, kernel_cache::Verdict { entry, namespaces: *namespaces });
    }
    kernel
}

/// Whether `namespaces`, beside a call cgroup, are all a tool needs under
/// Landlock ABI `landlock_abi`: the PID namespace where signals need it. A
/// verdict short of that is never kept, nor trusted when read.
fn complete_with_a_cgroup(namespaces: Namespaces, landlock_abi: u32) -> bool {
    namespaces.pid || !needs_pid_namespace(true, landlock_abi)
}

/// The first Landlock ABI that keeps a tool's signals inside its sandbox
/// (Linux 6.12).
const SIGNAL_SCOPE_ABI: u32 = 6;

/// Whether tools get a PID namespace: where no call cgroup can end what
/// they start, and where Landlock cannot keep their signals in (the
/// namespace then does: no process outside it can be named). A call
/// cgroup with scoped signals keeps the tool's pids the machine's.
fn needs_pid_namespace(kill_cgroup: bool, landlock_abi: u32) -> bool {
    !kill_cgroup || landlock_abi < SIGNAL_SCOPE_ABI
}

/// The namespaces tools get, as `support` (the probe) finds them for a
/// PID namespace or not. Where one was wanted only to keep signals in and
/// cannot be made (`user.max_pid_namespaces`, nesting), the call cgroup
/// and the view go on without it, and the signal gap is recorded.
fn tool_world(
    kill_cgroup: bool,
    landlock_abi: u32,
    support: impl Fn(bool) -> Result<Namespaces, String>,
) -> Result<Namespaces, String> {
    let pid = needs_pid_namespace(kill_cgroup, landlock_abi);
    match support(pid) {
        Err(_) if pid && kill_cgroup => support(false),
        found => found,
    }
}

/// Probes what the kernel offers (once per process) ahead of the first
/// plan, or takes the verdict `cache` keeps for this context
/// ([`crate::sandbox::kernel_cache`]).
pub(crate) fn probe_kernel(cache: &KernelCache) {
    KERNEL.get_or_init(|| cached_or_probed(cache));
}

/// `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`: the
/// ABI version, or 0 without Landlock.
fn landlock_abi() -> u32 {
    const SYS_LANDLOCK_CREATE_RULESET: libc::c_long = 444;
    const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
    // SAFETY: a null attribute pointer with size 0 and the version flag
    // only asks the kernel for a number.
    let abi = unsafe {
        libc::syscall(SYS_LANDLOCK_CREATE_RULESET, std::ptr::null::<u8>(), 0usize, LANDLOCK_CREATE_RULESET_VERSION)
    };
    u32::try_from(abi).unwrap_or(0)
}

/// The sandbox of one tool (see the module docs).
#[derive(Debug)]
pub(crate) struct SandboxPlan {
    mode: SandboxMode,
    kernel: Kernel,
    /// Read (and execute) rules: system, program, bundle.
    rules: Vec<FsRule>,
    /// The program and its interpreters as named (shown there too).
    named: Vec<PathBuf>,
    /// The links between a named path and what it leads to (shown as links).
    links: Vec<(PathBuf, PathBuf)>,
    /// The bundle folder.
    bundle: PathBuf,
    /// Read-write grants, as declared (never through a symbolic link).
    writable: Vec<PathBuf>,
    /// A grant that passes through a symbolic link: the call is refused.
    linked_grant: Option<String>,
    /// The namespaces and filesystem view the tool gets (none: the host's
    /// filesystem through Landlock only).
    namespaces: Option<Namespaces>,
    /// How the call's processes end with it.
    lifetime: Lifetime,
    network: Network,
    limits: Vec<Limit>,
    /// `max_processes`, when a pids cgroup enforces it.
    pids_cgroup: Option<u64>,
    /// What the kernel cannot enforce, and whether each one matters for
    /// `required` (a core guarantee) or only narrows the defence.
    gaps: Vec<(String, bool)>,
    /// What the call frame records (boxed: a plan travels in every call's
    /// plan, and this is most of its size).
    record: Box<SandboxRecord>,
}

impl SandboxPlan {
    /// The sandbox `grants` get under `mode` on this kernel.
    pub(crate) fn new(mode: SandboxMode, grants: &Grants<'_>) -> SandboxPlan {
        SandboxPlan::on(kernel().clone(), mode, grants)
    }

    /// The sandbox `grants` get under `mode` on a kernel offering `kernel`.
    fn on(kernel: Kernel, mode: SandboxMode, grants: &Grants<'_>) -> SandboxPlan {
        let confined = mode != SandboxMode::Off;
        let mut rules = Vec::new();
        let mut named = Vec::new();
        let mut links = Vec::new();
        let mut writable = Vec::new();
        let mut linked_grant = None;
        let mut namespaces = None;
        let mut lifetime = Lifetime::Sweep;
        let mut limits = Vec::new();
        let mut network = Network::Unrestricted;
        let mut gaps = Vec::new();
        let mut pids_cgroup = None;
        if confined {
            let program = program_rules(grants.command);
            rules.extend(program.rules);
            named = program.named;
            links = program.links;
            rules.push(FsRule { path: grants.bundle.to_path_buf(), access: Access::ReadExec });
            // Granted as declared, never through a symbolic link: one a tool
            // planted in a folder it may write would widen the grant.
            writable = grants.fs.clone();
            linked_grant = writable.iter().find_map(|dir| {
                let (link, target) = first_link(dir)?;
                Some(format!(
                    "the fs grant `{}` passes through the symbolic link `{}` (→ `{}`): grants are never followed through links",
                    dir.display(),
                    link.display(),
                    target.display()
                ))
            });
            namespaces = kernel.world.clone().ok();
            lifetime = match namespaces {
                _ if kernel.kill_cgroup => Lifetime::Cgroup,
                Some(Namespaces { pid: true, .. }) => Lifetime::PidNamespace,
                _ => Lifetime::Sweep,
            };
            network = if grants.net.is_empty() { Network::None } else { Network::Allow(grants.net.clone()) };
            limits.push((libc::RLIMIT_CORE, 0));
            limits.extend(grants.max_memory_bytes.map(|bytes| (libc::RLIMIT_AS, bytes)));
            // A pids cgroup bounds the tool's own processes, root's too; where
            // there is none, RLIMIT_NPROC bounds the user's.
            pids_cgroup = grants.max_processes.filter(|_| pids::available());
            if pids_cgroup.is_none() {
                limits.extend(grants.max_processes.map(|count| (libc::RLIMIT_NPROC, count)));
            }
            gaps = kernel_gaps(&kernel, &network, grants.max_processes.is_some() && pids_cgroup.is_none());
            if matches!(network, Network::Allow(_)) && !kernel.user_notif {
                network = Network::Unrestricted;
            }
        }
        let record = Box::new(SandboxRecord {
            mode: mode.to_string(),
            confined: confined && (kernel.landlock_abi > 0 || kernel.filter),
            landlock_abi: if confined { kernel.landlock_abi } else { 0 },
            read: if confined {
                std::iter::once("system".to_string())
                    .chain(rules.iter().map(|r| r.path.display().to_string()))
                    .collect()
            } else {
                Vec::new()
            },
            write: if confined {
                std::iter::once("$TMPDIR".to_string()).chain(writable.iter().map(|p| p.display().to_string())).collect()
            } else {
                Vec::new()
            },
            net: match &network {
                Network::None => "none",
                Network::Allow(_) => "allowlist",
                Network::Unrestricted => "unrestricted",
            }
            .to_string(),
            net_allow: match &network {
                Network::Allow(targets) => targets.iter().map(NetTarget::to_string).collect(),
                _ => Vec::new(),
            },
            seccomp: confined && kernel.filter,
            max_memory_bytes: grants.max_memory_bytes.filter(|_| confined),
            max_processes: grants.max_processes.filter(|_| confined),
            gaps: gaps.iter().map(|(gap, _)| gap.clone()).collect(),
            namespaces: namespaces.map(Namespaces::names).unwrap_or_default(),
            processes: confined.then(|| lifetime.as_str().to_string()),
            identity: confined.then(identity),
        });
        let bundle = grants.bundle.to_path_buf();
        SandboxPlan {
            mode,
            kernel,
            rules,
            named,
            links,
            bundle,
            writable,
            linked_grant,
            namespaces,
            lifetime,
            network,
            limits,
            pids_cgroup,
            gaps,
            record,
        }
    }

    /// What the call frame records.
    pub(crate) fn record(&self) -> &SandboxRecord {
        &self.record
    }

    /// Why the tool may not run whatever the mode (but `off`): a grant that
    /// passes through a symbolic link.
    pub(crate) fn linked_grant(&self) -> Option<&str> {
        self.linked_grant.as_deref()
    }

    /// Why the tool may not run: under `required`, a core guarantee the
    /// kernel cannot give.
    pub(crate) fn refusal(&self) -> Option<String> {
        if self.mode != SandboxMode::Required {
            return None;
        }
        let core: Vec<&str> = self.gaps.iter().filter(|(_, core)| *core).map(|(gap, _)| gap.as_str()).collect();
        (!core.is_empty()).then(|| core.join("; "))
    }

    /// Under `best-effort`, warns once per process (a [`crate::notice`])
    /// what the kernel cannot enforce.
    pub(crate) fn warn_once(&self) {
        static WARNED: Once = Once::new();
        if self.mode == SandboxMode::BestEffort && !self.gaps.is_empty() {
            WARNED.call_once(|| {
                let gaps: Vec<&str> = self.gaps.iter().map(|(gap, _)| gap.as_str()).collect();
                crate::notice::warn(&format!(
                    "the exec tool sandbox is partial on this kernel: {} (docs/sandbox.md; set [runtime] sandbox = \"required\" to refuse such calls)",
                    gaps.join("; ")
                ));
            });
        }
    }

    /// Environment variables the tool needs under this sandbox: glibc
    /// resolves names over TCP (the sandbox has no UDP).
    pub(crate) fn environment(&self) -> Vec<(String, String)> {
        match &self.network {
            Network::Allow(targets)
                if targets.iter().any(|t| t.host.parse::<std::net::IpAddr>().is_err() && !t.host.starts_with('[')) =>
            {
                vec![("RES_OPTIONS".to_string(), "use-vc".to_string())]
            }
            _ => Vec::new(),
        }
    }

    /// A short account for `rlp tools list`: `off`, or what the tool may
    /// write and reach.
    pub(crate) fn brief(&self) -> String {
        if !self.record.confined {
            return "off".to_string();
        }
        if self.linked_grant.is_some() {
            return "refused: an fs grant passes through a symbolic link".to_string();
        }
        let net = match &self.network {
            Network::None => "none".to_string(),
            Network::Allow(_) => self.record.net_allow.join(", "),
            Network::Unrestricted => "unrestricted".to_string(),
        };
        format!("rw: {}; net: {net}", self.record.write.join(", "))
    }

    /// A one-line account of the rules, for error messages.
    pub(crate) fn summary(&self) -> String {
        if !self.record.confined {
            return format!("the tool ran unconfined (sandbox = \"{}\")", self.mode);
        }
        let net = match &self.network {
            Network::None => "no network".to_string(),
            Network::Allow(_) => format!("network only to {}", self.record.net_allow.join(", ")),
            Network::Unrestricted => "network unrestricted".to_string(),
        };
        format!(
            "the tool ran sandboxed (Landlock ABI {}): read {}; read-write {}; {net}",
            self.record.landlock_abi,
            self.record.read.join(", "),
            self.record.write.join(", ")
        )
    }

    /// The confinement of one attempt, around its private folder; `None`
    /// when the sandbox is off. One the kernel refuses lets the next process
    /// probe afresh: the verdict kept for it may be what no longer holds.
    pub(crate) fn confine(&self, private: &Path) -> io::Result<Option<Confinement>> {
        self.confinement(private).inspect_err(|_| kernel_cache::forget())
    }

    fn confinement(&self, private: &Path) -> io::Result<Option<Confinement>> {
        if self.mode == SandboxMode::Off {
            return Ok(None);
        }
        let landlock = if self.kernel.landlock_abi > 0 { self.ruleset(private)? } else { None };
        let filter = match self.network {
            _ if !self.kernel.filter => None,
            Network::None => filter(NetFilter::Denied),
            Network::Allow(_) => filter(NetFilter::Supervised),
            Network::Unrestricted => None,
        };
        let supervised = match (&self.network, filter) {
            (Network::Allow(targets), Some(filter)) if filter.supervised() => {
                let (parent, child) =
                    socketpair(AddressFamily::UNIX, SocketType::SEQPACKET, SocketFlags::CLOEXEC, None)?;
                Some(Supervised { parent, child: Some(child), allow: Some(Allowlist::new(targets)) })
            }
            _ => None,
        };
        let killable = match self.lifetime {
            Lifetime::Cgroup => KillCgroup::create()?,
            _ => None,
        };
        let pids = match self.pids_cgroup {
            Some(max) => PidsCgroup::create(max)?,
            None => None,
        };
        let view = match self.namespaces {
            Some(namespaces) => {
                let entries =
                    view::call_entries(&self.rules, &self.named, &self.links, &self.bundle, private, &self.writable);
                Some((namespaces, ViewSteps::new(&world::root_mount_point(), &entries, private, namespaces.user)?))
            }
            None => None,
        };
        Ok(Some(Confinement { killable, pids, view, limits: self.limits.clone(), landlock, filter, supervised }))
    }

    /// The Landlock ruleset: the plan's rules, the private folder and the
    /// grants read-write, TCP binding denied (and connecting, without a net
    /// grant), signals and abstract sockets scoped to the tool.
    fn ruleset(&self, private: &Path) -> io::Result<Option<OwnedFd>> {
        let landlock_error = |e: landlock::RulesetError| io::Error::other(format!("Landlock: {e}"));
        let mut net: BitFlags<AccessNet> = AccessNet::BindTcp.into();
        if self.network == Network::None {
            net |= AccessNet::ConnectTcp;
        }
        let ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(TARGET_ABI))
            .and_then(|r| r.handle_access(net))
            .and_then(|r| r.scope(Scope::AbstractUnixSocket | Scope::Signal))
            .and_then(Ruleset::create)
            .map_err(landlock_error)?;
        let mut ruleset = ruleset;
        for system in system_rules() {
            let rule = PathBeneath::new(&system.fd, system.rule.access.rights());
            ruleset = ruleset.add_rule(rule).map_err(landlock_error)?;
        }
        for rule in &self.rules {
            // A path that went away since the plan was made is simply not
            // reachable.
            let Ok(fd) = PathFd::new(&rule.path) else { continue };
            ruleset = ruleset.add_rule(PathBeneath::new(fd, rule.access.rights())).map_err(landlock_error)?;
        }
        // The private folder and the grants, never through a symbolic link
        // (one planted since the plan was made refuses the attempt); a
        // grant that does not exist is not reachable.
        for path in std::iter::once(private).chain(self.writable.iter().map(PathBuf::as_path)) {
            let fd = match open_without_links(path) {
                Ok(fd) => fd,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                    return Err(io::Error::other(format!(
                        "`{}` passes through a symbolic link: grants are never followed through links",
                        path.display()
                    )));
                }
                Err(e) => return Err(e),
            };
            ruleset = ruleset.add_rule(PathBeneath::new(fd, Access::ReadWrite.rights())).map_err(landlock_error)?;
        }
        Ok(ruleset.into())
    }
}

/// Who the tool runs as, for the call frame: its uid, and for root the
/// capabilities it keeps.
fn identity() -> String {
    // SAFETY: geteuid has no failure mode.
    let uid = unsafe { libc::geteuid() };
    if world::is_root() {
        format!("uid {uid}, capabilities {}", KEPT_CAPABILITY_NAMES.join(" "))
    } else {
        format!("uid {uid}, no capabilities")
    }
}

/// The seccomp filter for `net`, assembled once per process.
fn filter(net: NetFilter) -> Option<&'static Filter> {
    static DENIED: OnceLock<Option<Filter>> = OnceLock::new();
    static SUPERVISED: OnceLock<Option<Filter>> = OnceLock::new();
    let cell = if net == NetFilter::Supervised { &SUPERVISED } else { &DENIED };
    cell.get_or_init(|| Filter::build(net)).as_ref()
}

/// What the kernel cannot enforce for a tool with `network` (each with
/// whether `required` refuses over it).
fn kernel_gaps(kernel: &Kernel, network: &Network, process_limit: bool) -> Vec<(String, bool)> {
    let abi = kernel.landlock_abi;
    let mut gaps = Vec::new();
    let mut gap = |text: String, core: bool| gaps.push((text, core));
    if abi == 0 {
        gap("Landlock is not available: the filesystem is not confined".into(), true);
    } else {
        // A PID namespace keeps signals in where Landlock cannot.
        let unscoped = match &kernel.world {
            Ok(Namespaces { pid: true, .. }) => "abstract sockets outside the sandbox",
            _ => "signals and abstract sockets outside the sandbox",
        };
        let missing: [(u32, &str); 4] = [
            (3, "truncating files"),
            (4, "TCP binding and connecting by port"),
            (5, "device ioctls"),
            (SIGNAL_SCOPE_ABI, unscoped),
        ];
        for (needed, what) in missing {
            if abi < needed {
                gap(format!("Landlock ABI {abi} does not control {what} (ABI {needed} does)"), false);
            }
        }
    }
    if let Err(why) = &kernel.world {
        gap(
            format!(
                "no mount, PID and IPC namespaces ({why}): the tool sees the host's filesystem through Landlock alone, can change the metadata of files Landlock lets it read, shares System V IPC, and what it starts is swept rather than ended with it"
            ),
            true,
        );
    }
    if !kernel.filter {
        gap("seccomp is not available: sockets and dangerous system calls are not filtered".into(), true);
    } else if matches!(network, Network::Allow(_)) && !kernel.user_notif {
        gap("seccomp user notification is not available: net grants cannot be checked per host".into(), true);
    }
    // SAFETY: getuid has no failure mode.
    if process_limit && unsafe { libc::getuid() } == 0 {
        gap(
            "max_processes is not enforced for root: no pids cgroup can be made here, and the kernel exempts uid 0 from RLIMIT_NPROC"
                .into(),
            true,
        );
    }
    gaps
}

/// The sandbox of one attempt, prepared in rlp before the clone.
#[derive(Debug)]
pub(crate) struct Confinement {
    /// The call's cgroup, killed when the attempt is over.
    killable: Option<KillCgroup>,
    /// The call's pids cgroup, removed when the attempt is over.
    pids: Option<PidsCgroup>,
    /// The namespaces and the filesystem view the child builds in them.
    view: Option<(Namespaces, ViewSteps)>,
    limits: Vec<Limit>,
    landlock: Option<OwnedFd>,
    filter: Option<&'static Filter>,
    supervised: Option<Supervised>,
}

/// The channel of a supervised network.
#[derive(Debug)]
struct Supervised {
    /// rlp's end: the listener arrives here.
    parent: OwnedFd,
    /// The child's end, closed once the child has executed the tool.
    child: Option<OwnedFd>,
    /// The hosts the supervisor allows (taken when it starts).
    allow: Option<Allowlist>,
}

impl Confinement {
    /// What the child applies.
    pub(crate) fn steps(&self) -> ChildSteps<'_> {
        // The tool is made in its call cgroup where the kernel can and it
        // has no pids cgroup to join first.
        let made_in = self.killable.as_ref().and_then(KillCgroup::at_birth).filter(|_| self.pids.is_none());
        let killable = self.killable.as_ref().filter(|_| made_in.is_none());
        ChildSteps {
            namespaces: self.view.as_ref().map_or(0, |(namespaces, _)| namespaces.clone_flags()),
            made_in,
            cgroups: [self.pids.as_ref().map(PidsCgroup::procs), killable.map(KillCgroup::procs)],
            view: self.view.as_ref().map(|(_, steps)| steps),
            keep_file_rights: world::is_root(),
            limits: &self.limits,
            landlock: self.landlock.as_ref().map(AsFd::as_fd),
            filter: self.filter,
            listener_to: self.supervised.as_ref().and_then(|s| s.child.as_ref()).map(AsFd::as_fd),
        }
    }

    /// Once the tool has ended: kills what is left of its processes in its
    /// cgroup, if it has one; returns their pids (to be reaped).
    pub(crate) fn end_processes(&self) -> Vec<i32> {
        self.killable.as_ref().map(KillCgroup::kill).unwrap_or_default()
    }

    /// Once the child has executed the tool: starts the supervisor of its
    /// connects, if it has one.
    pub(crate) fn supervise(&mut self) -> io::Result<Option<Supervisor>> {
        let Some(supervised) = &mut self.supervised else { return Ok(None) };
        // With the child's end closed, a listener that never came reads as
        // the end of the socket instead of blocking.
        supervised.child = None;
        let listener = seccomp::recv_fd(supervised.parent.as_fd())?;
        let allow = supervised.allow.take().unwrap_or_else(|| Allowlist::new(&[]));
        Supervisor::start(listener, allow).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grants<'a>(command: &'a Path, net: &[&str]) -> Grants<'a> {
        Grants {
            command,
            bundle: Path::new("/"),
            fs: vec![],
            net: net.iter().map(|t| NetTarget { host: (*t).to_string(), port: Some(80) }).collect(),
            max_memory_bytes: None,
            max_processes: None,
        }
    }

    /// Mount and IPC namespaces, as root.
    const NAMESPACES: Namespaces = Namespaces { user: false, pid: false };

    /// A kernel with everything but what `world` and `kill_cgroup` say.
    fn kernel(world: Result<Namespaces, String>, kill_cgroup: bool) -> Kernel {
        Kernel { landlock_abi: 7, filter: true, user_notif: true, world, kill_cgroup }
    }

    #[test]
    fn required_refuses_what_the_kernel_cannot_enforce_and_best_effort_records_it() {
        let sh = Path::new("/bin/sh");
        let old = Kernel { landlock_abi: 0, user_notif: false, ..kernel(Ok(NAMESPACES), true) };
        let refused = SandboxPlan::on(old.clone(), SandboxMode::Required, &grants(sh, &["api.example"]));
        assert_eq!(
            refused.refusal().as_deref(),
            Some(
                "Landlock is not available: the filesystem is not confined; seccomp user notification is not available: net grants cannot be checked per host"
            )
        );
        let lenient = SandboxPlan::on(old, SandboxMode::BestEffort, &grants(sh, &["api.example"]));
        assert_eq!(lenient.refusal(), None);
        assert_eq!(lenient.record().net, "unrestricted");
        assert_eq!(lenient.record().gaps.len(), 2);
        // Narrower gaps of an older Landlock are recorded, never refused.
        let abi3 = Kernel { landlock_abi: 3, ..kernel(Ok(NAMESPACES), true) };
        let plan = SandboxPlan::on(abi3.clone(), SandboxMode::Required, &grants(sh, &[]));
        assert_eq!(plan.refusal(), None);
        assert_eq!(
            plan.record().gaps,
            vec![
                "Landlock ABI 3 does not control TCP binding and connecting by port (ABI 4 does)",
                "Landlock ABI 3 does not control device ioctls (ABI 5 does)",
                "Landlock ABI 3 does not control signals and abstract sockets outside the sandbox (ABI 6 does)",
            ]
        );
        // With a PID namespace, signals stay in without Landlock's scope.
        let abi5 = Kernel { landlock_abi: 5, ..kernel(Ok(Namespaces { user: false, pid: true }), true) };
        let plan = SandboxPlan::on(abi5, SandboxMode::Required, &grants(sh, &[]));
        assert_eq!(
            plan.record().gaps,
            vec!["Landlock ABI 5 does not control abstract sockets outside the sandbox (ABI 6 does)"]
        );
        assert_eq!(plan.record().namespaces, ["mount", "pid", "ipc"]);
        assert_eq!(plan.record().processes.as_deref(), Some("cgroup"));
        // Off confines nothing and says so.
        let off = SandboxPlan::on(abi3, SandboxMode::Off, &grants(sh, &[]));
        assert!(!off.record().confined && off.record().gaps.is_empty() && off.refusal().is_none());
        assert_eq!(off.brief(), "off");
    }

    /// A kept verdict is one with everything a tool needs: a world without
    /// the PID namespace that signals need before Landlock ABI 6 (what the
    /// probe falls back to) is neither kept nor taken from the cache.
    #[test]
    fn a_verdict_short_of_a_needed_pid_namespace_is_not_complete() {
        let world = |pid| Namespaces { user: false, pid };
        assert!(complete_with_a_cgroup(world(false), 6));
        assert!(complete_with_a_cgroup(world(true), 7), "more than needed is kept");
        assert!(!complete_with_a_cgroup(world(false), 5));
        assert!(complete_with_a_cgroup(world(true), 5));
    }

    #[test]
    fn a_pid_namespace_is_given_where_no_cgroup_or_no_signal_scope_keeps_the_tool_in() {
        assert!(!needs_pid_namespace(true, 6));
        assert!(!needs_pid_namespace(true, 7));
        assert!(needs_pid_namespace(true, 5));
        assert!(needs_pid_namespace(true, 0));
        assert!(needs_pid_namespace(false, 7));
        // Without PID namespaces, a call cgroup keeps the view; without
        // the cgroup, there is nothing to fall back to.
        let no_pid = |pid: bool| if pid { Err("no".to_string()) } else { Ok(NAMESPACES) };
        assert_eq!(tool_world(true, 5, no_pid), Ok(NAMESPACES));
        assert_eq!(tool_world(false, 7, no_pid), Err("no".to_string()));
        let with_pid = Namespaces { user: false, pid: true };
        assert_eq!(tool_world(true, 5, |pid| Ok(Namespaces { user: false, pid })), Ok(with_pid));
        assert_eq!(tool_world(true, 7, |pid| Ok(Namespaces { user: false, pid })), Ok(NAMESPACES));
    }

    #[test]
    fn without_namespaces_required_refuses_and_best_effort_sweeps() {
        let sh = Path::new("/bin/sh");
        let bare = kernel(Err("Operation not permitted".into()), false);
        let refused = SandboxPlan::on(bare.clone(), SandboxMode::Required, &grants(sh, &[]));
        let why = refused.refusal().unwrap();
        assert!(why.starts_with("no mount, PID and IPC namespaces (Operation not permitted): "), "{why}");
        let lenient = SandboxPlan::on(bare, SandboxMode::BestEffort, &grants(sh, &[]));
        assert_eq!(lenient.refusal(), None);
        assert!(lenient.record().namespaces.is_empty());
        assert_eq!(lenient.record().processes.as_deref(), Some("sweep"));
        // A PID namespace where no call cgroup can be made, the cgroup where it can.
        let pid = kernel(Ok(Namespaces { user: true, pid: true }), false);
        let plan = SandboxPlan::on(pid, SandboxMode::Required, &grants(sh, &[]));
        assert_eq!(plan.record().namespaces, ["mount", "pid", "ipc", "user"]);
        assert_eq!(plan.record().processes.as_deref(), Some("pid-namespace"));
        let cgroup = kernel(Ok(NAMESPACES), true);
        let plan = SandboxPlan::on(cgroup, SandboxMode::Required, &grants(sh, &[]));
        assert_eq!(plan.record().namespaces, ["mount", "ipc"]);
        assert_eq!(plan.record().processes.as_deref(), Some("cgroup"));
    }
}
