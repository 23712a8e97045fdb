//! What starting a bridged server takes, worked out before it starts
//! ([`Prepared`]): its program resolved and checked and its kernel sandbox
//! planned (stdio), or its endpoint (HTTP); then [`Prepared::connect`]
//! starts it with its secrets filled in.

use std::time::Duration;

use crate::bundle::command::{self as bundle_command};
use crate::bundle::servers::{Server, ServerTransport};
use crate::process::server::{ServerProcess, ServerSpec};
use crate::runtime::exec::check_command;
use crate::runtime::http::fill_secrets;
use crate::runtime::mcp::session::Connect;
use crate::sandbox::{Grants, SandboxMode, SandboxPlan};

/// How `server` is reached, checked, outside a call (a refusal is said in
/// words): its stdio program must exist and, under `mode`, be confinable
/// with the server's grants.
pub(crate) fn prepare<'s>(
    server: &'s Server,
    root: &std::path::Path,
    mode: SandboxMode,
) -> Result<Prepared<'s>, String> {
    match &server.transport {
        Some(ServerTransport::Stdio { programs, args, env }) => {
            let here = bundle_command::this_platform();
            let command = programs
                .for_platform(&here)
                .ok_or_else(|| format!("server `{}` carries no program for this platform ({here})", server.name))?;
            let program = check_command(&bundle_command::resolve(command, root)).map_err(|e| e.to_string())?;
            let plan = SandboxPlan::new(mode, &Grants::of_server(server, &program, root));
            if let Some(why) = plan.linked_grant() {
                return Err(why.to_string());
            }
            if let Some(why) = plan.refusal() {
                return Err(format!("the sandbox is required and this kernel cannot confine the server: {why}"));
            }
            Ok(Prepared::Stdio { program, args, env, plan: Box::new(plan) })
        }
        Some(ServerTransport::Http { url: Some(url), headers }) => {
            Ok(Prepared::Http { url: url.as_str().to_string(), headers })
        }
        _ => Err(format!("server `{}` has no usable `command` or `url`", server.name)),
    }
}

/// How long `server` may take to start and finish the handshake.
pub(crate) fn startup(server: &Server) -> Duration {
    Duration::from_millis(server.startup_timeout_ms)
}

/// The `file://` URIs of the server's `fs:` grants: its answer to `roots/list`.
pub(crate) fn roots(server: &Server) -> Vec<String> {
    let fs_roots = server.capabilities.iter().filter_map(|(_, cap)| match cap {
        crate::bundle::capability::Capability::Fs(dir) => crate::bundle::capability::expand_home(dir).ok(),
        _ => None,
    });
    fs_roots.map(|dir| format!("file://{}", dir.display())).collect()
}

/// How a session is reached, checked before it is started.
pub(crate) enum Prepared<'a> {
    /// A stdio server: its program, arguments, environment and sandbox.
    Stdio { program: std::path::PathBuf, args: &'a [String], env: &'a [(String, String)], plan: Box<SandboxPlan> },
    /// A Streamable HTTP server: its URL and headers.
    Http { url: String, headers: &'a [(String, String)] },
}

impl Prepared<'_> {
    /// Starts the server (stdio) or names the endpoint (HTTP), its values'
    /// secrets filled in.
    pub(crate) fn connect(
        &self,
        root: &std::path::Path,
        secrets: &[(crate::bundle::capability::SecretId, crate::secrets::SecretValue)],
    ) -> Result<Connect, String> {
        match self {
            Prepared::Stdio { program, args, env, plan } => {
                let args: Vec<String> = args
                    .iter()
                    .enumerate()
                    .map(|(i, arg)| {
                        fill_secrets(&format!("argument {}", i + 1), &bundle_command::resolve(arg, root), secrets)
                            .map(|(v, _)| v)
                    })
                    .collect::<Result<_, _>>()?;
                let env: Vec<(String, String)> = env
                    .iter()
                    .map(|(name, value)| Ok((name.clone(), fill_secrets(&format!("env `{name}`"), value, secrets)?.0)))
                    .collect::<Result<_, String>>()?;
                let env: Vec<(String, &str)> = env.iter().map(|(n, v)| (n.clone(), v.as_str())).collect();
                plan.warn_once();
                let session = uuid::Uuid::now_v7().to_string();
                let spec =
                    ServerSpec { command: program, args: &args, env: &env, sandbox: Some(plan), session: &session };
                let (process, pipes) =
                    ServerProcess::start(&spec).map_err(|e| format!("cannot start `{}`: {e}", program.display()))?;
                Ok(Connect::Stdio(Box::new(process), pipes))
            }
            Prepared::Http { url, headers } => {
                let headers = headers
                    .iter()
                    .map(|(name, value)| {
                        Ok((name.clone(), fill_secrets(&format!("header `{name}`"), value, secrets)?.0))
                    })
                    .collect::<Result<_, String>>()?;
                Ok(Connect::Http { url: url.clone(), headers })
            }
        }
    }
}
