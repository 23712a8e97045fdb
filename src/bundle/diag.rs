//! Findings: what is wrong, where, and how to fix it.
//!
//! The rule catalog lives here because loading a bundle already produces
//! findings (syntax, types, unknown fields); `lint` adds the semantic rules on
//! top and renders them. Every code is stable: scripts and CI match on it.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::bundle::pointer::Pointer;

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Information, never a problem (where a shared schema was found).
    Note,
    /// Worth a look; fails only with `--deny-warnings`.
    Warning,
    /// The bundle is invalid and will not be loaded.
    Error,
}

impl Severity {
    /// The lower-case name used in every output format.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Note => "note",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

macro_rules! rule_catalog {
    ($( $variant:ident = $code:literal, $name:literal, $severity:ident, $summary:literal; )*) => {
        /// A stable rule code. See `docs/lint.md` for each one.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Code { $( #[doc = $summary] $variant, )* }

        impl Code {
            /// Every rule, in code order.
            pub const ALL: &'static [Code] = &[$(Code::$variant),*];

            /// The code as printed, e.g. `RLP201`.
            pub fn as_str(self) -> &'static str {
                match self { $(Code::$variant => $code,)* }
            }

            /// The rule's kebab-case name, e.g. `tool-id-invalid`.
            pub fn name(self) -> &'static str {
                match self { $(Code::$variant => $name,)* }
            }

            /// The severity the rule reports with.
            pub fn severity(self) -> Severity {
                match self { $(Code::$variant => Severity::$severity,)* }
            }

            /// One sentence on what the rule catches.
            pub fn summary(self) -> &'static str {
                match self { $(Code::$variant => $summary,)* }
            }
        }
    };
}

