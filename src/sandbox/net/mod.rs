//! The network of a supervised tool: only the hosts and ports its `net`
//! grants name.
//!
//! The tool's filter ([`crate::sandbox::seccomp::NetFilter::Supervised`])
//! lets it open TCP sockets and hands every `connect` to a [`Supervisor`],
//! which checks the address against an [`Allowlist`] and connects for the
//! tool, or refuses with EACCES; [`Supervisor::finish`] reports what was
//! allowed and refused.

mod allowlist;
mod notif;
pub mod sockaddr;
mod supervisor;

pub use allowlist::Allowlist;
pub use supervisor::{NetReport, Supervisor};

#[cfg(test)]
mod tests;
