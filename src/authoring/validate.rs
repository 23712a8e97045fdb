//! Checks of single answers, shared by flags, `--tool` specs and wizard
//! prompts. Each parser returns the value or a message that says what is
//! wrong and what is expected; the prompts show the message and ask again.
//!
//! The checks are the bundle model's own (`is_valid_tool_id`,
//! `UrlTemplate::parse`, `SecretId`, `Capability`, `NetTarget`), so an answer
//! that passes here passes lint.

use std::path::PathBuf;

use serde_json::Value;

use crate::bundle::capability::{Capability, NetTarget, SecretId, is_domain, parse_fs_path};
use crate::bundle::manifest::{NAME_PATTERN, is_valid_name};
use crate::bundle::schema::{invalid_schema_id, is_valid_schema_id};
use crate::bundle::tools::{
    HTTP_METHODS, TOOL_ID_PATTERN, header_control_message, header_value_control, is_header_name, is_valid_tool_id,
    secret_refs,
};
use crate::bundle::url_template::UrlTemplate;
use crate::bundle::value;

/// The longest agent name the scaffold accepts: it is a folder name, and
/// part of the archive name `<name>-<version>.bundle.tar.gz`.
pub(crate) const MAX_AGENT_NAME: usize = 64;

/// An agent name: `^[a-z][a-z0-9_]*$`, at most [`MAX_AGENT_NAME`] characters.
pub(crate) fn agent_name(text: &str) -> Result<String, String> {
    if !is_valid_name(text) {
        Err(format!("`{text}` is not a valid agent name: it must match {NAME_PATTERN} (lower-case letters, digits, _)"))
    } else if text.len() > MAX_AGENT_NAME {
        Err(format!(
            "the agent name is {} characters long; at most {MAX_AGENT_NAME} are allowed (it names the bundle's folder and archive)",
            text.len()
        ))
    } else {
        Ok(text.to_string())
    }
}

/// A tool id: lower-case dot-separated words.
pub(crate) fn tool_id(text: &str) -> Result<String, String> {
    if is_valid_tool_id(text) {
        Ok(text.to_string())
    } else {
        Err(format!("`{text}` is not a valid tool id: it must match {TOOL_ID_PATTERN}, e.g. `mail.smtp_send`"))
    }
}

/// A tool's description: non-empty; it may span lines, the model reads it all.
pub(crate) fn tool_description(text: &str) -> Result<String, String> {
    non_empty_description(text, "the tool")
}

/// The agent's description: non-empty and one line.
pub(crate) fn agent_description(text: &str) -> Result<String, String> {
    let text = non_empty_description(text, "the agent")?;
    if text.contains(['\n', '\r']) { Err("the agent description must be one line".into()) } else { Ok(text) }
}

fn non_empty_description(text: &str, subject: &str) -> Result<String, String> {
    let text = text.trim();
    if text.is_empty() {
        Err(format!("the description is empty; write one line saying what {subject} does"))
    } else {
        Ok(text.to_string())
    }
}

/// An exec command: an absolute path (the runtime never searches PATH).
pub(crate) fn command(text: &str) -> Result<String, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("the command is empty; write the absolute path of the tool binary".into());
    }
    if !text.starts_with('/') {
        return Err(format!(
            "command `{text}` is not an absolute path; write the full path, e.g. `/usr/local/bin/mytool` (the runtime never searches PATH)"
        ));
    }
    if text.contains('\0') {
        return Err("the command contains a NUL byte".into());
    }
    Ok(text.to_string())
}

/// An HTTP method, upper-cased.
pub(crate) fn method(text: &str) -> Result<String, String> {
    let upper = text.trim().to_ascii_uppercase();
    if HTTP_METHODS.contains(&upper.as_str()) {
        Ok(upper)
    } else {
        Err(format!("method `{text}` is not supported; use one of {}", HTTP_METHODS.join(", ")))
    }
}

/// A URL template: absolute http(s), placeholders only in path and query.
pub(crate) fn url(text: &str) -> Result<UrlTemplate, String> {
    UrlTemplate::parse(text.trim()).map_err(|e| format!("URL `{}` is refused: {}; {}", text.trim(), e.message, e.help))
}

/// A header `Name: value`; the value may hold `${secret:<id>}`.
pub(crate) fn header(text: &str) -> Result<(String, String), String> {
    let (name, value) =
        text.split_once(':').ok_or_else(|| format!("header `{text}` is not of the form `Name: value`"))?;
    let (name, value) = (name.trim(), value.trim());
    if !is_header_name(name) {
        return Err(format!("`{name}` is not a valid header name (letters, digits and !#$%&'*+-.^_`|~)"));
    }
    if let Some(c) = header_value_control(value) {
        return Err(header_control_message(name, c));
    }
    for id in secret_refs(value)? {
        secret(&id)?;
    }
    Ok((name.to_string(), value.to_string()))
}

