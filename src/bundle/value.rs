//! Strict readers that turn JSON and TOML text into one tree type.
//!
//! Both formats become a [`serde_json::Value`], so the typed loaders share one
//! set of field readers. JSON is parsed by serde_json (with its recursion
//! limit) refusing duplicate keys; TOML by toml_edit, keeping every value's
//! span, refusing datetimes and integers JSON cannot carry exactly.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use toml_edit::{Item, Table};

use crate::bundle::diag::{At, Code, Diagnostics};
use crate::bundle::pointer::Pointer;
use crate::bundle::source::{SourceFile, SpanIndex, Spans, Syntax, json_duplicate_keys};

/// The largest integer a manifest may hold: ±(2^53−1), exact in every JSON reader.
pub(crate) const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// The deepest nesting of arrays and objects rlp accepts in tool data
/// (arguments, results) and records. Well below the 128 levels a JSON
/// reader accepts, so every record — the payload around the data, the JSONL
/// line around the payload — reads back whole.
pub(crate) const MAX_DATA_DEPTH: usize = 100;

/// How deeply arrays and objects nest in `value` (a scalar: 0, `[]`: 1).
pub(crate) fn json_depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(json_depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(json_depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// A JSON value whose objects never repeat a key.
struct StrictJson(Value);

impl<'de> Deserialize<'de> for StrictJson {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(StrictJson)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(StrictJson(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            if map.contains_key(&key) {
                return Err(de::Error::custom(format!("duplicate key `{key}`")));
            }
            let StrictJson(value) = access.next_value()?;
            map.insert(key, value);
        }
        Ok(Value::Object(map))
    }
}

/// Parses JSON text as strictly as lint reads bundle files: a key repeated in
/// one object is an error (RLP002), never "the last one wins". Such an error
/// is the only one for which [`serde_json::Error::is_data`] holds.
pub(crate) fn parse_json_text(text: &str) -> Result<Value, serde_json::Error> {
    serde_json::from_str::<StrictJson>(text).map(|StrictJson(value)| value)
}

/// One line saying why [`parse_json_text`] refused a text, with the line and
/// column: a repeated key (RLP002) or invalid JSON (RLP001).
pub(crate) fn json_error_message(error: &serde_json::Error) -> String {
    if error.is_data() {
        format!("{error} (RLP002: JSON readers disagree on which of the two values wins)")
    } else {
        format!("invalid JSON: {error}")
    }
}

/// What is wrong with a JSON text that starts with a UTF-8 byte-order mark
/// (RFC 8259 forbids one), when it does.
pub(crate) fn bom_problem(text: &str) -> Option<&'static str> {
    text.starts_with('\u{feff}')
        .then_some("the file starts with a UTF-8 byte-order mark (U+FEFF), which JSON does not allow")
}

/// How to remove the byte-order mark from `path`.
pub(crate) fn bom_help(path: &std::path::Path) -> String {
    format!(
        "save the file as UTF-8 without a byte-order mark, or delete its first 3 bytes: `sed -i '1s/^\\xEF\\xBB\\xBF//' {}`",
        path.display()
    )
}

/// Parses a JSON document strictly, reporting a syntax error or the first
/// duplicate key with its exact position.
pub(crate) fn parse_json(file: &SourceFile, diags: &mut Diagnostics) -> Option<Value> {
    if let Some(problem) = bom_problem(file.text()) {
        diags.report(Code::Syntax, At::Span(0..'\u{feff}'.len_utf8()), problem).help(bom_help(file.path()));
        return None;
    }
    match parse_json_text(file.text()) {
        Ok(value) => Some(value),
        Err(error) => {
            let offset = file.offset_of(error.line(), error.column());
            let message = error.to_string();
            if error.is_data() {
                let duplicates = json_duplicate_keys(file.text());
                if duplicates.is_empty() {
                    diags.report(Code::DuplicateKey, At::Span(offset..offset), strip_position(&message));
                }
                for (key, range) in duplicates {
                    diags
                        .report(Code::DuplicateKey, At::Span(range), format!("duplicate key `{key}`"))
                        .help("remove one of the two entries; JSON readers disagree on which one wins");
                }
            } else {
                let help = if message.contains("recursion limit") {
                    "nesting deeper than 128 levels is refused; flatten the document"
                } else {
                    "fix the JSON syntax at this position"
                };
                diags
                    .report(
                        Code::Syntax,
                        At::Span(offset..offset + 1),
                        format!("invalid JSON: {}", strip_position(&message)),
                    )
                    .help(help);
            }
            None
        }
    }
}

/// A serde_json message without the " at line X column Y" it appends
/// (whoever shows the message places it themselves).
pub(crate) fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

/// Parses a TOML document into a value tree and a span index.
///
/// Returns `None` (with a finding) when the text is not TOML; otherwise the
/// tree, where a refused value (datetime, huge integer, NaN) was reported and
/// replaced by `null`.
pub(crate) fn parse_toml(text: &str, diags: &mut Diagnostics) -> Option<(Value, SpanIndex)> {
    let document = match toml_edit::Document::parse(text) {
        Ok(document) => document,
        Err(error) => {
            let span = error.span().unwrap_or(0..0);
            let message = error.message().trim_end().to_string();
            let code = if message.contains("duplicate key") { Code::DuplicateKey } else { Code::Syntax };
            let message = match text.get(span.clone()) {
                Some(key) if code == Code::DuplicateKey && !key.is_empty() => format!("duplicate key `{key}`"),
                _ => message,
            };
            let help = match code {
                Code::DuplicateKey => "remove one of the two entries",
                _ => "fix the TOML syntax at this position",
            };
            diags.report(code, At::Span(span), format!("invalid TOML: {message}")).help(help);
            return None;
        }
    };
    let mut spans = SpanIndex::new();
    spans.insert(Pointer::root(), Spans { key: None, value: 0..0 });
    let root = TomlConverter { spans: &mut spans, diags }.table(document.as_table(), &Pointer::root());
    Some((root, spans))
}

struct TomlConverter<'a> {
    spans: &'a mut SpanIndex,
    diags: &'a mut Diagnostics,
}

