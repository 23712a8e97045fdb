//! The one process runner: how rlp starts a tool binary, watches it, bounds
//! what it prints, and ends it with everything it started.
//!
//! Used by the exec transport ([`crate::runtime::exec`]) and by `rlp tools
//! import` / `rlp lint --check-tools` ([`crate::authoring::import`]), so both
//! give the same guarantees:
//!
//! - a tool never outlives rlp: it leads its own process group, has the
//!   kernel send it SIGKILL when rlp dies ([`spawn`], even when rlp is
//!   SIGKILLed), and is killed with its group by the signal handler when rlp
//!   is interrupted ([`crate::interrupt`]);
//! - timeouts hold: at the deadline the tool, its group and every process
//!   below it are frozen and killed ([`crate::kill`], the one place that signals a tool), whatever they do with
//!   SIGTERM, their group or their session;
//! - stdout is read up to a bound (beyond it the tool is killed), the tail of
//!   stderr is kept, and both pipes are drained as the tool writes, so a tool
//!   never blocks on a full pipe ([`capture`], [`run`]);
//! - no zombies, no orphans: the tool and the processes it left are reaped,
//!   and rlp, as subreaper, sweeps the orphans a call leaves ([`reap`]).
//!
//! Layers, lowest first: [`reap`] (waits, over [`crate::kill`]), [`release`]
//! (closing slow descriptors off the call's path), [`spawn`]
//! (starting a child), [`capture`] and [`run`] (one child to its end under
//! limits), [`tool`] (the exec protocol: private folder, blob, environment),
//! [`server`] (a program that stays up across calls: an MCP server on
//! stdio, with the same guarantees, started by one long-lived thread since
//! the parent-death signal follows the thread that started a child).

pub mod cancel;
pub(crate) mod capture;
pub(crate) mod reap;
pub(crate) mod release;
pub(crate) mod run;
pub(crate) mod server;
pub(crate) mod spawn;
pub(crate) mod tool;

pub use reap::become_subreaper;
