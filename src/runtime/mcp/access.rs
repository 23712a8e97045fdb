//! A bridged server reached outside a tool call, for what `rlp serve`
//! passes on of it besides its tools (resources, prompts, completions): a
//! server is reachable so only when its tools would be — the bundle admitted
//! by the trust policy, every capability the server needs (its grants,
//! `exec` or its URL's host, its secrets) granted by the effective policy —
//! and its session is the one its tool calls share, started the same way
//! (the kernel sandbox with the server's grants, its secrets from the
//! runtime's providers).

use std::sync::Arc;

use crate::bundle::servers::Server;
use crate::runtime::Runtime;
use crate::runtime::mcp::launch;
use crate::runtime::mcp::pin::ToolChange;
use crate::runtime::mcp::session::{Session, Started};
use crate::runtime::scrub::Scrubber;
use crate::secrets::Resolution;

impl Runtime {
    /// The servers whose resources and prompts may be offered, in
    /// tools.json order: those the effective policy grants every capability
    /// of (whatever the trust policy says; it is asked at each request);
    /// none under a replay.
    pub fn exposed_servers(&self) -> Vec<&Server> {
        // A replay runs nothing: no server is started for what it offers.
        if self.recording().is_some() {
            return Vec::new();
        }
        let policy = &self.policy().effective;
        self.servers().iter().filter(|server| server.required_capabilities().iter().all(|c| policy.allows(c))).collect()
    }

    /// The session with the exposed server `name`, started if need be; why
    /// not, in words (secret values never among them).
    pub(crate) fn server_session(&self, name: &str) -> Result<Arc<Session>, String> {
        let server = self
            .exposed_servers()
            .into_iter()
            .find(|server| server.name == name)
            .ok_or_else(|| format!("server `{name}` is not one the bundle's policy exposes"))?;
        if let Err(failure) = self.gate().check() {
            return Err(format!("bundle `{}` is refused by the trust policy: {}", self.agent(), failure.message));
        }
        if let Some(session) = self.bridge().running(name) {
            return Ok(session);
        }
        let secrets = self.server_secrets(server)?;
        let scrubber = Scrubber::new(secrets.iter().map(|(_, value)| value));
        let root = self.root();
        let prepared = launch::prepare(server, root, self.options().config.sandbox.value)?;
        let started = self.bridge().session(
            name,
            || {
                let sandbox = match &prepared {
                    launch::Prepared::Stdio { plan, .. } => Some(plan.record().clone()),
                    launch::Prepared::Http { .. } => None,
                };
                let started = Started { sandbox, command: None, scrubber: scrubber.clone() };
                prepared.connect(root, &secrets).map(|connected| (connected, started))
            },
            launch::roots(server),
            launch::startup(server),
        );
        started.map_err(|why| scrubber.scrub_string(&format!("cannot start the MCP server `{name}`: {why}")))
    }

    /// The values of the secrets `server` declares, from the runtime's
    /// providers; a missing one is named.
    fn server_secrets(
        &self,
        server: &Server,
    ) -> Result<Vec<(crate::bundle::capability::SecretId, crate::secrets::SecretValue)>, String> {
        let resolver = &self.options().secrets;
        server
            .secrets
            .iter()
            .map(|(_, id)| match resolver.resolve(id) {
                Ok(Resolution::Found { value, .. }) => Ok((id.clone(), value)),
                Ok(Resolution::Missing { why, .. }) => {
                    Err(format!("server `{}` needs secret `{id}`, which is not available ({why})", server.name))
                }
                Err(e) => Err(format!("server `{}` needs secret `{id}`: {}", server.name, e.message)),
            })
            .collect()
    }
}

impl Runtime {
    /// How the exposed server `name`'s tools now differ from the bundle's
    /// pins of them (the server listed again): `{"added": [names on the
    /// server], "removed": [tool ids], "changed": [{"tool", "parts"}]}`.
    pub(crate) fn server_tool_changes(&self, name: &str) -> Result<serde_json::Value, String> {
        let session = self.server_session(name)?;
        let server = self.server(name).ok_or_else(|| format!("no server `{name}`"))?;
        let definitions: Vec<serde_json::Value> =
            session.definitions(launch::startup(server))?.values().map(|listed| listed.definition.clone()).collect();
        let tools: Vec<crate::bundle::tools::Tool> =
            self.tool_ids().iter().filter_map(|id| self.tool(id)).cloned().collect();
        let (mut added, mut removed, mut changed) = (Vec::new(), Vec::new(), Vec::new());
        for change in crate::runtime::mcp::pin::compare(name, &tools, &definitions) {
            match change {
                ToolChange::Added(tool) => added.push(tool),
                ToolChange::Gone(tool) => removed.push(tool.id.clone()),
                ToolChange::Changed(tool, parts) => changed.push(serde_json::json!({"tool": tool.id, "parts": parts})),
            }
        }
        added.sort();
        Ok(serde_json::json!({"added": added, "removed": removed, "changed": changed}))
    }
}
