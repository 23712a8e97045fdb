//! Output conventions: formats, colour, the one printer of results on
//! stdout, and diagnostics on stderr.

#![allow(clippy::disallowed_methods, reason = "this module owns stdout (the `Printer`) and the diagnostics on stderr")]

use std::io::{IsTerminal, Write};
use std::ops::ControlFlow;

use clap::ValueEnum;

use crate::cli::exit::{CliError, CliResult, Exit};

/// `--format human|json` for commands that report something.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Readable text.
    Human,
    /// One stable JSON document (or JSON Lines where documented).
    Json,
}

/// `--color auto|always|never`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Default)]
pub enum ColorChoice {
    /// Colour when stderr is a terminal and `NO_COLOR` is unset.
    #[default]
    Auto,
    /// Always colour.
    Always,
    /// Never colour.
    Never,
}

impl ColorChoice {
    /// Whether to colour output written to a stream that is (or is not) a terminal.
    pub fn enabled(self, is_terminal: bool) -> bool {
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => is_terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        }
    }

    /// Whether to colour stderr.
    pub fn stderr(self) -> bool {
        self.enabled(std::io::stderr().is_terminal())
    }

    /// Whether to colour stdout.
    pub fn stdout(self) -> bool {
        self.enabled(std::io::stdout().is_terminal())
    }
}

/// Standard output, the one way a command prints its results: locked for
/// the whole command, buffered (flushed after every write on a terminal, so
/// results and stderr messages keep their order there), and flushed by
/// [`Printer::finish`].
///
/// A failed write is remembered: later writes fail at once, and `finish`
/// reports the first failure. A closed reader (`rlp trace list | head -1`:
/// a broken pipe) stops the command quietly with the exit code of what it
/// found so far; any other failure (`> /dev/full`) is an error (exit 2,
/// like a file named by `-o` that cannot be written).
pub(crate) struct Printer {
    out: std::io::BufWriter<std::io::StdoutLock<'static>>,
    terminal: bool,
    failed: Option<std::io::Error>,
}

/// Why a command's results could not be written.
#[derive(Debug)]
pub enum OutputError {
    /// The reader went away (a broken pipe): stop quietly.
    Closed,
    /// Any other failure: a full disk, an I/O error.
    Failed(std::io::Error),
}

impl From<std::io::Error> for OutputError {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::BrokenPipe { OutputError::Closed } else { OutputError::Failed(e) }
    }
}

impl OutputError {
    /// The command's error: nothing to print and `exit` (the code of what
    /// the command found so far) when the reader went away, else a message
    /// naming standard output (exit 2).
    pub fn ending(self, exit: Exit) -> CliError {
        match self {
            OutputError::Closed => CliError::quiet(exit),
            OutputError::Failed(e) => {
                let help = match e.kind() {
                    std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => {
                        "free some disk space, or redirect standard output elsewhere"
                    }
                    _ => "check where standard output goes, or redirect it elsewhere",
                };
                CliError::usage(format!("cannot write to standard output: {}", os_message(&e))).with_help(help)
            }
        }
    }
}

impl From<OutputError> for CliError {
    /// A write that failed midway: [`OutputError::ending`] with exit 0.
    fn from(e: OutputError) -> Self {
        e.ending(Exit::Success)
    }
}

/// The operating system's message without its ` (os error N)` suffix.
fn os_message(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.rsplit_once(" (os error ") {
        Some((message, _)) => message.to_string(),
        None => text,
    }
}

impl Printer {
    /// Standard output, locked until the printer is finished or dropped.
    pub(crate) fn stdout() -> Printer {
        let stdout = std::io::stdout();
        let terminal = stdout.is_terminal();
        Printer { out: std::io::BufWriter::with_capacity(1 << 16, stdout.lock()), terminal, failed: None }
    }

    /// Whether standard output is a terminal.
    pub(crate) fn is_terminal(&self) -> bool {
        self.terminal
    }

    /// Whether a write has failed (the reader went away, the disk is full):
    /// a streaming writer's own error is then [`finish`](Printer::finish)'s to report.
    pub(crate) fn has_failed(&self) -> bool {
        self.failed.is_some()
    }

    /// Writes `text` as it is.
    pub(crate) fn text(&mut self, text: &str) -> Result<(), OutputError> {
        self.write_all(text.as_bytes()).map_err(OutputError::from)
    }

    /// Writes `text` and a newline.
    pub(crate) fn line(&mut self, text: impl std::fmt::Display) -> Result<(), OutputError> {
        writeln!(self, "{text}").map_err(OutputError::from)
    }

