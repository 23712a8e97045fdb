//! `rlp trust add | revoke | list`: edits `$RUNLOOP_HOME/trust-policy.toml`.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::json;

use crate::bundle::capability::Capability;
use crate::cli::Context;
use crate::cli::exit::{CliError, CliResult, Exit};
use crate::cli::output::{Format, Printer, path_json};
use crate::integrity::keys::{KeyId, PublicKey};
use crate::integrity::trust::{self, AllowCaps, Rule, TrustPolicy};
use crate::integrity::{Failure, Reason};

/// `rlp trust …`
#[derive(Debug, Subcommand)]
pub enum TrustCommand {
    /// Trust a signer's public key as an anchor, with a rule for what its bundles may request.
    Add(AddArgs),
    /// Revoke a key: everything it signed is refused, installed or not.
    Revoke(RevokeArgs),
    /// Widen or narrow what a trusted signer's bundles may request.
    Allow(AllowArgs),
    /// Show anchors, their rules and revoked keys.
    List(ListArgs),
}

/// Flags of `rlp trust allow`.
#[derive(Debug, Args)]
#[command(
    group = clap::ArgGroup::new("change").required(true).multiple(true)
        .args(["caps", "add_caps", "remove_caps", "exec", "no_exec"]),
    after_help = "Examples:\n  rlp trust allow release --exec\n  rlp trust allow ci --add-caps net:api.example.com,kb_write\n  rlp trust allow ci --remove-caps kb_write --no-exec\n  rlp trust allow ci --caps any\n\nThe rule is [rules.NAME] in the home's trust-policy.toml; the rest of the file is kept as written.\nExit codes: 0 changed, 2 no such anchor, a bad capability or a malformed policy."
)]
pub struct AllowArgs {
    /// The anchor's name (see `rlp trust list`).
    pub name: String,
    /// Replace what its bundles may request: `any`, or a comma-separated list of capabilities.
    #[arg(long, value_name = "LIST", value_delimiter = ',', conflicts_with_all = ["add_caps", "remove_caps"])]
    pub caps: Vec<String>,
    /// Add these capabilities to its list (comma-separated).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub add_caps: Vec<String>,
    /// Remove these capabilities from its list (comma-separated).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub remove_caps: Vec<String>,
    /// Let its bundles request `exec`.
    #[arg(long, conflicts_with = "no_exec")]
    pub exec: bool,
    /// Do not let its bundles request `exec`.
    #[arg(long)]
    pub no_exec: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// Flags of `rlp trust add`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  rlp trust add keys/ci.pub --name ci --allow-caps kb_read,kb_write,net:localhost\n\nWithout --allow-caps the rule is `allow_caps = \"any\"`, which leaves out exec: exec needs\n--allow-exec, or `exec` in the --allow-caps list.\nExit codes: 0 added, 2 bad key file, name taken or malformed policy, 3 the key is revoked."
)]
pub struct AddArgs {
    /// The signer's `.pub` file (`ed25519:<base64>`).
    #[arg(value_name = "PUB-FILE")]
    pub pub_file: PathBuf,
    /// The anchor's name (`^[a-z][a-z0-9_-]*$`).
    #[arg(long)]
    pub name: String,
    /// Capabilities its bundles may request: `any`, or a comma-separated list
    /// of capability strings (e.g. `kb_read,net:api.example.com`).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub allow_caps: Vec<String>,
    /// Let its bundles request `exec`.
    #[arg(long)]
    pub allow_exec: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// Flags of `rlp trust revoke`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  rlp trust revoke 0123456789abcdef\n  rlp trust revoke ci      # an anchor's name stands for its key\n\nExit codes: 0 revoked (or already revoked), 2 not a key id or anchor name, or a malformed policy."
)]
pub struct RevokeArgs {
    /// A key id (16 hex digits, either case), or the name of an anchor.
    #[arg(value_name = "KEY-ID")]
    pub key: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// Flags of `rlp trust list`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  rlp trust list\n  rlp trust list --format json\n\nExit codes: 0 listed, 2 a malformed policy."
)]
pub struct ListArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// Runs a `trust` subcommand.
pub(crate) fn run(command: TrustCommand, ctx: &Context) -> CliResult {
    let path = ctx.home.trust_policy_file();
    // The first policy written makes the home: private, as rlp makes all of it.
    let create_home = || {
        let root = ctx.home.root();
        crate::fsutil::create_private_dir_all(root).map_err(|e| CliError::from(Failure::io(root, &e)))
    };
    match command {
        TrustCommand::Add(args) => {
            let key = PublicKey::load(&args.pub_file).map_err(CliError::from)?;
            let rule = rule_from(&args)?;
            create_home()?;
            trust::add_anchor(&path, &args.name, &key, &rule).map_err(CliError::from)?;
            let human = format!(
                "added anchor `{}` (key {}) to {}\nits bundles may request {}",
                args.name,
                key.key_id(),
                path.display(),
                rule.describe()
            );
            let json = json!({
                "anchor": args.name,
                "key_id": key.key_id().to_string(),
                "policy": path_json(&path),
                "allow_caps": allow_caps_json(&rule.allow_caps),
                "allow_exec": rule.exec_allowed(),
            });
            let mut out = Printer::stdout();
            out.report(args.format, &human, &json)?;
            out.finish(Exit::Success)
        }
        TrustCommand::Revoke(args) => {
            let policy = TrustPolicy::load(&path).map_err(CliError::from)?;
            // An anchor's name first: a name is never taken for a key id.
            let id = match policy.anchor_named(&args.key) {
                Some(anchor) => anchor.key_id(),
                // Typed by a person: either case names the same key.
                None => args.key.to_ascii_lowercase().parse::<KeyId>().map_err(|why| {
                    CliError::usage(why).with_help("pass a key id (see `rlp trust list`) or an anchor's name")
                })?,
            };
            create_home()?;
            let (_, newly) = trust::revoke(&path, id).map_err(CliError::from)?;
            let anchor = policy.anchor_for(id).map(|a| a.name.clone());
            let human = match (newly, &anchor) {
                (false, _) => format!("key {id} was already revoked"),
                (true, Some(_)) => format!("revoked key {id} in {}", path.display()),
                (true, None) => format!(
                    "revoked key {id} in {}\n(no anchor uses this key yet; bundles it signs are refused from now on)",
                    path.display()
                ),
            };
            let json =
                json!({"key_id": id.to_string(), "policy": path_json(&path), "newly_revoked": newly, "anchor": anchor});
            let mut out = Printer::stdout();
            out.report(args.format, &human, &json)?;
            out.finish(Exit::Success)
        }
        TrustCommand::Allow(args) => allow(&path, &args),
        TrustCommand::List(args) => list(&path, args.format),
    }
}

