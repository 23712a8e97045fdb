//! Secrets in a call: scrubbing of resolved values — in every spelling a
//! tool or server may echo them back in — from everything recorded or
//! printed. Where values come from is [`crate::secrets`]; the environment
//! an exec tool receives them in is [`crate::runtime::exec`]'s.

mod spelling;

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use crate::secrets::{REDACTED, SecretValue};

use spelling::Spellings;

/// Replaces every occurrence of the secret values it knows with `[redacted]`,
/// in each spelling a tool or server may echo one back in: raw,
/// JSON-escaped (once, or twice for JSON text inside a JSON string),
/// percent-encoded (any mix of these within one occurrence),
/// and base64 — standard or URL-safe, padded or not, on its own or inside a
/// longer base64 text (see [`MIN_EMBEDDED_BASE64_BYTES`]).
///
/// Build one per call: the matcher is made once, and clones share it. With
/// no values, scrubbing returns its input untouched at no cost.
#[derive(Clone, Default)]
pub(crate) struct Scrubber {
    spellings: Option<Arc<Spellings>>,
    /// The values that read as JSON numbers, as the numbers they read as: a
    /// tool that echoes one as a number gets it rounded by the JSON reader
    /// (`98765432109876543210` becomes `9.876543210987654e19`, `1.50`
    /// becomes `1.5`), where no spelling of its text matches.
    numbers: Arc<[f64]>,
}

impl fmt::Debug for Scrubber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.is_empty() { "Scrubber(empty)" } else { "Scrubber([redacted])" })
    }
}

