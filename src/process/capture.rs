//! What a tool prints, kept as it arrives: stdout up to a limit, the tail of
//! stderr. What was read so far can be taken at any time, so what a tool
//! printed before it exited counts even when the pipe never closes (a
//! process the tool started in the background still holds it).

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

/// Smallest amount a tail keeps between two trims (so that trimming stays
/// rare when the tail is short).
const TRIM_FLOOR: usize = 8 * 1024;

/// A capture in progress.
#[derive(Debug)]
pub(crate) struct Capture {
    keep: Keep,
    captured: Captured,
}

impl Capture {
    /// An empty capture keeping bytes as `keep` says.
    pub(crate) fn new(keep: Keep) -> Capture {
        Capture { keep, captured: Captured::default() }
    }

    /// Keeps `bytes`, just read from the pipe; returns whether the head
    /// overflowed (then reading stops).
    pub(crate) fn push(&mut self, bytes: &[u8]) -> bool {
        let captured = &mut self.captured;
        match self.keep {
            Keep::Head { limit } => {
                let room = usize::try_from(limit.saturating_sub(captured.bytes.len() as u64)).unwrap_or(usize::MAX);
                if bytes.len() > room {
                    captured.bytes.extend_from_slice(&bytes[..room]);
                    captured.cut = true;
                    return true;
                }
                captured.bytes.extend_from_slice(bytes);
            }
            Keep::Tail { keep, margin } => {
                let cap = keep + margin;
                captured.bytes.extend_from_slice(bytes);
                if captured.bytes.len() > 2 * cap.max(TRIM_FLOOR) {
                    let cut = captured.bytes.len() - cap;
                    captured.bytes.drain(..cut);
                    captured.cut = true;
                }
            }
        }
        false
    }

    /// The pipe reached its end: a tail is trimmed to its size.
    pub(crate) fn close(&mut self) {
        let captured = &mut self.captured;
        if let Keep::Tail { keep, margin } = self.keep
            && captured.bytes.len() > keep + margin
        {
            let cut = captured.bytes.len() - (keep + margin);
            captured.bytes.drain(..cut);
            captured.cut = true;
        }
        captured.closed = true;
    }

    /// The bytes kept so far.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.captured.bytes
    }

    /// What was read.
    pub(crate) fn into_captured(self) -> Captured {
        self.captured
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(keep: Keep, data: &[u8]) -> (bool, Captured) {
        let mut capture = Capture::new(keep);
        for chunk in data.chunks(8 * 1024) {
            if capture.push(chunk) {
                return (true, capture.into_captured());
            }
        }
        capture.close();
        (false, capture.into_captured())
    }

    #[test]
    fn a_tail_is_bounded() {
        let data = vec![b'x'; 300_000];
        let (overflow, tail) = read_all(Keep::Tail { keep: 1000, margin: 10 }, &data);
        assert!(!overflow);
        assert_eq!((tail.bytes.len(), tail.cut, tail.closed), (1010, true, true));
        let (_, short) = read_all(Keep::Tail { keep: 1000, margin: 10 }, b"short");
        assert_eq!(short, Captured { bytes: b"short".to_vec(), cut: false, closed: true });
    }

    #[test]
    fn a_head_stops_past_its_limit() {
        let (overflow, head) = read_all(Keep::Head { limit: 4 }, b"0123456789");
        assert!(overflow);
        assert_eq!(head, Captured { bytes: b"0123".to_vec(), cut: true, closed: false });
        let (overflow, head) = read_all(Keep::Head { limit: 4 }, b"0123");
        assert!(!overflow);
        assert_eq!(head, Captured { bytes: b"0123".to_vec(), cut: false, closed: true });
    }
}
