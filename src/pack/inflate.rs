//! Inflating an archive's deflate stream on every core.
//!
//! `rlp bundle pack` compresses the tar stream in independent 1 MiB chunks,
//! each ended by a sync flush — an empty stored block, the bytes
//! `00 00 ff ff` on a byte boundary (see [`crate::pack::canonical`]). The
//! stream is cut after every such 4-byte mark and the pieces are inflated at
//! once, each by a fresh decoder with no history. A mark can also occur inside
//! compressed data, so a piece is accepted only when it is proven to decode
//! exactly as a single sequential decoder would decode it:
//!
//! - it starts where a proven piece ended (the first at the stream's start);
//! - its decoder ends at a block boundary, byte-aligned, exactly at the
//!   piece's last byte, not after the final block, having written exactly
//!   [`CHUNK`] bytes (the last piece instead ends with the final block,
//!   followed by exactly the 8-byte gzip trailer);
//! - its output buffer does not wrap, so a match reaching before the piece's
//!   start is an error rather than a read of bytes the decoder never wrote.
//!
//! A sequential decoder is then between blocks with nothing pending at every
//! accepted cut, which is where a fresh decoder starts: both produce the same
//! bytes. A piece that fails is joined with the next and decoded again (at
//! most [`MAX_JOINED`] pieces); a stream that does not cut this way (not
//! chunked, chunks of another size, marks too far apart or too many) makes
//! [`Parallel`] give up, and the caller reads the archive again with one
//! sequential decoder.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::sync::mpsc::{self, Receiver};

use miniz_oxide::inflate::TINFLStatus;
use miniz_oxide::inflate::core::inflate_flags::{
    TINFL_FLAG_HAS_MORE_INPUT, TINFL_FLAG_STOP_ON_BLOCK_BOUNDARY, TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF,
};
use miniz_oxide::inflate::core::{DecompressorOxide, decompress};

use crate::pack::canonical::CHUNK;

/// The end of a sync flush: an empty stored block's length and its complement.
const SYNC_MARK: [u8; 4] = [0, 0, 0xff, 0xff];
/// Compressed bytes read at a time.
const READ_SIZE: usize = 1 << 18;
/// Most compressed bytes between two accepted cuts. A canonical chunk
/// compresses to at most a little more than [`CHUNK`] (incompressible data
/// is stored); beyond this the stream is not chunked the canonical way.
const MAX_PIECE: usize = 2 * CHUNK;
/// Most pieces being inflated at once.
const MAX_IN_FLIGHT: usize = 8;
/// Most pieces joined into one chunk. A mark inside a canonical chunk is rare
/// (incompressible data that happens to hold the 4 bytes); a stream of tiny
/// blocks each ended by a mark would otherwise be decoded again and again.
const MAX_JOINED: usize = 16;

/// Why the parallel path stopped: the archive is damaged, or not cut into
/// chunks; either way the sequential reader decides and explains.
#[derive(Debug)]
pub(crate) struct GiveUp;

/// One piece of the deflate stream and, if it decoded as a whole piece, its content.
struct Piece {
    input: Vec<u8>,
    last: bool,
    decoded: Option<Decoded>,
}

/// The content of a piece that ends at a proven cut.
struct Decoded {
    output: Vec<u8>,
    /// Compressed bytes used (the last piece: the rest is the gzip trailer).
    used: usize,
    crc: flate2::Crc,
}

/// Decodes `input` from a block boundary with no history: `Some` when it ends
/// at a byte-aligned block boundary exactly at its end and inflates to
/// exactly [`CHUNK`] bytes, as every chunk but the last does (`last`: when it
/// ends with the final block and inflates to at most [`CHUNK`] bytes).
fn decode(input: &[u8], last: bool) -> Option<Decoded> {
    let mut output = vec![0u8; CHUNK];
    let mut decoder = DecompressorOxide::new();
    let mut flags = TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF | TINFL_FLAG_STOP_ON_BLOCK_BOUNDARY;
    if !last {
        flags |= TINFL_FLAG_HAS_MORE_INPUT;
    }
    let (mut read, mut written) = (0, 0);
    loop {
        let (status, r, w) = decompress(&mut decoder, &input[read..], &mut output, written, flags);
        read += r;
        written += w;
        match status {
            TINFLStatus::BlockBoundary if !last && read == input.len() => {
                if decoder.block_boundary_state()?.num_bits != 0 || written != CHUNK {
                    return None;
                }
                break;
            }
            TINFLStatus::BlockBoundary => {}
            TINFLStatus::Done if last => break,
            _ => return None,
        }
    }
    output.truncate(written);
    let mut crc = flate2::Crc::new();
    crc.update(&output);
    Some(Decoded { output, used: read, crc })
}

