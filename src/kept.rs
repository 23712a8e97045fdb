//! The text of a small file that keeps a verdict between processes under
//! the key it was reached on (the trust gate's verdicts, the sandbox's
//! kernel probe): a first line naming the format, `key <hex>`, then the
//! verdict's own lines, each ended by a newline.

/// The verdict's `N` lines of `text`, when `text` is in the format `magic`
/// names, was kept for `key`, and holds exactly those lines.
pub(crate) fn verdict_lines<'a, const N: usize>(
    text: &'a str,
    magic: &str,
    key: &blake3::Hash,
) -> Option<[&'a str; N]> {
    let mut lines = text.strip_suffix('\n')?.split('\n');
    if lines.next()? != magic || lines.next()? != format!("key {}", key.to_hex()) {
        return None;
    }
    let verdict: Vec<&str> = lines.collect();
    verdict.try_into().ok()
}

/// The text that keeps the verdict `lines` for `key` in the format `magic`.
pub(crate) fn render(magic: &str, key: &blake3::Hash, lines: &[&str]) -> String {
    let mut text = format!("{magic}\nkey {}\n", key.to_hex());
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_reads_back_under_its_format_and_key_only() {
        let (key, other) = (blake3::Hash::from_bytes([1; 32]), blake3::Hash::from_bytes([2; 32]));
        let text = render("fmt v1", &key, &["a", "b c"]);
        assert_eq!(text, format!("fmt v1\nkey {}\na\nb c\n", key.to_hex()));
        assert_eq!(verdict_lines::<2>(&text, "fmt v1", &key), Some(["a", "b c"]));
        assert_eq!(verdict_lines::<2>(&text, "fmt v2", &key), None);
        assert_eq!(verdict_lines::<2>(&text, "fmt v1", &other), None);
        assert_eq!(verdict_lines::<1>(&text, "fmt v1", &key), None, "a line too many");
        assert_eq!(verdict_lines::<3>(&text, "fmt v1", &key), None, "a line too few");
        assert_eq!(verdict_lines::<2>(text.trim_end(), "fmt v1", &key), None, "no last newline");
    }
}