impl TomlConverter<'_> {
    fn record(&mut self, at: &Pointer, key: Option<std::ops::Range<usize>>, value: Option<std::ops::Range<usize>>) {
        if let Some(value) = value.or_else(|| key.clone()) {
            self.spans.insert(at.clone(), Spans { key, value });
        }
    }

    fn table(&mut self, table: &Table, at: &Pointer) -> Value {
        let mut map = Map::new();
        for (name, item) in table.iter() {
            let child = at.key(name);
            let key_span = table.key(name).and_then(|k| k.span());
            let value = match item {
                Item::None => continue,
                Item::Value(value) => {
                    self.record(&child, key_span, value.span());
                    self.value(value, &child)
                }
                Item::Table(sub) => {
                    self.record(&child, key_span, sub.span());
                    self.table(sub, &child)
                }
                Item::ArrayOfTables(array) => {
                    self.record(&child, key_span, array.span());
                    let items = array
                        .iter()
                        .enumerate()
                        .map(|(i, sub)| {
                            let element = child.index(i);
                            self.record(&element, None, sub.span());
                            self.table(sub, &element)
                        })
                        .collect();
                    Value::Array(items)
                }
            };
            map.insert(name.to_string(), value);
        }
        Value::Object(map)
    }

    fn value(&mut self, value: &toml_edit::Value, at: &Pointer) -> Value {
        use toml_edit::Value as V;
        match value {
            V::String(s) => Value::String(s.value().clone()),
            V::Boolean(b) => Value::Bool(*b.value()),
            V::Integer(i) => {
                let n = *i.value();
                if n.abs() > MAX_SAFE_INTEGER {
                    self.diags
                        .report(Code::InvalidValue, At::Value(at.clone()), format!("integer {n} is beyond ±(2^53−1)"))
                        .help("integers this large lose precision in JSON readers; use a string");
                    return Value::Null;
                }
                Value::Number(n.into())
            }
            V::Float(f) => match Number::from_f64(*f.value()) {
                Some(n) => Value::Number(n),
                None => {
                    self.diags
                        .report(Code::InvalidValue, At::Value(at.clone()), "NaN and infinite numbers are not allowed")
                        .help("use a finite number");
                    Value::Null
                }
            },
            V::Datetime(_) => {
                self.diags
                    .report(Code::WrongType, At::Value(at.clone()), "datetimes are not allowed here")
                    .help("write the value as a quoted string");
                Value::Null
            }
            V::Array(array) => Value::Array(
                array
                    .iter()
                    .enumerate()
                    .map(|(i, element)| {
                        let child = at.index(i);
                        self.record(&child, None, element.span());
                        self.value(element, &child)
                    })
                    .collect(),
            ),
            V::InlineTable(table) => {
                let mut map = Map::new();
                for (name, element) in table.iter() {
                    let child = at.key(name);
                    let key_span = table.key(name).and_then(|k| k.span());
                    self.record(&child, key_span, element.span());
                    map.insert(name.to_string(), self.value(element, &child));
                }
                Value::Object(map)
            }
        }
    }
}