rule_catalog! {
    Syntax = "RLP001", "syntax-error", Error, "A file is not valid TOML or JSON.";
    DuplicateKey = "RLP002", "duplicate-key", Error, "A key appears twice in the same table or object.";
    WrongType = "RLP003", "wrong-type", Error, "A value has the wrong type (for example a string where a list is expected).";
    UnknownField = "RLP004", "unknown-field", Warning, "A key this version of rlp does not know; it is kept but ignored.";
    UnsupportedVersion = "RLP005", "unsupported-version", Error, "A format version this rlp cannot read.";
    MissingField = "RLP006", "missing-field", Error, "A required key is absent.";
    InvalidValue = "RLP007", "invalid-value", Error, "A value is out of range or not of the required form.";
    Unreadable = "RLP008", "unreadable-file", Error, "A bundle file cannot be read (missing, not UTF-8, too large).";
    AgentNameMismatch = "RLP101", "agent-name-mismatch", Error, "`[agent].name` differs from the bundle's folder name.";
    AgentNameInvalid = "RLP102", "agent-name-invalid", Error, "`[agent].name` does not match `^[a-z][a-z0-9_]*$`.";
    AgentVersionInvalid = "RLP103", "agent-version-invalid", Error, "`[agent].version` is not a SemVer version.";
    AgentEntryInvalid = "RLP104", "agent-entry-invalid", Error, "`[agent].kind` and its entry binary disagree.";
    AgentDescriptionMultiline = "RLP105", "agent-description-multiline", Warning, "`[agent].description` spans more than one line.";
    ToolIdInvalid = "RLP201", "tool-id-invalid", Error, "A tool id does not match `^[a-z][a-z0-9_]*(\\.[a-z][a-z0-9_]*)*$`.";
    ToolIdDuplicate = "RLP202", "tool-id-duplicate", Error, "Two tools share one id.";
    ToolDescriptionEmpty = "RLP203", "tool-description-empty", Error, "A tool has no description, or an empty one.";
    ExecCommandNotAbsolute = "RLP204", "exec-command-not-absolute", Error, "An exec transport's `command` is not an absolute path (nor, for a stdio server, `${bundle}/<path>`).";
    HttpUrlInvalid = "RLP205", "http-url-invalid", Error, "An http transport's `url` is not an absolute http(s) URL template, or a server's `url` not an http(s) URL.";
    HttpMethodInvalid = "RLP206", "http-method-invalid", Error, "An http transport's `method` is not a supported HTTP method.";
    UrlPlaceholderInAuthority = "RLP207", "url-placeholder-in-authority", Error, "A `{placeholder}` sits in the URL's scheme, host or port.";
    UrlPlaceholderUnknown = "RLP208", "url-placeholder-unknown", Error, "A URL `{placeholder}` names no property of the tool's `input_schema`.";
    HeaderInvalid = "RLP209", "header-invalid", Error, "A header name or value is malformed or contains a control character.";
    HeaderSecretUndeclared = "RLP210", "header-secret-undeclared", Error, "A `${secret:<id>}` in a header (or a server's `env` or `args`) is not in the tool's (the server's) `secrets`.";
    SecretIdInvalid = "RLP211", "secret-id-invalid", Error, "A secret id is not of the form `runloop/<scope>/<name>`.";
    CapabilityInvalid = "RLP212", "capability-invalid", Error, "A capability string is malformed.";
    ConfirmationAdvised = "RLP213", "confirmation-advised", Warning, "A tool that reaches the network, or runs a command with secrets, does not set `requires_confirmation`.";
    SecretEnvNameShared = "RLP214", "secret-env-name-shared", Warning, "Two secret ids shared one environment variable name in earlier versions of rlp; each now has its own.";
    SandboxGrantUndeclared = "RLP215", "sandbox-grant-undeclared", Warning, "An exec tool declares no `fs:` (or no `net:`) capability while the policy grants folders (hosts) or its arguments name one; the sandbox keeps it from them.";
    SandboxLimitOnHttpTool = "RLP216", "sandbox-limit-on-http-tool", Warning, "`max_memory_bytes` or `max_processes` is set on a tool that is not an exec tool; only exec tools run under the sandbox.";
    CoreToolsMissing = "RLP217", "core-tools-missing", Warning, "A bundle with more than 30 tools (`rlp lint --core-threshold`) marks none `\"discoverability\": \"core\"`.";
    CoreToolUncategorised = "RLP218", "core-tool-uncategorised", Warning, "A core tool has no `category`.";
    ServerUnknown = "RLP219", "server-unknown", Error, "An mcp transport's `server` names no entry of `servers`.";
    ServerNotGranted = "RLP220", "server-not-granted", Error, "A server needs a capability or secret that `policy.caps` does not grant.";
    ServerNeedUndeclared = "RLP221", "server-need-undeclared", Error, "A tool does not declare a capability or secret its server needs; every tool of a server needs them.";
    ServerPlainHttp = "RLP222", "server-plain-http", Error, "A server's `url` is plain `http://` to a host other than loopback.";
    DefinitionUnpinned = "RLP223", "definition-unpinned", Warning, "An mcp tool has no `definition_blake3` pin of its server's definition.";
    ServerUnused = "RLP224", "server-unused", Warning, "A server that no tool uses.";
    BundleProgramInvalid = "RLP225", "bundle-program-invalid", Error, "A `${bundle}/<path>` command names no file of the bundle, a file the manifest does not list, or one that is not executable.";
    PlatformUnknown = "RLP227", "platform-unknown", Error, "A key of an exec transport's `platforms` is not a platform rlp knows (`linux-x86_64`, `macos-aarch64`, …).";
    CommandInsideBundle = "RLP226", "command-inside-bundle", Warning, "An absolute `command` points inside the bundle's own folder; written `${bundle}/<path>` it would travel with the bundle.";
    SchemaMissing = "RLP301", "schema-missing", Error, "A tool has no `input_schema` or `result_schema`.";
    SchemaInvalid = "RLP302", "schema-invalid", Error, "A schema is not a valid JSON Schema (2020-12).";
    SchemaRefUnresolved = "RLP303", "schema-ref-unresolved", Error, "A `$ref` names a schema that exists neither in the bundle nor in a shared registry.";
    SchemaRefRemote = "RLP304", "schema-ref-remote", Error, "A `$ref` points outside the bundle (http, file, …); rlp never fetches schemas.";
    SharedSchemaUnpinned = "RLP305", "shared-schema-unpinned", Error, "A `schema:<id>` found in a shared registry has no `[shared_schemas.\"<id>\"]` pin in manifest.toml.";
    SharedSchemaChanged = "RLP306", "shared-schema-changed", Error, "A shared registry's `<id>.json` differs from the size and digest manifest.toml pins.";
    SharedSchemaResolved = "RLP307", "shared-schema-resolved", Note, "Where a `schema:<id>` the bundle does not hold was found: the shared registry file used, and any it shadows.";
    CapabilityNotGranted = "RLP401", "capability-not-granted", Error, "A tool needs a capability that `policy.caps` does not grant.";
    SecretNotGranted = "RLP402", "secret-not-granted", Error, "A tool uses a secret that `policy.caps` does not grant.";
    PolicyValueInvalid = "RLP403", "policy-value-invalid", Error, "A grant in `policy.caps` is malformed (relative path, bad host, bad secret id).";
    ArtifactMissing = "RLP501", "artifact-missing", Error, "A file listed in the manifest is absent.";
    ArtifactUnlisted = "RLP502", "artifact-unlisted", Error, "A file in the bundle is not listed in the manifest.";
    ArtifactSizeMismatch = "RLP503", "artifact-size-mismatch", Error, "A file's size differs from the manifest.";
    ArtifactDigestMismatch = "RLP504", "artifact-digest-mismatch", Error, "A file's BLAKE3 digest differs from the manifest.";
    ArtifactPlaceholderDigest = "RLP505", "artifact-placeholder-digest", Warning, "An artifact carries the all-zero placeholder digest.";
    NonRegularFile = "RLP506", "non-regular-file", Error, "The bundle holds a symlink, hard link, device, FIFO or socket.";
    ArtifactPathInvalid = "RLP507", "artifact-path-invalid", Error, "An artifact path is absolute, has `..`, uses characters outside `[A-Za-z0-9._-]`, or is too long for an archive.";
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where in a file a finding points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum At {
    /// The file as a whole (a missing or unreadable file).
    File,
    /// The value at this pointer.
    Value(Pointer),
    /// The key of the entry at this pointer (an unknown or duplicate key).
    Key(Pointer),
    /// A byte range, for problems found before there is a tree (syntax).
    Span(Range<usize>),
}

/// One problem in one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The rule that fired.
    pub code: Code,
    /// Its severity (the rule's, unless a caller changed it).
    pub severity: Severity,
    /// The file, as the user named it (bundle path joined with the file name).
    pub file: PathBuf,
    /// Where in the file.
    pub at: At,
    /// One line: what is wrong.
    pub message: String,
    /// One line: how to fix it, where there is a fix to suggest.
    pub help: Option<String>,
    /// The file a `schema:<id>` resolved to, for findings about one that
    /// comes from a shared registry.
    pub resolved: Option<PathBuf>,
}

