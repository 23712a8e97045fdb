//! The safe archive reader: streams a `.bundle.tar.gz`, refuses anything but
//! the canonical form (see [`crate::pack::format`]), enforces limits, hashes
//! every file as it passes and hands the content to a [`Sink`]. Verification
//! ([`verify_archive`]) inflates the chunks of the archive on every core.
//!
//! The first entry decides the archive's [`Format`]: `agent.bundle/` (format
//! 2, what `rlp bundle pack` writes) or `manifest.toml` (format 1, the
//! bundle's files at the root, what rlp wrote before). Every later entry must
//! be in the same form: a format 2 archive with an entry outside
//! `agent.bundle/`, or a format 1 archive with one under it, is refused. The
//! [`Sink`] receives bundle paths either way, so both extract alike.
//!
//! Nothing in the archive is trusted before it is checked: entry types,
//! names (no absolute paths, no `..`, no duplicates, nothing the manifest
//! does not list), sizes (per file, in total, against the manifest), the
//! entry count and the compression ratio are checked before any byte of an
//! entry reaches the sink. The gzip CRC and length are checked at the end,
//! and no byte may follow the gzip stream. [`read_archive`] and
//! [`Encoding::Canonical`] also require the compressed bytes to be the
//! canonical encoding of the content ([`crate::pack::canonical`]).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};

use flate2::bufread::DeflateDecoder;

use crate::bundle::manifest::{Digest, MANIFEST_FILE, SIGNATURES_DIR, is_valid_artifact_path};
use crate::integrity::failure::{Failure, Reason};
use crate::integrity::signature::{MAX_SIGNATURE_BYTES, SIGNATURE_FILE};
use crate::integrity::verify::{self, Evidence, FileFacts, MAX_MANIFEST_BYTES, MAX_POLICY_BYTES};
use crate::pack::canonical::{Checker, MAX_LAG};
use crate::pack::format::{BLOCK, BUNDLE_PREFIX, GZIP_HEADER, Kind, canonical_header, padding, tar_name};
use crate::pack::inflate::{GiveUp, Parallel};
use crate::text::terminal_safe_line;

pub use crate::pack::format::Format;

/// Bounds on what an archive may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most entries (files and folders, manifest included).
    pub max_entries: usize,
    /// Largest single file.
    pub max_file_bytes: u64,
    /// Largest total of all file sizes.
    pub max_total_bytes: u64,
    /// Largest ratio of decompressed to compressed bytes…
    pub max_ratio: u64,
    /// …once more than this many bytes have been decompressed.
    pub ratio_floor: u64,
}

impl Default for Limits {
    /// 20,000 entries, 1 GiB per file, 2 GiB in total, and at most 256×
    /// expansion once 8 MiB have been decompressed.
    fn default() -> Self {
        Limits {
            max_entries: 20_000,
            max_file_bytes: 1 << 30,
            max_total_bytes: 2 << 30,
            max_ratio: 256,
            ratio_floor: 8 << 20,
        }
    }
}

/// Where verified entries go, in archive order. Paths are bundle paths that
/// passed every name check.
pub trait Sink {
    /// A folder.
    fn directory(&mut self, path: &str) -> io::Result<()>;
    /// The start of a file.
    fn begin_file(&mut self, path: &str, executable: bool) -> io::Result<()>;
    /// The next bytes of the current file.
    fn write(&mut self, chunk: &[u8]) -> io::Result<()>;
    /// The end of the current file.
    fn end_file(&mut self) -> io::Result<()>;
}

/// A sink that keeps nothing (verification only).
#[derive(Debug, Default)]
pub struct Discard;

