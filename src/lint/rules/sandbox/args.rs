//! What an exec tool's `transport.args` say it reaches: a folder (an absolute
//! path outside the bundle) or a host (a URL, or `host:port`).

use std::path::Path;

use crate::bundle::capability::{Capability, NetTarget, parse_fs_path};

/// Paths every process has without a grant: the null device and its own
/// standard streams.
const STANDARD_DEVICES: &[&str] = &["/dev/null", "/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/tty"];

/// The capability `arg` suggests the tool needs, if any: `fs:<dir>` for an
/// absolute path outside `bundle_dir` (the path's folder, or the path itself
/// when it ends in `/` or sits directly below `/`), `net:<host>[:<port>]` for
/// a URL or a `host:port`. An option written `--name=value` is judged by its
/// value.
pub(super) fn reach(arg: &str, bundle_dir: Option<&Path>) -> Option<Capability> {
    let value = arg.split_once('=').map(|(_, value)| value);
    [Some(arg), value].into_iter().flatten().find_map(|text| folder(text, bundle_dir).or_else(|| host(text)))
}

/// `fs:<dir>` for an absolute path outside the bundle.
fn folder(text: &str, bundle_dir: Option<&Path>) -> Option<Capability> {
    if !text.starts_with('/') || STANDARD_DEVICES.contains(&text) {
        return None;
    }
    let path = Path::new(text);
    if bundle_dir.is_some_and(|dir| path.starts_with(dir)) {
        return None;
    }
    let dir = match path.parent() {
        Some(parent) if !text.ends_with('/') && parent != Path::new("/") => parent,
        _ => path,
    };
    // No shell expands an argument's `~`: only an absolute one names a folder.
    let dir = parse_fs_path(dir.to_str()?).ok().filter(|dir| dir.is_absolute())?;
    (dir != Path::new("/")).then_some(Capability::Fs(dir))
}

/// `net:<host>[:<port>]` for a URL (`scheme://host…`, the port only when
/// written) or a `host:port` whose host is a dotted name, `localhost` or an
/// IP literal.
fn host(text: &str) -> Option<Capability> {
    let written = if text.contains("://") {
        let url = url::Url::parse(text).ok()?;
        if url.scheme() == "file" {
            return None;
        }
        let host = url.host_str().filter(|h| !h.is_empty())?;
        match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_string(),
        }
    } else {
        let (host, _) = text.rsplit_once(':')?;
        let named = host.contains('.') || host == "localhost" || host.starts_with('[');
        if !named || !host.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '[') {
            return None;
        }
        text.to_string()
    };
    let target: NetTarget = written.parse().ok()?;
    if !text.contains("://") && target.port.is_none() {
        return None;
    }
    Some(Capability::Net(target))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(arg: &str) -> Option<String> {
        reach(arg, Some(Path::new("/opt/agents/mailer"))).map(|cap| cap.to_string())
    }

    #[test]
    fn absolute_paths_outside_the_bundle_suggest_their_folder() {
        for (arg, expected) in [
            ("/srv/mail/outbox/draft.eml", Some("fs:/srv/mail/outbox")),
            ("/srv/mail/outbox/", Some("fs:/srv/mail/outbox")),
            ("/data", Some("fs:/data")),
            ("--out=/var/spool/out.csv", Some("fs:/var/spool")),
            ("/opt/agents/mailer/data.json", None),
            ("/dev/null", None),
            ("/", None),
            ("/a/../etc/passwd", None),
            ("relative/path", None),
            ("--json", None),
        ] {
            assert_eq!(shown(arg).as_deref(), expected, "{arg}");
        }
    }

    #[test]
    fn urls_and_host_ports_suggest_a_net_capability() {
        for (arg, expected) in [
            ("https://API.Example.com/v1", Some("net:api.example.com")),
            ("http://localhost:8080/x", Some("net:localhost:8080")),
            ("--endpoint=https://mail.example:8443", Some("net:mail.example:8443")),
            ("postgres://db.internal:5432/app", Some("net:db.internal:5432")),
            ("db.internal:5432", Some("net:db.internal:5432")),
            ("localhost:6379", Some("net:localhost:6379")),
            ("[::1]:9000", Some("net:[::1]:9000")),
            ("--redis=10.0.0.7:6379", Some("net:10.0.0.7:6379")),
            ("file:///srv/x", None),
            ("12:30", None),
            ("key:1", None),
            ("api.example.com", None),
            ("-x.y:80", None),
            ("db.internal:99999", None),
        ] {
            assert_eq!(shown(arg).as_deref(), expected, "{arg}");
        }
    }
}
