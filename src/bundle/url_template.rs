//! URL templates of http tools: `https://api.example/users/{id}/mail`.
//!
//! Placeholders are filled from the call's arguments, percent-encoded so a
//! value can never leave the path segment or query value it sits in. A
//! placeholder in the scheme, host or port is refused when the template is
//! parsed, so the host a call reaches is fixed by the bundle, not the model.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::Value;
use url::Url;

use crate::bundle::capability::NetTarget;
use crate::bundle::diag::Code;

/// Characters encoded in a substituted value: everything but RFC 3986 unreserved.
const VALUE_ENCODE: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    Literal(String),
    Placeholder(String),
}

/// A parsed URL template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UrlTemplate {
    raw: String,
    pieces: Vec<Piece>,
    target: NetTarget,
    /// The authority as written (`host` or `host:port`), for grant hints.
    written_authority: String,
}

/// Why a template was refused: a rule code, a message and a fix hint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateError {
    /// The lint rule this maps to.
    pub code: Code,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub help: &'static str,
}

fn refuse(code: Code, message: impl Into<String>) -> TemplateError {
    let help = match code {
        Code::UrlPlaceholderInAuthority => {
            "fix the scheme, host and port in the template; only the path and query may hold placeholders"
        }
        _ => "write an absolute http:// or https:// URL; `{name}` placeholders may appear in the path and query",
    };
    TemplateError { code, message: message.into(), help }
}

/// Refuses a placeholder after the first `#`: the fragment is never sent, so
/// an argument there would be dropped without a word.
fn check_fragment(raw: &str, after_scheme: usize) -> Result<(), TemplateError> {
    let Some(hash) = raw[after_scheme..].find('#') else { return Ok(()) };
    if !raw[after_scheme + hash..].contains('{') {
        return Ok(());
    }
    Err(TemplateError {
        help: "move the placeholder into the path or the query, or drop the fragment",
        ..refuse(
            Code::HttpUrlInvalid,
            "a placeholder in the fragment (after `#`) is never sent to the server; placeholders may appear only in the path and query",
        )
    })
}

fn is_placeholder_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl UrlTemplate {
    /// Parses and checks a template.
    pub fn parse(raw: &str) -> Result<Self, TemplateError> {
        let mut pieces = Vec::new();
        let mut rest = raw;
        while let Some(open) = rest.find(['{', '}']) {
            if rest[open..].starts_with('}') {
                return Err(refuse(Code::HttpUrlInvalid, "unmatched `}` in URL template"));
            }
            let close =
                rest[open..].find('}').ok_or_else(|| refuse(Code::HttpUrlInvalid, "unclosed `{` in URL template"))?;
            let name = &rest[open + 1..open + close];
            if !is_placeholder_name(name) {
                return Err(refuse(
                    Code::HttpUrlInvalid,
                    format!("`{{{name}}}` is not a placeholder (use `{{name}}` with letters, digits, _)"),
                ));
            }
            if open > 0 {
                pieces.push(Piece::Literal(rest[..open].to_string()));
            }
            pieces.push(Piece::Placeholder(name.to_string()));
            rest = &rest[open + close + 1..];
        }
        if !rest.is_empty() {
            pieces.push(Piece::Literal(rest.to_string()));
        }

        let scheme_end = raw.find("://").ok_or_else(|| {
            refuse(Code::HttpUrlInvalid, format!("`{raw}` is not an absolute URL (it needs http:// or https://)"))
        })?;
        let after_scheme = scheme_end + 3;
        let authority_end = raw[after_scheme..].find(['/', '?', '#']).map_or(raw.len(), |i| after_scheme + i);
        if raw[..authority_end].contains('{') {
            return Err(refuse(
                Code::UrlPlaceholderInAuthority,
                "a placeholder in the scheme, host or port would let arguments choose where the call goes",
            ));
        }
        check_fragment(raw, after_scheme)?;
        let sample: String = pieces
            .iter()
            .map(|p| match p {
                Piece::Literal(s) => s.as_str(),
                Piece::Placeholder(_) => "x",
            })
            .collect();
        let url = Url::parse(&sample)
            .map_err(|e| refuse(Code::HttpUrlInvalid, format!("`{raw}` is not a valid URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(refuse(Code::HttpUrlInvalid, format!("scheme `{}` is not http or https", url.scheme())));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(refuse(
                Code::HttpUrlInvalid,
                "credentials in the URL are refused; use a header with ${secret:<id>}",
            ));
        }
        let target = target_of(&url).ok_or_else(|| refuse(Code::HttpUrlInvalid, format!("`{raw}` has no host")))?;
        let written_authority = match url.port() {
            Some(port) => format!("{}:{port}", target.host),
            None => target.host.clone(),
        };
        Ok(UrlTemplate { raw: raw.to_string(), pieces, target, written_authority })
    }

    /// The template as written.
    pub fn as_str(&self) -> &str {
        &self.raw
    }

    /// Whether the scheme is `https` (rather than plain `http`).
    pub fn is_https(&self) -> bool {
        self.raw.get(..8).is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"))
    }

    /// The placeholder names, in order of appearance.
    pub fn placeholders(&self) -> impl Iterator<Item = &str> {
        self.pieces.iter().filter_map(|p| match p {
            Piece::Placeholder(name) => Some(name.as_str()),
            Piece::Literal(_) => None,
        })
    }

    /// The host and effective port every call goes to.
    pub fn target(&self) -> &NetTarget {
        &self.target
    }

    /// The grant to suggest for this URL: `host`, or `host:port` when the
    /// template names a port.
    pub fn suggested_grant(&self) -> &str {
        &self.written_authority
    }

    /// Fills the placeholders from `args`, percent-encoding each value.
    ///
    /// Returns the URL; refuses values that are not scalars and values that
    /// would become a `.` or `..` path segment.
    pub fn render(&self, args: &serde_json::Map<String, Value>) -> Result<Url, String> {
        let mut out = String::with_capacity(self.raw.len() + 32);
        for piece in &self.pieces {
            match piece {
                Piece::Literal(s) => out.push_str(s),
                Piece::Placeholder(name) => {
                    let text = match args.get(name) {
                        Some(Value::String(s)) => s.clone(),
                        Some(Value::Number(n)) => n.to_string(),
                        Some(Value::Bool(b)) => b.to_string(),
                        Some(_) => {
                            return Err(format!(
                                "argument `{name}` must be a string, number or boolean to fill the URL"
                            ));
                        }
                        None => return Err(format!("argument `{name}` is needed to fill the URL")),
                    };
                    if text == "." || text == ".." {
                        return Err(format!("argument `{name}` cannot be `{text}`: it would change the URL path"));
                    }
                    out.extend(utf8_percent_encode(&text, VALUE_ENCODE));
                }
            }
        }
        Url::parse(&out).map_err(|e| format!("the filled URL is invalid: {e}"))
    }
}

