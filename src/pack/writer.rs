//! `rlp bundle pack`: a reproducible `.tar.gz` of a bundle.
//!
//! The archive holds exactly manifest.toml, SIGNATURES/manifest.sig when
//! present, every file the manifest lists and the folders above them, all
//! under the folder `agent.bundle/` ([`Format::WRITTEN`]), in the canonical
//! form of [`crate::pack::format`]: the same content gives the same
//! bytes whatever the mtimes, owners, umask or creation order. Each file's
//! size and BLAKE3 are checked against the manifest while it is copied, so a
//! file changed during packing is caught. The archive is written to a
//! temporary file next to the target, synced and renamed into place, or
//! streamed to a writer the caller gives (standard output, for `-o -`).

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::bundle::inventory::hash_bytes;
use crate::bundle::manifest::{Digest, MANIFEST_FILE, Manifest};
use crate::bundle::registry::Registries;
use crate::integrity::failure::{Failure, Reason};
use crate::integrity::keys::{KeyId, SecretKey};
use crate::integrity::signature::{MAX_SIGNATURE_BYTES, ManifestSignature, SIGNATURE_FILE, sign_bundle};
use crate::integrity::verify;
use crate::pack::Progress;
use crate::pack::canonical::GzipWriter;
use crate::pack::format::{BLOCK, BUNDLE_PREFIX, Format, Kind, canonical_header, padding, tar_name};
use crate::pack::reader::Limits;

/// How to pack.
#[derive(Default)]
pub(crate) struct PackOptions<'a> {
    /// Where the archive goes.
    pub output: Destination<'a>,
    /// Sign the bundle with this key first.
    pub key: Option<&'a SecretKey>,
    /// Where the bundle's shared schemas are found (to check their pins).
    pub registries: Registries,
}

/// Where [`pack`] writes the archive.
#[derive(Default)]
pub(crate) enum Destination<'a> {
    /// `./<name>-<version>.bundle.tar.gz`.
    #[default]
    DefaultFile,
    /// This file (written atomically).
    File(PathBuf),
    /// This writer (e.g. standard output); [`Packed::path`] is then [`STDOUT`].
    Stream(&'a mut dyn Write),
}

/// A written archive.
#[derive(Debug)]
pub(crate) struct Packed {
    /// Where it was written.
    pub path: PathBuf,
    /// `[agent].name`.
    pub name: String,
    /// `[agent].version`.
    pub version: String,
    /// Number of files the manifest lists (as `rlp bundle verify` counts them:
    /// the manifest and its signature aside).
    pub files: usize,
    /// Archive size in bytes.
    pub bytes: u64,
    /// BLAKE3 of the archive.
    pub digest: Digest,
    /// The signing key, if the archive holds a signature.
    pub signed_by: Option<KeyId>,
}

/// One archive entry, in archive order.
#[derive(Debug)]
pub(crate) struct Entry {
    /// Its path in the bundle.
    pub path: String,
    /// A folder, or a file and whether it is executable.
    pub kind: Kind,
    /// Its size when listed.
    pub size: u64,
    /// The digest the content must have (checked while copying).
    pub digest: Option<Digest>,
}

/// Checks that a bundle may be packed: digests up to date, lint clean, no
/// placeholder digests; `then` names the step for the hints (`pack`).
pub(crate) fn check_packable(dir: &Path, then: &str, registries: &Registries) -> Result<(), Failure> {
    let plan = crate::integrity::ready::check_ready(dir, then, registries)?;
    let manifest = verify::parse_manifest(plan.before.as_bytes())?;
    if let Some(artifact) = manifest.listed().find(|a| a.blake3.is_some_and(|d| d.is_placeholder())) {
        return Err(Failure::new(
            Reason::Placeholder,
            format!("`{}` still carries the all-zero placeholder digest", artifact.path),
        )
        .with_help(format!("build the file and run `rlp digest`, then {then} again")));
    }
    Ok(())
}

