//! The `[secrets]` table of config.toml: which providers, in which order,
//! and how the `file` and `cmd` providers work.
//!
//! ```toml
//! [secrets]
//! providers = ["file", "cmd", "env"]   # asked in this order; default ["env"],
//!                                      # and ["env", "file"] once the home has a store
//!
//! [secrets.file]
//! key = "identity"                     # or "passphrase"
//! passphrase_command = ["pass", "show", "rlp/store"]   # else a hidden prompt
//!
//! [secrets.cmd]
//! command = ["pass", "show", "{id}"]   # argv; {id} is the secret id; no shell
//! timeout_ms = 10000
//! env = ["PASSWORD_STORE_DIR"]         # passed through besides the defaults
//! ```

use std::path::PathBuf;
use std::time::Duration;

use crate::config::{ConfigError, ConfigFile, Setting, Source};

/// A provider's name in `[secrets] providers`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProviderKind {
    /// `env`.
    Env,
    /// `file`.
    File,
    /// `cmd`.
    Cmd,
    /// `keyring`.
    Keyring,
}

impl ProviderKind {
    /// Every provider, by the name config.toml writes.
    const ALL: [(&'static str, ProviderKind); 4] = [
        ("env", ProviderKind::Env),
        ("file", ProviderKind::File),
        ("cmd", ProviderKind::Cmd),
        ("keyring", ProviderKind::Keyring),
    ];
}

/// How the file store's key is kept.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum StoreKey {
    /// An X25519 identity file (`$RUNLOOP_HOME/secrets/identity.txt`).
    #[default]
    Identity,
    /// A passphrase, from this command's output or else a hidden prompt.
    Passphrase {
        /// `passphrase_command`: argv of a command that prints the passphrase.
        command: Option<Vec<String>>,
    },
}

/// `[secrets.cmd]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CommandConfig {
    /// `command`: the argv template (`{id}` stands for the secret id).
    pub argv: Vec<String>,
    /// `timeout_ms`: how long the command may take.
    pub timeout: Duration,
    /// `env`: variables passed through besides [`crate::secrets::command::PASSED_THROUGH`].
    pub env: Vec<String>,
    /// The file that set it.
    pub file: PathBuf,
}

/// How long a `cmd` provider's command may take by default.
pub(crate) const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest `timeout_ms` accepted.
const MAX_COMMAND_TIMEOUT_MS: i64 = 600_000;

/// The secret settings in force.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SecretsConfig {
    /// `[secrets] providers`, in order.
    pub providers: Setting<Vec<ProviderKind>>,
    /// `[secrets.file] key` / `passphrase_command`.
    pub file: StoreKey,
    /// `[secrets.cmd]`, when some file sets it.
    pub cmd: Option<CommandConfig>,
}

impl SecretsConfig {
    /// Where no file names `[secrets] providers`, reads the home's store
    /// after the environment: a secret set with `rlp secrets set` works
    /// with no configuration, and a variable set for one run still wins
    /// over the stored value (as variables win over config files).
    pub(crate) fn read_store_by_default(&mut self) {
        if self.providers.source == Source::Default {
            self.providers.value = vec![ProviderKind::Env, ProviderKind::File];
        }
    }
}

impl Default for SecretsConfig {
    fn default() -> Self {
        SecretsConfig {
            providers: Setting { value: vec![ProviderKind::Env], source: Source::Default },
            file: StoreKey::default(),
            cmd: None,
        }
    }
}

/// What one config file says under `[secrets]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SecretsLayer {
    /// `providers`.
    pub providers: Option<Vec<ProviderKind>>,
    /// `[secrets.file]`.
    pub file: Option<StoreKey>,
    /// `[secrets.cmd]`.
    pub cmd: Option<CommandConfig>,
}

impl SecretsConfig {
    /// Applies a file's layer over what lower layers set (`source` names the
    /// file): each setting it makes replaces the lower one.
    pub(crate) fn apply(&mut self, layer: &SecretsLayer, source: Source) {
        if let Some(providers) = &layer.providers {
            self.providers = Setting { value: providers.clone(), source };
        }
        if let Some(file) = &layer.file {
            self.file = file.clone();
        }
        if let Some(cmd) = &layer.cmd {
            self.cmd = Some(cmd.clone());
        }
    }
}

