//! A window on one overlong source line (minified JSON, a long TOML array),
//! so a finding quotes the part around its marker instead of the whole line.
//!
//! [`Excerpt`] is a one-line [`Files`] source for codespan: its text is the
//! window with `…` where the line was cut, while the line and column it
//! reports are those of the real file.

use std::ops::Range;

use codespan_reporting::files::{Error, Files};

/// Lines longer than this many characters are quoted as a window.
pub(super) const MAX_LINE_CHARS: usize = 160;
/// Characters of context kept before the marker.
const BEFORE_CHARS: usize = 40;
/// Characters a window holds at least (context after a short marker).
const WINDOW_CHARS: usize = 120;
/// Marks where the quoted line was cut.
const CUT: &str = "…";

/// One cut line of a file, standing in for the file in a diagnostic.
#[derive(Debug)]
pub(super) struct Excerpt<'a> {
    name: &'a str,
    text: String,
    /// The real line number (1-based).
    line_number: usize,
    /// Real column (0-based, in characters) of the excerpt's first byte after any leading cut.
    first_column: usize,
    /// Bytes of the leading cut mark (0 or `CUT.len()`).
    lead: usize,
}

impl<'a> Excerpt<'a> {
    /// The window of `span`'s line (number `line_number`) in `source` when
    /// that line is overlong, with the span mapped into the window; `None`
    /// for an ordinary line.
    pub(super) fn cut(
        name: &'a str,
        source: &str,
        span: &Range<usize>,
        line_number: usize,
    ) -> Option<(Excerpt<'a>, Range<usize>)> {
        let start = floor_boundary(source, span.start.min(source.len()));
        let line_start = source[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = source[start..].find('\n').map_or(source.len(), |i| start + i);
        let line = &source[line_start..line_end];
        if line.chars().count() <= MAX_LINE_CHARS {
            return None;
        }
        let from = back_chars(source, start, BEFORE_CHARS).max(line_start);
        let end = floor_boundary(source, span.end.clamp(start, line_end));
        let to = forward_chars(source, from, WINDOW_CHARS).max(end).min(line_end);
        let lead = if from > line_start { CUT.len() } else { 0 };
        let tail = if to < line_end { CUT } else { "" };
        let text = format!("{}{}{tail}", &CUT[..lead], &source[from..to]);
        let excerpt = Excerpt { name, text, line_number, first_column: source[line_start..from].chars().count(), lead };
        Some((excerpt, lead + start - from..lead + end - from))
    }
}

impl<'e> Files<'e> for Excerpt<'_> {
    type FileId = ();
    type Name = &'e str;
    type Source = &'e str;

    fn name(&'e self, (): ()) -> Result<&'e str, Error> {
        Ok(self.name)
    }

    fn source(&'e self, (): ()) -> Result<&'e str, Error> {
        Ok(&self.text)
    }

    fn line_index(&'e self, (): (), _byte_index: usize) -> Result<usize, Error> {
        Ok(0)
    }

    fn line_number(&'e self, (): (), _line_index: usize) -> Result<usize, Error> {
        Ok(self.line_number)
    }

    fn column_number(&'e self, (): (), _line_index: usize, byte_index: usize) -> Result<usize, Error> {
        let at = floor_boundary(&self.text, byte_index.clamp(self.lead, self.text.len()));
        Ok(self.first_column + self.text[self.lead..at].chars().count() + 1)
    }

    fn line_range(&'e self, (): (), line_index: usize) -> Result<Range<usize>, Error> {
        match line_index {
            0 => Ok(0..self.text.len()),
            _ => Err(Error::LineTooLarge { given: line_index, max: 0 }),
        }
    }
}

fn floor_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The byte offset `n` characters before `at` (or 0).
fn back_chars(text: &str, at: usize, n: usize) -> usize {
    text[..at].char_indices().rev().nth(n.saturating_sub(1)).map_or(0, |(i, _)| i)
}

/// The byte offset `n` characters after `at` (or the end).
fn forward_chars(text: &str, at: usize, n: usize) -> usize {
    text[at..].char_indices().nth(n).map_or(text.len(), |(i, _)| at + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_lines_are_quoted_whole() {
        assert!(Excerpt::cut("f", "{\"a\": 1}\n", &(6..7), 1).is_none());
    }

    #[test]
    fn a_long_line_is_cut_around_the_span_and_keeps_real_positions() {
        let line = format!("{}\"Bad Id\"{}", "x".repeat(300), "y".repeat(300));
        let source = format!("first\n{line}\nlast\n");
        let start = 6 + 300;
        let (excerpt, span) = Excerpt::cut("tools.json", &source, &(start..start + 8), 2).unwrap();
        assert_eq!(&excerpt.text[span.clone()], "\"Bad Id\"");
        assert!(excerpt.text.starts_with(CUT) && excerpt.text.ends_with(CUT));
        assert_eq!(excerpt.text.chars().count(), 1 + 120 + 1);
        let location = excerpt.location((), span.start).unwrap();
        assert_eq!((location.line_number, location.column_number), (2, 301));
    }

    #[test]
    fn a_span_at_the_line_start_has_no_leading_cut() {
        let source = format!("\"é\"{}", "z".repeat(400));
        let (excerpt, span) = Excerpt::cut("f", &source, &(0..4), 1).unwrap();
        assert_eq!(&excerpt.text[span.clone()], "\"é\"");
        assert!(!excerpt.text.starts_with(CUT));
        assert_eq!(excerpt.location((), span.start).unwrap().column_number, 1);
    }

    #[test]
    fn a_span_running_past_the_line_is_clamped_to_it() {
        let source = format!("{}\n}}\n", "w".repeat(200));
        let (excerpt, span) = Excerpt::cut("f", &source, &(190..source.len()), 1).unwrap();
        assert_eq!(span.end, excerpt.text.len());
        assert_eq!(excerpt.location((), span.start).unwrap().column_number, 191);
    }
}