/// A secret id: `runloop/<scope>/<name>`.
pub(crate) fn secret(text: &str) -> Result<SecretId, String> {
    text.trim().parse()
}

/// A capability string (`exec`, `net:<host>`, `fs:<dir>`, …).
pub(crate) fn capability(text: &str) -> Result<Capability, String> {
    text.trim().parse()
}

/// An fs grant: an absolute directory without `.` or `..`.
pub(crate) fn fs_root(text: &str) -> Result<PathBuf, String> {
    parse_fs_path(text.trim())
}

/// A net grant: `host` or `host:port`.
pub(crate) fn net_host(text: &str) -> Result<NetTarget, String> {
    text.trim().parse()
}

/// A knowledge-base domain.
pub(crate) fn kb_domain(text: &str) -> Result<String, String> {
    let text = text.trim();
    if is_domain(text) {
        Ok(text.to_string())
    } else {
        Err(format!("`{text}` is not a knowledge-base domain (lower case, digits, _ - .)"))
    }
}

/// A tag: non-empty, no control characters.
pub(crate) fn tag(text: &str) -> Result<String, String> {
    let text = text.trim();
    if text.is_empty() || text.chars().any(char::is_control) {
        Err(format!("`{text}` is not a tag (non-empty, no control characters)"))
    } else {
        Ok(text.to_string())
    }
}

/// A `schema:<id>` id: one file name segment, so it maps to `schemas/<id>.json`.
pub(crate) fn schema_id(text: &str) -> Result<String, String> {
    let id = text.trim();
    if is_valid_schema_id(id) { Ok(id.to_string()) } else { Err(invalid_schema_id(id)) }
}

/// A positive integer.
pub(crate) fn positive(text: &str, what: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(n) if n > 0 && n < (1 << 53) => Ok(n),
        _ => Err(format!("{what} `{text}` is not a positive whole number")),
    }
}

/// A non-negative amount of US dollars.
pub(crate) fn usd(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(n) if n.is_finite() && n >= 0.0 => Ok(n),
        _ => Err(format!("budget `{text}` is not an amount of US dollars, e.g. 0.50")),
    }
}

/// A JSON Schema written inline: a JSON object (or `true`/`false`) that is a
/// valid JSON Schema 2020-12.
pub(crate) fn inline_schema(text: &str) -> Result<Value, String> {
    let value = value::parse_json_text(text.trim()).map_err(|e| value::json_error_message(&e))?;
    if !matches!(value, Value::Object(_) | Value::Bool(_)) {
        return Err("a schema must be a JSON object, e.g. {\"type\": \"object\"}".into());
    }
    jsonschema::meta::validate(&value).map_err(|e| format!("not a valid JSON Schema: {e}"))?;
    Ok(value)
}

/// Splits a comma-separated list, dropping blanks.
pub(crate) fn list(text: &str) -> Vec<&str> {
    text.split(',').map(str::trim).filter(|s| !s.is_empty()).collect()
}

/// Parses every item of a comma-separated list.
pub(crate) fn each<T>(text: &str, parse: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    list(text).into_iter().map(parse).collect()
}

/// A list of knowledge-base domains, or `*` for all of them (`None`).
pub(crate) fn kb_scope(text: &str) -> Result<Option<Vec<String>>, String> {
    if text.trim() == "*" { Ok(None) } else { each(text, kb_domain).map(Some) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_lint_refuses() {
        assert!(tool_id("mail.send").is_ok());
        assert!(tool_id("Mail").unwrap_err().contains("is not a valid tool id"));
        assert!(command("bin/tool").unwrap_err().contains("is not an absolute path"));
        assert!(url("https://{host}/x").unwrap_err().contains("scheme, host or port"));
        assert!(url("https://x.com/{id}#{frag}").unwrap_err().contains("in the fragment"));
        assert_eq!(url("http://LocalHost:8080/a/{b}").unwrap().suggested_grant(), "localhost:8080");
        assert_eq!(method("post").unwrap(), "POST");
        assert!(header("X-Key: ${secret:nope}").is_err());
        assert!(header("X-Key: a\u{1}b").unwrap_err().contains("control character U+0001"));
        assert!(header("X-Key: a\tb").is_ok());
        assert_eq!(header("Authorization: Bearer ${secret:runloop/a/b}").unwrap().0, "Authorization");
        assert!(schema_id("../x").is_err());
        assert_eq!(schema_id("mail.send.v1").unwrap(), "mail.send.v1");
        assert_eq!(kb_scope("*").unwrap(), None);
        assert_eq!(kb_scope("a, b").unwrap(), Some(vec!["a".to_string(), "b".to_string()]));
        assert!(inline_schema("{\"type\": 5}").is_err());
        assert!(inline_schema("[1]").is_err());
    }
}
