//! Secrets: resolution by id, a value type that never prints itself, and
//! scrubbing of resolved values from everything recorded or printed.

use std::borrow::Cow;
use std::fmt;

use serde_json::Value;

use crate::bundle::capability::SecretId;

/// What a scrubbed secret value is replaced with.
pub const REDACTED: &str = "[redacted]";

/// A secret's value. `Debug` and `Display` print `[redacted]`; the value is
/// reachable only through [`SecretValue::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(String);

impl SecretValue {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
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

/// Why a secret could not be resolved. Messages never contain the value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretError {
    /// What is wrong.
    pub message: String,
    /// What to do about it.
    pub help: String,
}

/// A source of secret values.
pub trait SecretResolver: Send + Sync {
    /// The value of `id`; `Ok(None)` when this provider does not have it.
    fn resolve(&self, id: &SecretId) -> Result<Option<SecretValue>, SecretError>;

    /// How an operator provides `id` to this resolver (for error messages).
    fn how_to_provide(&self, id: &SecretId) -> String;
}

/// Reads each secret from an environment variable named after its id:
/// `runloop/mail/smtp_api_key` → `RUNLOOP_MAIL_SMTP_API_KEY`.
#[derive(Clone, Copy, Debug, Default)]
pub struct EnvSecretResolver;

impl SecretResolver for EnvSecretResolver {
    fn resolve(&self, id: &SecretId) -> Result<Option<SecretValue>, SecretError> {
        let name = id.env_var();
        match std::env::var_os(&name) {
            None => Ok(None),
            Some(raw) if raw.is_empty() => Ok(None),
            Some(raw) => match raw.into_string() {
                Ok(value) => Ok(Some(SecretValue(value))),
                Err(_) => Err(SecretError {
                    message: format!("the environment variable {name} holding secret `{id}` is not UTF-8"),
                    help: format!("set {name} to a UTF-8 value"),
                }),
            },
        }
    }

    fn how_to_provide(&self, id: &SecretId) -> String {
        format!("set the environment variable {}", id.env_var())
    }
}

/// Tries each resolver in order; the first that has the secret wins.
pub struct ChainResolver(pub Vec<Box<dyn SecretResolver>>);

impl SecretResolver for ChainResolver {
    fn resolve(&self, id: &SecretId) -> Result<Option<SecretValue>, SecretError> {
        for resolver in &self.0 {
            if let Some(value) = resolver.resolve(id)? {
                return Ok(Some(value));
            }
        }
        Ok(None)
    }

    fn how_to_provide(&self, id: &SecretId) -> String {
        let ways: Vec<String> = self.0.iter().map(|r| r.how_to_provide(id)).collect();
        ways.join(", or ")
    }
}

/// Replaces every occurrence of the secret values it knows with `[redacted]`.
#[derive(Clone, Default)]
pub struct Scrubber {
    /// Values, longest first (so a value inside another is not left half-replaced).
    values: Vec<String>,
}

impl fmt::Debug for Scrubber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Scrubber({} values)", self.values.len())
    }
}

impl Scrubber {
    /// A scrubber for these values (empty values are ignored).
    pub fn new<'a>(values: impl IntoIterator<Item = &'a SecretValue>) -> Self {
        let mut values: Vec<String> = values.into_iter().map(|v| v.0.clone()).filter(|v| !v.is_empty()).collect();
        values.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        values.dedup();
        Scrubber { values }
    }

    /// Whether there is nothing to scrub.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The length in bytes of the longest value (0 when empty).
    pub fn max_len(&self) -> usize {
        self.values.first().map_or(0, String::len)
    }

    /// `text` with every secret value replaced.
    pub fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if !self.values.iter().any(|v| text.contains(v.as_str())) {
            return Cow::Borrowed(text);
        }
        let mut out = text.to_string();
        for value in &self.values {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), REDACTED);
            }
        }
        Cow::Owned(out)
    }

    /// `text` scrubbed, as an owned string.
    pub fn scrub_string(&self, text: &str) -> String {
        self.scrub(text).into_owned()
    }

    /// Scrubs every string and object key in a JSON value; a number whose
    /// text contains a secret becomes the string `[redacted]`.
    pub fn scrub_value(&self, value: &mut Value) {
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
                if matches!(self.scrub(&text), Cow::Owned(_)) {
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
    pub fn scrub_payload(&self, payload: &mut Value) {
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
    pub fn scrubbed(&self, value: &Value) -> Value {
        let mut copy = value.clone();
        self.scrub_value(&mut copy);
        copy
    }

    /// The last `keep` bytes of `bytes` as text, scrubbed.
    ///
    /// `bytes` must hold up to `max_len() - 1` bytes more than `keep` when it
    /// was cut from a longer stream: a secret cut in half at the front is
    /// dropped with that margin instead of leaking its tail.
    pub fn scrub_tail(&self, bytes: &[u8], keep: usize, truncated: bool) -> String {
        let text = String::from_utf8_lossy(bytes);
        let clean = self.scrub(&text);
        let margin = if truncated { self.max_len().saturating_sub(1) } else { 0 };
        let mut start = margin.min(clean.len());
        if clean.len() - start > keep {
            start = clean.len() - keep;
        }
        while !clean.is_char_boundary(start) {
            start += 1;
        }
        if truncated || start > 0 { format!("…{}", &clean[start..]) } else { clean.into_owned() }
    }

    /// The first `keep` bytes of `bytes` as text (the whole buffer scrubbed first).
    pub fn scrub_head(&self, bytes: &[u8], keep: usize) -> String {
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
    use super::*;
    use serde_json::json;

    fn scrubber(values: &[&str]) -> Scrubber {
        let values: Vec<SecretValue> = values.iter().map(|v| SecretValue::new(*v)).collect();
        Scrubber::new(&values)
    }

    #[test]
    fn values_never_print() {
        let secret = SecretValue::new("hunter2");
        assert_eq!(format!("{secret} {secret:?}"), "[redacted] [redacted]");
        assert_eq!(secret.expose(), "hunter2");
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
        // A tail cut in the middle of the secret: "EFGH" must not survive.
        let tail = s.scrub_tail(b"EFGH and more ABCDEFGH end", 100, true);
        assert_eq!(tail, "…d more [redacted] end");
        assert_eq!(s.scrub_tail(b"0123456789", 4, false), "…6789");
        assert_eq!(s.scrub_tail(b"0123", 4, false), "0123");
        assert_eq!(s.scrub_head(b"xx ABCDEFGH yy", 6), "xx [re…");
        assert_eq!(s.scrub_head("é".repeat(4).as_bytes(), 3), "é…");
    }

    #[test]
    fn env_resolver_names_the_variable() {
        let id: SecretId = "runloop/test/unset_secret_for_unit_test".parse().unwrap();
        assert_eq!(EnvSecretResolver.resolve(&id), Ok(None));
        assert_eq!(
            EnvSecretResolver.how_to_provide(&id),
            "set the environment variable RUNLOOP_TEST_UNSET_SECRET_FOR_UNIT_TEST"
        );
    }
}