impl Sink for Discard {
    fn directory(&mut self, _: &str) -> io::Result<()> {
        Ok(())
    }
    fn begin_file(&mut self, _: &str, _: bool) -> io::Result<()> {
        Ok(())
    }
    fn write(&mut self, _: &[u8]) -> io::Result<()> {
        Ok(())
    }
    fn end_file(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn bad(message: impl Into<String>) -> Failure {
    Failure::new(Reason::Archive, message).with_help("the archive is damaged or was not made by `rlp bundle pack`")
}

/// Keeps the compressed bytes read, when asked, until the re-encoded stream
/// has been compared with them.
struct Recording<R> {
    inner: R,
    record: Option<VecDeque<u8>>,
}

/// Most compressed bytes kept before they are compared: the comparison's
/// own bound, [`MAX_LAG`], and room for what the decoder has read ahead.
/// Compressed input that inflates to nothing (empty deflate blocks) is
/// never compared, so it is bounded here.
const MAX_RECORDED: usize = MAX_LAG + (1 << 20);

impl<R: Read> Read for Recording<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(record) = &mut self.record {
            if record.len() + n > MAX_RECORDED {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "its compressed bytes run more than {} MiB ahead of their content, which `rlp bundle pack` never writes",
                        MAX_LAG >> 20
                    ),
                ));
            }
            record.extend(&buf[..n]);
        }
        Ok(n)
    }
}

/// Whether the compressed bytes must be the canonical encoding of the content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// Byte for byte what the writer produces (`rlp bundle verify --canonical`,
    /// and installation, which reads an archive the first time).
    Canonical,
    /// Any deflate stream of the same content (`rlp bundle verify`; re-reading
    /// an archive already checked).
    Content,
}

fn not_canonical() -> Failure {
    bad(
        "the archive's compressed bytes are not the canonical encoding `rlp bundle pack` writes (the archive was altered)",
    )
}

fn cannot_reencode(e: io::Error) -> Failure {
    bad(format!("cannot re-encode the archive: {e}"))
}

/// The decompressed tar stream.
trait TarStream: Sized {
    /// The next bytes; `Ok(0)` at the end of the stream.
    fn read_some(&mut self, buf: &mut [u8]) -> Result<usize, Failure>;

    /// Checks that nothing follows the end-of-archive marker, and the gzip
    /// trailer (CRC-32 and length), and that nothing follows it.
    fn finish(self) -> Result<(), Failure>;

    /// Fills `buf` completely; `Ok(false)` at a clean end of stream before the first byte.
    fn read_full(&mut self, buf: &mut [u8]) -> Result<bool, Failure> {
        let mut filled = 0;
        while filled < buf.len() {
            let n = self.read_some(&mut buf[filled..])?;
            if n == 0 {
                if filled == 0 {
                    return Ok(false);
                }
                return Err(bad("the archive ends in the middle of an entry"));
            }
            filled += n;
        }
        Ok(true)
    }
}

fn bomb(limits: &Limits, out: u64, compressed: u64) -> Result<(), Failure> {
    if out > limits.ratio_floor && out > compressed.saturating_mul(limits.max_ratio) {
        return Err(Failure::new(
            Reason::Archive,
            format!(
                "the archive expands more than {}× ({out} bytes from {compressed}); refusing a likely compression bomb",
                limits.max_ratio
            ),
        ));
    }
    Ok(())
}

/// The decompressed tar stream, one decoder, with its CRC, length, ratio and encoding checks.
struct Inflater<R: Read> {
    decoder: DeflateDecoder<BufReader<Recording<R>>>,
    crc: flate2::Crc,
    out: u64,
    limits: Limits,
    checker: Option<Checker>,
}

impl<R: Read> TarStream for Inflater<R> {
    fn read_some(&mut self, buf: &mut [u8]) -> Result<usize, Failure> {
        let n = loop {
            match self.decoder.read(buf) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(bad(format!("the archive is corrupt: {e}"))),
            }
        };
        self.crc.update(&buf[..n]);
        self.out += n as u64;
        bomb(&self.limits, self.out, self.decoder.total_in())?;
        if let Some(checker) = &mut self.checker {
            let record = self.decoder.get_mut().get_mut().record.get_or_insert_default();
            if !checker.feed(&buf[..n], record).map_err(cannot_reencode)? {
                return Err(not_canonical());
            }
        }
        Ok(n)
    }

    fn finish(mut self) -> Result<(), Failure> {
        let mut probe = [0u8; 1];
        if self.read_some(&mut probe)? != 0 {
            return Err(bad("the archive has data after its end-of-archive marker"));
        }
        if let Some(checker) = self.checker.take() {
            let consumed = self.decoder.total_in();
            let record = self.decoder.get_mut().get_mut().record.get_or_insert_default();
            if !checker.finish(record, consumed).map_err(cannot_reencode)? {
                return Err(not_canonical());
            }
        }
        let mut raw = self.decoder.into_inner();
        let mut trailer = [0u8; 8];
        raw.read_exact(&mut trailer).map_err(|_| bad("the gzip trailer is missing or cut short"))?;
        let crc = u32::from_le_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
        let size = u32::from_le_bytes([trailer[4], trailer[5], trailer[6], trailer[7]]);
        if crc != self.crc.sum() || size != self.out as u32 {
            return Err(bad("the gzip checksum does not match the content (the archive was altered)"));
        }
        match raw.fill_buf() {
            Ok([]) => Ok(()),
            Ok(_) => Err(bad("the archive has bytes after the end of its gzip stream")),
            Err(e) => Err(bad(format!("cannot read the archive: {e}"))),
        }
    }
}

