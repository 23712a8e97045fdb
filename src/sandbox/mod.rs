//! The kernel sandbox of exec tools (docs/sandbox.md), applied in the child
//! between the clone and the exec.
//!
//! - [`plan`]: what one tool gets, worked out before its call is recorded
//!   (the call frame records it), and the confinement of each attempt;
//! - [`fs`]: the paths and rights of its Landlock ruleset;
//! - [`seccomp`]: the system call filter every sandboxed tool runs under, and
//!   the passing of its user-notification listener back to rlp;
//! - [`net`]: the supervisor that answers a supervised tool's `connect`
//!   calls, letting through only the hosts and ports its `net` grants name;
//! - [`child`]: the steps the child takes (its world, limits,
//!   capabilities, `no_new_privs`, Landlock, seccomp);
//! - [`world`]: the namespaces the tool runs in and the filesystem view it
//!   sees (only what it is granted, read-only but for its grants);
//! - [`kernel_cache`]: the probe's verdict kept between processes;
//! - [`lifetime`]: how the call's processes end with it (`cgroup.kill`, or
//!   a PID namespace);
//! - [`pids`]: the cgroup that enforces `max_processes`;
//! - [`cgroup`]: the call cgroups both are made of;
//! - [`mode`]: `[runtime] sandbox`.

pub(crate) mod cgroup;
pub(crate) mod child;
pub(crate) mod clone;
pub(crate) mod fs;
pub(crate) mod kernel_cache;
pub(crate) mod lifetime;
pub(crate) mod mode;
pub mod net;
pub(crate) mod pids;
pub(crate) mod plan;
pub mod seccomp;
pub(crate) mod world;

pub use mode::SandboxMode;
pub(crate) use plan::{Confinement, Grants, SandboxPlan, probe_kernel};
