//! rlp: a toolchain and runtime for agent bundles.
//!
//! The library does the work; the `rlp` binary parses arguments, calls into
//! [`cli`], and maps outcomes to exit codes. Modules sit on layers and
//! import only from layers below them and the leaves; docs/architecture.md
//! has the map, and the tidy test (`tests/it/tidy.rs`) keeps it:
//!
//! - leaves: [`error`], [`home`], `interrupt`, `kill` (the one place that
//!   signals a tool), `leftovers`, [`notice`] (the library's warnings, to a
//!   sink the CLI installs), `fsutil`, `text`;
//! - 0: [`bundle`], the data model;
//! - 1: `lint`, the rule catalog, and [`event`], the frame schema;
//! - 2: [`integrity`], and [`sandbox`] (the confinement of exec tools);
//! - 3: `config` (the settings, loaded once per command by the CLI),
//!   [`pack`], [`ledger`] (the store of frames), [`process`] (the one
//!   process runner), [`telemetry`] (spans of the frames);
//! - 4: [`secrets`] (where secret values come from), [`oci`] (registries);
//! - 5: [`runtime`], the call pipeline, which records through
//!   [`event::Recorder`] and does not know the ledger;
//! - 6: `authoring`, [`discovery`] (tool definitions, search), and
//!   [`replay`] over the runtime and the ledger;
//! - 7: [`serve`], the MCP server;
//! - 8: [`cli`].

// Unit tests set up real files and processes directly; the library itself
// is held to clippy.toml's rules in its normal build.
#![cfg_attr(test, allow(clippy::disallowed_methods))]

pub(crate) mod authoring;
pub mod bundle;
pub mod cli;
pub(crate) mod config;
pub mod discovery;
pub mod error;
pub mod event;
pub(crate) mod fsutil;
pub mod home;
pub mod integrity;
pub(crate) mod interrupt;
pub(crate) mod kept;
pub(crate) mod kill;
pub mod ledger;
pub(crate) mod leftovers;
pub(crate) mod lint;
pub mod notice;
pub mod oci;
pub mod pack;
pub mod process;
pub mod replay;
pub mod runtime;
pub mod sandbox;
pub mod secrets;
pub mod serve;
pub mod telemetry;
pub(crate) mod text;