/// The entries of the archive: manifest first, then the rest by tar name.
fn entries(dir: &Path, manifest: &Manifest, manifest_bytes: &[u8]) -> Result<Vec<Entry>, Failure> {
    let mut rest: BTreeMap<String, Entry> = BTreeMap::new();
    let add_parents = |rest: &mut BTreeMap<String, Entry>, path: &str| {
        let mut path = path;
        while let Some((parent, _)) = path.rsplit_once('/') {
            rest.insert(
                tar_name(parent, Kind::Dir),
                Entry { path: parent.to_string(), kind: Kind::Dir, size: 0, digest: None },
            );
            path = parent;
        }
    };
    for artifact in manifest.listed() {
        let full = dir.join(&artifact.path);
        let meta = fs::symlink_metadata(&full).map_err(|e| Failure::io(&full, &e))?;
        if !meta.file_type().is_file() {
            return Err(Failure::new(Reason::NotRegular, format!("`{}` is not a regular file", artifact.path)));
        }
        let kind = Kind::File { executable: meta.permissions().mode() & 0o100 != 0 };
        add_parents(&mut rest, &artifact.path);
        rest.insert(
            tar_name(&artifact.path, kind),
            Entry { path: artifact.path.clone(), kind, size: meta.len(), digest: artifact.blake3 },
        );
    }
    let sig = dir.join(SIGNATURE_FILE);
    if let Ok(meta) = fs::symlink_metadata(&sig) {
        if !meta.file_type().is_file() {
            return Err(Failure::new(Reason::NotRegular, format!("`{SIGNATURE_FILE}` is not a regular file")));
        }
        let bytes = crate::fsutil::read_limited(&sig, MAX_SIGNATURE_BYTES)
            .map_err(|e| Failure::read(&sig, e, Reason::Signature))?;
        add_parents(&mut rest, SIGNATURE_FILE);
        rest.insert(
            SIGNATURE_FILE.to_string(),
            Entry {
                path: SIGNATURE_FILE.into(),
                kind: Kind::File { executable: false },
                size: bytes.len() as u64,
                digest: Some(hash_bytes(&bytes)),
            },
        );
    }
    let mut out = vec![Entry {
        path: MANIFEST_FILE.into(),
        kind: Kind::File { executable: false },
        size: manifest_bytes.len() as u64,
        digest: Some(hash_bytes(manifest_bytes)),
    }];
    out.extend(rest.into_values());
    Ok(out)
}

/// Checks the entries of an archive of `format` against the limits the reader enforces.
fn check_limits(entries: &[Entry], format: Format, limits: &Limits) -> Result<(), Failure> {
    let too_big = |message: String| {
        Failure::new(Reason::Archive, message)
            .with_help("`rlp bundle verify` and `rlp agent install` would refuse this archive")
    };
    let count = entries.len() + format.extra_entries();
    if count > limits.max_entries {
        return Err(too_big(format!(
            "the bundle needs {count} archive entries; archives are limited to {}",
            limits.max_entries
        )));
    }
    if let Some(entry) = entries.iter().find(|e| e.size > limits.max_file_bytes) {
        return Err(too_big(format!(
            "`{}` is {} bytes; archived files are limited to {}",
            entry.path, entry.size, limits.max_file_bytes
        )));
    }
    let total: u64 = entries.iter().map(|e| e.size).sum();
    if total > limits.max_total_bytes {
        return Err(too_big(format!(
            "the bundle's files add up to {total} bytes; archives are limited to {}",
            limits.max_total_bytes
        )));
    }
    Ok(())
}

