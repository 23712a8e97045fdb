//! Passwords from a libpq password file (`~/.pgpass`, or the file
//! `PGPASSFILE` names), read the way libpq reads it: one
//! `host:port:database:user:password` entry per line, `*` matching
//! anything in the first four fields, `\:` and `\\` escaping, `#` lines
//! ignored, the first matching line winning. Like libpq, a file that its
//! group or others may read is not used.

use std::path::{Path, PathBuf};

use zeroize::Zeroizing;

/// Largest password file read.
const MAX_BYTES: u64 = 1 << 20;

/// What a connection is looked up by.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Target<'a> {
    /// The host name, or the socket folder (libpq matches a socket as `localhost`).
    pub host: &'a str,
    /// The port.
    pub port: u16,
    /// The database.
    pub database: &'a str,
    /// The user.
    pub user: &'a str,
}

/// What reading the password file found (no `Debug`: it holds a password).
pub(crate) enum Lookup {
    /// A line matched.
    Found(Zeroizing<String>),
    /// No file, or no line matched.
    None,
    /// The file exists but is not used, and why (said once, as a warning).
    Ignored(String),
}

/// The password file: `$PGPASSFILE`, else `~/.pgpass`.
pub(crate) fn default_file() -> Option<PathBuf> {
    match std::env::var_os("PGPASSFILE").filter(|v| !v.is_empty()) {
        Some(path) => Some(PathBuf::from(path)),
        None => std::env::var_os("HOME").filter(|v| !v.is_empty()).map(|home| PathBuf::from(home).join(".pgpass")),
    }
}

/// Looks `target` up in the password file at `path`.
pub(crate) fn lookup(path: &Path, target: Target<'_>) -> Lookup {
    use crate::fsutil::PrivateFileError;
    let bytes = match crate::fsutil::read_private(path, MAX_BYTES) {
        Ok(bytes) => Zeroizing::new(bytes),
        Err(PrivateFileError::Read(e)) if e.is_not_found() => return Lookup::None,
        Err(PrivateFileError::NotAFile) => {
            return Lookup::Ignored(format!("{} is not a plain file; it is not read", path.display()));
        }
        Err(PrivateFileError::Shared(_)) => {
            return Lookup::Ignored(format!(
                "{} may be read by others, so it is not used; run `chmod 600 {}`",
                path.display(),
                path.display()
            ));
        }
        Err(PrivateFileError::Read(e)) => return Lookup::Ignored(format!("cannot read {}: {e}", path.display())),
    };
    match std::str::from_utf8(&bytes) {
        Ok(text) => find(text, target).map_or(Lookup::None, Lookup::Found),
        Err(_) => Lookup::Ignored(format!("cannot read {}: stream did not contain valid UTF-8", path.display())),
    }
}

/// The password of the first line of `text` that matches `target`.
fn find(text: &str, target: Target<'_>) -> Option<Zeroizing<String>> {
    // A socket folder is looked up as `localhost`, as libpq does.
    let host = if target.host.starts_with('/') { "localhost" } else { target.host };
    let port = target.port.to_string();
    let wanted = [host, port.as_str(), target.database, target.user];
    text.lines().filter(|line| !line.trim_start().starts_with('#')).find_map(|line| {
        let fields = split(line)?;
        let matches = fields[..4].iter().zip(wanted).all(|(field, want)| field.as_str() == "*" || **field == want);
        matches.then(|| Zeroizing::new(fields[4].to_string()))
    })
}

/// The five fields of a line, unescaped; `None` for a line with fewer.
/// The password field keeps any further colons.
fn split(line: &str) -> Option<Vec<Zeroizing<String>>> {
    let mut fields = vec![Zeroizing::new(String::new())];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    fields.last_mut()?.push(next);
                }
            }
            ':' if fields.len() < 5 => fields.push(Zeroizing::new(String::new())),
            c => fields.last_mut()?.push(c),
        }
    }
    (fields.len() == 5).then_some(fields)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn target<'a>(host: &'a str, user: &'a str) -> Target<'a> {
        Target { host, port: 5432, database: "rlp", user }
    }

    #[test]
    fn the_first_matching_line_wins_with_wildcards_and_escapes() {
        let text = "# comment\n\
                    db.example:5432:rlp:ada:first\n\
                    *:*:rlp:ada:second\n\
                    localhost:5432:*:b\\:ob:pa\\:ss:with:colons\n\
                    short:line\n";
        assert_eq!(find(text, target("db.example", "ada")).unwrap().as_str(), "first");
        assert_eq!(find(text, target("elsewhere", "ada")).unwrap().as_str(), "second");
        assert_eq!(find(text, target("/var/run/postgresql", "b:ob")).unwrap().as_str(), "pa:ss:with:colons");
        assert!(find(text, target("elsewhere", "carol")).is_none());
        assert!(find(text, Target { port: 5433, ..target("db.example", "nobody") }).is_none());
    }

    #[test]
    fn a_file_others_may_read_is_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pgpass");
        std::fs::write(&path, "*:*:*:*:secret\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let Lookup::Ignored(why) = lookup(&path, target("h", "u")) else { panic!("a readable file was used") };
        assert!(why.contains("chmod 600"), "{why}");
        assert!(!why.contains("secret"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(matches!(lookup(&path, target("h", "u")), Lookup::Found(p) if p.as_str() == "secret"));
        assert!(matches!(lookup(&dir.path().join("absent"), target("h", "u")), Lookup::None));
    }
}
