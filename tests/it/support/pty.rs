//! rlp on a real pseudo-terminal, as an operator meets it.

use std::process::Command;
use std::time::Duration;

use rexpect::session::PtySession;

/// A process running on a pseudo-terminal of its own.
pub struct Terminal {
    session: PtySession,
}

impl Terminal {
    /// Starts `command` on a new pseudo-terminal; each wait for output gives
    /// up after `patience`.
    pub fn spawn(command: Command, patience: Duration) -> Terminal {
        let millis = u64::try_from(patience.as_millis()).unwrap();
        Terminal { session: rexpect::session::spawn_command(command, Some(millis)).unwrap() }
    }

    /// Waits until the terminal shows `text`.
    pub fn expect(&mut self, text: &str) {
        self.session.exp_string(text).unwrap_or_else(|e| panic!("waiting for `{text}`: {e}"));
    }

    /// Waits for `prompt`, then types `line` and Enter.
    pub fn answer(&mut self, prompt: &str, line: &str) {
        self.expect(prompt);
        self.session.send_line(line).unwrap();
    }

    /// Types `keys` without Enter.
    pub fn press(&mut self, keys: &str) {
        self.session.send(keys).unwrap();
        self.session.flush().unwrap();
    }

    /// Waits until the process has closed the terminal.
    pub fn expect_end(&mut self) {
        self.session.exp_eof().unwrap();
    }
}
