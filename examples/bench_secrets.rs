//! Cost of resolving one secret, per provider, measured in one run (see
//! bench/secrets.sh): `env`, the age-encrypted `file` store holding 1,000
//! secrets, and `cmd` running a trivial command (`/bin/echo`).
//!
//! Each provider is set up in a home of its own and asked through the same
//! [`Providers`] the runtime asks, once (for the file store: the decryption
//! of the whole store) and then `--iterations` times more.
//!
//! Usage: `bench_secrets [--iterations N] [--entries N]`. Prints a Markdown
//! report on stdout.

// An example program: it prints what it finds and runs what it measures.
#![allow(unreachable_pub, clippy::print_stdout, clippy::print_stderr, clippy::disallowed_methods)]

use std::io::Write;
use std::path::Path;
use std::str::FromStr;
use std::time::{Duration, Instant};

use age::secrecy::ExposeSecret;
use rlp::bundle::capability::SecretId;
use rlp::home::Home;
use rlp::secrets::{Resolution, SecretResolver};

fn main() {
    let mut iterations = 2000usize;
    let mut entries = 1000usize;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().and_then(|v| v.parse().ok()).expect("a number after each flag");
        match flag.as_str() {
            "--iterations" => iterations = value,
            "--entries" => entries = value,
            other => panic!("unknown flag {other}"),
        }
    }
    let id = SecretId::from_str(&format!("runloop/bench/s{}", entries / 2)).unwrap();
    let rows = [
        ("env", measure(&env_home(&id), &id, iterations)),
        ("file", measure(&file_home(entries), &id, iterations)),
        ("cmd", measure(&cmd_home(), &id, iterations)),
    ];
    let env_per_call = rows[0].1.1;
    println!("| provider | first resolution | per resolution after it (mean of {iterations}) | over `env` |");
    println!("|---|---:|---:|---:|");
    for (name, (first, per_call)) in rows {
        let label = match name {
            "file" => format!("`file` ({entries} secrets)"),
            "cmd" => "`cmd` (`/bin/echo value-{id}`)".to_string(),
            _ => "`env`".to_string(),
        };
        println!(
            "| {label} | {} | {} | {} |",
            shown(first),
            shown(per_call),
            shown(per_call.saturating_sub(env_per_call))
        );
    }
    HOMES.lock().unwrap().clear();
}

/// The first resolution, and the mean of `iterations` more.
fn measure(home: &Home, id: &SecretId, iterations: usize) -> (Duration, Duration) {
    let providers = rlp::cli::secret_providers(home.clone()).expect("the bench home's config");
    let resolve = || match providers.resolve(id).expect("a provider answers") {
        Resolution::Found { value, .. } => assert!(!value.expose().is_empty()),
        Resolution::Missing { why, .. } => panic!("not found: {why}"),
    };
    let start = Instant::now();
    resolve();
    let first = start.elapsed();
    let start = Instant::now();
    for _ in 0..iterations {
        resolve();
    }
    (first, start.elapsed() / iterations as u32)
}

fn shown(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us >= 1000.0 { format!("{:.2} ms", us / 1000.0) } else { format!("{us:.1} µs") }
}

/// A fresh home whose config.toml says `config` (removed when the
/// program ends).
fn home_with(config: &str) -> Home {
    let root = tempfile::Builder::new().prefix("rlp-bench-secrets-").tempdir().unwrap();
    std::fs::write(root.path().join("config.toml"), config).unwrap();
    let home = Home::new(root.path());
    HOMES.lock().unwrap().push(root);
    home
}

/// The homes made, removed at the end of `main`.
static HOMES: std::sync::Mutex<Vec<tempfile::TempDir>> = std::sync::Mutex::new(Vec::new());

fn env_home(id: &SecretId) -> Home {
    // SAFETY: set before any thread of this program starts.
    unsafe { std::env::set_var(id.env_var(), "value-from-the-environment") };
    home_with("[secrets]\nproviders = [\"env\"]\n")
}

/// A store of `entries` secrets of 40 bytes each, written as `rlp secrets
/// set` writes it (the document encrypted to a new X25519 identity).
fn file_home(entries: usize) -> Home {
    let home = home_with("[secrets]\nproviders = [\"file\"]\n");
    let dir = home.secrets_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let identity = age::x25519::Identity::generate();
    write_private(&dir.join("identity.txt"), format!("{}\n", identity.to_string().expose_secret()).as_bytes());
    let secrets: serde_json::Map<String, serde_json::Value> = (0..entries)
        .map(|i| (format!("runloop/bench/s{i}"), serde_json::json!({"value": format!("{i:040}"), "changed_ms": 1})))
        .collect();
    let plain = serde_json::to_vec(&serde_json::json!({"v": 1, "secrets": secrets})).unwrap();
    let recipient = identity.to_public();
    let encryptor = age::Encryptor::with_recipients(std::iter::once(&recipient as &dyn age::Recipient)).unwrap();
    let mut out = Vec::new();
    let mut writer = encryptor.wrap_output(&mut out).unwrap();
    writer.write_all(&plain).unwrap();
    writer.finish().unwrap();
    write_private(&dir.join("store.age"), &out);
    home
}

fn cmd_home() -> Home {
    home_with("[secrets]\nproviders = [\"cmd\"]\n[secrets.cmd]\ncommand = [\"/bin/echo\", \"value-{id}\"]\n")
}

fn write_private(path: &Path, bytes: &[u8]) {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new().create_new(true).write(true).mode(0o600).open(path).unwrap();
    file.write_all(bytes).unwrap();
}