/// A writer that hashes and counts what passes through.
struct Hashing<W> {
    inner: W,
    hasher: blake3::Hasher,
    bytes: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The tar headers of an archive of `entries` in `format`, in archive order:
/// format 2's folder `agent.bundle/` first, then one per entry. Fails, before
/// anything is written, on a name a ustar header cannot hold.
fn headers(entries: &[Entry], format: Format) -> Result<Vec<tar::Header>, Failure> {
    let root = (format == Format::V2).then(|| canonical_header(format, "", Kind::Dir, 0));
    let mut out = Vec::with_capacity(entries.len() + 1);
    if let Some(root) = root {
        out.push(root.map_err(|e| Failure::new(Reason::Archive, format!("cannot archive `{BUNDLE_PREFIX}`: {e}")))?);
    }
    for entry in entries {
        let header = canonical_header(format, &entry.path, entry.kind, entry.size).map_err(|e| {
            let failure = Failure::new(Reason::Archive, format!("cannot archive `{}`: {e}", entry.path));
            match format {
                Format::V1 => failure,
                Format::V2 => failure.with_help(format!(
                    "shorten the path: a ustar header holds `{BUNDLE_PREFIX}<path>` only if at most 100 bytes follow some `/` and at most 155 precede it"
                )),
            }
        })?;
        out.push(header);
    }
    Ok(out)
}

/// Writes the archive of `entries`, in `format`, to `out`.
fn write_archive<W: Write>(
    dir: &Path,
    entries: &[Entry],
    format: Format,
    out: W,
    progress: &dyn Progress,
) -> Result<W, Failure> {
    let io_err = |e: io::Error| Failure::new(Reason::Unreadable, format!("cannot write the archive: {e}"));
    let headers = headers(entries, format)?;
    let mut gz = GzipWriter::new(out).map_err(io_err)?;
    let mut buffer = vec![0u8; 1 << 16];
    let (root, headers) = headers.split_at(format.extra_entries());
    for header in root {
        gz.write_all(header.as_bytes()).map_err(io_err)?;
    }
    for (entry, header) in entries.iter().zip(headers) {
        gz.write_all(header.as_bytes()).map_err(io_err)?;
        if entry.kind == Kind::Dir {
            continue;
        }
        copy_exact(
            &dir.join(&entry.path),
            &entry.path,
            entry.size,
            entry.digest,
            &mut gz,
            &io_err,
            &mut buffer,
            progress,
            "pack",
        )?;
        gz.write_all(&[0u8; BLOCK][..padding(entry.size)]).map_err(io_err)?;
    }
    gz.write_all(&[0u8; 2 * BLOCK]).map_err(io_err)?;
    gz.finish().map_err(io_err)
}

/// Copies the file at `full` (shown as `shown`), listed with `size` bytes,
/// into `out`, hashing it on the way. It is opened without following a link
/// or blocking on a FIFO and must be a regular file; no more than `size`
/// bytes are read (and one more, to see it grew); its BLAKE3 must be
/// `digest` when given. `then` names the command for the hints (`pack`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn copy_exact(
    full: &Path,
    shown: &str,
    size: u64,
    digest: Option<Digest>,
    out: &mut dyn Write,
    out_err: &dyn Fn(io::Error) -> Failure,
    buffer: &mut [u8],
    progress: &dyn Progress,
    then: &str,
) -> Result<(), Failure> {
    use std::os::unix::fs::OpenOptionsExt;
    let changed = |what: &str| {
        Failure::new(Reason::Size, format!("`{shown}` {what} while the bundle was being read for {then}"))
            .with_help(format!("{then} again once nothing is writing to the bundle"))
    };
    let mut file = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(full)
    {
        Ok(file) => file,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(changed("became a symbolic link")),
        Err(e) => return Err(Failure::io(full, &e)),
    };
    if !file.metadata().map_err(|e| Failure::io(full, &e))?.file_type().is_file() {
        return Err(changed("stopped being a regular file"));
    }
    let mut hasher = blake3::Hasher::new();
    let mut left = size;
    while left > 0 {
        let want = buffer.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = match file.read(&mut buffer[..want]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Failure::io(full, &e)),
        };
        hasher.update(&buffer[..n]);
        out.write_all(&buffer[..n]).map_err(out_err)?;
        progress.advance(n as u64);
        left -= n as u64;
    }
    let mut probe = [0u8; 1];
    let grew = file.read(&mut probe).map_err(|e| Failure::io(full, &e))? > 0;
    if left > 0 || grew {
        return Err(changed("changed size"));
    }
    if let Some(want) = digest
        && Digest(*hasher.finalize().as_bytes()) != want
    {
        return Err(Failure::new(
            Reason::Digest,
            format!("`{shown}` changed while the bundle was being read for {then}"),
        )
        .with_help(format!("{then} again once nothing is writing to the bundle")));
    }
    Ok(())
}

