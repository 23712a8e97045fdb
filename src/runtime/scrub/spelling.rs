//! The spellings a tool or server may echo a secret value back in, and a
//! matcher that finds every one of them in a text.
//!
//! A value is matched as a sequence of *units*, each of which may be written
//! in any of its spellings, independently of the others (so an encoder that
//! escapes only some characters is caught too):
//!
//! - the value's characters: raw, JSON-escaped (`\"`, `\\`, `\/`, `\b`,
//!   `\f`, `\n`, `\r`, `\t`, and `\uXXXX` for any character, non-BMP ones as a
//!   surrogate pair), JSON-escaped twice (JSON text inside a JSON string:
//!   `\\\"`, `\\u00e9`), percent-encoded (`%XX` per UTF-8 byte, `+` for
//!   space), hex digits in either case, or as a JSON Pointer writes a key
//!   (`~1` for `/`, `~0` for `~`);
//! - the characters of the value's base64 text, standard or URL-safe, with
//!   or without padding, each of them also raw, JSON-escaped or
//!   percent-encoded (`\/`, `%2F`);
//! - for values of at least [`MIN_EMBEDDED_BASE64_BYTES`] bytes, the value
//!   inside a longer base64 text (`base64("user:" + value)`): for each of the
//!   three byte alignments, the run of base64 characters that depends only on
//!   the value's bytes.
//!
//! Each distinct unit is spelled once, so building the matcher costs little
//! more than one pass over each value and its base64 text; a text with no
//! character that can start a spelling is passed over with one table look-up
//! per byte.

use std::collections::HashMap;
use std::ops::Range;

use base64::Engine;
use base64::engine::general_purpose::STANDARD_NO_PAD;

/// Shortest value whose base64 runs inside a longer base64 text are matched:
/// each run is then at least 7 base64 characters long, which ordinary text
/// does not hold by chance. Shorter values are still matched as their own
/// base64 text.
pub(crate) const MIN_EMBEDDED_BASE64_BYTES: usize = 6;

/// Room for the longest single spelling: a surrogate pair escaped twice
/// (`\\uD83D\\uDE00`, 14 bytes).
const MAX_SPELLING_BYTES: usize = 16;

/// One way to write one unit.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Spelling {
    bytes: [u8; MAX_SPELLING_BYTES],
    len: u8,
    /// Whether ASCII letters match in either case (the hex digits of escapes).
    fold_case: bool,
}

impl Spelling {
    /// `text` (at most [`MAX_SPELLING_BYTES`] long) as it is.
    fn literal(text: &str) -> Spelling {
        let mut spelling = Spelling { bytes: [0; MAX_SPELLING_BYTES], len: 0, fold_case: false };
        text.bytes().for_each(|b| spelling.push(b));
        spelling
    }

    /// Each byte of `bytes` as two hex digits, `prefix` before every
    /// `group` of them (`%c3%a9`, `\u00e9`); the digits match in either case.
    fn hex(prefix: &str, group: usize, bytes: impl IntoIterator<Item = u8>) -> Spelling {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut spelling = Spelling::literal("");
        spelling.fold_case = true;
        for (i, b) in bytes.into_iter().enumerate() {
            if i % group == 0 {
                prefix.bytes().for_each(|p| spelling.push(p));
            }
            spelling.push(DIGITS[usize::from(b >> 4)]);
            spelling.push(DIGITS[usize::from(b & 15)]);
        }
        spelling
    }

    /// This spelling as it appears inside a JSON string: `\` and `"`
    /// escaped, and `/` too when `slash` is set (as PHP writes it).
    fn json_escaped(&self, slash: bool) -> Spelling {
        let mut escaped = Spelling { fold_case: self.fold_case, ..Spelling::literal("") };
        for &b in self.as_bytes() {
            if matches!(b, b'\\' | b'"') || (slash && b == b'/') {
                escaped.push(b'\\');
            }
            escaped.push(b);
        }
        escaped
    }

