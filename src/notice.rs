//! What the library has to tell the person running rlp that is neither a
//! result nor an error: a warning (the exec tool sandbox is partial on this
//! kernel) or a note (the trace an `rlp serve` session records into).
//!
//! The library never writes to stdout or stderr itself. It hands each
//! notice to the sink the CLI installs when it starts (`cli::output`
//! writes it to stderr, made safe for the terminal); where no sink is
//! installed — the library embedded elsewhere, its unit tests — notices
//! are dropped (what they say is also on the call's frames).

use std::sync::OnceLock;

/// One message for the person at the terminal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Notice<'a> {
    /// Something that works less well than asked (printed as `warning: …`).
    Warning(&'a str),
    /// Something worth knowing (printed as is).
    Note(&'a str),
}

/// The sink notices go to.
pub type Sink = fn(Notice<'_>);

static SINK: OnceLock<Sink> = OnceLock::new();

/// Sends notices to `sink` from now on (the first sink installed stays).
pub fn install(sink: Sink) {
    let _ = SINK.set(sink);
}

/// A warning, to the installed sink.
pub(crate) fn warn(text: &str) {
    emit(Notice::Warning(text));
}

/// A note, to the installed sink.
pub(crate) fn note(text: &str) {
    emit(Notice::Note(text));
}

fn emit(notice: Notice<'_>) {
    if let Some(sink) = SINK.get() {
        sink(notice);
    }
}
