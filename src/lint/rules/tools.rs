//! RLP202, RLP208, RLP210, RLP213: checks across one tool's fields or across tools.

use std::collections::HashMap;

use crate::bundle::LoadedBundle;
use crate::bundle::capability::{Capability, SecretId};
use crate::bundle::diag::{At, Code, Diagnostics, Finding};
use crate::bundle::pointer::Pointer;
use crate::bundle::tools::{TOOLS_FILE, Tool, Transport, secret_refs};

pub(super) fn check(bundle: &LoadedBundle, out: &mut Vec<Finding>) {
    let mut diags = Diagnostics::new(bundle.display_path(TOOLS_FILE));
    let mut first_seen: HashMap<&str, usize> = HashMap::new();
    for (i, tool) in bundle.tool_list().iter().enumerate() {
        if !tool.id.is_empty()
            && let Some(first) = first_seen.insert(&tool.id, i)
        {
            first_seen.insert(&tool.id, first);
            diags
                .report(
                    Code::ToolIdDuplicate,
                    At::Value(tool.at.key("id")),
                    format!("tool id `{}` is already used by tool #{first}", tool.id),
                )
                .help("give each tool its own id; frames and traces name tools by id");
        }
        if let Some(Transport::Http { url, headers, .. }) = &tool.transport {
            if let Some(url) = url {
                check_placeholders(bundle, tool, url.placeholders(), &mut diags);
            }
            check_header_secrets(tool, headers, &mut diags);
        }
        check_confirmation(tool, &mut diags);
    }
    out.extend(diags.into_findings());
}

fn check_placeholders<'a>(
    bundle: &LoadedBundle,
    tool: &Tool,
    names: impl Iterator<Item = &'a str>,
    diags: &mut Diagnostics,
) {
    let Some(schema) = tool.input_schema.as_ref().and_then(|s| bundle.resolve_schema(tool, s)) else { return };
    let properties = schema.get("properties").and_then(|p| p.as_object());
    for name in names {
        if !properties.is_some_and(|p| p.contains_key(name)) {
            diags
                .report(
                    Code::UrlPlaceholderUnknown,
                    At::Value(tool.at.key("transport").key("url")),
                    format!("URL placeholder `{{{name}}}` names no property of the input schema of `{}`", tool.id),
                )
                .help(format!(
                    "add `\"{name}\"` to the input schema's `properties` (and `required`), or fix the placeholder"
                ));
        }
    }
}

fn check_header_secrets(tool: &Tool, headers: &[(String, String)], diags: &mut Diagnostics) {
    let owner = Owner { named: format!("tool `{}`", tool.id), kind: "tool", secrets: &tool.secrets };
    for (name, value) in headers {
        let at = tool.at.key("transport").key("headers").key(name);
        for id in secret_refs(value).unwrap_or_default() {
            check_secret_ref(&owner, &at, &format!("header `{name}`"), &id, diags);
        }
    }
}

/// Who lists the secrets a `${secret:<id>}` may use: a tool or a server.
pub(super) struct Owner<'a> {
    /// As messages name it: ``tool `mail.send` ``.
    pub named: String,
    /// `tool` or `server`.
    pub kind: &'static str,
    /// Its `secrets`.
    pub secrets: &'a [(Pointer, SecretId)],
}

/// RLP211 or RLP210 for one `${secret:<id>}` in the value at `at`, which
/// messages call `site`.
pub(super) fn check_secret_ref(owner: &Owner<'_>, at: &Pointer, site: &str, id: &str, diags: &mut Diagnostics) {
    let at = At::Value(at.clone());
    if let Err(why) = id.parse::<SecretId>() {
        diags
            .report(Code::SecretIdInvalid, at, format!("{site}: {why}"))
            .help("secret ids look like `runloop/mail/smtp_api_key`");
    } else if !owner.secrets.iter().any(|(_, s)| s.as_str() == id) {
        diags
            .report(
                Code::HeaderSecretUndeclared,
                at,
                format!("{site} uses secret `{id}`, which {} does not list in `secrets`", owner.named),
            )
            .help(format!("add `\"{id}\"` to the {}'s `secrets`", owner.kind));
    }
}

fn check_confirmation(tool: &Tool, diags: &mut Diagnostics) {
    if tool.requires_confirmation.is_some() {
        return;
    }
    let reaches_network = matches!(tool.transport, Some(Transport::Http { .. }))
        || tool.capabilities.iter().any(|(_, c)| matches!(c, Capability::Net(_)));
    let runs_with_secrets = matches!(tool.transport, Some(Transport::Exec { .. })) && !tool.secrets.is_empty();
    if reaches_network || runs_with_secrets {
        let why = if reaches_network { "reaches the network" } else { "runs a command with secrets" };
        diags
            .report(Code::ConfirmationAdvised, At::Value(tool.at.key("id")), format!("tool `{}` {why} without `requires_confirmation`", tool.id))
            .help("set `\"requires_confirmation\": true` so an operator approves each call, or `false` to record that it needs none");
    }
}
