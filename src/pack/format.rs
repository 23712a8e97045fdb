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
//!   bundle paths under the archive's folder (see [`Format`]), directories
//!   end with `/`; names longer than 100 bytes are split into ustar's prefix
//!   field at the leftmost `/` that fits.
//! - every header: mtime 0, uid 0, gid 0, empty user and group names,
//!   device numbers 0; mode 0644 for files, 0755 for executable files and
//!   directories.
//! - order (format 2): the folder `agent.bundle/`, then
//!   `agent.bundle/manifest.toml`, then every other entry sorted by its tar
//!   name (bytes), so a folder comes before its contents. Format 1 is the
//!   same without the folder: `manifest.toml` first, then the rest sorted.
//! - the archive ends with two zero blocks and nothing else.
//!
//! The first entry tells the formats apart: `agent.bundle/` (or any name
//! under it) is format 2, anything else format 1. An archive never mixes
//! them.

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
/// The folder that holds every entry of a format 2 archive, as the start of
/// an entry name (and the name of the folder's own entry).
pub(crate) const BUNDLE_PREFIX: &str = "agent.bundle/";

/// Where an archive keeps the bundle's files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Format 1 (every rlp before format 2): the bundle's files at the
    /// archive's root, `manifest.toml` first. Still read, never written.
    V1,
    /// Format 2: everything under the folder `agent.bundle/`, which is the
    /// first entry, `agent.bundle/manifest.toml` the second.
    V2,
}

impl Format {
    /// The format `rlp bundle pack` writes.
    pub const WRITTEN: Format = Format::V2;

    /// The format of an archive whose first entry is named `first`.
    pub(crate) fn of_first_entry(first: &str) -> Format {
        if first.starts_with(BUNDLE_PREFIX) { Format::V2 } else { Format::V1 }
    }

    /// Its number (1 or 2), as reports and the documentation name it.
    pub fn number(self) -> u8 {
        match self {
            Format::V1 => 1,
            Format::V2 => 2,
        }
    }

    /// What comes before a bundle path in an entry name.
    pub(crate) fn prefix(self) -> &'static str {
        match self {
            Format::V1 => "",
            Format::V2 => BUNDLE_PREFIX,
        }
    }

    /// Entries an archive holds besides the bundle's files and folders
    /// (format 2's folder `agent.bundle/`).
    pub(crate) fn extra_entries(self) -> usize {
        match self {
            Format::V1 => 0,
            Format::V2 => 1,
        }
    }

    /// The tar name of the entry for the bundle path `path`: [`tar_name`]
    /// after [`Format::prefix`]. The empty path is format 2's folder
    /// `agent.bundle/`.
    pub(crate) fn entry_name(self, path: &str, kind: Kind) -> String {
        if path.is_empty() {
            return self.prefix().to_string();
        }
        format!("{}{}", self.prefix(), tar_name(path, kind))
    }

    /// An entry as messages name it: its tar name, without a folder's `/`
    /// (the bundle path itself in format 1).
    pub(crate) fn shown(self, path: &str) -> String {
        match self {
            Format::V1 => path.to_string(),
            Format::V2 if path.is_empty() => BUNDLE_PREFIX.to_string(),
            Format::V2 => format!("{BUNDLE_PREFIX}{path}"),
        }
    }
}

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

/// The canonical header of the entry for the bundle path `path` in an
/// archive of `format` (the empty path: format 2's folder `agent.bundle/`).
/// Fails if the name cannot be stored in a ustar header (longer than 255
/// bytes, or no `/` that splits it).
pub(crate) fn canonical_header(format: Format, path: &str, kind: Kind, size: u64) -> io::Result<Header> {
    let name = format.entry_name(path, kind);
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
                format!("`{}` is too long for a ustar header", format.shown(path)),
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
        let header = canonical_header(Format::V1, &long, Kind::File { executable: false }, 3).unwrap();
        assert_eq!(header.path_bytes().as_ref(), long.as_bytes());
        let header = canonical_header(Format::V2, &long, Kind::File { executable: false }, 3).unwrap();
        assert_eq!(header.path_bytes().as_ref(), format!("agent.bundle/{long}").as_bytes());
        let dir = format!("{}/", "d".repeat(120));
        let header = canonical_header(Format::V1, &format!("x/{}", "d".repeat(120)), Kind::Dir, 0);
        assert!(header.is_err(), "{dir}");
        let header = canonical_header(Format::V1, "bin", Kind::Dir, 0).unwrap();
        assert_eq!(header.path_bytes().as_ref(), b"bin/");
        assert_eq!(header.mode().unwrap(), 0o755);
        assert!(canonical_header(Format::V1, &"x".repeat(300), Kind::File { executable: true }, 0).is_err());
        // A prefix that fits 155 bytes alone no longer fits behind `agent.bundle/`.
        let deep = format!("{}/{}", "p".repeat(150), "n".repeat(50));
        assert!(canonical_header(Format::V1, &deep, Kind::File { executable: false }, 0).is_ok());
        let refused = canonical_header(Format::V2, &deep, Kind::File { executable: false }, 0).unwrap_err();
        assert_eq!(refused.to_string(), format!("`agent.bundle/{deep}` is too long for a ustar header"));
    }

    #[test]
    fn format_2_puts_everything_under_one_folder() {
        let root = canonical_header(Format::V2, "", Kind::Dir, 0).unwrap();
        assert_eq!(root.path_bytes().as_ref(), b"agent.bundle/");
        assert_eq!(root.entry_type(), EntryType::Directory);
        assert_eq!(Format::V2.entry_name("bin", Kind::Dir), "agent.bundle/bin/");
        assert_eq!(Format::V1.entry_name("bin/helper", Kind::File { executable: true }), "bin/helper");
        assert_eq!(Format::of_first_entry("agent.bundle/"), Format::V2);
        assert_eq!(Format::of_first_entry("agent.bundle/manifest.toml"), Format::V2);
        assert_eq!(Format::of_first_entry("manifest.toml"), Format::V1);
        assert_eq!(Format::of_first_entry("agent.bundle"), Format::V1);
        assert_eq!((Format::V1.number(), Format::V2.number(), Format::WRITTEN), (1, 2, Format::V2));
    }
}