/// The inflated stream of a chunked archive, decoded on the rayon pool and
/// handed out in order.
pub(crate) struct Parallel<R: Read> {
    input: R,
    /// Read and not yet cut into pieces.
    carry: Vec<u8>,
    /// How much of `carry` is known to hold no mark.
    scanned: usize,
    /// The last piece has been cut.
    cut_all: bool,
    in_flight: VecDeque<Receiver<Piece>>,
    max_in_flight: usize,
    /// Pieces since the last proven cut that did not end at a chunk's end.
    joined: Vec<u8>,
    /// How many.
    joined_pieces: usize,
    current: Vec<u8>,
    position: usize,
    /// The gzip trailer, once the last piece is decoded.
    trailer: Option<[u8; 8]>,
    crc: flate2::Crc,
    /// Bytes handed out.
    pub(crate) out: u64,
    /// Compressed bytes behind them.
    pub(crate) consumed: u64,
}

impl<R: Read> Parallel<R> {
    /// Starts after the gzip header; `carry` holds bytes already read past it.
    pub(crate) fn new(input: R, carry: Vec<u8>) -> Self {
        let max_in_flight = (rayon::current_num_threads() + 1).clamp(2, MAX_IN_FLIGHT);
        Parallel {
            input,
            carry,
            scanned: 0,
            cut_all: false,
            in_flight: VecDeque::new(),
            max_in_flight,
            joined: Vec::new(),
            joined_pieces: 0,
            current: Vec::new(),
            position: 0,
            trailer: None,
            crc: flate2::Crc::new(),
            out: 0,
            consumed: 0,
        }
    }

    /// The next inflated bytes; `Ok(0)` at the end of the deflate stream.
    pub(crate) fn read(&mut self, buf: &mut [u8]) -> Result<usize, GiveUp> {
        while self.position == self.current.len() {
            if self.trailer.is_some() {
                return Ok(0);
            }
            self.next_piece()?;
        }
        let n = buf.len().min(self.current.len() - self.position);
        buf[..n].copy_from_slice(&self.current[self.position..self.position + n]);
        self.position += n;
        Ok(n)
    }

    /// The CRC-32 and length of the whole content against the gzip trailer.
    pub(crate) fn trailer_matches(&self) -> bool {
        let Some(trailer) = self.trailer else { return false };
        let crc = u32::from_le_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
        let size = u32::from_le_bytes([trailer[4], trailer[5], trailer[6], trailer[7]]);
        crc == self.crc.sum() && size == self.out as u32
    }

    fn next_piece(&mut self) -> Result<(), GiveUp> {
        loop {
            while self.in_flight.len() < self.max_in_flight && !self.cut_all {
                self.cut()?;
            }
            let piece = self.in_flight.pop_front().ok_or(GiveUp)?.recv().map_err(|_| GiveUp)?;
            let Piece { input, last, decoded } = piece;
            if self.joined_pieces == 0 {
                self.joined = input;
            } else {
                self.joined.extend_from_slice(&input);
            }
            self.joined_pieces += 1;
            let decoded = if self.joined_pieces == 1 { decoded } else { decode(&self.joined, last) };
            match decoded {
                Some(decoded) => {
                    self.joined_pieces = 0;
                    let input = std::mem::take(&mut self.joined);
                    return self.accept(decoded, &input, last);
                }
                None if last || self.joined_pieces > MAX_JOINED || self.joined.len() > MAX_PIECE => {
                    return Err(GiveUp);
                }
                None => {}
            }
        }
    }

    fn accept(&mut self, decoded: Decoded, input: &[u8], last: bool) -> Result<(), GiveUp> {
        if last {
            self.trailer = Some(input[decoded.used..].try_into().map_err(|_| GiveUp)?);
        }
        self.crc.combine(&decoded.crc);
        self.out += decoded.output.len() as u64;
        self.consumed += decoded.used as u64;
        self.current = decoded.output;
        self.position = 0;
        Ok(())
    }

