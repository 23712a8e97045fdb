//! Pointers into a call: an RFC 6901 JSON Pointer rooted at the call's
//! arguments (`/args/…`) or at its successful result (`/result/…`), in
//! which the reference token `*` stands for every member of an object or
//! every element of an array (`/result/messages/*/from`). `*` is always
//! that wildcard: no key named `*` can be pointed at alone.
//!
//! They name the fields `rlp trace export --redact` and the `redact` lists
//! of config.toml (`[agents.<agent>.tools."<tool id>"] redact`) replace.

use std::fmt;

/// The part of a call a [`CallPointer`] starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallRoot {
    /// `/args`: the call's arguments.
    Args,
    /// `/result`: its successful result.
    Result,
}

/// One reference token of a [`CallPointer`] after its root.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// `*`: every member of an object, every element of an array.
    Any,
    /// A key (`~0` and `~1` decoded), which names an array element too
    /// when it is an RFC 6901 array index (`0`, `12`; no leading zero).
    Name(String),
}

impl Step {
    /// Whether the step names the member `key` of an object.
    pub fn matches_key(&self, key: &str) -> bool {
        match self {
            Step::Any => true,
            Step::Name(name) => name == key,
        }
    }

    /// Whether the step names element `index` of an array.
    pub fn matches_index(&self, index: usize) -> bool {
        match self {
            Step::Any => true,
            Step::Name(name) => {
                let canonical = name == "0" || (!name.starts_with('0') && name.bytes().all(|b| b.is_ascii_digit()));
                canonical && name.parse::<usize>().is_ok_and(|n| n == index)
            }
        }
    }
}

/// A pointer into a call's arguments or result (see the module
/// documentation), with the text it was read from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CallPointer {
    text: String,
    root: CallRoot,
    steps: Vec<Step>,
}

/// Why a text is not a [`CallPointer`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PointerError {
    /// What is wrong, quoting the text.
    pub message: String,
    /// What to write instead.
    pub help: String,
}

/// The help of a pointer that does not start where a call's data does.
const ROOTS_HELP: &str = "a pointer starts with /args (the call's arguments) or /result (its result), e.g. /args/to or \
                          /result/messages/*/from";

impl CallPointer {
    /// Reads `/args…` or `/result…` (RFC 6901 syntax: `~0` for `~` and
    /// `~1` for `/` in a key; `*` for every member or element).
    pub fn parse(text: &str) -> Result<CallPointer, PointerError> {
        let Some((root, rest)) = split_root(text) else {
            let fixed = format!("/{text}");
            let help = match split_root(&fixed) {
                Some(_) if !text.starts_with('/') => format!("write `{fixed}`: {ROOTS_HELP}"),
                _ => ROOTS_HELP.to_string(),
            };
            return Err(PointerError { message: format!("`{text}` does not start with /args or /result"), help });
        };
        let steps = rest.map(|tokens| tokens.split('/').map(|token| step(text, token)).collect()).transpose()?;
        Ok(CallPointer { text: text.to_string(), root, steps: steps.unwrap_or_default() })
    }

    /// Where it starts.
    pub fn root(&self) -> CallRoot {
        self.root
    }

    /// The reference tokens after the root.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// The text it was read from.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// The root `text` starts from and the reference tokens after it (`None`
/// when there are none), unless it starts with neither `/args` nor `/result`.
fn split_root(text: &str) -> Option<(CallRoot, Option<&str>)> {
    let rest = text.strip_prefix('/')?;
    let (first, tokens) = match rest.split_once('/') {
        Some((first, tokens)) => (first, Some(tokens)),
        None => (rest, None),
    };
    let root = match first {
        "args" => CallRoot::Args,
        "result" => CallRoot::Result,
        _ => return None,
    };
    Some((root, tokens))
}

/// One reference token of `text`, decoded.
fn step(text: &str, token: &str) -> Result<Step, PointerError> {
    if token == "*" {
        return Ok(Step::Any);
    }
    let mut name = String::with_capacity(token.len());
    let mut chars = token.chars();
    while let Some(c) = chars.next() {
        if c != '~' {
            name.push(c);
            continue;
        }
        match chars.next() {
            Some('0') => name.push('~'),
            Some('1') => name.push('/'),
            _ => {
                return Err(PointerError {
                    message: format!("`{text}` is not a JSON Pointer: `~` must be followed by 0 or 1"),
                    help: format!(
                        "write `~0` for a `~` in a key and `~1` for a `/`, e.g. `{}`",
                        escape_lone_tildes(text)
                    ),
                });
            }
        }
    }
    Ok(Step::Name(name))
}

/// `text` with each `~` that does not start `~0` or `~1` written `~0`.
fn escape_lone_tildes(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == '~' && !matches!(chars.peek(), Some('0' | '1')) {
            out.push('0');
        }
    }
    out
}

impl fmt::Display for CallPointer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(text: &str) -> Step {
        Step::Name(text.to_string())
    }

    #[test]
    fn reads_roots_keys_escapes_and_wildcards() {
        let p = CallPointer::parse("/result/messages/*/from").unwrap();
        assert_eq!(p.root(), CallRoot::Result);
        assert_eq!(p.steps(), [name("messages"), Step::Any, name("from")]);
        assert_eq!(p.to_string(), "/result/messages/*/from");
        let p = CallPointer::parse("/args/a~1b/~0c/").unwrap();
        assert_eq!((p.root(), p.steps()), (CallRoot::Args, &[name("a/b"), name("~c"), name("")][..]));
        assert_eq!(CallPointer::parse("/args").unwrap().steps(), []);
    }

    #[test]
    fn names_what_to_write_instead() {
        let e = CallPointer::parse("args/to").unwrap_err();
        assert_eq!(e.message, "`args/to` does not start with /args or /result");
        assert_eq!(e.help, format!("write `/args/to`: {ROOTS_HELP}"));
        for text in ["", "/", "/arguments/to", "/argsx", "result", "mail.send:/args/to"] {
            let e = CallPointer::parse(text).unwrap_err();
            assert_eq!(e.message, format!("`{text}` does not start with /args or /result"));
            let fixed = format!("/{text}");
            if CallPointer::parse(&fixed).is_err() {
                assert_eq!(e.help, ROOTS_HELP, "{text}");
            }
        }
        let e = CallPointer::parse("/args/a~b/c~/~01").unwrap_err();
        assert_eq!(e.message, "`/args/a~b/c~/~01` is not a JSON Pointer: `~` must be followed by 0 or 1");
        assert_eq!(e.help, "write `~0` for a `~` in a key and `~1` for a `/`, e.g. `/args/a~0b/c~0/~01`");
    }

    #[test]
    fn array_indices_are_rfc_6901_indices() {
        assert!(name("0").matches_index(0));
        assert!(name("12").matches_index(12));
        for (text, index) in [("01", 1), ("-", 0), ("1x", 1), ("", 0), ("+1", 1), ("99999999999999999999999", 0)] {
            assert!(!name(text).matches_index(index), "{text}");
        }
        assert!(Step::Any.matches_index(7) && Step::Any.matches_key("x"));
        assert!(name("0").matches_key("0") && !name("a").matches_key("b"));
    }
}