/// `rlp trust allow`: the anchor's rule changed as the flags say.
fn allow(path: &std::path::Path, args: &AllowArgs) -> CliResult {
    let replace = if args.caps.is_empty() { None } else { Some(allow_caps_from("--caps", &args.caps)?) };
    let add = capabilities("--add-caps", &args.add_caps)?;
    let remove = capabilities("--remove-caps", &args.remove_caps)?;
    let exec = match (args.exec, args.no_exec) {
        (true, _) => Some(true),
        (_, true) => Some(false),
        _ => None,
    };
    let (_, before, after) = trust::change_rule(path, &args.name, |rule| {
        changed_rule(rule, replace, &add, &remove, exec).map_err(|message| {
            Failure::new(Reason::Usage, message)
                .with_help("replace the whole list with --caps (e.g. --caps kb_read,net:api.example.com)")
        })
    })?;
    let human = format!(
        "anchor `{}` in {}: its bundles may request {} (before: {})",
        args.name,
        path.display(),
        after.describe(),
        before.describe()
    );
    let rule_json =
        |rule: &Rule| json!({"allow_caps": allow_caps_json(&rule.allow_caps), "allow_exec": rule.exec_allowed()});
    let json = json!({
        "anchor": args.name,
        "policy": path_json(path),
        "before": rule_json(&before),
        "after": rule_json(&after),
    });
    let mut out = Printer::stdout();
    out.report(args.format, &human, &json)?;
    out.finish(Exit::Success)
}

/// `rule` with the changes of `rlp trust allow` made, or why they cannot be.
fn changed_rule(
    rule: &Rule,
    replace: Option<AllowCaps>,
    add: &[Capability],
    remove: &[Capability],
    exec: Option<bool>,
) -> Result<Rule, String> {
    let mut allow_caps = replace.unwrap_or_else(|| rule.allow_caps.clone());
    match &mut allow_caps {
        AllowCaps::Any if !remove.is_empty() => {
            return Err("the rule allows any capability, so there is no list to remove from".to_string());
        }
        AllowCaps::Any => {}
        AllowCaps::Only(list) => {
            list.retain(|cap| !remove.contains(cap));
            for cap in add {
                if !list.contains(cap) {
                    list.push(cap.clone());
                }
            }
            if exec == Some(false) {
                list.retain(|cap| *cap != Capability::Exec);
            }
        }
    }
    let listed_exec = matches!(&allow_caps, AllowCaps::Only(list) if list.contains(&Capability::Exec));
    let allow_exec = match exec {
        Some(choice) => Some(choice),
        None if listed_exec => Some(true),
        None => rule.allow_exec,
    };
    Ok(Rule { allow_caps, allow_exec })
}

