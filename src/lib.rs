//! rlp: a toolchain and runtime for agent bundles.
//!
//! The library does the work; the `rlp` binary parses arguments, calls into
//! [`cli`], and maps outcomes to exit codes. Layers, lowest first:
//! [`bundle`] (the data model) ← [`lint`] ← [`cli`].

pub mod bundle;
