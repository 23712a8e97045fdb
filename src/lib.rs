//! rlp: a toolchain and runtime for agent bundles.
//!
//! The library does the work; the `rlp` binary parses arguments, calls into
//! [`cli`], and maps outcomes to exit codes. Layers, lowest first (a module
//! imports only from layers below it; [`home`] borrows one size limit from
//! [`integrity`]):
//!
//! 1. helpers: [`text`], [`fsutil`], [`interrupt`], [`home`], [`config`],
//!    [`leftovers`];
//! 2. [`bundle`], the data model;
//! 3. [`lint`], [`integrity`], [`pack`], [`authoring`], and [`event`] (the
//!    frame schema);
//! 4. [`ledger`], the store of frames (queries, verification, export, import);
//! 5. [`runtime`], the call pipeline, which records through
//!    [`event::Recorder`] and does not know the ledger;
//! 6. [`replay`], over the runtime and the ledger;
//! 7. [`cli`].

pub(crate) mod authoring;
pub mod bundle;
pub mod cli;
pub(crate) mod config;
pub mod error;
pub mod event;
pub(crate) mod fsutil;
pub mod home;
pub mod integrity;
pub(crate) mod interrupt;
pub mod ledger;
pub(crate) mod leftovers;
pub(crate) mod lint;
pub mod pack;
pub mod process;
pub mod replay;
pub mod runtime;
pub(crate) mod text;
