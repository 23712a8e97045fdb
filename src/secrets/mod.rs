//! Where secret values come from: the providers an operator configures, and
//! the value type that never prints itself.
//!
//! A tool names the secrets it needs by id (`runloop/mail/smtp_api_key`). At
//! call time the runtime asks [`Providers`], which asks each provider in the
//! order `[secrets] providers` in config.toml gives (default `["env"]`, and
//! `["env", "file"]` once the home has a store):
//!
//! - `env` ([`env`]): the environment variable the id names;
//! - `file` ([`store`]): the age-encrypted store `$RUNLOOP_HOME/secrets/store.age`,
//!   managed with `rlp secrets set|list|rm`;
//! - `cmd` ([`command`]): a command such as `pass show {id}`;
//! - `keyring` ([`keyring`], in builds with the `keyring` feature): the
//!   desktop's Secret Service.
//!
//! The first provider that has the value answers, and the answer names it
//! (on the call's `cap.audit` record). A provider that *fails* — a damaged
//! store, a command that prints more than a value can hold — stops the
//! search: a later provider never stands in for a broken earlier one.
//! Nothing here ever prints a value; scrubbing what tools echo back is
//! [`crate::runtime::scrub::Scrubber`]'s job.

pub(crate) mod command;
pub(crate) mod env;
#[cfg(feature = "keyring")]
pub(crate) mod keyring;
mod providers;
pub mod store;
mod value;

pub use providers::Providers;
pub(crate) use value::REDACTED;
pub use value::SecretValue;

use crate::bundle::capability::SecretId;

/// One source of secret values.
pub(crate) trait Provider: Send + Sync {
    /// The provider's name, as config.toml and the audit records write it.
    fn name(&self) -> &'static str;

    /// The value of `id`, or why this provider does not have it. An error
    /// means the provider itself failed (and stops the search).
    fn lookup(&self, id: &SecretId) -> Result<Lookup, ProviderError>;
}

/// What one provider knows of an id.
#[derive(Debug)]
pub(crate) enum Lookup {
    /// The value.
    Found(SecretValue),
    /// Not here.
    Missing {
        /// Why, in a few words (`RUNLOOP_MAIL__KEY is not set`).
        why: String,
        /// How an operator provides it here (`set the environment variable …`).
        how: String,
    },
}

/// A provider that failed. Messages never contain a value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ProviderError {
    /// What is wrong.
    pub message: String,
    /// What to do about it.
    pub help: String,
}

impl ProviderError {
    pub(crate) fn new(message: impl Into<String>, help: impl Into<String>) -> Self {
        ProviderError { message: message.into(), help: help.into() }
    }
}

/// The answer for one id.
#[derive(Debug)]
pub enum Resolution {
    /// The value, and the provider that gave it.
    Found {
        /// The value.
        value: SecretValue,
        /// The provider's name (`env`, `file`, `cmd`, `keyring`).
        provider: &'static str,
    },
    /// No provider has it.
    Missing {
        /// Why not, provider by provider (`env: RUNLOOP_X__Y is not set; file: …`).
        why: String,
        /// How to provide it (`set the environment variable …, or run …`).
        how: String,
    },
}

/// A provider failed while resolving an id. Messages never contain a value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretError {
    /// The provider that failed.
    pub provider: &'static str,
    /// What is wrong (names the provider and the id).
    pub message: String,
    /// What to do about it.
    pub help: String,
}

/// Where the runtime gets secret values.
pub trait SecretResolver: Send + Sync {
    /// The value of `id` and who gave it, or why no one could.
    fn resolve(&self, id: &SecretId) -> Result<Resolution, SecretError>;
}