/// Collects findings for one file.
#[derive(Debug)]
pub struct Diagnostics {
    file: PathBuf,
    findings: Vec<Finding>,
}

impl Diagnostics {
    /// An empty collection for `file`.
    pub fn new(file: impl Into<PathBuf>) -> Self {
        Self { file: file.into(), findings: Vec::new() }
    }

    /// The file these findings are about.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Records a finding with the rule's default severity; returns it so a
    /// hint can be attached with [`Finding::help`].
    pub fn report(&mut self, code: Code, at: At, message: impl Into<String>) -> &mut Finding {
        self.findings.push(Finding {
            code,
            severity: code.severity(),
            file: self.file.clone(),
            at,
            message: message.into(),
            help: None,
            resolved: None,
        });
        self.findings.last_mut().expect("just pushed")
    }

    /// Whether a finding already points at `at`: a value refused while
    /// parsing (a TOML datetime) is not reported again by the field readers.
    pub fn reported_at(&self, at: &At) -> bool {
        self.findings.iter().any(|f| f.at == *at)
    }

    /// Whether any error (not warning) was recorded.
    pub fn has_errors(&self) -> bool {
        self.findings.iter().any(|f| f.severity == Severity::Error)
    }

    /// The findings, in the order they were reported.
    pub fn into_findings(self) -> Vec<Finding> {
        self.findings
    }
}

impl Finding {
    /// Attaches a fix hint.
    pub fn help(&mut self, help: impl Into<String>) -> &mut Self {
        self.help = Some(help.into());
        self
    }

    /// Names the shared registry file a `schema:<id>` resolved to.
    pub fn resolved(&mut self, path: impl Into<PathBuf>) -> &mut Self {
        self.resolved = Some(path.into());
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_well_formed() {
        let mut seen = std::collections::HashSet::new();
        for code in Code::ALL {
            assert!(seen.insert(code.as_str()), "duplicate {code}");
            assert!(seen.insert(code.name()), "duplicate name {}", code.name());
            assert!(code.as_str().starts_with("RLP") && code.as_str().len() == 6);
        }
    }
}
