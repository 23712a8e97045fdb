//! One error type for sealing and shipping: what went wrong, how to fix it,
//! and which exit-code class it belongs to.

use std::fmt;

use crate::error::{Exit, Reportable};

/// What kind of problem stopped the command (stable names, used in JSON output).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// A file or folder could not be read or written.
    Unreadable,
    /// Arguments that cannot work together, or a file that already exists.
    Usage,
    /// A key file is malformed or unsafe.
    Key,
    /// trust-policy.toml is malformed.
    TrustPolicy,
    /// The archive is unsafe or not in the form `rlp bundle pack` writes.
    Archive,
    /// manifest.toml (or the bundle's policy file) is invalid.
    Manifest,
    /// A symlink, hard link, device, FIFO or socket in the bundle.
    NotRegular,
    /// A file's size differs from the manifest.
    Size,
    /// A file's BLAKE3 digest differs from the manifest.
    Digest,
    /// A listed file is missing, or a present file is not listed.
    FileSet,
    /// The digests in manifest.toml are out of date.
    Stale,
    /// The bundle does not lint clean.
    Lint,
    /// The manifest still carries an all-zero placeholder digest.
    Placeholder,
    /// SIGNATURES/manifest.sig is malformed or does not match manifest.toml.
    Signature,
    /// The bundle carries no signature and one is required.
    Unsigned,
    /// The signer is not a trust anchor (or not the expected key).
    Untrusted,
    /// The signer's key is revoked.
    Revoked,
    /// The bundle requests capabilities beyond its signer's rule.
    Capability,
    /// An older version than the installed one.
    Rollback,
    /// A shared schema the manifest pins is missing from the registries,
    /// or differs from its pin.
    SharedSchema,
}

impl Reason {
    /// The exit-code class.
    pub fn class(self) -> Exit {
        match self {
            Reason::Unreadable | Reason::Usage | Reason::Key | Reason::TrustPolicy => Exit::Usage,
            Reason::Unsigned | Reason::Untrusted | Reason::Revoked | Reason::Capability | Reason::Rollback => {
                Exit::Refused
            }
            _ => Exit::Problems,
        }
    }

    /// The stable name used in JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Unreadable => "unreadable",
            Reason::Usage => "usage",
            Reason::Key => "key",
            Reason::TrustPolicy => "trust-policy",
            Reason::Archive => "archive",
            Reason::Manifest => "manifest",
            Reason::NotRegular => "not-regular-file",
            Reason::Size => "size-mismatch",
            Reason::Digest => "digest-mismatch",
            Reason::FileSet => "file-set",
            Reason::Stale => "stale-digests",
            Reason::Lint => "lint",
            Reason::Placeholder => "placeholder-digest",
            Reason::Signature => "bad-signature",
            Reason::Unsigned => "unsigned",
            Reason::Untrusted => "untrusted",
            Reason::Revoked => "revoked",
            Reason::Capability => "capability",
            Reason::Rollback => "rollback",
            Reason::SharedSchema => "shared-schema",
        }
    }
}

/// A command that could not finish, with a message that names the file,
/// key or capability concerned, and a hint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// What kind of problem.
    pub reason: Reason,
    /// One line saying what is wrong.
    pub message: String,
    /// What to do about it.
    pub help: Option<String>,
}

impl Failure {
    /// A failure of the given kind.
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        Failure { reason, message: message.into(), help: None }
    }

    /// An I/O problem on `path`, with a hint for the common causes. The
    /// operating system's message is used as it is, without any temporary
    /// file name a library added to it.
    pub fn io(path: &std::path::Path, error: &std::io::Error) -> Self {
        use std::io::ErrorKind;
        // tempfile appends ` at path "<temporary name>"`: a name the user never chose.
        let text = error.to_string();
        let reason = text.split(" at path \"").next().unwrap_or_default();
        let failure = Failure::new(Reason::Unreadable, format!("{}: {reason}", path.display()));
        let shown = path.display();
        match error.kind() {
            ErrorKind::NotFound => failure.with_help(format!("check the path: {shown} does not exist")),
            ErrorKind::PermissionDenied => {
                failure.with_help(format!("check the permissions of {shown} and its folder"))
            }
            ErrorKind::NotADirectory => {
                failure.with_help(format!("a part of {shown} is a file where a folder is expected"))
            }
            ErrorKind::IsADirectory => failure.with_help(format!("{shown} is a folder; give a file")),
            ErrorKind::StorageFull | ErrorKind::QuotaExceeded => {
                failure.with_help("free some disk space, then try again")
            }
            ErrorKind::ReadOnlyFilesystem => failure.with_help(format!("{shown} is on a read-only file system")),
            _ => failure,
        }
    }

    /// A bounded read of `path` that failed: an I/O problem as [`Failure::io`]
    /// says, or a file past its limit as a failure of kind `too_large`.
    pub fn read(path: &std::path::Path, error: crate::fsutil::ReadError, too_large: Reason) -> Self {
        match error {
            crate::fsutil::ReadError::Io(e) => Failure::io(path, &e),
            e @ crate::fsutil::ReadError::TooLarge { .. } => {
                let help = e.help();
                let failure = Failure::new(too_large, e.to_string());
                match help {
                    Some(help) => failure.with_help(help),
                    None => failure,
                }
            }
        }
    }

    /// Adds a hint line.
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

impl Reportable for Failure {
    fn class(&self) -> Exit {
        self.reason.class()
    }

    fn help(&self) -> Option<String> {
        self.help.clone()
    }
}

#[cfg(test)]
mod io_tests {
    use super::*;

    #[test]
    fn io_failures_quote_the_system_message_without_temporary_names() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("afile");
        std::fs::write(&file, "x").unwrap();
        let error = tempfile::Builder::new().prefix(".rlp-").tempfile_in(&file).unwrap_err();
        let failure = Failure::io(&file.join("key"), &error);
        assert_eq!(failure.message, format!("{}: Not a directory (os error 20)", file.join("key").display()));
        assert!(failure.help.unwrap().contains("is a file where a folder is expected"));
    }
}