/// Reads the `[secrets]` table of `path`; unknown keys are warned about.
pub(crate) fn parse(
    file: ConfigFile<'_>,
    table: &toml::Table,
    warnings: &mut Vec<String>,
) -> Result<SecretsLayer, ConfigError> {
    let mut layer = SecretsLayer::default();
    for (key, value) in table {
        match key.as_str() {
            "providers" => layer.providers = Some(providers(file, value)?),
            "file" => layer.file = Some(store_key(file, table_of(file, "secrets.file", value)?, warnings)?),
            "cmd" => layer.cmd = Some(command(file, table_of(file, "secrets.cmd", value)?, warnings)?),
            _ => warnings
                .push(file.warning(&format!("secrets.\"{key}\""), format!("unknown key `secrets.{key}` ignored"))),
        }
    }
    Ok(layer)
}

fn table_of<'a>(file: ConfigFile<'_>, name: &str, value: &'a toml::Value) -> Result<&'a toml::Table, ConfigError> {
    value
        .as_table()
        .ok_or_else(|| file.error(name, format!("`{name}` must be a table"), format!("write it as [{name}]")))
}

/// A non-empty array of strings.
fn strings(file: ConfigFile<'_>, name: &str, value: &toml::Value, example: &str) -> Result<Vec<String>, ConfigError> {
    let help = || format!("write `{name} = {example}`");
    let items =
        value.as_array().ok_or_else(|| file.error(name, format!("`{name}` must be an array of strings"), help()))?;
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            item.as_str().map(str::to_string).ok_or_else(|| {
                file.error(&format!("{name}[{i}]"), format!("`{name}` holds {item}, which is not a string"), help())
            })
        })
        .collect()
}

fn providers(file: ConfigFile<'_>, value: &toml::Value) -> Result<Vec<ProviderKind>, ConfigError> {
    const AT: &str = "secrets.providers";
    let names = strings(file, AT, value, "[\"file\", \"env\"]")?;
    let known: Vec<&str> = ProviderKind::ALL.iter().map(|(name, _)| *name).collect();
    let mut kinds = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let kind = ProviderKind::ALL.iter().find(|(n, _)| n == name).map(|(_, k)| *k).ok_or_else(|| {
            file.error(
                &format!("{AT}[{i}]"),
                format!("`secrets.providers` names `{name}`, which is not a provider"),
                format!("the providers are {}", known.join(", ")),
            )
        })?;
        if kinds.contains(&kind) {
            return Err(file.error(
                &format!("{AT}[{i}]"),
                format!("`secrets.providers` names `{name}` twice"),
                "name each provider once, in the order to ask them",
            ));
        }
        kinds.push(kind);
    }
    if kinds.is_empty() {
        return Err(file.error(
            AT,
            "`secrets.providers` is empty: no secret could ever be resolved",
            "name at least one provider, e.g. `providers = [\"env\"]`",
        ));
    }
    Ok(kinds)
}

fn store_key(file: ConfigFile<'_>, table: &toml::Table, warnings: &mut Vec<String>) -> Result<StoreKey, ConfigError> {
    let mut passphrase = false;
    let mut command = None;
    for (key, value) in table {
        match key.as_str() {
            "key" => {
                passphrase = match value.as_str() {
                    Some("identity") => false,
                    Some("passphrase") => true,
                    _ => {
                        return Err(file.error(
                            "secrets.file.key",
                            format!("`secrets.file.key` must be \"identity\" or \"passphrase\", found {value}"),
                            "write `key = \"identity\"` (the default) or `key = \"passphrase\"` under [secrets.file]",
                        ));
                    }
                }
            }
            "passphrase_command" => {
                command =
                    Some(argv(file, "secrets.file.passphrase_command", value, "[\"pass\", \"show\", \"rlp/store\"]")?)
            }
            _ => warnings.push(
                file.warning(&format!("secrets.file.\"{key}\""), format!("unknown key `secrets.file.{key}` ignored")),
            ),
        }
    }
    match (passphrase, command) {
        (true, command) => Ok(StoreKey::Passphrase { command }),
        (false, None) => Ok(StoreKey::Identity),
        (false, Some(_)) => Err(file.error(
            "secrets.file.passphrase_command",
            "`secrets.file.passphrase_command` is set but `secrets.file.key` is not \"passphrase\"",
            "add `key = \"passphrase\"` under [secrets.file], or remove passphrase_command",
        )),
    }
}