/// Whether `inner` lies inside `outer` (both resolved).
fn is_inside(inner: &Path, outer: &Path) -> bool {
    match (inner.canonicalize(), outer.canonicalize()) {
        (Ok(inner), Ok(outer)) => inner.starts_with(outer),
        _ => false,
    }
}

/// The signer of the bundle's existing signature, refusing one that no
/// longer matches the manifest: such an archive could never be verified.
fn existing_signer(dir: &Path, manifest_bytes: &[u8]) -> Result<Option<KeyId>, Failure> {
    let path = dir.join(SIGNATURE_FILE);
    let bytes = match crate::fsutil::read_limited(&path, MAX_SIGNATURE_BYTES) {
        Ok(bytes) => bytes,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(Failure::read(&path, e, Reason::Signature)),
    };
    let resign = || format!("sign it again (`rlp sign {} --key <file.key>`) or pack with --key", dir.display());
    let signature = ManifestSignature::parse(&bytes).map_err(|why| {
        Failure::new(Reason::Signature, format!("{SIGNATURE_FILE} is malformed: {why}")).with_help(resign())
    })?;
    if !signature.verify(manifest_bytes) {
        return Err(Failure::new(
            Reason::Signature,
            format!(
                "{SIGNATURE_FILE} (key {}) no longer matches manifest.toml: the bundle changed after it was signed",
                signature.key_id()
            ),
        )
        .with_help(resign()));
    }
    Ok(Some(signature.key_id()))
}

/// The output path that stands for standard output.
pub(crate) const STDOUT: &str = "-";

/// Writes an archive of the bundle `dir` to `path` atomically: `fill`
/// writes it into a new temporary file (`<prefix>…`) next to `path`, which
/// is then given mode 0644, synced and renamed into place; on any failure
/// nothing is left. Refuses a `path` inside the bundle folder (the archive
/// would become a file of the bundle) and one that exists but is not a
/// regular file (`other` ends that hint with what else `-o` takes).
pub(crate) fn write_atomically<T>(
    dir: &Path,
    path: &Path,
    prefix: &str,
    other: &str,
    fill: impl FnOnce(&mut File) -> Result<T, Failure>,
) -> Result<T, Failure> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if is_inside(&parent, dir) {
        let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
        return Err(Failure::new(Reason::Usage, format!("{} lies inside the bundle folder", path.display()))
            .with_help(format!("write the archive outside the bundle, e.g. `-o ../{name}`")));
    }
    if let Ok(meta) = fs::symlink_metadata(path)
        && !meta.is_file()
    {
        return Err(Failure::new(
            Reason::Usage,
            format!("{} exists and is not a regular file; the archive would replace it", path.display()),
        )
        .with_help(format!("give the path of a new or existing archive file{other}")));
    }
    let (mut temp, _tracked) = crate::interrupt::temp_file_in(&parent, prefix).map_err(|e| Failure::io(&parent, &e))?;
    let filled = fill(temp.as_file_mut())?;
    let write_err = |e: io::Error| Failure::io(path, &e);
    temp.as_file().set_permissions(fs::Permissions::from_mode(0o644)).map_err(write_err)?;
    temp.as_file().sync_all().map_err(write_err)?;
    temp.persist(path).map_err(|e| write_err(e.error))?;
    crate::fsutil::sync_dir(&parent).map_err(|e| Failure::io(&parent, &e))?;
    Ok(filled)
}

