//! The canonical deflate encoding of an archive's tar stream: how
//! `rlp bundle pack` compresses it, and how the reader checks that an
//! archive's compressed bytes are exactly that encoding.
//!
//! The tar stream is cut into chunks of [`CHUNK`] bytes. Each chunk is
//! compressed on its own, by a fresh compressor at [`COMPRESSION_LEVEL`] with
//! no history from the chunk before; every chunk but the last ends with a sync
//! flush (an empty stored block, which byte-aligns the output) and the last
//! one with the final block. The concatenation is one ordinary deflate stream
//! that any gzip reader inflates, its bytes depend only on the content, and
//! the chunks are compressed — and re-compressed when checked — on every core.
//!
//! Deflate allows many encodings of the same bytes (other match distances
//! into repeated data, the unused bits after the last block). A reader that
//! only checked the decompressed content would accept an archive whose bytes
//! were changed without changing its content, so the canonical check
//! (`rlp bundle verify --canonical`, `rlp bundle pack --check`, `rlp agent
//! install`) compresses the content again, chunk by chunk, and compares the
//! result with the archive's compressed bytes as they arrive ([`Checker`]).
//! Plain `rlp bundle verify` checks the content only, inflating the chunks in
//! parallel ([`crate::pack::inflate`]).

use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::mpsc::{self, Receiver, TryRecvError};

use flate2::{Compress, Compression, FlushCompress, Status};

use crate::pack::format::{COMPRESSION_LEVEL, GZIP_HEADER};

/// Bytes of tar stream per independently compressed chunk.
pub const CHUNK: usize = 1 << 20;
/// Most chunks being compressed at once.
const MAX_IN_FLIGHT: usize = 8;
/// Most compressed bytes read ahead of the re-encoded stream before the
/// stream is declared non-canonical. An honest archive's lag is at most the
/// chunks in flight plus the one being filled (about 9 MiB); a stream of
/// blocks that inflate to nothing would otherwise grow without bound.
pub const MAX_LAG: usize = 16 << 20;

/// The canonical encoding of one chunk; `last` ends the deflate stream.
pub fn encode_chunk(data: &[u8], last: bool) -> io::Result<Vec<u8>> {
    let mut compress = Compress::new(Compression::new(COMPRESSION_LEVEL), false);
    let flush = if last { FlushCompress::Finish } else { FlushCompress::Sync };
    let mut out = Vec::with_capacity(data.len() + data.len() / 64 + 64);
    let mut input = data;
    loop {
        if out.capacity() - out.len() < 1 << 12 {
            out.reserve(1 << 16);
        }
        let (before_in, before_out) = (compress.total_in(), out.len());
        let status = compress.compress_vec(input, &mut out, flush).map_err(io::Error::other)?;
        let consumed = usize::try_from(compress.total_in() - before_in).map_err(io::Error::other)?;
        input = &input[consumed..];
        let room_left = out.len() < out.capacity();
        if status == Status::StreamEnd || (!last && input.is_empty() && room_left) {
            return Ok(out);
        }
        if consumed == 0 && out.len() == before_out && room_left {
            return Err(io::Error::other("deflate made no progress"));
        }
    }
}

/// Cuts a byte stream into chunks, compresses them on the rayon pool and
/// hands the encoded chunks back in stream order.
pub struct ChunkEncoder {
    filling: Vec<u8>,
    in_flight: VecDeque<Receiver<io::Result<Vec<u8>>>>,
    max_in_flight: usize,
}

impl std::fmt::Debug for ChunkEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ChunkEncoder({} bytes filling, {} chunks in flight)", self.filling.len(), self.in_flight.len())
    }
}

impl Default for ChunkEncoder {
    fn default() -> Self {
        let max_in_flight = (rayon::current_num_threads() + 1).clamp(2, MAX_IN_FLIGHT);
        ChunkEncoder { filling: Vec::with_capacity(CHUNK), in_flight: VecDeque::new(), max_in_flight }
    }
}