/// The decompressed tar stream of a chunked archive, inflated on every core
/// ([`crate::pack::inflate`]). Any failure, whether the archive is damaged or
/// only not chunked, sends the caller back to one sequential [`Inflater`],
/// which decides and explains; the message here is never shown.
struct ParallelStream<R: Read> {
    inner: Parallel<R>,
    limits: Limits,
}

fn gave_up(_: GiveUp) -> Failure {
    bad("the archive is not cut into independent chunks")
}

impl<R: Read> TarStream for ParallelStream<R> {
    fn read_some(&mut self, buf: &mut [u8]) -> Result<usize, Failure> {
        let n = self.inner.read(buf).map_err(gave_up)?;
        bomb(&self.limits, self.inner.out, self.inner.consumed)?;
        Ok(n)
    }

    fn finish(mut self) -> Result<(), Failure> {
        let mut probe = [0u8; 1];
        if self.read_some(&mut probe)? != 0 {
            return Err(bad("the archive has data after its end-of-archive marker"));
        }
        if !self.inner.trailer_matches() {
            return Err(bad("the gzip checksum does not match the content (the archive was altered)"));
        }
        Ok(())
    }
}

/// What the manifest allows into the archive.
struct Allowed {
    files: BTreeMap<String, (Option<u64>, Option<Digest>)>,
    dirs: HashSet<String>,
    caps_file: String,
}

impl Allowed {
    fn from(evidence_manifest: &crate::bundle::manifest::Manifest) -> Allowed {
        let mut files = BTreeMap::new();
        let mut dirs = HashSet::new();
        for artifact in evidence_manifest.listed() {
            files.insert(artifact.path.clone(), (artifact.size, artifact.blake3));
            let mut path = artifact.path.as_str();
            while let Some((parent, _)) = path.rsplit_once('/') {
                dirs.insert(parent.to_string());
                path = parent;
            }
        }
        dirs.insert(SIGNATURES_DIR.to_string());
        Allowed { files, dirs, caps_file: evidence_manifest.caps_file.clone() }
    }
}

/// Why an entry type is refused, if it is.
fn refused_type(entry_type: tar::EntryType) -> Option<&'static str> {
    use tar::EntryType::*;
    match entry_type {
        Regular | Directory => None,
        Symlink => Some("is a symbolic link"),
        Link => Some("is a hard link"),
        Char | Block => Some("is a device file"),
        Fifo => Some("is a FIFO"),
        GNULongName | GNULongLink | XHeader | XGlobalHeader => {
            Some("is a tar extension header (long name or PAX); rlp archives use plain ustar headers")
        }
        _ => Some("has an unsupported entry type"),
    }
}