    /// Cuts the next piece (after the next mark, or the rest at the end of
    /// the input) and sends it to be decoded.
    fn cut(&mut self) -> Result<(), GiveUp> {
        loop {
            let from = self.scanned.saturating_sub(SYNC_MARK.len() - 1);
            if let Some(at) = memchr::memmem::find(&self.carry[from..], &SYNC_MARK) {
                let end = from + at + SYNC_MARK.len();
                let rest = self.carry.split_off(end);
                let piece = std::mem::replace(&mut self.carry, rest);
                self.scanned = 0;
                self.dispatch(piece, false);
                return Ok(());
            }
            self.scanned = self.carry.len();
            if self.carry.len() > MAX_PIECE {
                return Err(GiveUp);
            }
            let start = self.carry.len();
            self.carry.resize(start + READ_SIZE, 0);
            let n = loop {
                match self.input.read(&mut self.carry[start..]) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => return Err(GiveUp),
                }
            };
            self.carry.truncate(start + n);
            if n == 0 {
                let piece = std::mem::take(&mut self.carry);
                self.cut_all = true;
                self.dispatch(piece, true);
                return Ok(());
            }
        }
    }

    fn dispatch(&mut self, input: Vec<u8>, last: bool) {
        let (done, result) = mpsc::sync_channel(1);
        rayon::spawn(move || {
            let decoded = decode(&input, last);
            let _ = done.send(Piece { input, last, decoded });
        });
        self.in_flight.push_back(result);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::canonical::GzipWriter;
    use std::io::{Read, Write};

    fn inflate_all(gz: &[u8]) -> Result<Vec<u8>, GiveUp> {
        let mut parallel = Parallel::new(&gz[10..], Vec::new());
        let mut out = Vec::new();
        let mut buf = vec![0u8; 100_000];
        loop {
            let n = parallel.read(&mut buf)?;
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        if parallel.trailer_matches() { Ok(out) } else { Err(GiveUp) }
    }

    /// Text-like runs, runs of marks, and noise (stored as is) with marks in
    /// it: cuts that are not chunk ends, inside compressed and stored data.
    fn sample(len: usize) -> Vec<u8> {
        (0..len as u64)
            .map(|i| match (i / 100_000) % 3 {
                0 => b"abcdefgh"[((i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 61) as usize) % 8],
                1 if i % 50_000 < 4 => SYNC_MARK[(i % 4) as usize],
                1 => {
                    let z = (i ^ (i >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                    let z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                    (z ^ (z >> 31)) as u8
                }
                _ => SYNC_MARK[(i % 4) as usize],
            })
            .collect()
    }

    #[test]
    fn chunked_streams_inflate_in_parallel_to_the_same_bytes() {
        for len in [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 12_345] {
            let content = sample(len);
            let mut gz = GzipWriter::new(Vec::new()).unwrap();
            gz.write_all(&content).unwrap();
            let packed = gz.finish().unwrap();
            assert!(inflate_all(&packed).ok().as_deref() == Some(&content[..]), "len {len}");
            if len > 3 * CHUNK {
                let marks = memchr::memmem::find_iter(&packed, &SYNC_MARK).count();
                assert!(marks > len / CHUNK, "{marks} marks: none inside a chunk");
            }
        }
    }

    #[test]
    fn a_stream_of_tiny_blocks_is_left_to_the_sequential_reader() {
        // 100,000 empty stored blocks, then the final one: a valid stream of nothing.
        let mut gz = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
        for _ in 0..100_000 {
            gz.extend_from_slice(&[0, 0, 0, 0xff, 0xff]);
        }
        gz.extend_from_slice(&[3, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        let mut inflated = Vec::new();
        flate2::read::GzDecoder::new(&gz[..]).read_to_end(&mut inflated).unwrap();
        assert!(inflated.is_empty());
        assert!(inflate_all(&gz).is_err());
    }

    #[test]
    fn a_stream_that_is_not_chunked_is_left_to_the_sequential_reader() {
        let content = sample(2 * CHUNK);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
        gz.write_all(&content).unwrap();
        let packed = gz.finish().unwrap();
        assert!(inflate_all(&packed).is_err());
    }
}
