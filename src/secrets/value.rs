//! The value of a secret: never printed, wiped from memory when dropped.

use std::fmt;

use zeroize::Zeroizing;

/// What a secret value is shown as, wherever one would be printed or
/// recorded (its `Debug` and `Display`, and the runtime's scrubbing).
pub(crate) const REDACTED: &str = "[redacted]";

/// A secret's value. `Debug` and `Display` print `[redacted]`; the value is
/// reachable only through [`SecretValue::expose`], and its memory is
/// overwritten with zeros when the last copy is dropped.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(Zeroizing<String>);

impl SecretValue {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(Zeroizing::new(value.into()))
    }

    /// The value itself, for handing to a tool (environment, header).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl fmt::Display for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_never_print() {
        let secret = SecretValue::new("hunter2");
        assert_eq!(format!("{secret} {secret:?} {:?}", Some(&secret)), "[redacted] [redacted] Some([redacted])");
        assert_eq!(secret.expose(), "hunter2");
    }
}
