//! The archive format `rlp bundle pack` writes, byte for byte; the reader
//! accepts exactly this form and nothing else.
//!
//! - gzip: one member with the fixed 10-byte header [`GZIP_HEADER`] (no file
//!   name, mtime 0, XFL 0, OS 255 "unknown"); the deflate stream is the tar
//!   stream cut into 1 MiB chunks, each compressed on its own at level 6 and
//!   ended by a sync flush, the last by the final block (see
//!   [`crate::pack::canonical`]). The compressor is miniz_oxide (flate2's
//!   pure-Rust backend, pinned): its output depends only on the input bytes —
//!   not on the CPU, the number of cores or how the input is split into
//!   writes — which is what makes archives byte-identical across machines and
//!   lets the reader check the encoding. Changing the compressor or the chunk
//!   size is a format change.
//! - tar: ustar headers only (no GNU or PAX extensions); entry names are
//!   bundle paths, directories end with `/`; names longer than 100 bytes
//!   are split into ustar's prefix field at the leftmost `/` that fits.
//! - every header: mtime 0, uid 0, gid 0, empty user and group names,
//!   device numbers 0; mode 0644 for files, 0755 for executable files and
//!   directories.
//! - order: `manifest.toml` first, then every other entry sorted by its tar
//!   name (bytes), so a folder comes before its contents.
//! - the archive ends with two zero blocks and nothing else.

use std::io;

use tar::{EntryType, Header};

use crate::bundle::manifest::ustar_split;

/// The gzip header every archive starts with.
pub(crate) const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0xff];
/// The deflate level (6: zlib's default balance of speed and size).
pub(crate) const COMPRESSION_LEVEL: u32 = 6;
/// The mtime of every entry.
pub(crate) const MTIME: u64 = 0;
/// Tar block size.
pub(crate) const BLOCK: usize = 512;

/// An entry's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A regular file.
    File {
        /// Whether it is executable (mode 0755 rather than 0644).
        executable: bool,
    },
    /// A directory.
    Dir,
}

/// The tar name of an entry: the bundle path, with `/` after a directory.
pub(crate) fn tar_name(path: &str, kind: Kind) -> String {
    match kind {
        Kind::Dir => format!("{path}/"),
        Kind::File { .. } => path.to_string(),
    }
}

/// The canonical header of an entry. Fails if the name cannot be stored in
/// a ustar header (longer than 255 bytes, or no `/` that splits it).
pub(crate) fn canonical_header(path: &str, kind: Kind, size: u64) -> io::Result<Header> {
    let name = tar_name(path, kind);
    let mut header = Header::new_ustar();
    let (entry_type, mode) = match kind {
        Kind::Dir => (EntryType::Directory, 0o755),
        Kind::File { executable: true } => (EntryType::Regular, 0o755),
        Kind::File { executable: false } => (EntryType::Regular, 0o644),
    };
    header.set_entry_type(entry_type);
    header.set_size(if kind == Kind::Dir { 0 } else { size });
    header.set_mode(mode);
    header.set_uid(0);
    header.set_gid(0);
    header.set_mtime(MTIME);
    header.set_username("")?;
    header.set_groupname("")?;
    header.set_device_major(0)?;
    header.set_device_minor(0)?;
    let ustar = header.as_ustar_mut().ok_or_else(|| io::Error::other("not a ustar header"))?;
    let bytes = name.as_bytes();
    match ustar_split(&name) {
        Some(None) => ustar.name[..bytes.len()].copy_from_slice(bytes),
        Some(Some(split)) => {
            ustar.prefix[..split].copy_from_slice(&bytes[..split]);
            ustar.name[..bytes.len() - split - 1].copy_from_slice(&bytes[split + 1..]);
        }
        None => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("`{path}` is too long for a ustar header"),
            ));
        }
    }
    header.set_cksum();
    Ok(header)
}

/// Zero bytes that pad `size` to a whole number of blocks.
pub(crate) fn padding(size: u64) -> usize {
    ((BLOCK as u64 - size % BLOCK as u64) % BLOCK as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_use_the_prefix_field() {
        let long = format!("schemas/{}/{}.json", "a".repeat(90), "b".repeat(90));
        let header = canonical_header(&long, Kind::File { executable: false }, 3).unwrap();
        assert_eq!(header.path_bytes().as_ref(), long.as_bytes());
        let dir = format!("{}/", "d".repeat(120));
        let header = canonical_header(&format!("x/{}", "d".repeat(120)), Kind::Dir, 0);
        assert!(header.is_err(), "{dir}");
        let header = canonical_header("bin", Kind::Dir, 0).unwrap();
        assert_eq!(header.path_bytes().as_ref(), b"bin/");
        assert_eq!(header.mode().unwrap(), 0o755);
        assert!(canonical_header(&"x".repeat(300), Kind::File { executable: true }, 0).is_err());
    }
}
