//! The words of identifiers, for a word tokenizer: `github.create_issue`
//! is `github create issue`, `pullRequestNumber` is `pull request number`.

/// `identifier` with its parts apart: split at every character that is not
/// a letter or digit, and where a lower-case letter or digit meets an
/// upper-case one (`issueNumber`) or an acronym ends (`HTTPServer`).
pub(crate) fn spaced(identifier: &str) -> String {
    let chars: Vec<char> = identifier.chars().collect();
    let mut out = String::with_capacity(identifier.len() + 8);
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !out.ends_with(' ') && !out.is_empty() {
                out.push(' ');
            }
            continue;
        }
        let previous = i.checked_sub(1).map(|p| chars[p]);
        let next = chars.get(i + 1).copied();
        let boundary = c.is_uppercase()
            && previous.is_some_and(|p| {
                p.is_lowercase() || p.is_ascii_digit() || (p.is_uppercase() && next.is_some_and(char::is_lowercase))
            });
        if boundary && !out.ends_with(' ') {
            out.push(' ');
        }
        out.push(c);
    }
    out.trim_end().to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_ids_and_property_names_into_words() {
        assert_eq!(spaced("github.create_issue"), "github create issue");
        assert_eq!(spaced("pullRequestNumber"), "pull request number");
        assert_eq!(spaced("HTTPServer-v2"), "http server v2");
        assert_eq!(spaced("owner"), "owner");
        assert_eq!(spaced("__a..b__"), "a b");
        assert_eq!(spaced(""), "");
        assert_eq!(spaced("sha256Sum"), "sha256 sum");
    }
}