/// Checks the name of an entry of an archive of `format` (after its first)
/// and returns the bundle path.
fn check_name(name: &str, is_dir: bool, format: Format) -> Result<&str, Failure> {
    // The name is the archive's, shown on one line whatever it holds.
    let quoted = terminal_safe_line(name);
    if name.starts_with('/') {
        return Err(Failure::new(Reason::Archive, format!("entry `{quoted}` has an absolute path")));
    }
    let path = match (is_dir, name.strip_suffix('/')) {
        (true, Some(path)) => path,
        (false, None) => name,
        (true, None) | (false, Some(_)) => {
            return Err(bad(format!("entry `{quoted}`: folders and only folders end with `/`")));
        }
    };
    if path.split(['/', '\\']).any(|segment| segment == "..") {
        return Err(Failure::new(Reason::Archive, format!("entry `{quoted}` climbs out of the bundle with `..`")));
    }
    let path = match (format, name.starts_with(BUNDLE_PREFIX)) {
        (Format::V2, true) => path.strip_prefix(BUNDLE_PREFIX).unwrap_or_default(),
        (Format::V2, false) => {
            return Err(bad(format!(
                "entry `{quoted}` lies outside `{BUNDLE_PREFIX}`: every entry of an archive that starts with `{BUNDLE_PREFIX}` (format 2) must be under it"
            )));
        }
        (Format::V1, true) => {
            return Err(bad(format!(
                "entry `{quoted}` is under `{BUNDLE_PREFIX}`, but the archive starts with `{MANIFEST_FILE}` at its root: an archive keeps every entry under `{BUNDLE_PREFIX}` (format 2) or none (format 1), never some of them"
            )));
        }
        (Format::V1, false) => path,
    };
    if !is_valid_artifact_path(path) {
        return Err(Failure::new(
            Reason::Archive,
            format!("entry `{quoted}` is not a valid bundle path (`/`-separated [A-Za-z0-9._-] segments)"),
        ));
    }
    Ok(path)
}

/// Reads an archive, checking every entry before it reaches `sink`, and
/// returns the evidence for [`verify::check`]. The compressed bytes must be
/// exactly the canonical encoding of the content (see [`crate::pack::canonical`]).
pub fn read_archive<R: Read>(input: R, limits: &Limits, sink: &mut dyn Sink) -> Result<Evidence, Failure> {
    read(input, limits, sink, Encoding::Canonical).map(|(evidence, _)| evidence)
}

/// Like [`read_archive`], but accepts any deflate encoding of the content:
/// for reading again an archive that [`read_archive`] already accepted (every
/// entry, size, digest and the gzip checksum are still checked).
pub fn read_archive_content<R: Read>(input: R, limits: &Limits, sink: &mut dyn Sink) -> Result<Evidence, Failure> {
    read(input, limits, sink, Encoding::Content).map(|(evidence, _)| evidence)
}

/// Like [`read_archive`] with [`Encoding::Canonical`], or [`read_archive_content`]
/// with [`Encoding::Content`], and also says which [`Format`] the archive is in.
pub fn read_archive_with_format<R: Read>(
    input: R,
    limits: &Limits,
    sink: &mut dyn Sink,
    encoding: Encoding,
) -> Result<(Evidence, Format), Failure> {
    read(input, limits, sink, encoding)
}

/// Verifies an archive (nothing is kept) and returns the evidence for
/// [`verify::check`]. With [`Encoding::Content`] the chunks of an archive
/// `rlp bundle pack` wrote are inflated on every core; any other deflate
/// stream of the content is read with one decoder, and so is a damaged
/// archive, whose failure is then the one [`read_archive_content`] reports.
/// With [`Encoding::Canonical`] this is [`read_archive`].
pub fn verify_archive<R: Read + Seek>(input: R, limits: &Limits, encoding: Encoding) -> Result<Evidence, Failure> {
    verify_archive_with_format(input, limits, encoding).map(|(evidence, _)| evidence)
}

/// [`verify_archive`], which also says which [`Format`] the archive is in.
pub fn verify_archive_with_format<R: Read + Seek>(
    mut input: R,
    limits: &Limits,
    encoding: Encoding,
) -> Result<(Evidence, Format), Failure> {
    if encoding == Encoding::Canonical {
        return read(input, limits, &mut Discard, Encoding::Canonical);
    }
    let fast = (|| {
        let mut gzip_header = [0u8; 10];
        input.read_exact(&mut gzip_header).map_err(|_| bad("the file is too short to be a bundle archive"))?;
        check_gzip_header(&gzip_header)?;
        let stream = ParallelStream { inner: Parallel::new(&mut input, Vec::new()), limits: *limits };
        parse(stream, limits, &mut Discard)
    })();
    if let Ok(evidence) = fast {
        return Ok(evidence);
    }
    input.seek(SeekFrom::Start(0)).map_err(|e| bad(format!("cannot read the archive: {e}")))?;
    read(input, limits, &mut Discard, Encoding::Content)
}