/// A command's argv: at least the program, which is not empty.
fn argv(file: ConfigFile<'_>, name: &str, value: &toml::Value, example: &str) -> Result<Vec<String>, ConfigError> {
    let argv = strings(file, name, value, example)?;
    if argv.first().is_none_or(|program| program.is_empty()) {
        return Err(file.error(name, format!("`{name}` names no program"), format!("write `{name} = {example}`")));
    }
    Ok(argv)
}

fn command(
    file: ConfigFile<'_>,
    table: &toml::Table,
    warnings: &mut Vec<String>,
) -> Result<CommandConfig, ConfigError> {
    let mut config = CommandConfig {
        argv: Vec::new(),
        timeout: DEFAULT_COMMAND_TIMEOUT,
        env: Vec::new(),
        file: file.path.to_path_buf(),
    };
    for (key, value) in table {
        match key.as_str() {
            "command" => config.argv = argv(file, "secrets.cmd.command", value, "[\"pass\", \"show\", \"{id}\"]")?,
            "timeout_ms" => {
                let ms = value.as_integer().filter(|ms| (1..=MAX_COMMAND_TIMEOUT_MS).contains(ms)).ok_or_else(|| {
                    file.error(
                        "secrets.cmd.timeout_ms",
                        format!("`secrets.cmd.timeout_ms` must be a whole number from 1 to {MAX_COMMAND_TIMEOUT_MS}, found {value}"),
                        "write e.g. `timeout_ms = 10000` (ten seconds) under [secrets.cmd]",
                    )
                })?;
                config.timeout = Duration::from_millis(ms.unsigned_abs());
            }
            "env" => {
                config.env = strings(file, "secrets.cmd.env", value, "[\"PASSWORD_STORE_DIR\"]")?;
                if let Some((i, bad)) = config.env.iter().enumerate().find(|(_, name)| !is_env_name(name)) {
                    return Err(file.error(
                        &format!("secrets.cmd.env[{i}]"),
                        format!("`secrets.cmd.env` holds `{bad}`, which is not an environment variable name"),
                        "list names such as \"PASSWORD_STORE_DIR\" (letters, digits and _, not starting with a digit)",
                    ));
                }
            }
            _ => warnings.push(
                file.warning(&format!("secrets.cmd.\"{key}\""), format!("unknown key `secrets.cmd.{key}` ignored")),
            ),
        }
    }
    if config.argv.is_empty() {
        return Err(file.error(
            "secrets.cmd",
            "[secrets.cmd] has no `command`",
            "write `command = [\"pass\", \"show\", \"{id}\"]` under [secrets.cmd]",
        ));
    }
    Ok(config)
}