/// Capability strings of a flag, parsed.
fn capabilities(flag: &str, texts: &[String]) -> Result<Vec<Capability>, CliError> {
    texts
        .iter()
        .map(|text| {
            text.trim().parse::<Capability>().map_err(|why| {
                CliError::usage(format!("{flag}: {why}")).with_help(
                    "capabilities: exec, time, model, net:<host>[:<port>], fs:<dir>, kb_read[:<domain>], kb_write[:<domain>], secrets:<id>",
                )
            })
        })
        .collect()
}

/// `any`, or the list of capabilities a flag names.
fn allow_caps_from(flag: &str, texts: &[String]) -> Result<AllowCaps, CliError> {
    match texts {
        [] => Ok(AllowCaps::Any),
        [any] if any == "any" => Ok(AllowCaps::Any),
        list => Ok(AllowCaps::Only(capabilities(flag, list)?)),
    }
}

fn rule_from(args: &AddArgs) -> Result<Rule, CliError> {
    let allow_caps = allow_caps_from("--allow-caps", &args.allow_caps)?;
    let listed_exec = matches!(&allow_caps, AllowCaps::Only(list) if list.contains(&Capability::Exec));
    Ok(Rule { allow_caps, allow_exec: Some(args.allow_exec || listed_exec) })
}

/// `allow_caps` in JSON reports: `"any"` or the list of capability strings.
fn allow_caps_json(allow_caps: &AllowCaps) -> serde_json::Value {
    match allow_caps {
        AllowCaps::Any => json!("any"),
        AllowCaps::Only(list) => json!(list.iter().map(|c| c.to_string()).collect::<Vec<_>>()),
    }
}

fn list(path: &std::path::Path, format: Format) -> CliResult {
    let policy = TrustPolicy::load(path).map_err(CliError::from)?;
    let mut out = Printer::stdout();
    match format {
        Format::Json => {
            let anchors: Vec<_> = policy
                .anchors
                .iter()
                .map(|a| {
                    let rule = a.effective_rule();
                    json!({
                        "name": a.name,
                        "key": a.key.to_string(),
                        "key_id": a.key_id().to_string(),
                        "allow_caps": allow_caps_json(&rule.allow_caps),
                        "allow_exec": rule.exec_allowed(),
                        "has_rule": a.rule.is_some(),
                        "revoked": policy.is_revoked(a.key_id()),
                    })
                })
                .collect();
            let revoked: Vec<String> = policy.revoked.iter().map(|id| id.to_string()).collect();
            out.json(&json!({"file": path_json(path), "anchors": anchors, "revoked": revoked}))?;
        }
        Format::Human => {
            if policy.anchors.is_empty() {
                out.line(format_args!("no trust anchors in {}", path.display()))?;
            }
            let width = policy.anchors.iter().map(|a| a.name.len()).max().unwrap_or(0);
            for anchor in &policy.anchors {
                let state = if policy.is_revoked(anchor.key_id()) { "revoked" } else { "trusted" };
                out.line(format_args!(
                    "{:width$}  {}  {state:7}  may request {}",
                    anchor.name,
                    anchor.key_id(),
                    anchor.effective_rule().describe()
                ))?;
            }
            let loose: Vec<String> =
                policy.revoked.iter().filter(|id| policy.anchor_for(**id).is_none()).map(|id| id.to_string()).collect();
            if !loose.is_empty() {
                out.line(format_args!("revoked keys: {}", loose.join(", ")))?;
            }
        }
    }
    out.finish(Exit::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(list: &[&str]) -> Vec<Capability> {
        list.iter().map(|c| c.parse().unwrap()).collect()
    }

    #[test]
    fn allow_widens_narrows_and_replaces_a_rule() {
        let dev = Rule { allow_caps: AllowCaps::Only(caps(&["kb_read"])), allow_exec: None };
        let wider = changed_rule(&dev, None, &caps(&["kb_write", "kb_read"]), &[], None).unwrap();
        assert_eq!(wider.allow_caps, AllowCaps::Only(caps(&["kb_read", "kb_write"])));
        let narrower = changed_rule(&wider, None, &[], &caps(&["kb_read"]), Some(false)).unwrap();
        assert_eq!(narrower, Rule { allow_caps: AllowCaps::Only(caps(&["kb_write"])), allow_exec: Some(false) });
        let listed = changed_rule(&narrower, None, &caps(&["exec"]), &[], None).unwrap();
        assert!(listed.exec_allowed(), "exec added to the list is allowed");
        let any = changed_rule(&dev, Some(AllowCaps::Any), &[], &[], Some(true)).unwrap();
        assert_eq!(any.describe(), "any capability");
        let refused = changed_rule(&any, None, &[], &caps(&["kb_read"]), None).unwrap_err();
        assert_eq!(refused, "the rule allows any capability, so there is no list to remove from");
        let no_exec = changed_rule(&listed, None, &[], &[], Some(false)).unwrap();
        assert!(!no_exec.exec_allowed());
        assert_eq!(no_exec.allow_caps, AllowCaps::Only(caps(&["kb_write"])));
    }
}