fn check_gzip_header(gzip_header: &[u8; 10]) -> Result<(), Failure> {
    if gzip_header[..2] != GZIP_HEADER[..2] {
        return Err(bad("the file is not a gzip archive"));
    }
    if *gzip_header != GZIP_HEADER {
        return Err(bad("the gzip header is not the fixed one `rlp bundle pack` writes (name, time or flags differ)"));
    }
    Ok(())
}

fn read<R: Read>(
    input: R,
    limits: &Limits,
    sink: &mut dyn Sink,
    encoding: Encoding,
) -> Result<(Evidence, Format), Failure> {
    let record = (encoding == Encoding::Canonical).then(VecDeque::new);
    let mut raw = BufReader::with_capacity(1 << 16, Recording { inner: input, record });
    let mut gzip_header = [0u8; 10];
    raw.read_exact(&mut gzip_header).map_err(|_| bad("the file is too short to be a bundle archive"))?;
    check_gzip_header(&gzip_header)?;
    if let Some(record) = &mut raw.get_mut().record {
        record.drain(..GZIP_HEADER.len());
    }
    let checker = (encoding == Encoding::Canonical).then(Checker::default);
    let tar = Inflater { decoder: DeflateDecoder::new(raw), crc: flate2::Crc::new(), out: 0, limits: *limits, checker };
    parse(tar, limits, sink)
}

