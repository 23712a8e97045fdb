//! Confinement of exec tools by the kernel.
//!
//! - [`seccomp`]: the system call filter every sandboxed tool runs under, and
//!   the passing of its user-notification listener back to rlp;
//! - [`net`]: the supervisor that answers a supervised tool's `connect`
//!   calls, letting through only the hosts and ports its `net` grants name.

pub mod net;
pub mod seccomp;