impl ChunkEncoder {
    /// Adds the next bytes of the stream. Encoded chunks that are ready go to
    /// `ready`, in order; this blocks only while too many chunks are in flight.
    pub fn feed(&mut self, mut data: &[u8], ready: &mut dyn FnMut(Vec<u8>) -> io::Result<()>) -> io::Result<()> {
        while !data.is_empty() {
            // A full chunk is sent only once more data shows it is not the last.
            if self.filling.len() == CHUNK {
                self.dispatch(false);
                self.collect(ready)?;
            }
            let take = data.len().min(CHUNK - self.filling.len());
            self.filling.extend_from_slice(&data[..take]);
            data = &data[take..];
        }
        Ok(())
    }

    /// Ends the stream: the chunk being filled is the last; every encoded
    /// chunk left goes to `ready`, in order.
    pub fn finish(mut self, ready: &mut dyn FnMut(Vec<u8>) -> io::Result<()>) -> io::Result<()> {
        self.dispatch(true);
        while let Some(front) = self.in_flight.pop_front() {
            ready(receive(&front)?)?;
        }
        Ok(())
    }

    fn dispatch(&mut self, last: bool) {
        let chunk = std::mem::replace(&mut self.filling, if last { Vec::new() } else { Vec::with_capacity(CHUNK) });
        let (done, result) = mpsc::sync_channel(1);
        rayon::spawn(move || {
            let _ = done.send(encode_chunk(&chunk, last));
        });
        self.in_flight.push_back(result);
    }

    /// Hands over the finished chunks at the front, waiting for the oldest
    /// while too many are in flight.
    fn collect(&mut self, ready: &mut dyn FnMut(Vec<u8>) -> io::Result<()>) -> io::Result<()> {
        while let Some(front) = self.in_flight.front() {
            let encoded = if self.in_flight.len() >= self.max_in_flight {
                receive(front)?
            } else {
                match front.try_recv() {
                    Ok(encoded) => encoded?,
                    Err(TryRecvError::Empty) => return Ok(()),
                    Err(TryRecvError::Disconnected) => return Err(lost()),
                }
            };
            self.in_flight.pop_front();
            ready(encoded)?;
        }
        Ok(())
    }
}

fn receive(result: &Receiver<io::Result<Vec<u8>>>) -> io::Result<Vec<u8>> {
    result.recv().map_err(|_| lost())?
}

fn lost() -> io::Error {
    io::Error::other("a compression worker stopped without an answer")
}

/// Writes one gzip member in the canonical form: [`GZIP_HEADER`], the
/// chunked deflate stream, then the CRC-32 and length of the content.
pub struct GzipWriter<W: Write> {
    out: W,
    encoder: ChunkEncoder,
    crc: flate2::Crc,
}

impl<W: Write> GzipWriter<W> {
    /// Starts the member (writes the header).
    pub fn new(mut out: W) -> io::Result<Self> {
        out.write_all(&GZIP_HEADER)?;
        Ok(GzipWriter { out, encoder: ChunkEncoder::default(), crc: flate2::Crc::new() })
    }

    /// Ends the member and returns the underlying writer.
    pub fn finish(self) -> io::Result<W> {
        let GzipWriter { mut out, encoder, crc } = self;
        encoder.finish(&mut |encoded| out.write_all(&encoded))?;
        out.write_all(&crc.sum().to_le_bytes())?;
        out.write_all(&crc.amount().to_le_bytes())?;
        Ok(out)
    }
}

impl<W: Write> Write for GzipWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.crc.update(buf);
        let out = &mut self.out;
        self.encoder.feed(buf, &mut |encoded| out.write_all(&encoded))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Checks, while an archive streams, that its compressed bytes are the
/// canonical encoding of the content they inflate to.
#[derive(Debug, Default)]
pub struct Checker {
    encoder: ChunkEncoder,
    compared: Comparison,
}