/// Writes the archive to a temporary file next to `path`, syncs it and
/// renames it into place; returns its size and BLAKE3.
fn write_to_file(
    dir: &Path,
    entries: &[Entry],
    path: &Path,
    progress: &dyn Progress,
) -> Result<(u64, Digest), Failure> {
    write_atomically(dir, path, ".rlp-pack-", &format!(", or `-o {STDOUT}` for standard output"), |file| {
        let out = Hashing { inner: BufWriter::with_capacity(1 << 20, file), hasher: blake3::Hasher::new(), bytes: 0 };
        let written = write_archive(dir, entries, Format::WRITTEN, out, progress)?;
        written.inner.into_inner().map_err(|e| Failure::io(path, &e.into_error()))?;
        Ok((written.bytes, Digest(*written.hasher.finalize().as_bytes())))
    })
}

/// Streams the archive to `out`.
fn write_to_stream(
    dir: &Path,
    entries: &[Entry],
    out: &mut dyn Write,
    progress: &dyn Progress,
) -> Result<(u64, Digest), Failure> {
    let out = Hashing { inner: out, hasher: blake3::Hasher::new(), bytes: 0 };
    let written = write_archive(dir, entries, Format::WRITTEN, out, progress)?;
    written.inner.flush().map_err(|e| Failure::new(Reason::Unreadable, format!("cannot write the archive: {e}")))?;
    Ok((written.bytes, Digest(*written.hasher.finalize().as_bytes())))
}

/// A bundle ready to be written as an archive.
/// A bundle checked for sealing, and the entries of its archive.
pub(crate) struct Plan {
    /// manifest.toml, parsed.
    pub manifest: Manifest,
    /// `[agent].name`.
    pub name: String,
    /// `[agent].version`.
    pub version: String,
    /// The archive's entries, by bundle path (an archive puts them under
    /// `agent.bundle/`): manifest.toml first, then folders and files by name.
    pub entries: Vec<Entry>,
    /// The key of its signature, when signed.
    pub signed_by: Option<KeyId>,
}

/// A bundle folder ready to be sealed into an archive, as read once checked.
pub(crate) struct Sealable {
    /// The exact bytes of manifest.toml (those its signature covers).
    pub manifest_bytes: Vec<u8>,
    /// manifest.toml, parsed from those bytes.
    pub manifest: Manifest,
    /// The key of its signature, which matches the manifest; `None` when unsigned.
    pub signed_by: Option<KeyId>,
}

/// Checks that `dir` is a bundle folder that may be packed
/// ([`check_packable`], `then` naming the step for the hints), signs it
/// with `key` if given, and reads its manifest and signer (refusing a
/// signature that no longer matches).
pub(crate) fn sealable(
    dir: &Path,
    key: Option<&SecretKey>,
    then: &str,
    registries: &Registries,
) -> Result<Sealable, Failure> {
    if !crate::lint::is_bundle(dir) {
        return Err(Failure::new(
            Reason::Unreadable,
            format!("{} is not a bundle folder (no {MANIFEST_FILE})", dir.display()),
        ));
    }
    check_packable(dir, then, registries)?;
    if let Some(key) = key {
        sign_bundle(dir, key, registries)?;
    }
    let manifest_bytes = read_manifest(dir)?;
    let signed_by = existing_signer(dir, &manifest_bytes)?;
    let manifest = verify::parse_manifest(&manifest_bytes)?;
    Ok(Sealable { manifest_bytes, manifest, signed_by })
}