/// Reads the tar stream, checking every entry before it reaches `sink`;
/// returns the evidence and the archive's format.
fn parse<T: TarStream>(mut tar: T, limits: &Limits, sink: &mut dyn Sink) -> Result<(Evidence, Format), Failure> {
    let mut format: Option<Format> = None;
    let mut block = [0u8; BLOCK];
    let mut count = 0usize;
    let mut total = 0u64;
    let mut seen: HashSet<String> = HashSet::new();
    let mut seen_dirs: HashSet<String> = HashSet::new();
    let mut previous = String::new();
    let mut manifest: Option<(Vec<u8>, crate::bundle::manifest::Manifest, Allowed)> = None;
    let mut signature = None;
    let mut policy_text = None;
    let mut files = BTreeMap::new();
    let mut chunk = vec![0u8; 1 << 16];
    loop {
        if !tar.read_full(&mut block)? {
            return Err(bad("the archive ends without an end-of-archive marker"));
        }
        if block.iter().all(|b| *b == 0) {
            if !tar.read_full(&mut block)? || block.iter().any(|b| *b != 0) {
                return Err(bad("the end-of-archive marker is damaged"));
            }
            break;
        }
        count += 1;
        if count > limits.max_entries {
            return Err(Failure::new(
                Reason::Archive,
                format!("the archive holds more than {} entries; refusing it", limits.max_entries),
            ));
        }
        let header = tar::Header::from_byte_slice(&block);
        let raw_name = header.path_bytes();
        let name: Cow<'_, str> = match std::str::from_utf8(&raw_name) {
            Ok(name) => Cow::Borrowed(name),
            Err(_) => {
                return Err(Failure::new(Reason::Archive, format!("entry #{count} has a name that is not UTF-8")));
            }
        };
        let entry_type = header.entry_type();
        if let Some(why) = refused_type(entry_type) {
            let quoted = terminal_safe_line(&name);
            return Err(Failure::new(Reason::Archive, format!("entry `{quoted}` {why}"))
                .with_help("bundle archives hold only regular files and folders"));
        }
        let is_dir = entry_type == tar::EntryType::Directory;
        let format = match format {
            Some(format) => format,
            None => {
                // The first entry decides the format; format 2 starts with its folder.
                let first = Format::of_first_entry(&name);
                format = Some(first);
                if first == Format::V2 {
                    check_bundle_folder(&name, is_dir, header)?;
                    continue;
                }
                first
            }
        };
        if format == Format::V2 && name == BUNDLE_PREFIX {
            return Err(Failure::new(Reason::Archive, format!("entry `{BUNDLE_PREFIX}` appears twice in the archive")));
        }
        let path = check_name(&name, is_dir, format)?.to_string();
        let shown = format.shown(&path);
        if !seen.insert(path.clone()) {
            return Err(Failure::new(Reason::Archive, format!("entry `{shown}` appears twice in the archive")));
        }
        let size = header.entry_size().map_err(|_| bad(format!("entry `{shown}` has a malformed size field")))?;
        let mode = header.mode().map_err(|_| bad(format!("entry `{shown}` has a malformed mode field")))?;
        let kind = if is_dir { Kind::Dir } else { Kind::File { executable: mode & 0o111 != 0 } };

        match &manifest {
            None if (path != MANIFEST_FILE || is_dir) && format == Format::V1 => {
                return Err(bad(format!("the archive must start with {MANIFEST_FILE}, not `{path}`")));
            }
            None if path != MANIFEST_FILE || is_dir => {
                return Err(bad(format!(
                    "the archive must go on with `{}` after `{BUNDLE_PREFIX}`, not `{shown}`",
                    format.shown(MANIFEST_FILE)
                )));
            }
            None => {}
            Some((_, _, allowed)) => {
                let listed = if is_dir {
                    allowed.dirs.contains(&path)
                } else {
                    allowed.files.contains_key(&path) || path == SIGNATURE_FILE
                };
                if !listed {
                    return Err(Failure::new(
                        Reason::Archive,
                        format!("entry `{shown}` is in the archive but not listed in manifest.toml"),
                    ));
                }
                let tar_path = tar_name(&path, kind);
                if tar_path.as_str() <= previous.as_str() {
                    return Err(bad(format!(
                        "entry `{shown}` is out of order (after `{}{previous}`)",
                        format.prefix()
                    )));
                }
                if let Some((parent, _)) = path.rsplit_once('/')
                    && !seen_dirs.contains(parent)
                {
                    return Err(bad(format!(
                        "entry `{shown}` comes without an entry for its folder `{}/`",
                        format.shown(parent)
                    )));
                }
                previous = tar_path;
            }
        }
        let canonical =
            canonical_header(format, &path, kind, size).map_err(|e| bad(format!("entry `{shown}`: {e}")))?;
        if canonical.as_bytes() != header.as_bytes() {
            return Err(bad(format!(
                "entry `{shown}`: its tar header is not in the form `rlp bundle pack` writes (type, mode, owner, time or format differ)"
            )));
        }
        if is_dir {
            seen_dirs.insert(path.clone());
            sink.directory(&path)
                .map_err(|e| Failure::new(Reason::Unreadable, format!("cannot create `{path}/`: {e}")))?;
            continue;
        }

        if size > limits.max_file_bytes {
            return Err(Failure::new(
                Reason::Archive,
                format!("entry `{shown}` is {size} bytes; files are limited to {} bytes", limits.max_file_bytes),
            ));
        }
        total = total.saturating_add(size);
        if total > limits.max_total_bytes {
            return Err(Failure::new(
                Reason::Archive,
                format!("the archive's files add up to more than {} bytes; refusing it", limits.max_total_bytes),
            ));
        }
        let keep_limit = match &manifest {
            None => Some((MAX_MANIFEST_BYTES, Reason::Archive)),
            Some(_) if path == SIGNATURE_FILE => Some((MAX_SIGNATURE_BYTES, Reason::Signature)),
            Some((_, _, allowed)) if path == allowed.caps_file => Some((MAX_POLICY_BYTES, Reason::Size)),
            Some(_) => None,
        };
        if let Some((limit, reason)) = keep_limit
            && size > limit
        {
            return Err(Failure::new(reason, format!("`{path}` is {size} bytes; the limit is {limit}")));
        }
        if let Some((_, _, allowed)) = &manifest
            && let Some((Some(want), _)) = allowed.files.get(&path)
            && *want != size
        {
            return Err(Failure::new(
                Reason::Size,
                format!("`{path}` is {size} bytes in the archive, but manifest.toml says {want}"),
            ));
        }

        let sink_error = |e: io::Error| Failure::new(Reason::Unreadable, format!("cannot write `{path}`: {e}"));
        sink.begin_file(&path, matches!(kind, Kind::File { executable: true })).map_err(sink_error)?;
        let mut kept = keep_limit.map(|_| Vec::with_capacity(size as usize));
        let mut hasher = blake3::Hasher::new();
        let mut left = size;
        while left > 0 {
            let want = chunk.len().min(usize::try_from(left).unwrap_or(usize::MAX));
            let n = tar.read_some(&mut chunk[..want])?;
            if n == 0 {
                return Err(bad(format!("the archive ends in the middle of `{shown}`")));
            }
            hasher.update(&chunk[..n]);
            if let Some(kept) = &mut kept {
                kept.extend_from_slice(&chunk[..n]);
            }
            sink.write(&chunk[..n]).map_err(sink_error)?;
            left -= n as u64;
        }
        sink.end_file().map_err(sink_error)?;
        let pad = padding(size);
        if pad > 0 {
            let mut zeros = [0u8; BLOCK];
            if !tar.read_full(&mut zeros[..pad])? || zeros[..pad].iter().any(|b| *b != 0) {
                return Err(bad(format!("the padding after `{shown}` is damaged")));
            }
        }
        let digest = Digest(*hasher.finalize().as_bytes());

        match &manifest {
            None => {
                let bytes = kept.unwrap_or_default();
                let parsed = verify::parse_manifest(&bytes)?;
                let allowed = Allowed::from(&parsed);
                if allowed.files.len() + 1 + format.extra_entries() > limits.max_entries {
                    return Err(Failure::new(
                        Reason::Archive,
                        format!(
                            "manifest.toml lists {} files; archives are limited to {} entries",
                            allowed.files.len(),
                            limits.max_entries
                        ),
                    ));
                }
                manifest = Some((bytes, parsed, allowed));
            }
            Some(_) if path == SIGNATURE_FILE => signature = kept,
            Some((_, _, allowed)) => {
                let want = allowed.files.get(&path).and_then(|(_, digest)| *digest);
                verify::check_digest(&path, want, Some(digest))?;
                if path == allowed.caps_file {
                    policy_text = kept;
                }
                files.insert(path.clone(), FileFacts { size, digest: Some(digest) });
            }
        }
    }
    tar.finish()?;
    let format = format.unwrap_or(Format::V1);
    let Some((manifest_bytes, manifest, _)) = manifest else {
        return Err(bad(format!("the archive is empty (no {})", format.shown(MANIFEST_FILE))));
    };
    if seen.contains(SIGNATURES_DIR) && signature.is_none() {
        return Err(bad(format!(
            "the archive has a `{}/` folder without {}",
            format.shown(SIGNATURES_DIR),
            format.shown(SIGNATURE_FILE)
        )));
    }
    Ok((Evidence { manifest_bytes, manifest, signature, files, policy_text }, format))
}

/// Checks the first entry of a format 2 archive, named `name`: the folder
/// `agent.bundle/` in its canonical form.
fn check_bundle_folder(name: &str, is_dir: bool, header: &tar::Header) -> Result<(), Failure> {
    if name != BUNDLE_PREFIX || !is_dir {
        let quoted = terminal_safe_line(name);
        return Err(bad(format!("the archive must start with the folder `{BUNDLE_PREFIX}`, not `{quoted}`")));
    }
    let canonical =
        canonical_header(Format::V2, "", Kind::Dir, 0).map_err(|e| bad(format!("entry `{BUNDLE_PREFIX}`: {e}")))?;
    if canonical.as_bytes() != header.as_bytes() {
        return Err(bad(format!(
            "entry `{BUNDLE_PREFIX}`: its tar header is not in the form `rlp bundle pack` writes (type, mode, owner, time or format differ)"
        )));
    }
    Ok(())
}

/// Reads an archive held in memory without keeping its content (the entry
/// point for fuzzing).
pub fn scan_archive(bytes: &[u8], limits: &Limits) -> Result<Evidence, Failure> {
    read_archive(bytes, limits, &mut Discard)
}
