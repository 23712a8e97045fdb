//! The operator's list of an agent's tools: `allow` and `deny` patterns
//! under `[agents.<agent>.tools]` in the config files, and `rlp serve
//! --tools`. Each layer that sets a list can only narrow what the others
//! let through: a tool is exposed when it matches every allow list set and
//! no deny pattern of any layer, so the system config's list is a floor
//! the home's config.toml and the flag cannot loosen. What the lists say
//! of a tool is decided in `runtime::exposure`.

use std::fmt;
use std::str::FromStr;

use crate::config::{ConfigError, ConfigFile, Source};

/// Longest pattern accepted (tool ids are short).
const MAX_PATTERN_CHARS: usize = 256;

/// A pattern over tool ids: a tool id in which `*` stands for any run of
/// characters, dots included (none at all too). `issues.*` matches
/// `issues.list` and `issues.comments.add`, `*.delete` matches
/// `repos.delete`, `*` matches every tool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolPattern(String);

impl ToolPattern {
    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether tool `id` matches the pattern.
    pub fn matches(&self, id: &str) -> bool {
        let mut parts = self.0.split('*');
        // Without a `*` the one part is the whole id.
        let first = parts.next().unwrap_or_default();
        let Some(mut rest) = id.strip_prefix(first) else { return false };
        let mut parts: Vec<&str> = parts.collect();
        let Some(last) = parts.pop() else { return rest.is_empty() };
        for part in parts {
            match rest.find(part) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
        rest.len() >= last.len() && rest.ends_with(last)
    }
}

impl FromStr for ToolPattern {
    type Err = String;

    /// Reads a pattern: the characters of tool ids (lowercase letters,
    /// digits, `_`, `.` between names) and `*`.
    fn from_str(text: &str) -> Result<ToolPattern, String> {
        if text.contains("**") {
            return Err(format!("`{text}` has `**`: one `*` already matches any run of characters, dots included"));
        }
        if text.chars().count() > MAX_PATTERN_CHARS {
            return Err(format!("a pattern has at most {MAX_PATTERN_CHARS} characters"));
        }
        // A pattern is well formed when putting a letter for each `*` makes a tool id.
        if !crate::bundle::tools::is_valid_tool_id(&text.replace('*', "a")) {
            return Err(format!(
                "`{}` is not a tool-id pattern: write a tool id (lowercase names joined by dots) with `*` for any run of characters",
                text.escape_debug()
            ));
        }
        Ok(ToolPattern(text.to_string()))
    }
}

impl fmt::Display for ToolPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One layer's patterns of one kind (allow or deny), and the layer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Patterns {
    /// The patterns, as written.
    pub patterns: Vec<ToolPattern>,
    /// The file (or flag) that set them.
    pub source: Source,
}

impl Patterns {
    /// The first pattern `id` matches, if any.
    pub fn matching(&self, id: &str) -> Option<&ToolPattern> {
        self.patterns.iter().find(|p| p.matches(id))
    }

    /// Where the list is, in words: `in <file>`, or `of --tools`.
    pub fn place(&self) -> String {
        place(&self.source)
    }
}

/// Where a list from `source` is, in words: `in <file>`, or `of <flag>`.
pub(crate) fn place(source: &Source) -> String {
    match source {
        Source::SystemConfig(path) | Source::SystemPolicy(path) | Source::UserConfig(path) => {
            format!("in {}", path.display())
        }
        Source::Flag(name) | Source::Env(name) => format!("of {name}"),
        Source::Default => "by default".to_string(),
    }
}

/// The operator's lists of one agent's tools, from every layer that sets
/// one, in the order the layers are read (system files, the home's file,
/// the flag).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolList {
    /// The allow lists: a tool must match one pattern of each.
    pub allow: Vec<Patterns>,
    /// The deny lists: a tool that matches any of their patterns is not exposed.
    pub deny: Vec<Patterns>,
}

