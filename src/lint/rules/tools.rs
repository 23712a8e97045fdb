//! RLP202, RLP208, RLP210, RLP213: checks across one tool's fields or across tools.

use std::collections::HashMap;

use crate::bundle::LoadedBundle;
use crate::bundle::capability::Capability;
use crate::bundle::diag::{At, Code, Diagnostics, Finding};
use crate::bundle::tools::{TOOLS_FILE, Tool, Transport, header_secret_refs};

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
    for (name, value) in headers {
        let at = At::Value(tool.at.key("transport").key("headers").key(name));
        for id in header_secret_refs(value).unwrap_or_default() {
            if let Err(why) = id.parse::<crate::bundle::capability::SecretId>() {
                diags
                    .report(Code::SecretIdInvalid, at.clone(), format!("header `{name}`: {why}"))
                    .help("secret ids look like `runloop/mail/smtp_api_key`");
            } else if !tool.secrets.iter().any(|(_, s)| s.as_str() == id) {
                diags
                    .report(
                        Code::HeaderSecretUndeclared,
                        at.clone(),
                        format!(
                            "header `{name}` uses secret `{id}`, which tool `{}` does not list in `secrets`",
                            tool.id
                        ),
                    )
                    .help(format!("add `\"{id}\"` to the tool's `secrets`"));
            }
        }
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
