//! Helpers shared by the integration tests. Each test crate compiles this
//! module on its own and uses only some of it.
#![allow(dead_code)]

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
