//! Small wording helpers shared by every report.

/// `1 word` or `n words`, for any count.
pub fn plural(n: impl std::fmt::Display, word: &str) -> String {
    let n = n.to_string();
    if n == "1" { format!("1 {word}") } else { format!("{n} {word}s") }
}