impl Scrubber {
    /// A scrubber for these values (empty values are ignored).
    pub(crate) fn new<'a>(values: impl IntoIterator<Item = &'a SecretValue>) -> Self {
        let mut values: Vec<&str> = values.into_iter().map(SecretValue::expose).filter(|v| !v.is_empty()).collect();
        values.sort_unstable();
        values.dedup();
        let numbers = values
            .iter()
            .filter_map(|v| serde_json::from_str::<serde_json::Number>(v).ok())
            .filter_map(|n| n.as_f64())
            .collect();
        let spellings = (!values.is_empty()).then(|| Arc::new(Spellings::new(values)));
        Scrubber { spellings, numbers }
    }

    /// Whether there is nothing to scrub.
    pub(crate) fn is_empty(&self) -> bool {
        self.spellings.is_none()
    }

    /// The length in bytes of the longest text one spelled occurrence of a
    /// value can take (0 when empty): the margin a cut stream needs so that
    /// a value cut in half at the front is dropped ([`Scrubber::scrub_tail`]).
    pub(crate) fn max_spelled_len(&self) -> usize {
        self.spellings.as_ref().map_or(0, |s| s.max_len())
    }

    /// `text` with every spelled occurrence of a value replaced.
    pub(crate) fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let Some(spellings) = &self.spellings else {
            return Cow::Borrowed(text);
        };
        let found = spellings.find(text);
        if found.is_empty() {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len());
        let mut copied = 0;
        for range in found {
            out.push_str(&text[copied..range.start]);
            out.push_str(REDACTED);
            copied = range.end;
        }
        out.push_str(&text[copied..]);
        Cow::Owned(out)
    }

    /// `text` scrubbed, as an owned string.
    pub(crate) fn scrub_string(&self, text: &str) -> String {
        self.scrub(text).into_owned()
    }

    /// Scrubs every string and object key in a JSON value; a number whose
    /// text contains a secret becomes the string `[redacted]`.
    pub(crate) fn scrub_value(&self, value: &mut Value) {
        if self.is_empty() {
            return;
        }
        match value {
            Value::String(s) => {
                if let Cow::Owned(clean) = self.scrub(s) {
                    *s = clean;
                }
            }
            Value::Number(n) => {
                let text = n.to_string();
                let rounded = n.as_f64().is_some_and(|x| self.numbers.contains(&x));
                if rounded || matches!(self.scrub(&text), Cow::Owned(_)) {
                    *value = Value::String(REDACTED.to_string());
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.scrub_value(v)),
            Value::Object(map) => {
                let needs_key_scrub = map.keys().any(|k| matches!(self.scrub(k), Cow::Owned(_)));
                if needs_key_scrub {
                    let old = std::mem::take(map);
                    for (key, v) in old {
                        map.insert(self.scrub_string(&key), v);
                    }
                }
                map.values_mut().for_each(|v| self.scrub_value(v));
            }
            Value::Null | Value::Bool(_) => {}
        }
    }

    /// Scrubs a ledger payload. Tool data — `args` and `result` — is scrubbed
    /// entirely ([`Scrubber::scrub_value`]); elsewhere every string is
    /// scrubbed except the identifiers and digests rlp makes itself
    /// (`invocation_id`, `*_blake3`), and numbers (counters, durations,
    /// status codes) are left alone: a short secret value, a PIN such as `0`,
    /// must not turn an invocation id into something that is no longer a UUID.
    pub(crate) fn scrub_payload(&self, payload: &mut Value) {
        let Value::Object(fields) = payload else {
            return self.scrub_value(payload);
        };
        for (key, value) in fields.iter_mut() {
            match key.as_str() {
                "args" | "result" => self.scrub_value(value),
                "invocation_id" => {}
                key if key.ends_with("_blake3") => {}
                _ => self.scrub_strings(value),
            }
        }
    }

    /// Scrubs every string (not object keys, not numbers) in a JSON value.
    fn scrub_strings(&self, value: &mut Value) {
        match value {
            Value::String(s) => {
                if let Cow::Owned(clean) = self.scrub(s) {
                    *s = clean;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.scrub_strings(v)),
            Value::Object(map) => map.values_mut().for_each(|v| self.scrub_strings(v)),
            Value::Number(_) | Value::Null | Value::Bool(_) => {}
        }
    }

    /// A scrubbed copy of a JSON value.
    pub(crate) fn scrubbed(&self, value: &Value) -> Value {
        let mut copy = value.clone();
        self.scrub_value(&mut copy);
        copy
    }

    /// The last `keep` bytes of `bytes` as text, scrubbed.
    ///
    /// `bytes` must hold up to `max_spelled_len() - 1` bytes more than `keep`
    /// when it was cut from a longer stream: a secret (in any spelling) cut in
    /// half at the front is dropped with that margin instead of leaking its tail.
    pub(crate) fn scrub_tail(&self, bytes: &[u8], keep: usize, truncated: bool) -> String {
        // The margin is dropped before scrubbing: what is left of a value cut
        // at the front lies wholly inside it.
        let margin = if truncated { self.max_spelled_len().saturating_sub(1).min(bytes.len()) } else { 0 };
        let text = String::from_utf8_lossy(&bytes[margin..]);
        let clean = self.scrub(&text);
        let mut start = clean.len().saturating_sub(keep);
        while !clean.is_char_boundary(start) {
            start += 1;
        }
        if truncated || start > 0 { format!("…{}", &clean[start..]) } else { clean.into_owned() }
    }

    /// The first `keep` bytes of `bytes` as text (the whole buffer scrubbed first).
    pub(crate) fn scrub_head(&self, bytes: &[u8], keep: usize) -> String {
        let text = String::from_utf8_lossy(bytes);
        let clean = self.scrub(&text);
        if clean.len() <= keep {
            return clean.into_owned();
        }
        let mut end = keep;
        while !clean.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &clean[..end])
    }
}

#[cfg(test)]
mod tests {
    use super::spelling::MIN_EMBEDDED_BASE64_BYTES;
    use super::*;
    use base64::Engine;
    use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
    use serde_json::json;

    /// Holds `"`, `\`, `/`, a tab, a space, a non-ASCII and a non-BMP character.
    const HARD: &str = "a\"b\\c/d\te f\u{e9}\u{1F600}z";

    fn scrubber(values: &[&str]) -> Scrubber {
        let values: Vec<SecretValue> = values.iter().map(|v| SecretValue::new(*v)).collect();
        Scrubber::new(&values)
    }

