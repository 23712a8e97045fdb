//! The one error protocol. Every error a command can end with implements
//! [`Reportable`]: it says which [`Exit`] code of docs/cli.md it maps to and, when it can, what to do about it. The CLI
//! turns any of them into its error with one conversion; nothing matches on
//! error messages.

use std::fmt;

/// How a command ends: the exit-code contract of docs/cli.md, the one
/// table of it. Library errors say which of the failing codes they are
/// ([`Reportable::class`]); the CLI returns the same values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Exit {
    /// 0: success.
    Success,
    /// 1: the command ran and found a problem (lint errors, a failed
    /// verification, a tool error, a stale digest, a replay divergence).
    Problems,
    /// 2: bad arguments or unreadable input that stops the command.
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

impl From<Exit> for std::process::ExitCode {
    fn from(exit: Exit) -> Self {
        std::process::ExitCode::from(exit.code())
    }
}

/// An error a command can end with: its message (`Display`, one line or a
/// few, naming the file or field), its class, and a hint.
pub trait Reportable: fmt::Display {
    /// The exit code it maps to (never [`Exit::Success`]).
    fn class(&self) -> Exit;

    /// What the command line says (by default the error's `Display`); an
    /// error may say more there, e.g. what the command was doing.
    fn message(&self) -> String {
        self.to_string()
    }

    /// What to do about it, when there is something to say.
    fn help(&self) -> Option<String> {
        None
    }
}