/// Whether `name` is a portable environment variable name.
fn is_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<(SecretsLayer, Vec<String>), ConfigError> {
        let table: toml::Table = text.parse().unwrap();
        let mut warnings = Vec::new();
        let places = crate::config::Places::default();
        let file = ConfigFile::new(std::path::Path::new("/h/config.toml"), text, &places);
        let layer = parse(file, table["secrets"].as_table().unwrap(), &mut warnings)?;
        Ok((layer, warnings))
    }

    #[test]
    fn reads_every_setting() {
        let (layer, warnings) = parsed(
            "[secrets]\nproviders = [\"file\", \"cmd\", \"env\"]\nextra = 1\n\
             [secrets.file]\nkey = \"passphrase\"\npassphrase_command = [\"pass\", \"show\", \"rlp\"]\n\
             [secrets.cmd]\ncommand = [\"pass\", \"show\", \"{id}\"]\ntimeout_ms = 2500\nenv = [\"PASSWORD_STORE_DIR\"]\n",
        )
        .unwrap();
        assert_eq!(layer.providers, Some(vec![ProviderKind::File, ProviderKind::Cmd, ProviderKind::Env]));
        assert_eq!(
            layer.file,
            Some(StoreKey::Passphrase { command: Some(vec!["pass".into(), "show".into(), "rlp".into()]) })
        );
        let cmd = layer.cmd.unwrap();
        assert_eq!(cmd.argv, ["pass", "show", "{id}"]);
        assert_eq!(cmd.timeout, Duration::from_millis(2500));
        assert_eq!(cmd.env, ["PASSWORD_STORE_DIR"]);
        assert_eq!(warnings, ["/h/config.toml:3:1: unknown key `secrets.extra` ignored"]);
    }

    #[test]
    fn refuses_what_cannot_work() {
        for (text, at, message) in [
            ("providers = [\"vault\"]", "2:14", "`secrets.providers` names `vault`, which is not a provider"),
            ("providers = [\"env\", \"env\"]", "2:21", "`secrets.providers` names `env` twice"),
            ("providers = []", "2:13", "`secrets.providers` is empty: no secret could ever be resolved"),
            ("providers = \"env\"", "2:13", "`secrets.providers` must be an array of strings"),
            ("providers = [1]", "2:14", "`secrets.providers` holds 1, which is not a string"),
            ("[secrets.cmd]\ntimeout_ms = 5", "2:1", "[secrets.cmd] has no `command`"),
            ("[secrets.cmd]\ncommand = []", "3:11", "`secrets.cmd.command` names no program"),
            (
                "[secrets.cmd]\ncommand = [\"x\"]\ntimeout_ms = 0",
                "4:14",
                "`secrets.cmd.timeout_ms` must be a whole number from 1 to 600000, found 0",
            ),
            (
                "[secrets.cmd]\ncommand = [\"x\"]\nenv = [\"A=B\"]",
                "4:8",
                "`secrets.cmd.env` holds `A=B`, which is not an environment variable name",
            ),
            (
                "[secrets.file]\nkey = \"yubikey\"",
                "3:7",
                "`secrets.file.key` must be \"identity\" or \"passphrase\", found \"yubikey\"",
            ),
            (
                "[secrets.file]\npassphrase_command = [\"x\"]",
                "3:22",
                "`secrets.file.passphrase_command` is set but `secrets.file.key` is not \"passphrase\"",
            ),
        ] {
            let e = parsed(&format!("[secrets]\n{text}\n")).unwrap_err();
            assert_eq!(e.message, format!("/h/config.toml:{at}: {message}"), "{text}");
        }
    }

    #[test]
    fn a_home_with_a_store_reads_it_after_the_environment_unless_providers_are_named() {
        let mut config = SecretsConfig::default();
        config.read_store_by_default();
        assert_eq!(config.providers.value, [ProviderKind::Env, ProviderKind::File]);
        assert_eq!(config.providers.source, Source::Default);
        let mut named = SecretsConfig::default();
        let (layer, _) = parsed("[secrets]\nproviders = [\"env\"]\n").unwrap();
        named.apply(&layer, Source::UserConfig("/h/config.toml".into()));
        named.read_store_by_default();
        assert_eq!(named.providers.value, [ProviderKind::Env]);
    }

    #[test]
    fn a_higher_layer_replaces_each_setting_it_makes() {
        let mut config = SecretsConfig::default();
        let (system, _) = parsed("[secrets]\nproviders = [\"cmd\"]\n[secrets.cmd]\ncommand = [\"pass\"]\n").unwrap();
        let (user, _) = parsed("[secrets]\nproviders = [\"file\", \"cmd\"]\n").unwrap();
        config.apply(&system, Source::SystemConfig("/etc/s.toml".into()));
        config.apply(&user, Source::UserConfig("/h/config.toml".into()));
        assert_eq!(config.providers.value, [ProviderKind::File, ProviderKind::Cmd]);
        assert_eq!(config.providers.source, Source::UserConfig("/h/config.toml".into()));
        assert_eq!(config.cmd.unwrap().argv, ["pass"]);
        assert_eq!(SecretsConfig::default().providers.value, [ProviderKind::Env]);
    }
}
