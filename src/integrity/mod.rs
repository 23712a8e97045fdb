//! Integrity: manifest digests, Ed25519 keys and signatures, the trust
//! policy, and verification of a bundle against all of them.

pub mod digest;
pub mod failure;
pub mod keys;
pub(crate) mod manifest_read;
pub(crate) mod ready;
pub mod signature;
pub mod trust;
pub mod verify;
pub(crate) mod walk;

pub use failure::{Failure, Reason};

/// Turns a digest error into a [`Failure`]: a link, device or other
/// non-regular entry is a problem with the bundle (exit 1); an unreadable or
/// malformed manifest stops the command (exit 2).
pub fn digest_failure(error: digest::DigestError) -> Failure {
    use digest::DigestError;
    match error {
        DigestError::Refused { ref path, .. } if crate::fsutil::is_leftover_temp(&path.to_string_lossy()) => {
            Failure::new(Reason::NotRegular, error.to_string()).with_help(crate::fsutil::LEFTOVER_TEMP_HELP)
        }
        DigestError::Refused { ref why, .. } if why.contains("name") => {
            Failure::new(Reason::NotRegular, error.to_string())
                .with_help("rename it using only letters, digits, `.`, `_` and `-` in each part of its path")
        }
        DigestError::Refused { .. } => Failure::new(Reason::NotRegular, error.to_string())
            .with_help("bundles hold only regular files and folders: replace it with a regular file, or remove it"),
        DigestError::NoManifest(ref dir) => {
            let message = match std::fs::metadata(dir) {
                Err(_) => format!("{} does not exist", dir.display()),
                Ok(meta) if !meta.is_dir() => format!("{} is a file, not a bundle folder", dir.display()),
                Ok(_) => error.to_string(),
            };
            Failure::new(Reason::Unreadable, message)
                .with_help("pass a bundle folder (one with a manifest.toml), e.g. agents/<name>")
        }
        DigestError::Syntax { .. } | DigestError::Shape { .. } => Failure::new(Reason::Unreadable, error.to_string())
            .with_help("fix manifest.toml (`rlp lint` shows where), then run the command again"),
        DigestError::Read { path, source } => Failure::read(&path, source, Reason::Unreadable),
        DigestError::Io { path, source } => Failure::io(&path, &source),
    }
}
