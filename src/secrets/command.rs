//! The `cmd` provider: a command prints the value (`pass show {id}`).
//!
//! The command is the operator's own, from config.toml: it runs as argv (no
//! shell), with `{id}` in any argument replaced by the secret id, stdin
//! empty, and a cleared environment holding only [`PASSED_THROUGH`] and the
//! names `[secrets.cmd] env` adds — never rlp's `RUNLOOP_*` variables. Its
//! stdout, less one trailing newline, is the value; it may print at most
//! [`MAX_VALUE_BYTES`]. A non-zero exit, a kill or the timeout mean "not
//! available"; what it printed on stderr is never shown (it may hold a
//! value). It runs through rlp's process runner ([`crate::process`]): own
//! process group, killed with everything it started at the deadline.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use zeroize::Zeroize;

use crate::bundle::capability::SecretId;
use crate::config::secrets::CommandConfig;
use crate::fsutil::{find_on_path, is_executable_file};
use crate::process::capture::Keep;
use crate::process::run::{RunError, Watch, run};
use crate::process::spawn::Program;
use crate::secrets::{Lookup, Provider, ProviderError, SecretValue};

/// The variables of rlp's environment a command receives (when set): what
/// password managers and their agents need to find the user's store.
pub(crate) const PASSED_THROUGH: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "DBUS_SESSION_BUS_ADDRESS",
    "GNUPGHOME",
    "GPG_TTY",
    "PASSWORD_STORE_DIR",
];

/// Most bytes a command may print (a value, and its trailing newline).
pub(crate) const MAX_VALUE_BYTES: u64 = 64 * 1024;
/// The variable by which the orphan sweep recognises what a command left.
const MARKER_ENV: &str = "RLP_SECRET_LOOKUP";

/// How one run of a command ended.
pub(crate) enum Ran {
    /// It exited 0: what it printed, less one trailing newline.
    Printed(SecretValue),
    /// It gave no value: why, in a few words.
    NoValue(String),
}

/// Runs `argv` as described in the module docs, passing `extra_env` through
/// besides [`PASSED_THROUGH`]. `shown` names the command in messages.
pub(crate) fn run_for_value(
    argv: &[String],
    extra_env: &[String],
    timeout: Duration,
    shown: &str,
) -> Result<Ran, ProviderError> {
    let (program, args) =
        argv.split_first().ok_or_else(|| ProviderError::new("the command is empty", "name a program"))?;
    let path = find_program(program).ok_or_else(|| {
        ProviderError::new(
            format!("cannot find the program `{program}` of `{shown}`"),
            "install it, or give its absolute path in config.toml",
        )
    })?;
    let marker_value = uuid::Uuid::now_v7().to_string();
    let env: Vec<(OsString, OsString)> = PASSED_THROUGH
        .iter()
        .copied()
        .chain(extra_env.iter().map(String::as_str))
        .filter_map(|name| std::env::var_os(name).map(|value| (OsString::from(name), value)))
        .chain([(OsString::from(MARKER_ENV), OsString::from(&marker_value))])
        .collect();
    let dir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let program =
        Program::new(&path, args.iter().map(OsStr::new), env.iter().map(|(n, v)| (n.as_os_str(), v.as_os_str())), &dir)
            .map_err(|e| {
                ProviderError::new(format!("cannot start `{shown}`: {e}"), "check the command in config.toml")
            })?;
    let marker = format!("{MARKER_ENV}={marker_value}");
    let watch = Watch {
        deadline: Instant::now() + timeout,
        max_stdout: MAX_VALUE_BYTES,
        stderr: Keep::Tail { keep: 0, margin: 0 },
        marker: &marker,
        cancel: None,
    };
    let mut finished = run(&program, None, &watch).map_err(|e| {
        let e = match e {
            RunError::Start(e) | RunError::Wait(e) => e,
        };
        ProviderError::new(format!("cannot run `{shown}`: {e}"), "check the command in config.toml")
    })?;
    let mut stdout = std::mem::take(&mut finished.stdout.bytes);
    if finished.overflow {
        stdout.zeroize();
        return Err(ProviderError::new(
            format!("`{shown}` printed more than {} bytes, more than a secret value may hold", MAX_VALUE_BYTES),
            "make the command print the value alone",
        ));
    }
    if finished.timed_out {
        stdout.zeroize();
        return Ok(Ran::NoValue(format!("`{shown}` did not answer within {} ms (timeout_ms)", timeout.as_millis())));
    }
    match finished.status {
        Some(status) if status.success() => {}
        status => {
            stdout.zeroize();
            let how = match status.and_then(|s| s.code()) {
                Some(code) => format!("exited with status {code}"),
                None => "was killed".to_string(),
            };
            return Ok(Ran::NoValue(format!("`{shown}` {how}")));
        }
    }
    if stdout.last() == Some(&b'\n') {
        stdout.pop();
    }
    match String::from_utf8(stdout) {
        Ok(value) if value.is_empty() => Ok(Ran::NoValue(format!("`{shown}` printed nothing"))),
        Ok(value) => Ok(Ran::Printed(SecretValue::new(value))),
        Err(e) => {
            e.into_bytes().zeroize();
            Err(ProviderError::new(
                format!("`{shown}` printed a value that is not UTF-8"),
                "store the value as UTF-8 text",
            ))
        }
    }
}

/// `program`'s path: itself when it holds a `/`, else the first executable
/// of that name in rlp's `PATH`.
fn find_program(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        let path = PathBuf::from(program);
        return is_executable_file(&path).then_some(path);
    }
    find_on_path(program, std::env::var_os("PATH").as_deref())
}

/// Answers from `[secrets.cmd] command`.
#[derive(Debug)]
pub(crate) struct CommandProvider {
    config: CommandConfig,
}

impl CommandProvider {
    /// A provider running `config`'s command.
    pub(crate) fn new(config: CommandConfig) -> Self {
        CommandProvider { config }
    }

    /// The command for `id`: the template with `{id}` replaced.
    fn argv(&self, id: &SecretId) -> Vec<String> {
        self.config.argv.iter().map(|arg| arg.replace("{id}", id.as_str())).collect()
    }
}

impl Provider for CommandProvider {
    fn name(&self) -> &'static str {
        "cmd"
    }

    fn lookup(&self, id: &SecretId) -> Result<Lookup, ProviderError> {
        let argv = self.argv(id);
        let shown = argv.join(" ");
        match run_for_value(&argv, &self.config.env, self.config.timeout, &shown)? {
            Ran::Printed(value) => Ok(Lookup::Found(value)),
            Ran::NoValue(why) => Ok(Lookup::Missing {
                why,
                how: format!("make `{shown}` print it (the command is set in {})", self.config.file.display()),
            }),
        }
    }
}
