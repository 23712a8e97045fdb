//! Commands whose arguments clap builds only when the command line enters
//! them.
//!
//! clap's derive builds the whole command tree, every argument of every
//! command, before it parses anything: for rlp's tree that is most of a
//! millisecond on each start, paid by `rlp tools call` in every call of a
//! script. A command declared as [`Deferred`] is built with its name and
//! summary only; its arguments (or subcommands) are added when the parser
//! enters it, or when something asks for the whole tree
//! ([`clap::Command::build`]). What shows the whole tree at once builds it
//! up front ([`build_eagerly`]): clap's `help` subcommand copies the tree
//! as it stands when it is built, and completion scripts walk that copy.

use std::sync::atomic::{AtomicBool, Ordering};

use clap::{ArgMatches, Args, Command, FromArgMatches, Subcommand};

/// Whether [`Deferred`] commands are built at once.
static EAGER: AtomicBool = AtomicBool::new(false);

/// From here on, [`Deferred`] commands are built with their parents, as
/// without it (completion scripts, man pages).
pub(crate) fn build_eagerly() {
    EAGER.store(true, Ordering::Relaxed);
}

/// `augment(command)` now, or when the parser enters `command`.
fn defer(command: Command, augment: fn(Command) -> Command, when_entered: fn(Command) -> Command) -> Command {
    if EAGER.load(Ordering::Relaxed) { augment(command) } else { command.defer(when_entered) }
}

/// `T`, its arguments or subcommands built when the parser enters it.
#[derive(Debug)]
pub struct Deferred<T>(pub T);

impl<T: FromArgMatches> FromArgMatches for Deferred<T> {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches(matches).map(Deferred)
    }

    fn from_arg_matches_mut(matches: &mut ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches_mut(matches).map(Deferred)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches(matches)
    }

    fn update_from_arg_matches_mut(&mut self, matches: &mut ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches_mut(matches)
    }
}

impl<T: Args> Args for Deferred<T> {
    fn group_id() -> Option<clap::Id> {
        T::group_id()
    }

    fn augment_args(command: Command) -> Command {
        defer(command, T::augment_args, |command| keeping_summary(command, T::augment_args))
    }

    fn augment_args_for_update(command: Command) -> Command {
        defer(command, T::augment_args_for_update, |command| keeping_summary(command, T::augment_args_for_update))
    }
}

impl<T: Subcommand> Subcommand for Deferred<T> {
    fn augment_subcommands(command: Command) -> Command {
        defer(command, T::augment_subcommands, |command| keeping_summary(command, T::augment_subcommands))
    }

    fn augment_subcommands_for_update(command: Command) -> Command {
        defer(command, T::augment_subcommands_for_update, |command| {
            keeping_summary(command, T::augment_subcommands_for_update)
        })
    }

    fn has_subcommand(name: &str) -> bool {
        T::has_subcommand(name)
    }
}

/// `augment(command)`, the summary `command` was declared with kept: the
/// derive gives a command the doc comment of its variant after its type's
/// (a type's own doc comment, which `augment` sets, documents the code).
fn keeping_summary(command: Command, augment: fn(Command) -> Command) -> Command {
    let about = command.get_about().cloned();
    let long_about = command.get_long_about().cloned();
    let augmented = augment(command);
    let augmented = match about {
        Some(about) => augmented.about(about),
        None => augmented.about(None::<&str>),
    };
    match long_about {
        Some(long_about) => augmented.long_about(long_about),
        None => augmented.long_about(None::<&str>),
    }
}