/// The host and effective port of a URL.
pub(crate) fn target_of(url: &Url) -> Option<NetTarget> {
    let host = match url.host()? {
        url::Host::Domain(d) => d.to_ascii_lowercase(),
        url::Host::Ipv4(ip) => ip.to_string(),
        url::Host::Ipv6(ip) => format!("[{ip}]"),
    };
    Some(NetTarget { host, port: url.port_or_known_default() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fills_and_encodes() {
        let t = UrlTemplate::parse("https://api.example.com/users/{user}/mail?x={q}").unwrap();
        assert_eq!(t.placeholders().collect::<Vec<_>>(), ["user", "q"]);
        let args = json!({"user": "../../admin?x=1#@evil.example", "q": 5});
        let url = t.render(args.as_object().unwrap()).unwrap();
        assert_eq!(url.host_str(), Some("api.example.com"));
        assert_eq!(url.path(), "/users/..%2F..%2Fadmin%3Fx%3D1%23%40evil.example/mail");
        assert_eq!(url.query(), Some("x=5"));
        assert!(t.render(json!({"user": "..", "q": 1}).as_object().unwrap()).is_err());
        assert_eq!(t.target().port, Some(443));
        assert_eq!(t.suggested_grant(), "api.example.com");
    }

    #[test]
    fn refuses_bad_templates() {
        let code = |raw: &str| UrlTemplate::parse(raw).unwrap_err().code;
        assert_eq!(code("https://{host}/x"), Code::UrlPlaceholderInAuthority);
        assert_eq!(code("https://api.x:{port}/x"), Code::UrlPlaceholderInAuthority);
        assert_eq!(code("{scheme}://api.x/"), Code::UrlPlaceholderInAuthority);
        assert_eq!(code("/relative/{x}"), Code::HttpUrlInvalid);
        assert_eq!(code("ftp://x/"), Code::HttpUrlInvalid);
        assert_eq!(code("https://u:p@x/"), Code::HttpUrlInvalid);
        assert_eq!(code("https://x/{a"), Code::HttpUrlInvalid);
        assert_eq!(code("https://x.com/{id}#{frag}"), Code::HttpUrlInvalid);
        assert_eq!(code("https://x.com/a#b{frag}"), Code::HttpUrlInvalid);
        assert!(UrlTemplate::parse("https://x.com/{id}?q={q}#top").is_ok());
        assert_eq!(UrlTemplate::parse("http://LocalHost:8080/a").unwrap().suggested_grant(), "localhost:8080");
    }
}
