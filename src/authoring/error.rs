//! Errors of authoring commands: what went wrong, how to fix it, and whether
//! it was the input (exit 2) or something the command found (exit 1).

use std::fmt;
use std::path::Path;

use crate::error::{Exit, Reportable};

/// An authoring command that could not finish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AuthoringError {
    /// Exit-code class: [`Exit::Usage`] for bad arguments, unreadable or
    /// invalid input; [`Exit::Problems`] for a problem found while running
    /// (a tool binary that did not answer). Either way nothing was changed.
    pub class: Exit,
    /// What is wrong; names the file, flag or field.
    pub message: String,
    /// What to do about it.
    pub help: Option<String>,
}

impl AuthoringError {
    /// An input error (exit 2).
    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Self { class: Exit::Usage, message: message.into(), help: None }
    }

    /// A problem found while running (exit 1).
    pub(crate) fn failed(message: impl Into<String>) -> Self {
        Self { class: Exit::Problems, message: message.into(), help: None }
    }

    /// Adds a hint line.
    pub(crate) fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// An I/O error on `path` (exit 2).
    pub(crate) fn io(action: &str, path: &Path, error: &std::io::Error) -> Self {
        Self::usage(format!("cannot {action} {}: {error}", path.display()))
    }

    /// A bounded read of `path` that failed (exit 2).
    pub(crate) fn read(path: &Path, error: crate::fsutil::ReadError) -> Self {
        match error {
            crate::fsutil::ReadError::Io(e) => Self::io("read", path, &e),
            e @ crate::fsutil::ReadError::TooLarge { .. } => {
                let help = e.help().unwrap_or_default();
                Self::usage(e.to_string()).with_help(help)
            }
        }
    }
}

impl fmt::Display for AuthoringError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for AuthoringError {}

impl Reportable for AuthoringError {
    fn class(&self) -> Exit {
        self.class
    }

    fn help(&self) -> Option<String> {
        self.help.clone()
    }
}
