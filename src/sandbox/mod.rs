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
//! - [`child`]: the steps the child takes (limits, capabilities,
//!   `no_new_privs`, Landlock, seccomp);
//! - [`pids`]: the cgroup that enforces `max_processes`;
//! - [`mode`]: `[runtime] sandbox`.

pub(crate) mod child;
pub(crate) mod fs;
pub(crate) mod mode;
pub mod net;
pub(crate) mod pids;
pub(crate) mod plan;
pub mod seccomp;

pub use mode::SandboxMode;
pub(crate) use plan::{Confinement, Grants, SandboxPlan};
