//! Checks that a deflate stream is byte for byte the one `rlp bundle pack`
//! would write for the same content.
//!
//! Deflate allows many encodings of the same bytes (other match distances
//! into repeated data, the unused bits after the last block). A reader that
//! only checks the decompressed content would accept an archive whose bytes
//! were changed without changing its content. The reader therefore
//! compresses the content again with the writer's settings while it streams
//! and compares the result with the archive's compressed bytes.

use std::collections::VecDeque;
use std::io;

use flate2::{Compress, Compression, FlushCompress, Status};

use crate::pack::format::COMPRESSION_LEVEL;

/// Most compressed bytes read ahead of the re-encoded stream before the
/// stream is declared non-canonical (the writer's own lag is far smaller).
pub const MAX_LAG: usize = 8 << 20;

/// Re-encodes decompressed content and compares it with the original
/// compressed bytes as they arrive.
pub struct Reencoder {
    compress: Compress,
    out: Vec<u8>,
}

impl std::fmt::Debug for Reencoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Reencoder({} bytes out)", self.compress.total_out())
    }
}

impl Default for Reencoder {
    fn default() -> Self {
        Reencoder { compress: Compress::new(Compression::new(COMPRESSION_LEVEL), false), out: Vec::new() }
    }
}

impl Reencoder {
    /// Compresses the next decompressed bytes.
    pub fn feed(&mut self, input: &[u8]) -> io::Result<()> {
        self.run(input, FlushCompress::None)
    }

    /// Ends the stream.
    pub fn finish(&mut self) -> io::Result<()> {
        self.run(&[], FlushCompress::Finish)
    }

    fn run(&mut self, mut input: &[u8], flush: FlushCompress) -> io::Result<()> {
        loop {
            if self.out.capacity() - self.out.len() < 1 << 15 {
                self.out.reserve(1 << 16);
            }
            let (before_in, before_out) = (self.compress.total_in(), self.out.len());
            let status = self.compress.compress_vec(input, &mut self.out, flush).map_err(io::Error::other)?;
            let consumed = usize::try_from(self.compress.total_in() - before_in).map_err(io::Error::other)?;
            input = &input[consumed..];
            let stuck = consumed == 0 && self.out.len() == before_out;
            let room_left = self.out.len() < self.out.capacity();
            match flush {
                FlushCompress::Finish if status == Status::StreamEnd => return Ok(()),
                FlushCompress::Finish if stuck && room_left => return Err(io::Error::other("deflate did not finish")),
                FlushCompress::Finish => {}
                _ if input.is_empty() && room_left => return Ok(()),
                _ if stuck && room_left => return Err(io::Error::other("deflate made no progress")),
                _ => {}
            }
        }
    }

    /// Compares what has been re-encoded with the original bytes received so
    /// far, dropping the matched prefix of both. `false` on a difference.
    pub fn matches(&mut self, original: &mut VecDeque<u8>) -> bool {
        let n = self.out.len().min(original.len());
        if !original.range(..n).eq(self.out[..n].iter()) {
            return false;
        }
        original.drain(..n);
        self.out.drain(..n);
        true
    }

    /// Re-encoded bytes not yet compared.
    pub fn pending(&self) -> usize {
        self.out.len()
    }

    /// Total bytes re-encoded.
    pub fn total_out(&self) -> u64 {
        self.compress.total_out()
    }
}
