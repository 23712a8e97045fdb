//! Authoring: scaffolding bundles, adding, importing and listing tools.
//!
//! Everything here is library code: terminal questions go through the
//! [`ask::Ask`] trait (the command line answers it with dialoguer, tests with
//! scripted answers), files are written atomically, and every change is
//! checked with the same rules `rlp lint` applies before anything is written.
//!
//! - [`spec`]: one tool to add, from flags, a `--tool` spec string or JSON.
//! - [`check`]: lint rules applied to would-be tool entries.
//! - [`tools_file`], [`policy_edit`]: edits of tools.json and policy.caps
//!   (what they share: [`edited`]).
//! - [`scaffold`], [`templates`], [`wizard`]: `rlp agent scaffold`; [`example`]:
//!   the runnable tool of `--example`.
//! - [`add`]: `rlp tools add`; [`import`]: `rlp tools import`.
//! - [`drift`]: `rlp lint --check-tools`; [`list`]: `rlp tools list`.

pub(crate) mod add;
pub(crate) mod ask;
pub(crate) mod check;
pub(crate) mod drift;
pub(crate) mod edited;
pub(crate) mod error;
pub(crate) mod example;
pub(crate) mod import;
mod jp_shape;
pub(crate) mod list;
pub(crate) mod mcp_import;
pub(crate) mod policy_edit;
pub(crate) mod scaffold;
pub(crate) mod spec;
pub(crate) mod target;
pub(crate) mod templates;
pub(crate) mod tools_file;
pub(crate) mod validate;
pub(crate) mod wizard;

pub(crate) use error::AuthoringError;