impl ToolList {
    /// Whether no layer sets a list (every tool the policy grants is exposed).
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty()
    }

    /// Where the lists are, in words (`in /etc/…, in /home/…`).
    pub fn places(&self) -> String {
        let mut places: Vec<String> = Vec::new();
        for place in self.allow.iter().chain(&self.deny).map(Patterns::place) {
            if !places.contains(&place) {
                places.push(place);
            }
        }
        places.join(", ")
    }

    /// Adds one layer's lists (from `source`).
    pub(crate) fn add(&mut self, layer: &FileList, source: &Source) {
        if let Some(allow) = &layer.allow {
            self.allow.push(Patterns { patterns: allow.clone(), source: source.clone() });
        }
        if !layer.deny.is_empty() {
            self.deny.push(Patterns { patterns: layer.deny.clone(), source: source.clone() });
        }
    }
}

/// What one config file says under `[agents.<agent>.tools]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FileList {
    /// `allow`: `None` when absent (`allow = []` allows nothing).
    pub allow: Option<Vec<ToolPattern>>,
    /// `deny`.
    pub deny: Vec<ToolPattern>,
}

/// The keys of `[agents.<agent>.tools]` that are lists, not tool ids.
pub(crate) const LIST_KEYS: [&str; 2] = ["allow", "deny"];

/// Reads the value of `agents.<agent>.tools.<key>` (`allow` or `deny`) in
/// the file at `path` into `list`.
pub(crate) fn read_list(
    file: ConfigFile<'_>,
    agent: &str,
    key: &str,
    value: &toml::Value,
    list: &mut FileList,
) -> Result<(), ConfigError> {
    let at = format!("agents.{agent}.tools.{key}");
    let example = if key == "allow" { "[\"issues.*\", \"repos.get\"]" } else { "[\"*.delete\"]" };
    let items = value.as_array().ok_or_else(|| {
        file.error(
            &at,
            format!("`{at}` must be an array of tool-id patterns, found {}", value.type_str()),
            format!(
                "write `{key} = {example}` under [agents.{agent}.tools]; `allow` and `deny` there are the operator's lists, never tool ids"
            ),
        )
    })?;
    let mut patterns = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let item_at = format!("{at}[{i}]");
        let text = item.as_str().ok_or_else(|| {
            file.error(
                &item_at,
                format!("`{item_at}` must be a string, found {}", item.type_str()),
                format!("write `{key} = {example}` under [agents.{agent}.tools]"),
            )
        })?;
        let pattern = text.parse().map_err(|why| {
            file.error(
                &item_at,
                format!("`{item_at}`: {why}"),
                "a pattern is a tool id with `*` for any run of characters, e.g. \"issues.*\" or \"*.delete\"",
            )
        })?;
        patterns.push(pattern);
    }
    if key == "allow" {
        list.allow = Some(patterns);
    } else {
        list.deny = patterns;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(text: &str) -> ToolPattern {
        text.parse().unwrap()
    }

    #[test]
    fn a_star_matches_any_run_of_characters() {
        for (text, id, expected) in [
            ("issues.*", "issues.list", true),
            ("issues.*", "issues.comments.add", true),
            ("issues.*", "issues", false),
            ("issues.*", "pulls.list", false),
            ("*.delete", "repos.delete", true),
            ("*.delete", "a.b.delete", true),
            ("*.delete", "repos.delete_all", false),
            ("*", "anything.at.all", true),
            ("repos.get", "repos.get", true),
            ("repos.get", "repos.get_all", false),
            ("repos.get", "repos", false),
            ("a*b*c", "abc", true),
            ("a*b*c", "a.x.b.y.c", true),
            ("a*b*c", "a.c.b", false),
            ("a*a", "a", false),
            ("a*a", "aa", true),
            ("issues*", "issues.list", true),
        ] {
            assert_eq!(pattern(text).matches(id), expected, "{text} ~ {id}");
        }
    }

    #[test]
    fn patterns_are_tool_ids_with_stars() {
        for good in ["*", "issues.*", "*.delete", "repos.get", "a_1.*.b", "iss*"] {
            assert_eq!(good.parse::<ToolPattern>().unwrap().as_str(), good);
        }
        for bad in ["", "Issues.*", ".*", "issues.", "a..b", "1a.b", "issues/x", "a b"] {
            assert!(bad.parse::<ToolPattern>().unwrap_err().contains("is not a tool-id pattern"), "{bad:?}");
        }
        assert_eq!(
            "issues.**".parse::<ToolPattern>().unwrap_err(),
            "`issues.**` has `**`: one `*` already matches any run of characters, dots included"
        );
        assert!("a".repeat(300).parse::<ToolPattern>().unwrap_err().contains("at most 256"));
    }
}
