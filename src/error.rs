//! The one error protocol. Every error a command can end with implements
//! [`Reportable`]: it says which [`Class`] it is (and so which exit code of
//! docs/cli.md it maps to) and, when it can, what to do about it. The CLI
//! turns any of them into its error with one conversion; nothing matches on
//! error messages.

use std::fmt;

/// How an error maps to the exit-code contract (docs/cli.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Exit 1: the command ran and found a problem (a failed verification,
    /// a tool error, a stale digest).
    Problem,
    /// Exit 2: bad arguments or unreadable input that stops the command.
    Usage,
    /// Exit 3: refused by policy (capability, confirmation, trust, budget).
    Refused,
}

impl Class {
    /// The process exit code.
    pub fn exit_code(self) -> u8 {
        match self {
            Class::Problem => 1,
            Class::Usage => 2,
            Class::Refused => 3,
        }
    }
}

/// An error a command can end with: its message (`Display`, one line or a
/// few, naming the file or field), its class, and a hint.
pub trait Reportable: fmt::Display {
    /// The exit-code class.
    fn class(&self) -> Class;

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