/// Checks a bundle folder, signs it with `key` if given, and lists its
/// entries within the archive limits; `then` names the command for hints.
pub(crate) fn plan(dir: &Path, key: Option<&SecretKey>, then: &str, registries: &Registries) -> Result<Plan, Failure> {
    let Sealable { manifest_bytes, manifest, signed_by } = sealable(dir, key, then, registries)?;
    let name = manifest.name.clone().unwrap_or_default();
    let version = manifest.version.clone().unwrap_or_default();
    let entries = entries(dir, &manifest, &manifest_bytes)?;
    check_limits(&entries, Format::WRITTEN, &Limits::default())?;
    Ok(Plan { manifest, name, version, entries, signed_by })
}

/// The bytes of the manifest.toml of the bundle folder `dir`: a regular
/// file with a single name.
fn read_manifest(dir: &Path) -> Result<Vec<u8>, Failure> {
    verify::read_regular(&dir.join(MANIFEST_FILE), MANIFEST_FILE, verify::MAX_MANIFEST_BYTES)
}

/// The archive `rlp bundle pack` writes for a bundle by default.
pub(crate) fn default_archive(dir: &Path) -> Result<PathBuf, Failure> {
    let manifest = verify::parse_manifest(&read_manifest(dir)?)?;
    Ok(PathBuf::from(format!(
        "{}-{}.bundle.tar.gz",
        manifest.name.unwrap_or_default(),
        manifest.version.unwrap_or_default()
    )))
}

/// Compares what is written with an existing file, byte by byte.
struct Comparing<R> {
    existing: R,
    offset: u64,
    first_difference: Option<u64>,
    buffer: Vec<u8>,
}

