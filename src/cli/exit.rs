//! Exit codes and command errors (the contract in docs/cli.md).

use std::fmt;
use std::process::ExitCode;

use crate::error::{Class, Reportable};

/// How a command ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// 0: success.
    Success,
    /// 1: the command ran and found a problem (lint errors, failed
    /// verification, tool error, replay divergence).
    Problems,
    /// 2: usage error or unreadable input that stops the command.
    Usage,
    /// 3: refused by policy (capability, confirmation, trust, budget).
    Refused,
}

impl Exit {
    /// The process exit code.
    pub fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::Problems => 1,
            Exit::Usage => 2,
            Exit::Refused => 3,
        }
    }
}

impl From<Class> for Exit {
    fn from(class: Class) -> Exit {
        match class {
            Class::Problem => Exit::Problems,
            Class::Usage => Exit::Usage,
            Class::Refused => Exit::Refused,
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> Self {
        ExitCode::from(exit.code())
    }
}

/// A command that could not finish: what went wrong, how to fix it, and the
/// exit code it maps to.
#[derive(Debug)]
pub struct CliError {
    /// The exit code.
    pub exit: Exit,
    /// One line (or a few) saying what is wrong; names the file or field.
    pub message: String,
    /// What to do about it.
    pub help: Option<String>,
    /// Nothing to print: the command stopped because its reader went away.
    quiet: bool,
}

impl CliError {
    fn new(exit: Exit, message: impl Into<String>) -> Self {
        Self { exit, message: message.into(), help: None, quiet: false }
    }

    /// A command that stopped because standard output was closed (a broken
    /// pipe): it ends with `exit`, the code of what it found so far, and
    /// prints nothing.
    pub fn quiet(exit: Exit) -> Self {
        Self { quiet: true, ..Self::new(exit, "standard output was closed") }
    }

    /// Whether there is nothing to print (see [`CliError::quiet`]).
    pub fn is_quiet(&self) -> bool {
        self.quiet
    }

    /// Exit 2: bad arguments or unreadable input.
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(Exit::Usage, message)
    }

    /// Exit 1: the command ran and found a problem.
    pub fn problem(message: impl Into<String>) -> Self {
        Self::new(Exit::Problems, message)
    }

    /// Exit 3: refused by policy.
    pub fn refused(message: impl Into<String>) -> Self {
        Self::new(Exit::Refused, message)
    }

    /// Adds a hint line.
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CliError {}

impl<E: Reportable> From<E> for CliError {
    /// The one conversion from a library error: its class picks the exit
    /// code, its message and hint are printed as they are.
    fn from(error: E) -> CliError {
        CliError { exit: error.class().into(), message: error.message(), help: error.help(), quiet: false }
    }
}

/// What every command returns.
pub(crate) type CliResult = Result<Exit, CliError>;
