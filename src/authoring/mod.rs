//! Authoring: scaffolding bundles, adding, importing and listing tools.
//!
//! Everything here is library code: terminal questions go through the
//! [`ask::Ask`] trait (the command line answers it with dialoguer, tests with
//! scripted answers), files are written atomically, and every change is
//! checked with the same rules `rlp lint` applies before anything is written.
//!
//! - [`spec`]: one tool to add, from flags, a `--tool` spec string or JSON.
//! - [`check`]: lint rules applied to would-be tool entries.
//! - [`tools_file`], [`policy_edit`]: edits of tools.json and policy.caps.
//! - [`scaffold`], [`templates`], [`wizard`]: `rlp agent scaffold`.
//! - [`add`]: `rlp tools add`; [`import`]: `rlp tools import`.
//! - [`drift`]: `rlp lint --check-tools`; [`list`]: `rlp tools list`.

pub mod add;
pub mod ask;
pub mod check;
pub mod drift;
pub mod error;
pub mod import;
pub mod list;
pub mod policy_edit;
pub mod scaffold;
pub mod spec;
pub mod target;
pub mod templates;
pub mod tools_file;
pub mod validate;
pub mod wizard;

pub use error::{AuthoringError, ErrorKind};
