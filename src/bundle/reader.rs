//! Typed field access over a value tree, reporting every problem it meets.
//!
//! All three bundle files are read through [`Fields`]: a missing required key,
//! a value of the wrong type or an unknown key each become a finding that
//! points at the exact key or value, and reading goes on so one run reports
//! everything.

use serde_json::{Map, Value};

use crate::bundle::diag::{At, Code, Diagnostics};
use crate::bundle::pointer::Pointer;

/// How a value's type is named in messages.
pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a number",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a table",
    }
}

/// The value as a table/object, or a wrong-type finding.
pub(crate) fn expect_object<'v>(
    value: &'v Value,
    at: &Pointer,
    what: &str,
    diags: &mut Diagnostics,
) -> Option<&'v Map<String, Value>> {
    match value {
        Value::Object(map) => Some(map),
        other => {
            diags.report(
                Code::WrongType,
                At::Value(at.clone()),
                format!("{what} must be a table (object), found {}", type_name(other)),
            );
            None
        }
    }
}

/// The keys of one table/object, read one by one.
pub(crate) struct Fields<'v> {
    map: &'v Map<String, Value>,
    at: Pointer,
    what: &'static str,
    known: &'static [&'static str],
}

impl<'v> Fields<'v> {
    /// Reads `map` (found at `at`, described as `what` in messages), where
    /// `known` lists the keys that are not reported as unknown.
    pub(crate) fn new(
        map: &'v Map<String, Value>,
        at: Pointer,
        what: &'static str,
        known: &'static [&'static str],
    ) -> Self {
        Self { map, at, what, known }
    }

    /// Like [`Fields::new`] after checking the value is a table.
    pub(crate) fn of(
        value: &'v Value,
        at: Pointer,
        what: &'static str,
        known: &'static [&'static str],
        diags: &mut Diagnostics,
    ) -> Option<Self> {
        expect_object(value, &at, what, diags).map(|map| Self::new(map, at, what, known))
    }

    /// Where this table is.
    pub(crate) fn pointer(&self) -> &Pointer {
        &self.at
    }

    /// The pointer of one key's value.
    pub(crate) fn at(&self, key: &str) -> Pointer {
        self.at.key(key)
    }

    /// The keys present, in document order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &'v String> + use<'v> {
        self.map.keys()
    }

    /// The raw value of a key.
    pub(crate) fn get(&self, key: &str) -> Option<&'v Value> {
        self.map.get(key)
    }

    fn present(&self, key: &str, required: bool, diags: &mut Diagnostics) -> Option<&'v Value> {
        match self.map.get(key) {
            // JSON null stands for "absent"; for a required key that is an error.
            Some(Value::Null) => {
                let at = At::Value(self.at(key));
                if required && !diags.reported_at(&at) {
                    diags
                        .report(Code::MissingField, at, format!("`{key}` in {} is null", self.what))
                        .help(format!("give `{key}` a value"));
                }
                None
            }
            Some(value) => Some(value),
            None => {
                if required {
                    diags
                        .report(Code::MissingField, At::Key(self.at.clone()), format!("{} has no `{key}`", self.what))
                        .help(format!("add `{key}` to {}", self.what));
                }
                None
            }
        }
    }

    fn wrong_type(&self, key: &str, expected: &str, found: &Value, diags: &mut Diagnostics) {
        diags.report(
            Code::WrongType,
            At::Value(self.at(key)),
            format!("`{key}` in {} must be {expected}, found {}", self.what, type_name(found)),
        );
    }

    /// A string value.
    pub(crate) fn string(&self, key: &str, required: bool, diags: &mut Diagnostics) -> Option<&'v str> {
        match self.present(key, required, diags)? {
            Value::String(s) => Some(s),
            other => {
                self.wrong_type(key, "a string", other, diags);
                None
            }
        }
    }

    /// A boolean value.
    pub(crate) fn boolean(&self, key: &str, diags: &mut Diagnostics) -> Option<bool> {
        match self.present(key, false, diags)? {
            Value::Bool(b) => Some(*b),
            other => {
                self.wrong_type(key, "true or false", other, diags);
                None
            }
        }
    }

    /// A non-negative integer within `min..=max`.
    pub(crate) fn integer(&self, key: &str, min: u64, max: u64, diags: &mut Diagnostics) -> Option<u64> {
        let value = self.present(key, false, diags)?;
        match value.as_u64() {
            Some(n) if (min..=max).contains(&n) => Some(n),
            Some(n) => {
                diags
                    .report(
                        Code::InvalidValue,
                        At::Value(self.at(key)),
                        format!("`{key}` is {n}, outside {min}..={max}"),
                    )
                    .help(format!("use a value from {min} to {max}"));
                None
            }
            None if value.is_number() => {
                diags.report(
                    Code::InvalidValue,
                    At::Value(self.at(key)),
                    format!("`{key}` must be a whole number from {min} to {max}"),
                );
                None
            }
            None => {
                self.wrong_type(key, "an integer", value, diags);
                None
            }
        }
    }

    /// A non-negative number (integer or decimal).
    pub(crate) fn number(&self, key: &str, diags: &mut Diagnostics) -> Option<f64> {
        let value = self.present(key, false, diags)?;
        match value.as_f64() {
            Some(n) if n >= 0.0 => Some(n),
            Some(_) => {
                diags.report(Code::InvalidValue, At::Value(self.at(key)), format!("`{key}` must not be negative"));
                None
            }
            None => {
                self.wrong_type(key, "a number", value, diags);
                None
            }
        }
    }

    /// A list of strings, each with its pointer; wrong elements are reported and skipped.
    pub(crate) fn strings(&self, key: &str, diags: &mut Diagnostics) -> Vec<(Pointer, &'v str)> {
        let Some(value) = self.present(key, false, diags) else { return Vec::new() };
        let Value::Array(items) = value else {
            self.wrong_type(key, "a list of strings", value, diags);
            return Vec::new();
        };
        let at = self.at(key);
        items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| match item {
                Value::String(s) => Some((at.index(i), s.as_str())),
                other => {
                    diags.report(
                        Code::WrongType,
                        At::Value(at.index(i)),
                        format!("`{key}` must hold only strings, found {}", type_name(other)),
                    );
                    None
                }
            })
            .collect()
    }

    /// A nested table, read with its own known keys.
    pub(crate) fn table(
        &self,
        key: &str,
        what: &'static str,
        known: &'static [&'static str],
        required: bool,
        diags: &mut Diagnostics,
    ) -> Option<Fields<'v>> {
        let value = self.present(key, required, diags)?;
        Fields::of(value, self.at(key), what, known, diags)
    }

    /// Reports every key not in the known list, as a warning.
    pub(crate) fn finish(&self, diags: &mut Diagnostics) {
        for key in self.map.keys() {
            if !self.known.contains(&key.as_str()) {
                diags
                    .report(Code::UnknownField, At::Key(self.at(key)), format!("unknown key `{key}` in {}", self.what))
                    .help(format!("known keys are: {}; rlp ignores this one and keeps it as written in every rewrite (a newer rlp may know it)", self.known.join(", ")));
            }
        }
    }
}