    /// `value` with each character written by `spell`.
    fn spelled(value: &str, spell: impl Fn(usize, char) -> String) -> String {
        value.chars().enumerate().map(|(i, c)| spell(i, c)).collect()
    }

    fn json_u(c: char, upper: bool) -> String {
        let mut units = [0; 2];
        let text: String = c.encode_utf16(&mut units).iter().map(|u| format!("\\u{u:04x}")).collect();
        if upper { text.to_uppercase().replace("\\U", "\\u") } else { text }
    }

    fn percent(c: char, upper: bool) -> String {
        let mut buf = [0; 4];
        c.encode_utf8(&mut buf).bytes().map(|b| if upper { format!("%{b:02X}") } else { format!("%{b:02x}") }).collect()
    }

    /// Asserts that `text` around the value comes out as `[redacted]` alone.
    fn assert_scrubbed(s: &Scrubber, spelling: &str) {
        let text = format!("<{spelling}>");
        assert_eq!(s.scrub(&text), "<[redacted]>", "{spelling:?}");
    }

    #[test]
    fn scrubbers_never_print_values() {
        assert_eq!(format!("{:?}", scrubber(&["hunter2"])), "Scrubber([redacted])");
    }

    #[test]
    fn scrubs_text_and_json() {
        let s = scrubber(&["s3cr3t", "s3cr3t-long", "", "4242"]);
        assert_eq!(s.scrub("a s3cr3t-long b s3cr3t c"), "a [redacted] b [redacted] c");
        assert!(matches!(s.scrub("nothing here"), Cow::Borrowed(_)));
        let mut v = json!({"k": ["x s3cr3t", {"s3cr3t": 1}], "n": 424242, "m": 7});
        s.scrub_value(&mut v);
        assert_eq!(v, json!({"k": ["x [redacted]", {"[redacted]": 1}], "n": "[redacted]", "m": 7}));
    }

    #[test]
    fn nothing_to_scrub_costs_nothing() {
        let s = Scrubber::new(&[SecretValue::new("")]);
        assert!(s.is_empty());
        assert_eq!(s.max_spelled_len(), 0);
        assert!(matches!(s.scrub("anything \\u0041 %41"), Cow::Borrowed(_)));
    }

    #[test]
    fn a_numeric_value_echoed_as_a_rounded_number_is_scrubbed() {
        let s = scrubber(&["98765432109876543210", "1.50"]);
        let mut v: Value =
            serde_json::from_str("{\"account\": 98765432109876543210, \"rate\": 1.50, \"n\": 7}").unwrap();
        s.scrub_value(&mut v);
        assert_eq!(v, json!({"account": "[redacted]", "rate": "[redacted]", "n": 7}));
    }

    #[test]
    fn a_value_written_as_a_json_pointer_is_scrubbed() {
        let s = scrubber(&["AKIA/abc~def+ghi"]);
        assert_eq!(
            s.scrub("/AKIA~1abc~0def+ghi: 1 is not of type \"string\""),
            "/[redacted]: 1 is not of type \"string\""
        );
    }

    #[test]
    fn a_cut_front_is_dropped_before_scrubbing() {
        // A one-byte value scrubbed first would lengthen the text past the margin.
        let long = format!("{}WXYZ", "0".repeat(200));
        let s = scrubber(&[long.as_str(), "0"]);
        let stream = format!("{long} then {} log line\n", "z".repeat(4 * s.max_spelled_len()));
        let tail = s.scrub_tail(&stream.as_bytes()[1..], 4096, true);
        assert!(!tail.contains("WXYZ"), "{tail}");
        assert!(tail.starts_with("…z") && tail.ends_with("z log line\n"), "{tail}");
    }

    #[test]
    fn overlapping_occurrences_are_covered_whole() {
        let s = scrubber(&["aba", "xab"]);
        assert_eq!(s.scrub("-ababa-"), "-[redacted]-");
        assert_eq!(s.scrub("-xaba-"), "-[redacted]-");
        assert_eq!(s.scrub("abaaba"), "[redacted][redacted]");
    }

