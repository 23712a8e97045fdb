//! Whole-output snapshots of an `rlp` run: [`rlp_snapshot!`] records the exit
//! code, stdout and stderr as one block in `tests/it/snapshots/`, after
//! [`Filters`] replaced what varies between runs and machines.
//!
//! ```text
//! rlp_snapshot!(&td, td.rlp().args(["lint", "agents/demo"]));
//! rlp_snapshot!(td.filters().digests().literal(TRACE, "[TRACE]"), &output);
//! ```
//!
//! The block reads:
//!
//! ```text
//! exit code: 1
//! ----- stdout -----
//! …
//! ----- stderr -----
//! error: …
//! ```
//!
//! Filters, applied in order (a test's own [`Filters::literal`]s first):
//! the `rlp` binary (`[RLP]`), the checkout (`[REPO]`), the test folder of [`TestDir`] and its
//! canonical form (`[TEMP]`), other temporary folders of `tempfile`
//! (`[OTHER_TEMP]`), the user's home (`[USER_HOME]`), with
//! [`Filters::digests`] BLAKE3 and SHA-256 digests (`[HASH]`), UUIDs
//! (`[UUID]`, trace and invocation ids included), signing key ids (16 hex
//! digits, `[KEY_ID]`: each test makes its keys afresh), local ports
//! (`127.0.0.1:[PORT]`), RFC 3339 times as `format_ts` prints them
//! (`[TIME]`), the times and durations of JSON output (`"ts_ms":[N]`,
//! `"duration_ms":[N]`), and the durations a call took (`in [DURATION]`,
//! `[DURATION]` for `1.234 s`, `+[OFFSET]` for a frame's offset in
//! `trace show`).
//!
//! Write new snapshots with `INSTA_UPDATE=always cargo test --test it <area>::`
//! and read every new `.snap` file before committing it.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use super::testdir::TestDir;

/// What [`rlp_snapshot!`] replaces before comparing: pairs of a regular
/// expression (insta's filters) and its replacement.
#[derive(Clone)]
pub struct Filters {
    own: Vec<(String, String)>,
    paths: Vec<(String, String)>,
    digests: bool,
}

impl Filters {
    /// The filters of every snapshot, for commands run in `dir`.
    pub fn new(dir: &Path) -> Self {
        let mut paths = vec![(escape(env!("CARGO_BIN_EXE_rlp")), "[RLP]".to_string())];
        // The checkout (fixtures' paths), wherever it is.
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        for root in [std::fs::canonicalize(repo).unwrap_or(repo.to_path_buf()), repo.to_path_buf()] {
            paths.push((format!(r"{}\b", escape(&root.to_string_lossy())), "[REPO]".to_string()));
        }
        let mut temp = vec![dir.to_path_buf()];
        if let Ok(canonical) = std::fs::canonicalize(dir) {
            temp.push(canonical);
        }
        // The longer form first, so that no half of a path is left.
        temp.sort_by_key(|p| std::cmp::Reverse(p.as_os_str().len()));
        temp.dedup();
        for path in temp {
            paths.push((escape(&path.to_string_lossy()), "[TEMP]".to_string()));
        }
        let tmp = std::env::temp_dir();
        for root in [std::fs::canonicalize(&tmp).unwrap_or(tmp.clone()), tmp] {
            paths.push((format!(r"{}/\.tmp[A-Za-z0-9]{{6}}", escape(&root.to_string_lossy())), "[OTHER_TEMP]".into()));
        }
        if let Some(home) = std::env::var_os("HOME").filter(|h| h.len() > 1) {
            paths.push((format!(r"{}\b", escape(&home.to_string_lossy())), "[USER_HOME]".to_string()));
        }
        Filters { own: Vec::new(), paths, digests: false }
    }

    /// Also replaces `text` (taken literally) with `with`, before any other
    /// filter: a fixed trace id kept readable as `[TRACE]`, a port, a key id.
    pub fn literal(mut self, text: &str, with: &str) -> Self {
        self.own.push((escape(text), with.to_string()));
        self
    }

    /// Also replaces what the regular expression `pattern` matches, before
    /// the filters of every snapshot: an archive's size, an upper-case key id.
    pub fn regex(mut self, pattern: &str, with: &str) -> Self {
        self.own.push((pattern.to_string(), with.to_string()));
        self
    }

    /// Also collapses each run of spaces into two: for a table whose column
    /// widths follow a path of the checkout (which differs between machines).
    pub fn aligned(self) -> Self {
        self.regex(" {2,}", "  ")
    }

    /// Also replaces BLAKE3 and SHA-256 digests (64 hex digits, with or
    /// without a `blake3:`/`sha256:` prefix) by `[HASH]`: for output whose
    /// digests depend on times or paths (a ledger's head, a trace's rows).
    pub fn digests(mut self) -> Self {
        self.digests = true;
        self
    }