impl<R: Read> Comparing<R> {
    /// Reads up to `len` bytes of the existing file.
    fn next(&mut self, len: usize) -> io::Result<&[u8]> {
        self.buffer.resize(len, 0);
        let mut filled = 0;
        while filled < len {
            match self.existing.read(&mut self.buffer[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(&self.buffer[..filled])
    }
}

impl<R: Read> Write for Comparing<R> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.first_difference.is_none() {
            let offset = self.offset;
            let existing = self.next(buf.len())?;
            let same = existing.iter().zip(buf).take_while(|(a, b)| a == b).count();
            if same < buf.len() {
                self.first_difference = Some(offset + same as u64);
            }
        }
        self.offset += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// An archive that is exactly what [`pack`] writes for its bundle.
#[derive(Debug)]
pub(crate) struct Checked {
    /// `[agent].name`.
    pub name: String,
    /// `[agent].version`.
    pub version: String,
    /// Number of files the manifest lists.
    pub files: usize,
    /// Archive size in bytes.
    pub bytes: u64,
}

/// Checks that `archive` is byte for byte the archive [`pack`] would write
/// for the bundle `dir` (nothing is written). When it is not, the failure
/// names the first difference: an entry whose content differs, is missing or
/// is extra, or, with the same content, the first byte where the encoding
/// differs.
pub(crate) fn check(
    dir: &Path,
    archive: &Path,
    registries: &Registries,
    progress: &dyn Progress,
) -> Result<Checked, Failure> {
    let plan = plan(dir, None, "pack", registries)?;
    let file = File::open(archive).map_err(|e| Failure::io(archive, &e))?;
    let archive_len = file.metadata().map_err(|e| Failure::io(archive, &e))?.len();
    let compare = Comparing {
        existing: io::BufReader::with_capacity(1 << 20, file),
        offset: 0,
        first_difference: None,
        buffer: Vec::new(),
    };
    progress.start(plan.entries.iter().map(|e| e.size).sum());
    let written = write_archive(dir, &plan.entries, Format::WRITTEN, compare, progress);
    progress.finish();
    let written = written?;
    let first_difference =
        written.first_difference.or((written.offset != archive_len).then_some(written.offset.min(archive_len)));
    let Some(offset) = first_difference else {
        return Ok(Checked {
            name: plan.name,
            version: plan.version,
            files: plan.manifest.listed().count(),
            bytes: archive_len,
        });
    };
    Err(describe_difference(dir, &plan, archive, offset))
}

/// The first difference between the bundle and an archive that is not what [`pack`] writes for it.
fn describe_difference(dir: &Path, plan: &Plan, archive: &Path, offset: u64) -> Failure {
    let differs = |what: String| {
        Failure::new(
            Reason::Archive,
            format!("{} is not what `rlp bundle pack` writes for {}: {what}", archive.display(), dir.display()),
        )
        .with_help(format!("pack it again: `rlp bundle pack {} -o {}`", dir.display(), archive.display()))
    };
    let (evidence, format) = match File::open(archive).map_err(|e| Failure::io(archive, &e)).and_then(|file| {
        crate::pack::reader::read_archive_with_format(
            io::BufReader::new(file),
            &Limits::default(),
            &mut crate::pack::reader::Discard,
            crate::pack::reader::Encoding::Content,
        )
    }) {
        Ok(read) => read,
        Err(failure) => return differs(format!("it cannot be read as a bundle archive ({})", failure.message)),
    };
    for entry in &plan.entries {
        if entry.kind == Kind::Dir {
            continue;
        }
        let found = if entry.path == MANIFEST_FILE {
            Some((evidence.manifest_bytes.len() as u64, Some(hash_bytes(&evidence.manifest_bytes))))
        } else if entry.path == SIGNATURE_FILE {
            evidence.signature.as_ref().map(|bytes| (bytes.len() as u64, Some(hash_bytes(bytes))))
        } else {
            evidence.files.get(&entry.path).map(|facts| (facts.size, facts.digest))
        };
        match found {
            None => return differs(format!("`{}` is missing from the archive", entry.path)),
            Some((size, digest)) if size != entry.size || entry.digest.is_some_and(|want| digest != Some(want)) => {
                return differs(format!("`{}` differs from the bundle's", entry.path));
            }
            Some(_) => {}
        }
    }
    if evidence.signature.is_some() && !plan.entries.iter().any(|e| e.path == SIGNATURE_FILE) {
        return differs(format!("the archive holds {SIGNATURE_FILE}, the bundle does not"));
    }
    if let Some(extra) = evidence.files.keys().find(|path| !plan.entries.iter().any(|e| &e.path == *path)) {
        return differs(format!("`{extra}` is in the archive, not in the bundle"));
    }
    if format != Format::WRITTEN {
        return differs(format!(
            "its files are the same, but it is a format {} archive (the bundle's files at its root); `rlp bundle pack` now writes format {} (every entry under `{BUNDLE_PREFIX}`)",
            format.number(),
            Format::WRITTEN.number()
        ));
    }
    differs(format!(
        "its files are the same, but its bytes differ from byte {offset} on (another compression of the same content, or a file's mode)"
    ))
}

/// Packs a bundle folder.
pub(crate) fn pack(dir: &Path, options: PackOptions<'_>, progress: &dyn Progress) -> Result<Packed, Failure> {
    let Plan { manifest, name, version, entries, signed_by } = plan(dir, options.key, "pack", &options.registries)?;

    progress.start(entries.iter().map(|e| e.size).sum());
    let (path, written) = match options.output {
        Destination::Stream(out) => (PathBuf::from(STDOUT), write_to_stream(dir, &entries, out, progress)),
        Destination::File(path) => {
            let written = write_to_file(dir, &entries, &path, progress);
            (path, written)
        }
        Destination::DefaultFile => {
            let path = PathBuf::from(format!("{name}-{version}.bundle.tar.gz"));
            let written = write_to_file(dir, &entries, &path, progress);
            (path, written)
        }
    };
    progress.finish();
    let (bytes, digest) = written?;
    Ok(Packed { path, name, version, files: manifest.listed().count(), bytes, digest, signed_by })
}