impl Checker {
    /// Takes the next inflated bytes. `original` holds the compressed bytes
    /// read so far and not yet compared; the equal prefix is dropped from it.
    /// `Ok(false)` once the two differ or the archive runs too far ahead.
    pub fn feed(&mut self, content: &[u8], original: &mut VecDeque<u8>) -> io::Result<bool> {
        let unmatched = &mut self.compared.unmatched;
        self.encoder.feed(content, &mut |encoded| {
            unmatched.extend(encoded);
            Ok(())
        })?;
        Ok(self.compared.advance(original) && original.len() <= MAX_LAG)
    }

    /// Ends the content: `Ok(true)` when the whole deflate stream, exactly
    /// `compressed_len` bytes, was the canonical encoding.
    pub fn finish(self, original: &mut VecDeque<u8>, compressed_len: u64) -> io::Result<bool> {
        let Checker { encoder, mut compared } = self;
        encoder.finish(&mut |encoded| {
            compared.unmatched.extend(encoded);
            Ok(())
        })?;
        Ok(compared.advance(original) && compared.unmatched.is_empty() && compared.matched == compressed_len)
    }
}

/// The re-encoded bytes against the archive's, compared as both arrive.
#[derive(Debug, Default)]
struct Comparison {
    /// Re-encoded bytes not yet compared with the archive's.
    unmatched: VecDeque<u8>,
    /// Bytes compared and equal so far.
    matched: u64,
}

impl Comparison {
    /// Compares what both sides have, dropping the equal prefix of each;
    /// `false` on a difference.
    fn advance(&mut self, original: &mut VecDeque<u8>) -> bool {
        let n = self.unmatched.len().min(original.len());
        if !original.range(..n).eq(self.unmatched.range(..n)) {
            return false;
        }
        original.drain(..n);
        self.unmatched.drain(..n);
        self.matched += n as u64;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// Half text-like (compressible) runs, half noise, alternating every 4 KiB.
    fn sample(len: usize) -> Vec<u8> {
        let noise: Vec<u8> = (0..len as u64).map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8).collect();
        noise
            .iter()
            .enumerate()
            .map(|(i, &b)| if (i / 4096) % 2 == 0 { b"abcdefgh"[usize::from(b % 8)] } else { b })
            .collect()
    }

    fn pack(content: &[u8], write_size: usize) -> Vec<u8> {
        let mut gz = GzipWriter::new(Vec::new()).unwrap();
        for piece in content.chunks(write_size.max(1)) {
            gz.write_all(piece).unwrap();
        }
        gz.finish().unwrap()
    }

    #[test]
    fn any_gzip_reader_inflates_it_and_the_bytes_do_not_depend_on_write_sizes() {
        for len in [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 12_345] {
            let content = sample(len);
            let packed = pack(&content, 65_536);
            assert_eq!(pack(&content, 7_777), packed, "len {len}");
            assert_eq!(&packed[..10], &GZIP_HEADER);
            let mut inflated = Vec::new();
            flate2::read::GzDecoder::new(&packed[..]).read_to_end(&mut inflated).unwrap();
            assert_eq!(inflated, content, "len {len}");
        }
    }

    fn check(content: &[u8], deflate: &[u8]) -> bool {
        let mut checker = Checker::default();
        let mut original: VecDeque<u8> = deflate.iter().copied().collect();
        for piece in content.chunks(50_000) {
            if !checker.feed(piece, &mut original).unwrap() {
                return false;
            }
        }
        checker.finish(&mut original, deflate.len() as u64).unwrap()
    }

    #[test]
    fn the_checker_accepts_the_canonical_stream_and_nothing_else() {
        let content = sample(2 * CHUNK + 999);
        let packed = pack(&content, 65_536);
        let deflate = &packed[10..packed.len() - 8];
        assert!(check(&content, deflate));
        // The same content encoded another way (one stream, no chunks).
        let mut other = flate2::write::DeflateEncoder::new(Vec::new(), Compression::new(COMPRESSION_LEVEL));
        other.write_all(&content).unwrap();
        assert!(!check(&content, &other.finish().unwrap()));
        // A byte more after the stream.
        let mut longer = deflate.to_vec();
        longer.push(0);
        assert!(!check(&content, &longer));
    }
}