    fn push(&mut self, b: u8) {
        self.bytes[usize::from(self.len)] = b;
        self.len += 1;
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// Whether `text` holds this spelling at `at`.
    fn is_at(&self, text: &[u8], at: usize) -> bool {
        let wanted = self.as_bytes();
        text.get(at..at + wanted.len())
            .is_some_and(|found| if self.fold_case { found.eq_ignore_ascii_case(wanted) } else { found == wanted })
    }
}

/// Every spelling of one character of a value (or of its base64 text).
fn char_spellings(c: char, out: &mut Vec<Spelling>) {
    let first = out.len();
    escaped_once(c, out);
    for i in first..out.len() {
        for slash in [false, true] {
            let twice = out[i].json_escaped(slash);
            if !out[first..].contains(&twice) {
                out.push(twice);
            }
        }
    }
}

/// The spellings of one character: raw, JSON-escaped, percent-encoded.
fn escaped_once(c: char, out: &mut Vec<Spelling>) {
    let mut utf8 = [0; 4];
    let raw = c.encode_utf8(&mut utf8);
    out.push(Spelling::literal(raw));
    let short = match c {
        '"' => Some("\\\""),
        '\\' => Some("\\\\"),
        '/' => Some("\\/"),
        '\u{8}' => Some("\\b"),
        '\u{c}' => Some("\\f"),
        '\n' => Some("\\n"),
        '\r' => Some("\\r"),
        '\t' => Some("\\t"),
        _ => None,
    };
    if let Some(short) = short {
        out.push(Spelling::literal(short));
    }
    // A JSON Pointer (a schema error's path to a key) writes `/` and `~` so.
    let pointer = match c {
        '/' => Some("~1"),
        '~' => Some("~0"),
        _ => None,
    };
    if let Some(pointer) = pointer {
        out.push(Spelling::literal(pointer));
    }
    let mut utf16 = [0; 2];
    let units = c.encode_utf16(&mut utf16);
    out.push(Spelling::hex("\\u", 2, units.iter().flat_map(|unit| unit.to_be_bytes())));
    out.push(Spelling::hex("%", 1, raw.bytes()));
    if c == ' ' {
        out.push(Spelling::literal("+"));
    }
}

/// What one unit of a form stands for.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Unit {
    /// A character of the value.
    Char(char),
    /// A character of base64 text, in either alphabet.
    Base64(char),
    /// One optional `=` of base64 padding.
    Padding,
}

impl Unit {
    fn spell(self, out: &mut Vec<Spelling>) {
        match self {
            Unit::Char(c) => char_spellings(c, out),
            Unit::Base64(c) => {
                char_spellings(c, out);
                match c {
                    '+' => char_spellings('-', out),
                    '/' => char_spellings('_', out),
                    _ => {}
                }
            }
            Unit::Padding => {
                char_spellings('=', out);
                out.push(Spelling::literal(""));
            }
        }
    }
}

/// Where one unit's spellings sit in [`Spellings::table`].
#[derive(Clone, Copy)]
struct Span {
    start: u32,
    end: u32,
}

impl Span {
    fn of(self, table: &[Spelling]) -> &[Spelling] {
        &table[self.start as usize..self.end as usize]
    }
}

/// One form a value may take: its units, in order.
type Form = Vec<Span>;

/// The text positions a partial occurrence has reached (reused between starts).
#[derive(Default)]
struct Reach {
    here: Vec<usize>,
    next: Vec<usize>,
}

/// Builds the forms of the values, spelling each distinct unit once.
#[derive(Default)]
struct Builder {
    table: Vec<Spelling>,
    spans: HashMap<Unit, Span>,
    forms: Vec<Form>,
}

impl Builder {
    fn span(&mut self, unit: Unit) -> Span {
        if let Some(span) = self.spans.get(&unit) {
            return *span;
        }
        let start = self.table.len();
        unit.spell(&mut self.table);
        // The table holds a few dozen spellings per distinct unit, and there
        // are fewer distinct units than Unicode scalar values: far below u32::MAX.
        let span = Span { start: start as u32, end: self.table.len() as u32 };
        self.spans.insert(unit, span);
        span
    }

    fn form(&mut self, units: impl IntoIterator<Item = Unit>) {
        let form = units.into_iter().map(|unit| self.span(unit)).collect();
        self.forms.push(form);
    }

