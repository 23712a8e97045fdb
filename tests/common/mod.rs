//! Helpers shared by the integration tests. Each test crate compiles this
//! module on its own and uses only some of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;
use serde_json::Value;

/// Guards against a hang; not a timing assertion.
pub const HANG_GUARD: Duration = Duration::from_secs(60);

/// A tools.json entry `id` over `transport`: objects in, anything out, no
/// confirmation.
pub fn tool(id: &str, transport: Value) -> Value {
    serde_json::json!({
        "id": id,
        "description": format!("test tool {id}"),
        "transport": transport,
        "input_schema": {"type": "object"},
        "result_schema": {},
        "requires_confirmation": false,
    })
}

/// A temporary folder holding a runtime home (`home/`), bundles
/// (`agents/`) and tool scripts; `rlp` runs in it with a clean environment.
pub struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    pub fn new() -> Self {
        Sandbox { dir: tempfile::tempdir().unwrap() }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn home(&self) -> PathBuf {
        self.path().join("home")
    }

    pub fn ledger_path(&self) -> PathBuf {
        self.home().join("pog/events.sqlite")
    }

    /// Writes (or rewrites) bundle `agents/<name>` with a manifest listing every file.
    pub fn bundle(&self, name: &str, tools: Value, caps: &str) -> PathBuf {
        write_bundle(&self.path().join("agents"), name, tools, caps)
    }

    /// Writes an executable shell script and returns its absolute path.
    pub fn script(&self, name: &str, body: &str) -> String {
        use std::os::unix::fs::PermissionsExt;
        let path = self.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.display().to_string()
    }

    /// `rlp --home <home>`, in the sandbox, with no `RUNLOOP_*` variable of
    /// the caller's environment and no system config of the sandbox's.
    pub fn rlp(&self) -> Command {
        let mut cmd = Command::cargo_bin("rlp").unwrap();
        cmd.current_dir(self.path()).arg("--home").arg(self.home()).timeout(HANG_GUARD);
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("RUNLOOP_") {
                cmd.env_remove(name);
            }
        }
        cmd.env("RUNLOOP_SYSTEM_CONFIG", self.path().join("no-system-config.toml"));
        cmd
    }

    /// `rlp tools call <bundle> <tool> --args <args>`.
    pub fn call(&self, bundle: &Path, tool: &str, args: Value) -> Command {
        let mut cmd = self.rlp();
        cmd.args(["tools", "call"]).arg(bundle).arg(tool).arg("--args").arg(args.to_string());
        cmd
    }

    /// Every event of the ledger, in order.
    pub fn events(&self) -> Vec<rlp::event::Event> {
        let ledger = rlp::ledger::SqliteLedger::open_existing(&self.ledger_path()).unwrap();
        let mut events = Vec::new();
        ledger
            .for_each_event(|e| {
                events.push(e);
                std::ops::ControlFlow::Continue(())
            })
            .unwrap();
        events
    }
}

/// Whether process `pid` exists and has not exited: a zombie waiting to be
/// reaped (by init, once its parent is gone) counts as gone.
pub fn process_is_running(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(") ").is_some_and(|(_, state)| !state.starts_with('Z')))
}

/// When process `pid` started (clock ticks since boot), if it exists: tells
/// a process from a later one that reused its pid.
pub fn process_start_time(pid: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(") ")?;
    // Field 22 of stat; `rest` starts at field 3.
    rest.split_ascii_whitespace().nth(19)?.parse().ok()
}

/// `len` pseudo-random bytes (xorshift64 from `seed`): incompressible,
/// rarely valid UTF-8, and the same on every run.
pub fn noise(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        })
        .collect()
}

/// Writes (or rewrites) bundle `<agents>/<name>`: `tools` as tools.json v1,
/// `caps` as policy.caps, and a manifest listing both with their digests.
pub fn write_bundle(agents: &std::path::Path, name: &str, tools: serde_json::Value, caps: &str) -> std::path::PathBuf {
    let dir = agents.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let tools_text = serde_json::to_string_pretty(&serde_json::json!({"version": 1, "tools": tools})).unwrap();
    std::fs::write(dir.join("tools.json"), &tools_text).unwrap();
    std::fs::write(dir.join("policy.caps"), caps).unwrap();
    let entry = |path: &str, text: &str| {
        format!("path = \"{path}\"\nblake3 = \"{}\"\nsize = {}\n", blake3::hash(text.as_bytes()).to_hex(), text.len())
    };
    let manifest = format!(
        "[agent]\nname = \"{name}\"\nversion = \"0.1.0\"\n\n[artifacts.tools]\n{}version = 1\n\n[artifacts.caps]\n{}",
        entry("tools.json", &tools_text),
        entry("policy.caps", caps)
    );
    std::fs::write(dir.join("manifest.toml"), manifest).unwrap();
    dir
}