/// Reads a TOML file into a source file (with spans) and its tree.
pub(crate) fn load_toml(
    path: std::path::PathBuf,
    text: String,
    diags: &mut Diagnostics,
) -> (SourceFile, Option<Value>) {
    match parse_toml(&text, diags) {
        Some((value, spans)) => (SourceFile::with_spans(path, text, Syntax::Toml, spans), Some(value)),
        None => (SourceFile::new(path, text, Syntax::Toml), None),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn depth_counts_containers() {
        use serde_json::json;
        assert_eq!(super::json_depth(&json!(1)), 0);
        assert_eq!(super::json_depth(&json!([])), 1);
        assert_eq!(super::json_depth(&json!({"a": [1, {"b": {}}], "c": 2})), 4);
    }

    use super::*;

    fn json(text: &str) -> (Option<Value>, Vec<crate::bundle::diag::Finding>) {
        let file = SourceFile::new("t.json", text.to_string(), Syntax::Json);
        let mut diags = Diagnostics::new("t.json");
        let value = parse_json(&file, &mut diags);
        (value, diags.into_findings())
    }

    #[test]
    fn json_duplicate_key_points_at_second_key() {
        let (value, findings) = json("{\"a\": 1,\n \"a\": 2}");
        assert!(value.is_none());
        assert_eq!(findings[0].code, Code::DuplicateKey);
        assert_eq!(findings[0].at, At::Span(10..13));
    }

    #[test]
    fn json_byte_order_mark_is_named() {
        let (value, findings) = json("\u{feff}{}");
        assert!(value.is_none());
        assert_eq!(findings[0].at, At::Span(0..3));
        assert!(findings[0].message.contains("byte-order mark"), "{}", findings[0].message);
    }

    #[test]
    fn json_deep_nesting_is_an_error_not_a_crash() {
        let text = "[".repeat(10_000) + &"]".repeat(10_000);
        let (value, findings) = json(&text);
        assert!(value.is_none());
        assert_eq!(findings[0].code, Code::Syntax);
        assert!(findings[0].message.contains("recursion limit"), "{}", findings[0].message);
    }

    #[test]
    fn toml_refuses_datetimes_and_huge_integers() {
        let mut diags = Diagnostics::new("m.toml");
        let (value, spans) =
            parse_toml("[a]\nwhen = 1979-05-27\nbig = 9007199254740992\nok = 3\n", &mut diags).unwrap();
        assert_eq!(value["a"]["ok"], 3);
        let codes: Vec<_> = diags.into_findings().iter().map(|f| f.code).collect();
        assert_eq!(codes, vec![Code::WrongType, Code::InvalidValue]);
        assert_eq!(spans[&Pointer::root().key("a").key("ok")].value, 50..51);
    }

    #[test]
    fn toml_duplicate_keys_are_reported() {
        let mut diags = Diagnostics::new("m.toml");
        assert!(parse_toml("a = 1\na = 2\n", &mut diags).is_none());
        assert_eq!(diags.into_findings()[0].code, Code::DuplicateKey);
    }
}
