//! What a tool prints, captured while it prints it: stdout up to a limit,
//! the tail of stderr. Each pipe is read on its own thread into a shared
//! buffer, so that what was printed before the tool exited can be taken
//! even when the pipe never closes (a process the tool started in the
//! background still holds it).

use std::io::{self, Read};
use std::sync::{Arc, Mutex, PoisonError};

/// Size of one read.
const CHUNK: usize = 8 * 1024;

/// A pipe's bytes as read so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Captured {
    /// The bytes kept: all of stdout up to its limit, the tail of stderr.
    pub bytes: Vec<u8>,
    /// stdout: more than the limit was printed. stderr: the front was cut.
    pub cut: bool,
    /// The pipe reached its end (every writer closed it).
    pub closed: bool,
}

/// How a capture keeps bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Keep {
    /// The first `limit` bytes; one more marks an overflow and stops reading.
    Head { limit: u64 },
    /// The last `keep + margin` bytes.
    Tail { keep: usize, margin: usize },
}

/// A capture in progress, shared with the thread that reads the pipe.
#[derive(Clone, Debug, Default)]
pub(crate) struct Capture(Arc<Mutex<Captured>>);

impl Capture {
    /// What was read so far.
    pub(crate) fn snapshot(&self) -> Captured {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Reads `pipe` to its end (or, for a head, past its limit), keeping
    /// bytes as `keep` says; returns whether the head overflowed.
    pub(crate) fn read_from(&self, mut pipe: impl Read, keep: Keep) -> bool {
        let mut chunk = [0u8; CHUNK];
        loop {
            let n = match pipe.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            let mut captured = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            match keep {
                Keep::Head { limit } => {
                    let room = usize::try_from(limit.saturating_sub(captured.bytes.len() as u64)).unwrap_or(usize::MAX);
                    if n > room {
                        captured.bytes.extend_from_slice(&chunk[..room]);
                        captured.cut = true;
                        return true;
                    }
                    captured.bytes.extend_from_slice(&chunk[..n]);
                }
                Keep::Tail { keep, margin } => {
                    let cap = keep + margin;
                    captured.bytes.extend_from_slice(&chunk[..n]);
                    if captured.bytes.len() > 2 * cap.max(CHUNK) {
                        let cut = captured.bytes.len() - cap;
                        captured.bytes.drain(..cut);
                        captured.cut = true;
                    }
                }
            }
        }
        let mut captured = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Keep::Tail { keep, margin } = keep
            && captured.bytes.len() > keep + margin
        {
            let cut = captured.bytes.len() - (keep + margin);
            captured.bytes.drain(..cut);
            captured.cut = true;
        }
        captured.closed = true;
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_is_bounded() {
        let capture = Capture::default();
        let data = vec![b'x'; 300_000];
        assert!(!capture.read_from(&data[..], Keep::Tail { keep: 1000, margin: 10 }));
        let tail = capture.snapshot();
        assert_eq!((tail.bytes.len(), tail.cut, tail.closed), (1010, true, true));
        let capture = Capture::default();
        capture.read_from(&b"short"[..], Keep::Tail { keep: 1000, margin: 10 });
        assert_eq!(capture.snapshot(), Captured { bytes: b"short".to_vec(), cut: false, closed: true });
    }

    #[test]
    fn a_head_stops_past_its_limit() {
        let capture = Capture::default();
        assert!(capture.read_from(&b"0123456789"[..], Keep::Head { limit: 4 }));
        assert_eq!(capture.snapshot(), Captured { bytes: b"0123".to_vec(), cut: true, closed: false });
        let capture = Capture::default();
        assert!(!capture.read_from(&b"0123"[..], Keep::Head { limit: 4 }));
        assert_eq!(capture.snapshot(), Captured { bytes: b"0123".to_vec(), cut: false, closed: true });
    }
}
