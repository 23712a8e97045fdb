//! What the tools.json and policy.caps editors share: each remembers the
//! text it read, so that the edited text keeps the file's line endings
//! (CRLF stays CRLF), is written only when it changed, and atomically.

use std::path::Path;

use crate::authoring::AuthoringError;

/// A document of a bundle, open for editing.
pub(crate) trait Editable {
    /// The file it is read from and written to.
    fn path(&self) -> &Path;

    /// The text the file held when it was read (`None`: a new file).
    fn original(&self) -> Option<&str>;

    /// The document's text as this editor writes it, in `\n` line endings.
    fn render(&self) -> String;

    /// The text as it would be written, with the line endings of the file
    /// as it was read.
    fn to_text(&self) -> String {
        crate::fsutil::with_line_endings_of(self.original().unwrap_or_default(), self.render())
    }

    /// Whether the text differs from what was read.
    fn changed(&self) -> bool {
        self.original() != Some(self.to_text().as_str())
    }

    /// Writes the file atomically.
    fn write(&self) -> Result<(), AuthoringError> {
        crate::fsutil::write_atomic(self.path(), self.to_text().as_bytes(), None)
            .map_err(|e| AuthoringError::io("write", self.path(), &e))
    }
}
