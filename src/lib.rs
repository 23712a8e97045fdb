//! rlp: a toolchain and runtime for agent bundles.
//!
//! The library does the work; the `rlp` binary parses arguments, calls into
//! [`cli`], and maps outcomes to exit codes. Layers, lowest first:
//! [`bundle`] (the data model) ← {[`lint`], integrity, pack, runtime, trace}
//! ← [`cli`].

pub mod authoring;
pub mod bundle;
pub mod cli;
pub mod config;
pub mod fsutil;
pub mod home;
pub mod integrity;
pub mod interrupt;
pub mod leftovers;
pub mod lint;
pub mod pack;
pub mod process;
pub mod runtime;
pub mod text;
pub mod trace;
