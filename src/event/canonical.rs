//! RFC 8785 (JCS) canonical JSON: the one canonicaliser of the crate.
//!
//! Every payload and provenance the ledger stores, every frame hash preimage
//! and every schema digest is written by [`push_canonical`]: members sorted by
//! their UTF-16 code units, strings escaped as [`push_json_string`] does,
//! integers up to 2^53 as plain digits and every other number in the
//! ECMAScript shortest form (`ryu_js`, the formatter RFC 8785 prescribes).
//!
//! The writer works straight on a [`Value`] into a `String`; it is written by
//! hand because importing and replaying a JSON Lines trace canonicalises
//! every frame, and a general serializer that buffers and re-sorts each object
//! costs two to four times as much there (docs/benchmarks.md, "Canonical
//! JSON"). The tests hold it to the RFC's own examples and to an independent
//! implementation.

use serde_json::{Number, Value};

/// Largest integer written as plain digits without going through a double (2^53).
const MAX_EXACT_INTEGER: u64 = 1 << 53;

/// Appends `s` as an RFC 8785 JSON string: `"` and `\` escaped, the control
/// characters as `\b \t \n \f \r` or `\u00xx` (lower-case hex), everything
/// else as is.
pub fn push_json_string(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    let mut start = 0;
    for (i, byte) in s.bytes().enumerate() {
        let escape: Option<&str> = match byte {
            b'"' => Some("\\\""),
            b'\\' => Some("\\\\"),
            0x08 => Some("\\b"),
            b'\t' => Some("\\t"),
            b'\n' => Some("\\n"),
            0x0c => Some("\\f"),
            b'\r' => Some("\\r"),
            0..=0x1f => None,
            _ => continue,
        };
        out.push_str(&s[start..i]);
        match escape {
            Some(text) => out.push_str(text),
            None => {
                out.push_str("\\u00");
                out.push(char::from(HEX[usize::from(byte >> 4)]));
                out.push(char::from(HEX[usize::from(byte & 0xf)]));
            }
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// Appends a number as RFC 8785 writes it: the ECMAScript form of the
/// nearest double (`1.0` as `1`, `1e21` as `1e+21`, integers beyond 2^53
/// rounded).
fn push_double(out: &mut String, n: f64) {
    out.push_str(ryu_js::Buffer::new().format_finite(n));
}

/// Appends `n` as RFC 8785 writes it (plain digits up to 2^53, the
/// ECMAScript form of the nearest double beyond).
pub fn push_json_integer(out: &mut String, n: i64) {
    if n.unsigned_abs() <= MAX_EXACT_INTEGER {
        out.push_str(&n.to_string());
    } else {
        // Rounding to the nearest double is what RFC 8785 asks for.
        push_double(out, n as f64);
    }
}

fn push_number(out: &mut String, n: &Number) {
    match (n.as_i64(), n.as_u64()) {
        (Some(i), _) if i.unsigned_abs() <= MAX_EXACT_INTEGER => out.push_str(&i.to_string()),
        (_, Some(u)) if u <= MAX_EXACT_INTEGER => out.push_str(&u.to_string()),
        // A JSON number always has a finite double (serde_json holds no NaN or infinity).
        _ => push_double(out, n.as_f64().unwrap_or_default()),
    }
}

/// Appends the RFC 8785 canonical form of `value` to `out`.
pub fn push_canonical(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => push_number(out, n),
        Value::String(s) => push_json_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_canonical(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            if members.iter().all(|(k, _)| k.is_ascii()) {
                members.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            } else {
                members.sort_unstable_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            }
            out.push('{');
            for (i, (key, item)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_json_string(out, key);
                out.push(':');
                push_canonical(out, item);
            }
            out.push('}');
        }
    }
}

/// The RFC 8785 canonical text of `value` (see [`push_canonical`]).
pub fn canonical_text(value: &Value) -> String {
    let mut out = String::new();
    push_canonical(&mut out, value);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// RFC 8785 Appendix B: IEEE 754 doubles and their canonical text.
    const RFC_NUMBERS: &[(u64, &str)] = &[
        (0x0000_0000_0000_0000, "0"),
        (0x8000_0000_0000_0000, "0"),
        (0x0000_0000_0000_0001, "5e-324"),
        (0x8000_0000_0000_0001, "-5e-324"),
        (0x7fef_ffff_ffff_ffff, "1.7976931348623157e+308"),
        (0xffef_ffff_ffff_ffff, "-1.7976931348623157e+308"),
        (0x4340_0000_0000_0000, "9007199254740992"),
        (0xc340_0000_0000_0000, "-9007199254740992"),
        (0x4430_0000_0000_0000, "295147905179352830000"),
        (0x44b5_2d02_c7e1_4af5, "9.999999999999997e+22"),
        (0x44b5_2d02_c7e1_4af6, "1e+23"),
        (0x44b5_2d02_c7e1_4af7, "1.0000000000000001e+23"),
        (0x444b_1ae4_d6e2_ef4e, "999999999999999700000"),
        (0x444b_1ae4_d6e2_ef4f, "999999999999999900000"),
        (0x444b_1ae4_d6e2_ef50, "1e+21"),
        (0x3eb0_c6f7_a0b5_ed8c, "9.999999999999997e-7"),
        (0x3eb0_c6f7_a0b5_ed8d, "0.000001"),
        (0x41b3_de43_5555_5553, "333333333.3333332"),
        (0x41b3_de43_5555_5554, "333333333.33333325"),
        (0x41b3_de43_5555_5555, "333333333.3333333"),
        (0x41b3_de43_5555_5556, "333333333.3333334"),
        (0x41b3_de43_5555_5557, "333333333.33333343"),
        (0xbecb_f647_612f_3696, "-0.0000033333333333333333"),
        (0x4314_3ff3_c1cb_0959, "1424953923781206.2"),
    ];

    #[test]
    fn numbers_are_the_rfc_8785_examples() {
        for &(bits, expected) in RFC_NUMBERS {
            let value = Value::from(f64::from_bits(bits));
            assert_eq!(canonical_text(&value), expected, "{bits:#018x}");
        }
        let mut out = String::new();
        for n in [0, -5, 1 << 53, -(1 << 53), (1 << 53) + 1, i64::MAX, i64::MIN] {
            out.clear();
            push_json_integer(&mut out, n);
            assert_eq!(out, canonical_text(&Value::from(n)), "{n}");
        }
        assert_eq!(out, "-9223372036854776000");
    }

    #[test]
    fn strings_and_member_order_are_the_rfc_8785_examples() {
        // RFC 8785 section 3.2.3: members sorted by UTF-16 code units.
        let sorted = json!({
            "\u{20ac}": "Euro Sign", "\r": "Carriage Return", "\u{fb33}": "Hebrew Letter Dalet With Dagesh",
            "1": "One", "\u{1f600}": "Emoji: Grinning Face", "\u{80}": "Control",
            "\u{f6}": "Latin Small Letter O With Diaeresis"
        });
        assert_eq!(
            canonical_text(&sorted),
            "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u{80}\":\"Control\",\
             \"\u{f6}\":\"Latin Small Letter O With Diaeresis\",\"\u{20ac}\":\"Euro Sign\",\
             \"\u{1f600}\":\"Emoji: Grinning Face\",\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}"
        );
        // RFC 8785 section 3.2.2.2: string escapes.
        let mut out = String::new();
        push_json_string(&mut out, "\u{20ac}$\u{f}\nA'B\"\\\\\"/");
        assert_eq!(out, "\"\u{20ac}$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"");
    }

    /// The same text as an independent RFC 8785 implementation (the
    /// `serde_json_canonicalizer` crate, a test-only dependency), across
    /// strings, member orders and numbers of every form.
    #[test]
    fn equals_an_independent_implementation() {
        let mut values = vec![
            json!({"b": [1, -2, 1.5, 1e21, 1e-7, 0.1, 9007199254740993u64, -9007199254740993i64, 123456789012345680000.0],
                   "a": {"z": null, "é": true, "\u{10000}": "x", "\u{ffff}": "y", "": false}, "A": "\u{1}\"\\"}),
            json!([]),
            json!({}),
            json!(-0.0),
            json!(9007199254740992u64),
            json!(u64::MAX),
            json!(i64::MIN),
            json!("plain"),
            json!(["\u{1}\u{8}\t\n\u{b}\u{c}\r\u{1f}", "é ☃ \u{2028} \u{7f}", "q\"b\\s", ""]),
        ];
        values.extend(RFC_NUMBERS.iter().map(|&(bits, _)| Value::from(f64::from_bits(bits))));
        // Doubles spread over the whole exponent range, both signs.
        let mut bits: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..2000 {
            bits ^= bits << 13;
            bits ^= bits >> 7;
            bits ^= bits << 17;
            let n = f64::from_bits(bits);
            if n.is_finite() {
                values.push(Value::from(n));
            }
        }
        for value in values {
            let expected = serde_json_canonicalizer::to_string(&value).unwrap();
            assert_eq!(canonical_text(&value), expected, "{value}");
        }
    }
}