    /// The base64 forms of `value`: its own base64 text, and the runs that
    /// depend only on its bytes at each alignment inside a longer text.
    fn base64_forms(&mut self, value: &[u8]) {
        let n = value.len();
        let padding = std::iter::repeat_n(Unit::Padding, (3 - n % 3) % 3);
        self.form(STANDARD_NO_PAD.encode(value).chars().map(Unit::Base64).chain(padding));
        if n < MIN_EMBEDDED_BASE64_BYTES {
            return;
        }
        for offset in 0..3_usize {
            if offset == 0 && n.is_multiple_of(3) {
                continue; // the same as the value's own base64 text
            }
            // With `offset` bytes before the value, the first base64 character
            // made of the value's bits alone starts at bit 6·first ≥ 8·offset,
            // and the last ends at or before bit 8·(offset + n).
            let first = (8 * offset).div_ceil(6);
            let end = 8 * (offset + n) / 6;
            let mut shifted = vec![0; offset];
            shifted.extend_from_slice(value);
            let text = STANDARD_NO_PAD.encode(&shifted);
            self.form(text[first..end].chars().map(Unit::Base64));
        }
    }
}

/// Finds every spelling of a set of values.
pub(super) struct Spellings {
    /// The spellings of every distinct unit, each unit's side by side.
    table: Vec<Spelling>,
    forms: Vec<Form>,
    /// The bytes an occurrence of some form can start with.
    first_bytes: [bool; 256],
    max_len: usize,
}

impl Spellings {
    /// A matcher for `values` (none empty).
    pub(super) fn new<'a>(values: impl IntoIterator<Item = &'a str>) -> Spellings {
        let mut builder = Builder::default();
        for value in values {
            builder.form(value.chars().map(Unit::Char));
            builder.base64_forms(value.as_bytes());
        }
        let Builder { table, forms, .. } = builder;
        let mut first_bytes = [false; 256];
        for span in forms.iter().filter_map(|form| form.first()) {
            for spelling in span.of(&table) {
                if let Some(&b) = spelling.as_bytes().first() {
                    first_bytes[usize::from(b)] = true;
                    if spelling.fold_case {
                        first_bytes[usize::from(b.to_ascii_lowercase())] = true;
                        first_bytes[usize::from(b.to_ascii_uppercase())] = true;
                    }
                }
            }
        }
        let mut spellings = Spellings { table, forms, first_bytes, max_len: 0 };
        spellings.max_len = spellings.forms.iter().map(|form| spellings.max_form_len(form)).max().unwrap_or(0);
        spellings
    }

    /// The longest text one occurrence of `form` can take, in bytes.
    fn max_form_len(&self, form: &Form) -> usize {
        form.iter().map(|span| span.of(&self.table).iter().map(|s| usize::from(s.len)).max().unwrap_or(0)).sum()
    }

    /// The end of the longest occurrence of `form` that starts at `start`.
    fn longest_at(&self, form: &Form, text: &[u8], start: usize, reach: &mut Reach) -> Option<usize> {
        let Reach { here, next } = reach;
        here.clear();
        here.push(start);
        for span in form {
            next.clear();
            for &at in here.iter() {
                for spelling in span.of(&self.table) {
                    let end = at + usize::from(spelling.len);
                    if spelling.is_at(text, at) && !next.contains(&end) {
                        next.push(end);
                    }
                }
            }
            if next.is_empty() {
                return None;
            }
            std::mem::swap(here, next);
        }
        here.iter().copied().max()
    }

    /// The longest text one occurrence can take, in bytes.
    pub(super) fn max_len(&self) -> usize {
        self.max_len
    }

    /// The byte ranges of `text` covered by an occurrence, in order; ranges
    /// that overlap (one occurrence inside or across another) are merged.
    /// Each starts and ends on a character boundary.
    pub(super) fn find(&self, text: &str) -> Vec<Range<usize>> {
        let bytes = text.as_bytes();
        let mut found: Vec<Range<usize>> = Vec::new();
        let mut reach = Reach::default();
        for (start, &b) in bytes.iter().enumerate() {
            if !self.first_bytes[usize::from(b)] {
                continue;
            }
            let Some(end) = self.forms.iter().filter_map(|form| self.longest_at(form, bytes, start, &mut reach)).max()
            else {
                continue;
            };
            match found.last_mut() {
                Some(last) if start < last.end => last.end = last.end.max(end),
                _ => found.push(start..end),
            }
        }
        found
    }
}
