//! JSON-Pointer-like paths (RFC 6901) used to name a value inside a document.
//!
//! Every finding names the value it is about by a [`Pointer`]; the file's
//! locator turns the pointer into a line and column only when it is printed,
//! so loading stays fast on the happy path.

use std::fmt;

/// One step of a [`Pointer`]: an object key or an array index.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Segment {
    /// A key of an object (JSON) or table (TOML).
    Key(String),
    /// An index into an array.
    Index(usize),
}

/// A path from the document root to one value.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pointer(Vec<Segment>);

impl Pointer {
    /// The document root.
    pub fn root() -> Self {
        Self(Vec::new())
    }

    /// This pointer extended by an object key.
    pub fn key(&self, key: impl Into<String>) -> Self {
        let mut segments = self.0.clone();
        segments.push(Segment::Key(key.into()));
        Self(segments)
    }

    /// This pointer extended by an array index.
    pub fn index(&self, index: usize) -> Self {
        let mut segments = self.0.clone();
        segments.push(Segment::Index(index));
        Self(segments)
    }

    /// The steps from the root.
    pub fn segments(&self) -> &[Segment] {
        &self.0
    }

    /// The pointer one step up, or `None` at the root.
    pub fn parent(&self) -> Option<Self> {
        let (_, rest) = self.0.split_last()?;
        Some(Self(rest.to_vec()))
    }

    /// Parses an RFC 6901 pointer such as `/tools/0/id`.
    ///
    /// Segments made only of digits are read as array indices.
    pub fn parse(text: &str) -> Option<Self> {
        if text.is_empty() {
            return Some(Self::root());
        }
        let rest = text.strip_prefix('/')?;
        let segments = rest
            .split('/')
            .map(|raw| {
                let key = raw.replace("~1", "/").replace("~0", "~");
                match key.parse::<usize>() {
                    Ok(index) if !key.is_empty() && (key == "0" || !key.starts_with('0')) => Segment::Index(index),
                    _ => Segment::Key(key),
                }
            })
            .collect();
        Some(Self(segments))
    }
}

/// An object key as one JSON Pointer segment (RFC 6901): `~` as `~0`, `/` as `~1`.
pub(crate) fn escape_key(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

impl fmt::Display for Pointer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for segment in &self.0 {
            match segment {
                Segment::Key(key) => write!(f, "/{}", escape_key(key))?,
                Segment::Index(index) => write!(f, "/{index}")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_escapes_and_parse_round_trips() {
        let pointer = Pointer::root().key("tools").index(3).key("a/b~c");
        assert_eq!(pointer.to_string(), "/tools/3/a~1b~0c");
        assert_eq!(Pointer::parse(&pointer.to_string()), Some(pointer));
        assert_eq!(Pointer::parse("nope"), None);
        assert_eq!(Pointer::parse("/01"), Some(Pointer::root().key("01")));
    }
}