    /// Writes a JSON document, pretty and newline-terminated.
    pub(crate) fn json(&mut self, value: &serde_json::Value) -> Result<(), OutputError> {
        self.text(&json_text(value))
    }

    /// Writes what a command did: `human` as lines of text, or `json` as
    /// one document, as `format` asks.
    pub(crate) fn report(&mut self, format: Format, human: &str, json: &serde_json::Value) -> Result<(), OutputError> {
        match format {
            Format::Json => self.json(json),
            Format::Human => self.line(human),
        }
    }

    /// Flushes the output and ends the command with `exit`; a write that
    /// failed, now or before, ends it as [`OutputError::ending`] says.
    pub(crate) fn finish(mut self, exit: Exit) -> CliResult {
        let _ = self.flush();
        match self.failed.take() {
            Some(e) => Err(OutputError::from(e).ending(exit)),
            None => Ok(exit),
        }
    }

    /// Writes `text`, then [`finish`](Printer::finish)es with `exit`: for
    /// a command whose outcome is known before it prints.
    pub(crate) fn finish_with(mut self, text: &str, exit: Exit) -> CliResult {
        // A failure is remembered, and `finish` reports it with `exit`.
        let _ = self.text(text);
        self.finish(exit)
    }

    /// Flushes what was written and returns `error`, the command's outcome:
    /// a failure to write changes nothing (the error says what went wrong).
    pub(crate) fn fail(mut self, error: CliError) -> CliResult {
        let _ = self.flush();
        Err(error)
    }

    /// Keeps the first failure (for `finish`) and hands a copy back.
    fn remember(&mut self, e: std::io::Error) -> std::io::Error {
        let copy = std::io::Error::new(e.kind(), e.to_string());
        self.failed.get_or_insert(e);
        copy
    }

    /// The error every write returns once one has failed.
    fn stopped(&self) -> std::io::Result<()> {
        match &self.failed {
            Some(e) => Err(std::io::Error::new(e.kind(), e.to_string())),
            None => Ok(()),
        }
    }
}

/// Streaming writers (an archive, an export, a report) write through this.
impl Write for Printer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.stopped()?;
        let written =
            self.out.write(buf).and_then(|n| if self.terminal { self.out.flush().map(|()| n) } else { Ok(n) });
        written.map_err(|e| self.remember(e))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.stopped()?;
        self.out.flush().map_err(|e| self.remember(e))
    }
}

/// A JSON document as [`Printer::json`] writes it.
pub(crate) fn json_text(value: &serde_json::Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

/// Writes `text` and a newline to stderr (diagnostics, progress, warnings).
/// A stderr that cannot be written (a closed pipe) is ignored: there is
/// nowhere left to say anything.
pub(crate) fn diagnostic(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes()).and_then(|()| err.write_all(b"\n"));
}

/// `warning: …` on stderr, through [`diagnostic`]; the text (which may name
/// a file or quote one) cannot drive the terminal.
pub(crate) fn warning(text: impl std::fmt::Display) {
    diagnostic(&format!("warning: {}", crate::text::terminal_safe(&text.to_string())));
}

/// Where the library's notices go ([`crate::notice`]): stderr, made safe
/// for the terminal.
pub(crate) fn notice(notice: crate::notice::Notice<'_>) {
    match notice {
        crate::notice::Notice::Warning(text) => warning(text),
        crate::notice::Notice::Note(text) => diagnostic(&crate::text::terminal_safe(text)),
    }
}

/// Reads items with `visit` (a reader that calls back once per item and
/// stops at `Break`) and writes each with `write`; the first write that
/// fails stops the reading and becomes the command's error.
pub(crate) fn write_each<T, R, E>(
    visit: impl FnOnce(&mut dyn FnMut(T) -> ControlFlow<()>) -> Result<R, E>,
    mut write: impl FnMut(T) -> Result<(), OutputError>,
) -> Result<R, CliError>
where
    CliError: From<E>,
{
    let mut failure = None;
    let read = visit(&mut |item| match write(item) {
        Ok(()) => ControlFlow::Continue(()),
        Err(e) => {
            failure = Some(e);
            ControlFlow::Break(())
        }
    })?;
    match failure {
        Some(e) => Err(e.into()),
        None => Ok(read),
    }
}

/// A path in a JSON report. JSON strings are Unicode, so bytes of the path
/// that are not UTF-8 are shown as U+FFFD, as `Path::display` does (a path
/// serialised as it is would make the report fail).
pub(crate) fn path_json(path: &std::path::Path) -> serde_json::Value {
    serde_json::Value::String(path.display().to_string())
}
