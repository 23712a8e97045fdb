//! Exit codes and command errors (the contract in docs/cli.md).

use std::error::Error;
use std::fmt;

use crate::error::Reportable;
use crate::text::terminal_safe;

pub(crate) use crate::error::Exit;

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
    /// The library error this one was made from, whose causes
    /// ([`Error::source`]) are printed as `Caused by:` lines.
    from: Option<Box<dyn Error + Send + Sync + 'static>>,
}

impl CliError {
    fn new(exit: Exit, message: impl Into<String>) -> Self {
        Self { exit, message: message.into(), help: None, quiet: false, from: None }
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

impl Error for CliError {
    /// The cause of the library error this one was made from.
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.from.as_deref().and_then(Error::source)
    }
}

impl CliError {
    /// The causes to print under the message, outermost first: the
    /// [`Error::source`] chain up to the first cause the message already
    /// says (that one, and what lies under it, the message has told in its
    /// own words).
    pub fn causes(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut next = self.source();
        while let Some(cause) = next {
            let text = cause.to_string();
            if self.message.contains(&text) {
                break;
            }
            if !text.is_empty() && !out.contains(&text) {
                out.push(text);
            }
            next = cause.source();
        }
        out
    }
}

impl CliError {
    /// `error: …`, a `  Caused by: …` line for each of [`CliError::causes`]
    /// (as uv prints them), and `  help: …` (as cargo does); made safe for
    /// the terminal, coloured when `color`.
    pub fn render(&self, color: bool) -> String {
        let (red, cyan, bold, reset) =
            if color { ("\x1b[1;31m", "\x1b[1;36m", "\x1b[1m", "\x1b[0m") } else { ("", "", "", "") };
        let mut text = format!("{red}error{reset}{bold}: {}{reset}", terminal_safe(&self.message));
        for cause in self.causes() {
            text.push_str(&format!("\n  {bold}Caused by{reset}: {}", terminal_safe(&cause)));
        }
        if let Some(help) = &self.help {
            text.push_str(&format!("\n  {cyan}help{reset}: {}", terminal_safe(help)));
        }
        text
    }
}

impl<E: Reportable + Error + Send + Sync + 'static> From<E> for CliError {
    /// The one conversion from a library error: its class picks the exit
    /// code, its message and hint are printed as they are, and its causes
    /// are kept.
    fn from(error: E) -> CliError {
        CliError {
            exit: error.class(),
            message: error.message(),
            help: error.help(),
            quiet: false,
            from: Some(Box::new(error)),
        }
    }
}

/// What every command returns.
pub(crate) type CliResult = Result<Exit, CliError>;

#[cfg(test)]
mod tests {
    use std::io;

    use super::*;

    /// A library error whose message leaves out its cause.
    #[derive(Debug, thiserror::Error)]
    #[error("cannot open the store")]
    struct Opening(#[source] io::Error);

    impl Reportable for Opening {
        fn class(&self) -> Exit {
            Exit::Problems
        }
    }

    /// One whose message already says its cause.
    #[derive(Debug, thiserror::Error)]
    #[error("cannot open the store: {0}")]
    struct Saying(#[source] Inner);

    /// A cause that has a cause of its own.
    #[derive(Debug, thiserror::Error)]
    #[error("file is not a database")]
    struct Inner(#[source] io::Error);

    impl Reportable for Saying {
        fn class(&self) -> Exit {
            Exit::Usage
        }
    }

    #[test]
    fn a_library_error_keeps_its_cause_and_its_exit_code() {
        let error = CliError::from(Opening(io::Error::other("permission denied")));
        assert_eq!(error.exit, Exit::Problems);
        assert_eq!(error.source().map(ToString::to_string).as_deref(), Some("permission denied"));
        assert_eq!(error.causes(), ["permission denied"]);
        let shown = error.with_help("check the folder's permissions").render(false);
        assert_eq!(
            shown,
            "error: cannot open the store\n  Caused by: permission denied\n  help: check the folder's permissions"
        );
    }

    #[test]
    fn a_cause_the_message_already_says_is_not_repeated() {
        let error = CliError::from(Saying(Inner(io::Error::other("Error code 26: file is not a database"))));
        assert_eq!(error.exit, Exit::Usage);
        assert!(error.source().is_some());
        assert!(error.causes().is_empty());
        assert_eq!(error.render(false), "error: cannot open the store: file is not a database");
        assert!(CliError::usage("no source").causes().is_empty());
    }
}