    /// insta's settings with these filters, the expression left out of the
    /// snapshot's header (it is always the same).
    pub fn settings(&self) -> insta::Settings {
        let mut settings = insta::Settings::clone_current();
        settings.set_omit_expression(true);
        for (pattern, with) in self.rules() {
            settings.add_filter(&pattern, with);
        }
        settings
    }

    /// Every rule in the order insta applies them.
    pub fn rules(&self) -> Vec<(String, String)> {
        let mut rules = self.own.clone();
        rules.extend(self.paths.iter().cloned());
        if self.digests {
            rules.push((r"\b[0-9a-f]{64}\b".into(), "[HASH]".into()));
        }
        rules.extend(
            [
                (r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", "[UUID]"),
                (r"\b[0-9a-f]{16}\b", "[KEY_ID]"),
                (r"\b127\.0\.0\.1:\d{2,5}\b", "127.0.0.1:[PORT]"),
                (r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})", "[TIME]"),
                (r#""(ts_ms|first_ts_ms|last_ts_ms|duration_ms)":\s*\d+"#, r#""$1":[N]"#),
                (r"\bin \d+ ms\b", "in [DURATION]"),
                (r"\b\d+\.\d{3} s\b", "[DURATION]"),
                (r"\+\d+\.\d{3}s\b", "+[OFFSET]"),
            ]
            .map(|(a, b)| (a.to_string(), b.to_string())),
        );
        rules
    }
}

impl From<&TestDir> for Filters {
    fn from(dir: &TestDir) -> Self {
        dir.filters()
    }
}

impl From<&Filters> for Filters {
    fn from(filters: &Filters) -> Self {
        filters.clone()
    }
}

impl TestDir {
    /// The filters of a snapshot of a command run in this folder.
    pub fn filters(&self) -> Filters {
        Filters::new(self.path())
    }
}

/// What a snapshot shows: a finished process, or a command it runs (with an
/// empty stdin where the command does not set one).
pub trait Run {
    /// The finished process.
    fn finish(self) -> Output;
}

impl Run for Output {
    fn finish(self) -> Output {
        self
    }
}

impl Run for &Output {
    fn finish(self) -> Output {
        self.clone()
    }
}

impl Run for &mut assert_cmd::Command {
    fn finish(self) -> Output {
        self.output().unwrap()
    }
}

impl Run for &mut Command {
    fn finish(self) -> Output {
        self.stdin(Stdio::null()).output().unwrap()
    }
}

/// The exit code, stdout and stderr of `out` as one block.
pub fn shown(out: &Output) -> String {
    let status = match out.status.code() {
        Some(code) => format!("exit code: {code}"),
        None => format!("ended by {:?}", out.status),
    };
    let stream = |bytes: &[u8]| {
        let text = String::from_utf8_lossy(bytes).into_owned();
        if text.is_empty() || text.ends_with('\n') { text } else { format!("{text}\n[no newline at the end]\n") }
    };
    format!("{status}\n----- stdout -----\n{}----- stderr -----\n{}", stream(&out.stdout), stream(&out.stderr))
}

/// `text` with the characters of a regular expression escaped.
pub fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if r"\.+*?()|[]{}^$#&-~".contains(c) {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// Snapshots the whole output of an `rlp` run — exit code, stdout and stderr
/// — after the filters (a [`TestDir`] or [`Filters`]) replaced what varies;
/// returns the [`Output`] for further checks. The snapshot is named after the
/// test (`-2`, `-3`… for the next ones) unless a name comes first.
macro_rules! rlp_snapshot {
    ($filters:expr, $run:expr $(,)?) => {{
        let filters = $crate::support::snapshot::Filters::from($filters);
        let output = $crate::support::snapshot::Run::finish($run);
        let shown = $crate::support::snapshot::shown(&output);
        filters.settings().bind(|| insta::assert_snapshot!(shown));
        output
    }};
    ($name:expr, $filters:expr, $run:expr $(,)?) => {{
        let filters = $crate::support::snapshot::Filters::from($filters);
        let output = $crate::support::snapshot::Run::finish($run);
        let shown = $crate::support::snapshot::shown(&output);
        filters.settings().bind(|| insta::assert_snapshot!($name, shown));
        output
    }};
}

/// Snapshots a text (a written file, a report put together by a test) with
/// the same filters as [`rlp_snapshot!`].
macro_rules! text_snapshot {
    ($filters:expr, $text:expr $(,)?) => {{
        let filters = $crate::support::snapshot::Filters::from($filters);
        let text: &str = &$text;
        filters.settings().bind(|| insta::assert_snapshot!(text));
    }};
}

pub(crate) use {rlp_snapshot, text_snapshot};