    #[test]
    fn json_escaped_spellings() {
        let s = scrubber(&[HARD]);
        let encoded = serde_json::to_string(HARD).unwrap();
        assert_scrubbed(&s, &encoded[1..encoded.len() - 1]);
        let php = serde_json::to_string(HARD).unwrap().replace('/', "\\/");
        assert_scrubbed(&s, &php[1..php.len() - 1]);
        assert_scrubbed(&s, &spelled(HARD, |_, c| json_u(c, false)));
        assert_scrubbed(&s, &spelled(HARD, |_, c| json_u(c, true)));
        // Any character may be escaped, or only some, in either case.
        assert_scrubbed(&s, &spelled(HARD, |i, c| if i % 2 == 0 { json_u(c, i % 4 == 0) } else { c.to_string() }));
        assert_scrubbed(&s, "a\\\"b\\\\c\\/d\\u0009e f\\u00E9\\ud83d\\uDE00z");
        let controls = scrubber(&["\u{8}\u{c}\n\r\t"]);
        assert_scrubbed(&controls, "\\b\\f\\n\\r\\t");
        assert_scrubbed(&controls, "\\u0008\\u000C\\n\\u000d\\t");
        // JSON text inside a JSON string, as a tool may print it (escaped twice).
        let twice = serde_json::to_string(&serde_json::to_string(&json!({"token": HARD})).unwrap()).unwrap();
        assert_eq!(s.scrub(&twice), r#""{\"token\":\"[redacted]\"}""#);
        let php_twice = serde_json::to_string(&php[1..php.len() - 1]).unwrap().replace('/', "\\/");
        assert_scrubbed(&s, &php_twice[1..php_twice.len() - 1]);
        assert_scrubbed(&s, &spelled(HARD, |i, c| json_u(c, i % 2 == 0).replace('\\', "\\\\")));
        // The value inside a JSON string that holds JSON text, once decoded.
        let inner = serde_json::to_string(&json!({"token": HARD})).unwrap();
        let outer: Value = json!({"body": inner});
        let mut scrubbed = outer.clone();
        s.scrub_value(&mut scrubbed);
        assert_eq!(scrubbed, json!({"body": "{\"token\":\"[redacted]\"}"}));
    }

    /// The examples of docs/security.md.
    #[test]
    fn documented_examples() {
        let s = scrubber(&["p/w\"é"]);
        for spelling in [
            "p/w\"é",
            r#"p\/w\"\u00E9"#,
            r#"\u0070/w\"é"#,
            r#"p/w\\\"\\u00e9"#,
            "p%2Fw%22%C3%A9",
            "p/w%22%c3%a9",
            "cC93IsOp",
        ] {
            assert_scrubbed(&s, spelling);
        }
        assert_eq!(s.scrub("dXNlcjpwL3ciw6k="), "dXNlcjp[redacted]k=");
    }

    #[test]
    fn percent_encoded_spellings() {
        let s = scrubber(&[HARD]);
        assert_scrubbed(&s, &spelled(HARD, |_, c| percent(c, true)));
        assert_scrubbed(&s, &spelled(HARD, |_, c| percent(c, false)));
        assert_scrubbed(
            &s,
            &spelled(HARD, |i, c| {
                if c == ' ' {
                    "+".into()
                } else if i % 3 == 0 {
                    percent(c, i % 2 == 0)
                } else {
                    c.to_string()
                }
            }),
        );
        let form: String = url::form_urlencoded::byte_serialize(HARD.as_bytes()).collect();
        assert_scrubbed(&s, &form);
    }

    #[test]
    fn base64_spellings_on_their_own() {
        for value in [HARD, "0", "ab", "abc", "hunter22"] {
            let s = scrubber(&[value]);
            let standard = STANDARD.encode(value);
            assert_scrubbed(&s, &standard);
            assert_scrubbed(&s, standard.trim_end_matches('='));
            assert_scrubbed(&s, &URL_SAFE_NO_PAD.encode(value));
            assert_scrubbed(&s, &standard.replace('/', "\\/"));
        }
    }

    /// `base64(prefix + value + suffix)` keeps only the characters that
    /// carry bits of the prefix or the suffix.
    #[test]
    fn base64_spellings_inside_longer_base64_text() {
        let value = "p4ss/w0rd+\u{e9}?";
        let s = scrubber(&[value]);
        for prefix in ["", "u:", "us:", "use:", "user:", "basic-user:"] {
            for suffix in ["", ":x", ":more data"] {
                let plain = format!("{prefix}{value}{suffix}");
                for encoded in [STANDARD.encode(&plain), URL_SAFE_NO_PAD.encode(&plain)] {
                    let scrubbed = s.scrub(&encoded).into_owned();
                    let (p, n) = (prefix.len(), value.len());
                    let kept_before = if p == 0 { 0 } else { (8 * p).div_ceil(6) };
                    let kept_after = if suffix.is_empty() && p % 3 == 0 {
                        // The value's own base64 text: matched to its end, padding included.
                        &encoded[encoded.len()..]
                    } else {
                        &encoded[8 * (p + n) / 6..]
                    };
                    let expected = format!("{}[redacted]{kept_after}", &encoded[..kept_before]);
                    assert_eq!(scrubbed, expected, "{plain:?} as {encoded}");
                }
            }
        }
    }

    #[test]
    fn short_values_are_not_searched_for_inside_longer_base64_text() {
        let short = "abc12";
        assert_eq!(short.len() + 1, MIN_EMBEDDED_BASE64_BYTES);
        let s = scrubber(&[short]);
        let embedded = STANDARD.encode(format!("u:{short}"));
        assert_eq!(s.scrub(&embedded), embedded);
        assert_scrubbed(&s, &STANDARD.encode(short));
    }

    #[test]
    fn payloads_keep_the_ids_digests_and_counters_rlp_makes() {
        let s = scrubber(&["0"]);
        let id = "0197b0ff-0000-7000-8000-000000000001";
        let digest = "a0".repeat(32);
        let mut v = json!({
            "v": 1, "tool": "t0", "invocation_id": id, "input_schema_blake3": digest,
            "args": {"pin": "0", "n": 100}, "result": [10],
            "error": {"message": "bad pin 0", "status": 500, "retry_after_ms": 100}, "duration_ms": 30
        });
        s.scrub_payload(&mut v);
        assert_eq!(
            v,
            json!({
                "v": 1, "tool": "t[redacted]", "invocation_id": id, "input_schema_blake3": digest,
                "args": {"pin": "[redacted]", "n": "[redacted]"}, "result": ["[redacted]"],
                "error": {"message": "bad pin [redacted]", "status": 500, "retry_after_ms": 100}, "duration_ms": 30
            })
        );
    }

    #[test]
    fn tails_and_heads_do_not_leak_halves() {
        let s = scrubber(&["ABCDEFGH"]);
        // The longest spelling is the base64 text with every character
        // `\u`-escaped twice (`\\u0051`): 12 units of 7 bytes.
        assert_eq!(s.max_spelled_len(), 84);
        let longest = spelled(&STANDARD.encode("ABCDEFGH"), |_, c| format!("\\{}", json_u(c, false)));
        assert_eq!(longest.len(), 84);
        // A tail cut in the middle of the longest spelling: none of it survives.
        let stream = format!("{longest} and then {}", "x".repeat(100));
        let tail = s.scrub_tail(&stream.as_bytes()[3..], 1000, true);
        assert_eq!(tail, format!("…{}", &stream[3 + 83..]));
        assert_eq!(s.scrub_tail(b"0123456789", 4, false), "…6789");
        assert_eq!(s.scrub_tail(b"0123", 4, false), "0123");
        assert_eq!(s.scrub_head(b"xx ABCDEFGH yy", 6), "xx [re…");
        assert_eq!(s.scrub_head("é".repeat(4).as_bytes(), 3), "é…");
    }
}
