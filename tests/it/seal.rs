//! Sealing and shipping bundles, end to end: `rlp digest`, `keygen`, `sign`,
//! `bundle pack`, `bundle verify`, `trust`, `agent install` and `agent list`,
//! run as real processes on real files. Every test builds its own bundles,
//! keys, archives and runtime home in its own temporary folder.

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use flate2::Crc;
use rlp::pack::canonical::{CHUNK, GzipWriter, encode_chunk};
use rlp::pack::reader::Encoding;

use crate::support::TestDir;
use crate::support::files::{copy_tree, file_names, noise, repo};
use crate::support::output::{self, assert_contains, stderr};
use crate::support::process;
use crate::support::rlp_snapshot;

const MANIFEST: &str = "# The mailer agent: sends drafts.\n[agent]\nname    = \"mailer\"   # must match the folder\nversion = \"VERSION\"\ndescription = \"Sends drafts\"\n\n[caps]\nfile = \"policy.caps\"\n";
const CAPS: &str = "[capabilities]\nkb_read = true\nnet = [\"api.mail.example\"]\n";
const TOOLS: &str = "{\"version\": 1, \"tools\": []}\n";

// A test folder holds bundles under `agents/`, keys under `keys/` and the
// runtime home under `home/`. Commands run with the test folder as their current
// folder, so outputs name relative paths.

/// Writes a bundle `agents/<name>` at `version` without digests; returns its
/// path relative to the test folder.
fn write_mailer(w: &TestDir, name: &str, version: &str, caps: &str) -> String {
    let rel = format!("agents/{name}");
    let dir = w.join(&rel);
    fs::create_dir_all(dir.join("schemas")).unwrap();
    fs::create_dir_all(dir.join("bin")).unwrap();
    fs::write(dir.join("manifest.toml"), MANIFEST.replace("mailer", name).replace("VERSION", version)).unwrap();
    fs::write(dir.join("policy.caps"), caps).unwrap();
    fs::write(dir.join("tools.json"), TOOLS).unwrap();
    fs::write(dir.join("schemas/mail.json"), "{\"type\": \"object\"}\n").unwrap();
    fs::write(dir.join("bin/helper"), "#!/bin/sh\necho hello\n").unwrap();
    fs::set_permissions(dir.join("bin/helper"), fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(dir.join("README.md"), "# Mailer\n").unwrap();
    rel
}

/// `rlp keygen --out keys --name NAME`; returns (pub, key) paths relative to the test folder.
fn keygen(w: &TestDir, name: &str) -> (String, String) {
    w.expect(0, &["keygen", "--out", "keys", "--name", name]);
    (format!("keys/{name}.pub"), format!("keys/{name}.key"))
}

/// A digested and signed bundle; returns its path.
fn signed_bundle(w: &TestDir, name: &str, version: &str, key: &str) -> String {
    let rel = write_mailer(w, name, version, CAPS);
    w.expect(0, &["digest", &rel]);
    w.expect(0, &["sign", &rel, "--key", key]);
    rel
}

/// Names in `home/agents/` (hidden ones included).
fn installed_names(w: &TestDir) -> Vec<String> {
    let mut names: Vec<String> = match fs::read_dir(w.home().join("agents")) {
        Ok(entries) => entries.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names
}

#[test]
fn round_trip_from_folder_to_installed_agent() {
    let w = TestDir::new();
    let bundle = write_mailer(&w, "mailer", "0.1.0", CAPS);
    let (stdout, _) = w.expect(0, &["digest", &bundle]);
    assert_eq!(
        stdout,
        "added README.md\nadded bin/helper\nadded policy.caps\nadded schemas/mail.json\nadded tools.json\nupdated manifest.toml: 5 added, 0 updated, 0 removed\n"
    );
    let (stdout, _) = w.expect(0, &["digest", &bundle, "--check"]);
    assert_eq!(stdout, "manifest.toml is up to date\n");

    let (stdout, _) = w.expect(0, &["keygen", "--out", "keys", "--name", "release"]);
    let public = fs::read_to_string(w.join("keys/release.pub")).unwrap();
    assert!(public.starts_with("ed25519:") && public.ends_with('\n') && public.lines().count() == 1, "{public}");
    let mode = fs::metadata(w.join("keys/release.key")).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let key_id = stdout.lines().last().unwrap().strip_prefix("key id ").unwrap().to_string();
    assert_eq!(key_id.len(), 16);
    let secret = fs::read_to_string(w.join("keys/release.key")).unwrap();
    assert!(!stdout.contains(secret.trim().trim_start_matches("ed25519-secret:")), "keygen printed the secret");

    let (stdout, _) = w.expect(0, &["sign", &bundle, "--key", "keys/release.key"]);
    assert_eq!(stdout, format!("signed agents/mailer/SIGNATURES/manifest.sig with key {key_id}\n"));
    let sig = fs::read_to_string(w.join("agents/mailer/SIGNATURES/manifest.sig")).unwrap();
    let lines: Vec<&str> = sig.lines().collect();
    assert_eq!(lines[0], "rlp-signature v1");
    assert_eq!(lines[1], format!("key-id {key_id}"));
    assert_eq!(lines[2], format!("public-key {}", public.trim()));
    assert!(lines[3].starts_with("signature ") && lines.len() == 4);

    let stdout = output::stdout(&rlp_snapshot!(
        w.filters().digests().regex(r"\): \d+ bytes", "): [SIZE] bytes"),
        w.expect_output(0, &["bundle", "pack", &bundle])
    ));
    assert!(stdout.starts_with("wrote mailer-0.1.0.bundle.tar.gz (mailer 0.1.0: 5 files, signed by key "), "{stdout}");

    // Every sealing command can report as JSON for scripts.
    let json = |args: &[&str]| -> serde_json::Value {
        let mut args = args.to_vec();
        args.extend(["--format", "json"]);
        serde_json::from_str(&w.expect(0, &args).0).unwrap()
    };
    let archive = fs::read(w.join("mailer-0.1.0.bundle.tar.gz")).unwrap();
    let packed = json(&["bundle", "pack", &bundle, "-o", "again.tar.gz"]);
    assert_eq!(
        packed,
        serde_json::json!({
            "archive": "again.tar.gz", "name": "mailer", "version": "0.1.0", "files": 5,
            "bytes": archive.len(), "blake3": blake3::hash(&archive).to_hex().to_string(), "signed_by": key_id,
        })
    );
    let signed = json(&["sign", &bundle, "--key", "keys/release.key"]);
    assert_eq!(
        signed,
        serde_json::json!({"bundle": "agents/mailer", "signature": "agents/mailer/SIGNATURES/manifest.sig", "key_id": key_id})
    );
    let generated = json(&["keygen", "--out", "keys", "--name", "spare"]);
    assert_eq!(
        (&generated["public_file"], &generated["secret_file"]),
        (&serde_json::json!("keys/spare.pub"), &serde_json::json!("keys/spare.key"))
    );
    assert_eq!(generated["key_id"].as_str().unwrap().len(), 16);

    let (stdout, _) = w.expect(0, &["bundle", "verify", &bundle, "--key", "keys/release.pub"]);
    assert_eq!(
        stdout,
        format!(
            "verified mailer 0.1.0: 5 files, 134 bytes; sizes, digests and file set match\nsigned by key {key_id} (the key in keys/release.pub)\n"
        )
    );
    w.expect(
        0,
        &["bundle", "verify", "mailer-0.1.0.bundle.tar.gz", "--key", "keys/release.pub", "--require-signature"],
    );
    // Without an anchor the signer is not trusted.
    rlp_snapshot!(&w, w.expect_output(3, &["bundle", "verify", "mailer-0.1.0.bundle.tar.gz"]));

    let (stdout, _) = w.expect(0, &["trust", "add", "keys/release.pub", "--name", "release"]);
    assert_eq!(
        stdout,
        format!(
            "added anchor `release` (key {key_id}) to {}\nits bundles may request any capability except exec\n",
            w.home().join("trust-policy.toml").display()
        )
    );
    let (stdout, _) = w.expect(0, &["bundle", "verify", "mailer-0.1.0.bundle.tar.gz", "--format", "json"]);
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["ok"], true);
    assert_eq!(json["signer"]["anchor"], "release");
    assert_eq!(json["signer"]["key_id"], key_id.as_str());
    assert_eq!(json["capabilities"], serde_json::json!(["net:api.mail.example", "kb_read"]));

    let (stdout, _) = w.expect(0, &["agent", "install", "mailer-0.1.0.bundle.tar.gz"]);
    let installed = w.home().join("agents/mailer");
    assert_eq!(
        stdout,
        format!("installed mailer 0.1.0 (signed by `release`, key {key_id}) in {}\n", installed.display())
    );
    let (stdout, _) = w.expect(0, &["agent", "install", "mailer-0.1.0.bundle.tar.gz", "--force", "--format", "json"]);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&stdout).unwrap(),
        serde_json::json!({
            "name": "mailer", "version": "0.1.0", "path": installed, "replaced": "0.1.0",
            "signer": {"key_id": key_id, "anchor": "release"},
        })
    );
    assert_eq!(installed_names(&w), ["mailer"]);
    assert_eq!(
        file_names(&installed),
        [
            "README.md",
            "SIGNATURES/manifest.sig",
            "bin/helper",
            "manifest.toml",
            "policy.caps",
            "schemas/mail.json",
            "tools.json"
        ]
    );
    let helper_mode = fs::metadata(installed.join("bin/helper")).unwrap().permissions().mode() & 0o777;
    assert_eq!(helper_mode, 0o755);
    assert_eq!(
        fs::read(installed.join("manifest.toml")).unwrap(),
        fs::read(w.join("agents/mailer/manifest.toml")).unwrap()
    );

    let (stdout, _) = w.expect(0, &["agent", "list"]);
    assert_eq!(stdout, format!("mailer  0.1.0  ok  release ({key_id})\n"));
    let (stdout, _) = w.expect(0, &["agent", "list", "--format", "json"]);
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["agents"][0]["status"], "ok");
    assert_eq!(json["agents"][0]["version"], "0.1.0");

    // Installing the folder itself works the same way (same version needs --force).
    rlp_snapshot!(&w, w.expect_output(2, &["agent", "install", &bundle]));
    let (stdout, _) = w.expect(0, &["agent", "install", &bundle, "--force"]);
    assert!(stdout.ends_with("replaced 0.1.0\n"), "{stdout}");
    assert_eq!(installed_names(&w), ["mailer"], "no staging or old copy left behind");
}

#[test]
fn install_sweeps_what_killed_installs_left_and_replaces_a_stray_file() {
    let w = TestDir::new();
    let (public, key) = keygen(&w, "release");
    w.expect(0, &["trust", "add", &public, "--name", "release"]);
    let bundle = signed_bundle(&w, "mailer", "0.1.0", &key);
    let agents = w.home().join("agents");
    fs::create_dir_all(&agents).unwrap();
    let gone = {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        child.wait().unwrap();
        child.id()
    };
    let alive = std::process::id();
    fs::create_dir_all(agents.join(format!(".staging-{gone}-abc/schemas"))).unwrap();
    fs::write(agents.join(format!(".staging-{gone}-abc/schemas/x.json")), "{}").unwrap();
    fs::write(agents.join(format!(".old-{gone}-0123")), "aside").unwrap();
    fs::create_dir(agents.join(format!(".staging-{alive}-running"))).unwrap();
    fs::write(agents.join("mailer"), "not a bundle").unwrap();
    w.expect(0, &["agent", "install", &bundle, "--force"]);
    assert_eq!(installed_names(&w), [format!(".staging-{alive}-running"), "mailer".to_string()]);
}

#[test]
fn pack_writes_to_standard_output_and_never_replaces_what_is_not_a_file() {
    let w = TestDir::new();
    let bundle = write_mailer(&w, "mailer", "0.1.0", CAPS);
    w.expect(0, &["digest", &bundle]);
    w.expect(0, &["bundle", "pack", &bundle, "-o", "file.tar.gz"]);
    let output = w.rlp().args(["bundle", "pack", &bundle, "-o", "-"]).output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(output.stdout, fs::read(w.join("file.tar.gz")).unwrap(), "the same bytes on standard output");
    assert!(stderr(&output).starts_with("wrote - (mailer 0.1.0: "));
    assert!(!w.join("-").exists());

    std::os::unix::fs::symlink("file.tar.gz", w.join("link.tar.gz")).unwrap();
    fs::create_dir(w.join("folder")).unwrap();
    for target in ["link.tar.gz", "folder", "/dev/null"] {
        let (_, stderr) = w.expect(2, &["bundle", "pack", &bundle, "-o", target]);
        assert!(stderr.starts_with(&format!("error: {target} exists and is not a regular file")), "{stderr}");
    }
    assert!(fs::symlink_metadata(w.join("link.tar.gz")).unwrap().file_type().is_symlink());
}

#[test]
fn an_interrupted_pack_leaves_the_old_archive_and_no_temporary_file() {
    use std::os::unix::process::ExitStatusExt;
    let w = TestDir::new();
    let bundle = write_mailer(&w, "mailer", "0.1.0", CAPS);
    // Enough incompressible bytes that packing is still running when interrupted.
    fs::write(w.join(&bundle).join("noise.bin"), noise(96 << 20, 7)).unwrap();
    w.expect(0, &["digest", &bundle]);
    fs::create_dir(w.join("out")).unwrap();
    fs::write(w.join("out/a.tar.gz"), "old").unwrap();
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let mut pack = w
            .command()
            .args(["bundle", "pack", &bundle, "-o", "out/a.tar.gz"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let temp = || {
            fs::read_dir(w.join("out"))
                .unwrap()
                .filter_map(Result::ok)
                .any(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !temp() {
            assert!(std::time::Instant::now() < deadline, "pack never started writing");
            std::thread::sleep(Duration::from_millis(5));
        }
        process::signal(pack.id() as i32, signal);
        let status = pack.wait().unwrap();
        assert_eq!(status.signal(), Some(signal), "{status:?}");
        assert_eq!(fs::read_to_string(w.join("out/a.tar.gz")).unwrap(), "old");
        let left: Vec<_> = fs::read_dir(w.join("out")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, ["a.tar.gz"], "only the old archive is left");
    }
}

/// The BLAKE3 of the archive of `write_mailer(w, "mailer", "0.1.0", CAPS)`
/// as every rlp since format 2 (everything under `agent.bundle/`) has
/// packed it. A change of this value breaks the promise that the same
/// content always packs to the same bytes (a newer deflate encoder, a tar
/// header change): it must be a deliberate format change, never a
/// dependency update.
const GOLDEN_ARCHIVE_BLAKE3: &str = "a6ea63897ab4928ad4273309c557687890cfbf3a30c50e0322bd5dda50727ccd";

/// The BLAKE3 of the same archive in format 1 (files at the root), as every
/// rlp before format 2 packed it: the fixture
/// `tests/fixtures/archives/mailer-0.1.0-format1-unsigned.bundle.tar.gz`.
const GOLDEN_FORMAT_1_BLAKE3: &str = "4f78f8e648c79e880769e6f1d7828b112e94cfd8b7e05f0ebd0968eeedee4df1";

#[test]
fn a_fixed_bundle_packs_to_the_same_bytes_as_ever() {
    let w = TestDir::new();
    let bundle = write_mailer(&w, "mailer", "0.1.0", CAPS);
    w.expect(0, &["digest", &bundle]);
    w.expect(0, &["bundle", "pack", &bundle, "-o", "golden.tar.gz"]);
    let archive = fs::read(w.join("golden.tar.gz")).unwrap();
    assert_eq!(blake3::hash(&archive).to_hex().as_str(), GOLDEN_ARCHIVE_BLAKE3);
}

#[test]
fn pack_is_byte_identical_whatever_the_metadata() {
    let w = TestDir::new();
    let (_, key) = keygen(&w, "release");
    let first = signed_bundle(&w, "mailer", "0.1.0", &key);

    // A second copy, files created in reverse order, other mtimes, modes and owners.
    let second = w.join("other/agents/mailer");
    let files = file_names(&w.join(&first));
    for file in files.iter().rev() {
        let target = second.join(file);
        fs::create_dir_all(target.parent().unwrap()).unwrap();
        fs::write(&target, fs::read(w.join(&first).join(file)).unwrap()).unwrap();
        let mode = if file == "bin/helper" { 0o700 } else { 0o600 };
        fs::set_permissions(&target, fs::Permissions::from_mode(mode)).unwrap();
        let when = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + file.len() as u64 * 7919);
        fs::File::options().write(true).open(&target).unwrap().set_modified(when).unwrap();
    }
    for dir in ["", "bin", "schemas", "SIGNATURES"] {
        fs::set_permissions(second.join(dir), fs::Permissions::from_mode(0o700)).unwrap();
    }
    let is_root = fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0).unwrap_or(false);
    if is_root {
        for file in &files {
            std::os::unix::fs::chown(second.join(file), Some(1234), Some(5678)).unwrap();
        }
    }

    w.expect(0, &["bundle", "pack", &first, "-o", "one.tar.gz"]);
    // The second pack runs under another umask.
    let output =
        w.shell("umask 077").args(["bundle", "pack", "other/agents/mailer", "-o", "two.tar.gz"]).output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    w.expect(0, &["bundle", "pack", &first, "-o", "three.tar.gz"]);
    let one = fs::read(w.join("one.tar.gz")).unwrap();
    assert_eq!(one, fs::read(w.join("two.tar.gz")).unwrap(), "metadata leaked into the archive");
    assert_eq!(one, fs::read(w.join("three.tar.gz")).unwrap(), "packing twice differs");
    assert_eq!(&one[..10], &[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff], "fixed gzip header");
    let mode = fs::metadata(w.join("two.tar.gz")).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644);

    // The tar inside: the folder agent.bundle/, its manifest, then the rest sorted; canonical metadata.
    assert_eq!(
        tar_listing(&one),
        [
            "755 agent.bundle/",
            "644 agent.bundle/manifest.toml",
            "644 agent.bundle/README.md",
            "755 agent.bundle/SIGNATURES/",
            "644 agent.bundle/SIGNATURES/manifest.sig",
            "755 agent.bundle/bin/",
            "755 agent.bundle/bin/helper",
            "644 agent.bundle/policy.caps",
            "755 agent.bundle/schemas/",
            "644 agent.bundle/schemas/mail.json",
            "644 agent.bundle/tools.json"
        ]
    );
}

/// `mode name` of every entry of the archive `bytes`, in archive order,
/// checking that each header carries the canonical metadata.
fn tar_listing(bytes: &[u8]) -> Vec<String> {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
    let mut listing = Vec::new();
    for entry in archive.entries().unwrap() {
        let entry = entry.unwrap();
        let header = entry.header();
        assert_eq!((header.mtime().unwrap(), header.uid().unwrap(), header.gid().unwrap()), (0, 0, 0));
        assert_eq!(header.username().unwrap(), Some(""));
        listing.push(format!("{:o} {}", header.mode().unwrap(), String::from_utf8_lossy(&entry.path_bytes())));
    }
    listing
}

/// The key that signed `mailer-0.1.0-format1-signed.bundle.tar.gz`.
const LEGACY_KEY_ID: &str = "7fc089f1c109d6d9";

#[test]
fn format_1_archives_still_verify_and_install() {
    let w = TestDir::new();
    // Archives packed by rlp before format 2 (tests/fixtures/archives/README.md).
    let (signed, unsigned, public) =
        ("mailer-0.1.0-format1-signed.bundle.tar.gz", "mailer-0.1.0-format1-unsigned.bundle.tar.gz", "legacy.pub");
    for name in [signed, unsigned, public] {
        fs::copy(repo("tests/fixtures/archives").join(name), w.join(name)).unwrap();
    }
    let old = fs::read(w.join(unsigned)).unwrap();
    assert_eq!(blake3::hash(&old).to_hex().as_str(), GOLDEN_FORMAT_1_BLAKE3, "not what rlp packed before format 2");
    let old_signed = fs::read(w.join(signed)).unwrap();
    assert_eq!(
        tar_listing(&old_signed),
        [
            "644 manifest.toml",
            "644 README.md",
            "755 SIGNATURES/",
            "644 SIGNATURES/manifest.sig",
            "755 bin/",
            "755 bin/helper",
            "644 policy.caps",
            "755 schemas/",
            "644 schemas/mail.json",
            "644 tools.json"
        ]
    );

    // Verified, with the signature required, and byte for byte (--canonical).
    let verified = format!(
        "verified mailer 0.1.0 (archive format 1): 5 files, 134 bytes; sizes, digests and file set match\nsigned by key {LEGACY_KEY_ID} (the key in legacy.pub)\n"
    );
    for canonical in [None, Some("--canonical")] {
        let mut args = vec!["bundle", "verify", signed, "--key", public, "--require-signature"];
        args.extend(canonical);
        let (stdout, _) = w.expect(0, &args);
        assert_eq!(stdout, verified, "{args:?}");
    }
    w.expect(0, &["bundle", "verify", unsigned, "--canonical"]);
    let (stdout, _) = w.expect(0, &["bundle", "verify", unsigned, "--format", "json"]);
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!((&report["ok"], &report["archive_format"]), (&serde_json::json!(true), &serde_json::json!(1)));
    // --canonical re-encodes the archive as it is, in format 1: another
    // compression of the same entries passes the content check only.
    fs::write(w.join("other.tar.gz"), recompressed(&old_signed, 9)).unwrap();
    w.expect(0, &["bundle", "verify", "other.tar.gz", "--key", public]);
    let (_, stderr) = w.expect(1, &["bundle", "verify", "other.tar.gz", "--key", public, "--canonical"]);
    assert!(stderr.starts_with("error: the archive's compressed bytes are not the canonical encoding"), "{stderr}");

    // Installed as before: the bundle's files, no `agent.bundle` folder.
    w.expect(0, &["trust", "add", public, "--name", "legacy"]);
    let (stdout, _) = w.expect(0, &["agent", "install", signed]);
    let installed = w.home().join("agents/mailer");
    assert_eq!(
        stdout,
        format!("installed mailer 0.1.0 (signed by `legacy`, key {LEGACY_KEY_ID}) in {}\n", installed.display())
    );
    let files = [
        "README.md",
        "SIGNATURES/manifest.sig",
        "bin/helper",
        "manifest.toml",
        "policy.caps",
        "schemas/mail.json",
        "tools.json",
    ];
    assert_eq!(file_names(&installed), files);
    assert_eq!(fs::metadata(installed.join("bin/helper")).unwrap().permissions().mode() & 0o777, 0o755);
    let (stdout, _) = w.expect(0, &["agent", "list"]);
    assert_eq!(stdout, format!("mailer  0.1.0  ok  legacy ({LEGACY_KEY_ID})\n"));
    w.expect(0, &["agent", "install", unsigned, "--allow-unsigned", "--force"]);
    let unsigned_files: Vec<&str> = files.iter().copied().filter(|f| !f.starts_with("SIGNATURES")).collect();
    assert_eq!(file_names(&installed), unsigned_files);

    // The same bundle packs to format 2 now; --check says the old archive is format 1.
    let bundle = write_mailer(&w, "mailer", "0.1.0", CAPS);
    w.expect(0, &["digest", &bundle]);
    let (_, stderr) = w.expect(1, &["bundle", "pack", &bundle, "--check", "-o", unsigned]);
    assert_eq!(
        stderr,
        format!(
            "error: {unsigned} is not what `rlp bundle pack` writes for agents/mailer: its files are the same, but it is a format 1 archive (the bundle's files at its root); `rlp bundle pack` now writes format 2 (every entry under `agent.bundle/`)\n  help: pack it again: `rlp bundle pack agents/mailer -o {unsigned}`\n"
        )
    );
    w.expect(0, &["bundle", "pack", &bundle, "-o", "new.tar.gz"]);
    let new = fs::read(w.join("new.tar.gz")).unwrap();
    let expected: Vec<String> = std::iter::once("755 agent.bundle/".to_string())
        .chain(tar_listing(&old).iter().map(|line| line.replacen(' ', " agent.bundle/", 1)))
        .collect();
    assert_eq!(tar_listing(&new), expected);
    w.expect(0, &["bundle", "pack", &bundle, "--check", "-o", "new.tar.gz"]);
    let format = |bytes: &[u8]| {
        let limits = Default::default();
        let read =
            rlp::pack::reader::verify_archive_with_format(std::io::Cursor::new(bytes), &limits, Encoding::Canonical);
        read.unwrap().1.number()
    };
    assert_eq!((format(&old), format(&old_signed), format(&new)), (1, 1, 2));
    // Installed from either, the files are the same.
    let (stdout, _) = w.expect(0, &["agent", "install", "new.tar.gz", "--allow-unsigned", "--force"]);
    assert!(stdout.ends_with("replaced 0.1.0\n"), "{stdout}");
    for file in file_names(&installed) {
        assert_eq!(fs::read(installed.join(&file)).unwrap(), fs::read(w.join(&bundle).join(&file)).unwrap(), "{file}");
    }
}

#[test]
fn archives_that_mix_the_two_layouts_are_refused_naming_the_entry() {
    let w = TestDir::new();
    let notes = b"hello\n";
    // Format 1 (manifest.toml at the root) with an entry under agent.bundle/.
    archive_with(&w.join("mixed.tar.gz"), |out| entry(out, "agent.bundle/notes.txt", tar::EntryType::Regular, notes));
    // Format 2 (agent.bundle/ first) with an entry at the root.
    archive_v2_with(&w.join("outside.tar.gz"), |out| entry(out, "notes.txt", tar::EntryType::Regular, notes));
    // Format 2 with the manifest at the root.
    gzip_to(&w.join("root-manifest.tar.gz"), |out| {
        entry(out, "agent.bundle/", tar::EntryType::Directory, b"");
        entry(out, "manifest.toml", tar::EntryType::Regular, b"");
        out.write_all(&[0u8; 1024]).unwrap();
    });
    let help = "  help: the archive is damaged or was not made by `rlp bundle pack`\n";
    let cases = [
        (
            "mixed.tar.gz",
            "error: entry `agent.bundle/notes.txt` is under `agent.bundle/`, but the archive starts with `manifest.toml` at its root: an archive keeps every entry under `agent.bundle/` (format 2) or none (format 1), never some of them\n",
        ),
        (
            "outside.tar.gz",
            "error: entry `notes.txt` lies outside `agent.bundle/`: every entry of an archive that starts with `agent.bundle/` (format 2) must be under it\n",
        ),
        (
            "root-manifest.tar.gz",
            "error: entry `manifest.toml` lies outside `agent.bundle/`: every entry of an archive that starts with `agent.bundle/` (format 2) must be under it\n",
        ),
    ];
    for (file, message) in cases {
        for args in [
            vec!["bundle", "verify", file],
            vec!["bundle", "verify", file, "--canonical"],
            vec!["agent", "install", file, "--allow-unsigned"],
        ] {
            let (_, stderr) = w.expect(1, &args);
            assert_eq!(stderr, format!("{message}{help}"), "{args:?}");
        }
        assert!(installed_names(&w).is_empty(), "{file}: left {:?}", installed_names(&w));
    }
    // The same entries, all under agent.bundle/, are a good format 2 archive.
    archive_v2_with(&w.join("fine.tar.gz"), |out| entry(out, "agent.bundle/notes.txt", tar::EntryType::Regular, notes));
    w.expect(0, &["bundle", "verify", "fine.tar.gz", "--canonical"]);
    w.expect(0, &["agent", "install", "fine.tar.gz", "--allow-unsigned"]);
    assert_eq!(file_names(&w.home().join("agents/evil")), ["manifest.toml", "notes.txt"]);
}

#[test]
fn one_changed_byte_in_any_bundle_file_fails_verification() {
    let w = TestDir::new();
    let (public, key) = keygen(&w, "release");
    let bundle = signed_bundle(&w, "mailer", "0.1.0", &key);
    let files = file_names(&w.join(&bundle));
    assert_eq!(files.len(), 7);
    for file in &files {
        let original = fs::read(w.join(&bundle).join(file)).unwrap();
        for offset in [0, original.len() / 2, original.len() - 1] {
            for flip in [0x01u8, 0xff] {
                let copy = w.join("tampered/mailer");
                let _ = fs::remove_dir_all(&copy);
                copy_tree(&w.join(&bundle), &copy);
                let mut bytes = original.clone();
                bytes[offset] ^= flip;
                fs::write(copy.join(file), &bytes).unwrap();
                let (_, stderr) = w.expect(1, &["bundle", "verify", "tampered/mailer", "--key", &public]);
                let names_it = if file == "manifest.toml" {
                    stderr.contains("manifest.toml") || files.iter().any(|f| stderr.contains(&format!("`{f}`")))
                } else if file.starts_with("SIGNATURES") {
                    stderr.contains("SIGNATURES/manifest.sig")
                } else {
                    stderr.contains(&format!("`{file}`"))
                };
                assert!(names_it, "{file} byte {offset} ^ {flip:#x}: {stderr}");
            }
        }
    }
    // An extra, unlisted file.
    fs::write(w.join(&bundle).join("notes.txt"), "hi").unwrap();
    let (_, stderr) = w.expect(1, &["bundle", "verify", &bundle, "--key", &public]);
    assert_eq!(
        stderr,
        "error: `notes.txt` is in the bundle but not listed in manifest.toml\n  help: remove it, or list it with `rlp digest` and sign again\n"
    );
}

/// Every single-bit change and the all-bits change, plus an ASCII case flip.
const TAMPER_PATTERNS: [u8; 9] = [0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xff];

#[test]
fn every_changed_byte_of_every_bundle_file_fails_verification() {
    let w = TestDir::new();
    let (public, key) = keygen(&w, "release");
    let bundle = signed_bundle(&w, "mailer", "0.1.0", &key);
    let trusted = rlp::integrity::keys::PublicKey::load(&w.join(&public)).unwrap();
    let options = rlp::integrity::verify::Options {
        trust: rlp::integrity::verify::Trust::Key(&trusted, &Default::default()),
        require_signature: true,
        registries: None,
    };
    let copy = w.join("tampered/mailer");
    copy_tree(&w.join(&bundle), &copy);
    assert!(rlp::integrity::verify::verify_dir(&copy, &options).is_ok());
    let files = file_names(&copy);
    let mut variants = 0;
    for file in &files {
        let path = copy.join(file);
        let original = fs::read(&path).unwrap();
        for offset in 0..original.len() {
            for pattern in TAMPER_PATTERNS {
                let mut bytes = original.clone();
                bytes[offset] ^= pattern;
                fs::write(&path, &bytes).unwrap();
                if rlp::integrity::verify::verify_dir(&copy, &options).is_ok() {
                    panic!("{file} byte {offset} ^ {pattern:#04x} was accepted");
                }
                variants += 1;
            }
        }
        fs::write(&path, &original).unwrap();
    }
    assert!(variants > 2000, "only {variants} variants");
    assert!(rlp::integrity::verify::verify_dir(&copy, &options).is_ok());
}

#[test]
fn an_upper_case_key_id_in_the_signature_is_refused() {
    let w = TestDir::new();
    let (public, key) = keygen(&w, "release");
    let bundle = signed_bundle(&w, "mailer", "0.1.0", &key);
    let sig_path = w.join(&bundle).join("SIGNATURES/manifest.sig");
    let sig = fs::read_to_string(&sig_path).unwrap();
    let id_line = sig.lines().nth(1).unwrap().to_string();
    let upper = format!("key-id {}", id_line.trim_start_matches("key-id ").to_ascii_uppercase());
    assert_ne!(upper, id_line, "the key id has hex letters");
    fs::write(&sig_path, sig.replace(&id_line, &upper)).unwrap();
    rlp_snapshot!(
        w.filters().regex("`[0-9A-F]{16}`", "`[UPPER-CASE KEY_ID]`"),
        w.expect_output(1, &["bundle", "verify", &bundle, "--key", &public])
    );
}

#[test]
fn changed_bytes_where_compressed_chunks_meet_fail_verification() {
    let w = TestDir::new();
    let bundle = write_mailer(&w, "mailer", "0.1.0", CAPS);
    // 1.5 MiB that barely compresses: the archive spans two chunks.
    let noise = noise(3 << 19, 0x9e37_79b9_7f4a_7c15);
    fs::write(w.join(format!("{bundle}/noise.bin")), &noise).unwrap();
    w.expect(0, &["digest", &bundle]);
    w.expect(0, &["bundle", "pack", &bundle, "-o", "two.tar.gz"]);
    let good = fs::read(w.join("two.tar.gz")).unwrap();
    assert!(rlp::pack::reader::scan_archive(&good, &Default::default()).is_ok());
    let mut tar = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&good[..]), &mut tar).unwrap();
    assert!(tar.len() > CHUNK && tar.len() < 2 * CHUNK);
    // The first chunk's encoding ends with a sync flush: an empty stored
    // block whose padding bits any inflater ignores.
    let boundary = 10 + encode_chunk(&tar[..CHUNK], false).unwrap().len();
    assert_eq!(&good[boundary - 4..boundary], &[0, 0, 0xff, 0xff]);
    for offset in boundary - 24..boundary + 24 {
        for flip in [0x01u8, 0x02, 0x80, 0xff] {
            let mut bytes = good.clone();
            bytes[offset] ^= flip;
            match rlp::pack::reader::scan_archive(&bytes, &Default::default()) {
                Ok(_) => panic!("byte {offset} ^ {flip:#x} went unnoticed"),
                Err(f) => assert_eq!(f.reason.class(), rlp::error::Exit::Problems, "byte {offset}: {f:?}"),
            }
            assert_content_checked(&good, &bytes, &format!("byte {offset} ^ {flip:#x}"));
        }
    }
}

/// The default verification (content, chunks inflated in parallel) of
/// `changed`, an altered copy of the archive `good`: it refuses it, unless the
/// change left the content exactly as it was (then only the canonical check,
/// `--canonical`, can see it).
fn assert_content_checked(good: &[u8], changed: &[u8], what: &str) {
    let content = |bytes: &[u8]| {
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(bytes), &mut out).ok().map(|_| out)
    };
    let limits = Default::default();
    match rlp::pack::reader::verify_archive(std::io::Cursor::new(changed), &limits, Encoding::Content) {
        Ok(_) => {
            let (before, after) = (content(good), content(changed));
            assert!(before.is_some() && before == after, "{what} went unnoticed and changed the content");
            // The encoding alone changed: gzip's own reader agrees, and the trailer is the same.
            assert_eq!(&good[good.len() - 8..], &changed[changed.len() - 8..], "{what}");
        }
        Err(f) => assert_eq!(f.reason.class(), rlp::error::Exit::Problems, "{what}: {f:?}"),
    }
}

#[test]
fn one_changed_byte_anywhere_in_the_archive_fails_verification() {
    let w = TestDir::new();
    let (public, key) = keygen(&w, "release");
    let bundle = signed_bundle(&w, "mailer", "0.1.0", &key);
    w.expect(0, &["bundle", "pack", &bundle, "-o", "good.tar.gz"]);
    let good = fs::read(w.join("good.tar.gz")).unwrap();
    let trusted = rlp::integrity::keys::PublicKey::load(&w.join(&public)).unwrap();
    let options = rlp::integrity::verify::Options {
        trust: rlp::integrity::verify::Trust::Key(&trusted, &Default::default()),
        require_signature: true,
        registries: None,
    };
    let verify = |bytes: &[u8]| {
        rlp::pack::reader::scan_archive(bytes, &Default::default())
            .and_then(|evidence| rlp::integrity::verify::check(&evidence, &options))
    };
    assert!(verify(&good).is_ok());
    // Every offset, every pattern, in process.
    for offset in 0..good.len() {
        for flip in TAMPER_PATTERNS {
            let mut bytes = good.clone();
            bytes[offset] ^= flip;
            match verify(&bytes) {
                Ok(_) => panic!("byte {offset} ^ {flip:#x} of {} went unnoticed", good.len()),
                Err(f) => assert_eq!(f.reason.class(), rlp::error::Exit::Problems, "byte {offset}: {f:?}"),
            }
            assert_content_checked(&good, &bytes, &format!("byte {offset} ^ {flip:#x}"));
        }
    }
    // A sample through the real binary: gzip header, early deflate (tar headers), middle, trailer.
    // `--canonical` refuses every change; the default check every change of the
    // content (the last deflate byte's padding bits are not content).
    let len = good.len();
    for offset in [0, 1, 3, 4, 9, 10, 12, 40, len / 3, len / 2, 2 * len / 3, len - 9, len - 8, len - 5, len - 1] {
        let mut bytes = good.clone();
        bytes[offset] ^= 0x01;
        fs::write(w.join("bad.tar.gz"), &bytes).unwrap();
        let (_, stderr) = w.expect(1, &["bundle", "verify", "bad.tar.gz", "--key", &public, "--canonical"]);
        assert!(stderr.starts_with("error: ") && !stderr.contains("panicked"), "byte {offset}: {stderr}");
        if offset != len - 9 {
            let (_, stderr) = w.expect(1, &["bundle", "verify", "bad.tar.gz", "--key", &public]);
            assert!(stderr.starts_with("error: ") && !stderr.contains("panicked"), "byte {offset}: {stderr}");
        }
    }
    // Truncated and extended archives.
    fs::write(w.join("short.tar.gz"), &good[..len - 1]).unwrap();
    rlp_snapshot!(&w, w.expect_output(1, &["bundle", "verify", "short.tar.gz", "--key", &public]));
    let mut long = good.clone();
    long.push(0);
    fs::write(w.join("long.tar.gz"), &long).unwrap();
    rlp_snapshot!(&w, w.expect_output(1, &["bundle", "verify", "long.tar.gz", "--key", &public]));
    // Unreadable input is exit 2.
    rlp_snapshot!(&w, w.expect_output(2, &["bundle", "verify", "missing.tar.gz"]));
}

#[test]
fn untrusted_revoked_and_unsigned_bundles_are_refused() {
    let w = TestDir::new();
    let (release_pub, release_key) = keygen(&w, "release");
    let (_, stranger_key) = keygen(&w, "stranger");
    let bundle = signed_bundle(&w, "mailer", "0.1.0", &release_key);
    w.expect(0, &["trust", "add", &release_pub, "--name", "release"]);
    w.expect(0, &["bundle", "verify", &bundle]);

    // Signed by a key that is not an anchor.
    let other = signed_bundle(&w, "stranger", "0.1.0", &stranger_key);
    rlp_snapshot!(&w, w.expect_output(3, &["bundle", "verify", &other]));
    w.expect(3, &["agent", "install", &other]);
    assert!(installed_names(&w).is_empty(), "{:?}", installed_names(&w));

    // Verified against a different explicit key.
    rlp_snapshot!(&w, w.expect_output(3, &["bundle", "verify", &other, "--key", &release_pub]));

    // Unsigned: accepted by plain verify, refused with --require-signature and by install.
    let unsigned = write_mailer(&w, "plain", "0.1.0", CAPS);
    w.expect(0, &["digest", &unsigned]);
    let (stdout, _) = w.expect(0, &["bundle", "verify", &unsigned]);
    assert!(stdout.ends_with("not signed\n"), "{stdout}");
    rlp_snapshot!(&w, w.expect_output(3, &["bundle", "verify", &unsigned, "--require-signature"]));
    rlp_snapshot!(&w, w.expect_output(3, &["agent", "install", &unsigned]));
    rlp_snapshot!(&w, w.expect_output(0, &["agent", "install", &unsigned, "--allow-unsigned"]));

    // Install the signed one, then revoke its key: verify, install and list all refuse it.
    w.expect(0, &["agent", "install", &bundle]);
    let key_id = rlp::integrity::keys::PublicKey::load(&w.join(&release_pub)).unwrap().key_id().to_string();
    let (stdout, _) = w.expect(0, &["trust", "revoke", &key_id]);
    assert_eq!(stdout, format!("revoked key {key_id} in {}\n", w.home().join("trust-policy.toml").display()));
    let (stdout, _) = w.expect(0, &["trust", "revoke", "release"]);
    assert_eq!(stdout, format!("key {key_id} was already revoked\n"));
    rlp_snapshot!(&w, w.expect_output(3, &["bundle", "verify", &bundle]));
    rlp_snapshot!(&w, w.expect_output(3, &["bundle", "verify", &bundle, "--key", &release_pub]));
    w.expect(3, &["agent", "install", &bundle, "--force"]);
    let (stdout, _) = w.expect(1, &["agent", "list"]);
    assert_eq!(
        stdout,
        format!(
            "mailer  0.1.0  revoked: the bundle is signed by key {key_id} (anchor `release`), which is revoked in trust-policy.toml\nplain   0.1.0  unsigned\n"
        )
    );
    let (stdout, _) = w.expect(0, &["trust", "list"]);
    assert_eq!(stdout, format!("release  {key_id}  revoked  may request any capability except exec\n"));
    assert_eq!(installed_names(&w), ["mailer", "plain"]);
}

#[test]
fn rollbacks_and_capabilities_beyond_the_signer_rule_are_refused() {
    let w = TestDir::new();
    let (public, key) = keygen(&w, "dev");
    w.expect(0, &["trust", "add", &public, "--name", "dev", "--allow-caps", "kb_read,net:api.mail.example"]);
    let bundle = signed_bundle(&w, "mailer", "0.2.0", &key);
    w.expect(0, &["bundle", "pack", &bundle, "-o", "new.tar.gz"]);
    w.expect(0, &["agent", "install", "new.tar.gz"]);

    fs::remove_dir_all(w.join(&bundle)).unwrap();
    let old = signed_bundle(&w, "mailer", "0.1.0", &key);
    w.expect(0, &["bundle", "pack", &old, "-o", "old.tar.gz"]);
    let (_, stderr) = w.expect(3, &["agent", "install", "old.tar.gz"]);
    assert_eq!(
        stderr,
        format!(
            "error: mailer 0.2.0 is installed; refusing to roll back to 0.1.0\n  help: to downgrade on purpose, remove {} first\n",
            w.home().join("agents/mailer").display()
        )
    );
    w.expect(3, &["agent", "install", "old.tar.gz", "--force"]);
    assert_eq!(installed_names(&w), ["mailer"]);

    // Build metadata does not order versions: 0.2.0+build.5 is 0.2.0 again.
    let rebuilt = "rebuilt/mailer";
    copy_tree(&w.join(&old), &w.join(rebuilt));
    let manifest = fs::read_to_string(w.join(rebuilt).join("manifest.toml")).unwrap();
    fs::write(w.join(rebuilt).join("manifest.toml"), manifest.replace("\"0.1.0\"", "\"0.2.0+build.5\"")).unwrap();
    w.expect(0, &["sign", rebuilt, "--key", &key]);
    rlp_snapshot!(&w, w.expect_output(2, &["agent", "install", rebuilt]));
    w.expect(0, &["agent", "install", rebuilt, "--force"]);
    w.expect(0, &["agent", "install", "new.tar.gz", "--force"]);

    // A bundle asking for more than the rule allows.
    let greedy = write_mailer(&w, "greedy", "0.1.0", "[capabilities]\nkb_read = true\nkb_write = [\"drafts\"]\n");
    w.expect(0, &["digest", &greedy]);
    w.expect(0, &["sign", &greedy, "--key", &key]);
    let key_id = rlp::integrity::keys::PublicKey::load(&w.join(&public)).unwrap().key_id().to_string();
    let (_, stderr) = w.expect(3, &["bundle", "verify", &greedy]);
    assert_eq!(
        stderr,
        format!(
            "error: the bundle requests `kb_write:drafts`, beyond what signer `dev` (key {key_id}) may grant: its rule allows kb_read, net:api.mail.example\n  help: to trust this signer with it, run `rlp trust allow dev --add-caps kb_write:drafts`; or sign the bundle with a key whose rule allows `kb_write:drafts`\n"
        )
    );
    w.expect(3, &["agent", "install", &greedy]);
    assert_eq!(installed_names(&w), ["mailer"]);

    // Widened from the command line as the help says, the bundle installs;
    // narrowed again, it is refused again; the policy keeps its comments.
    let policy = w.home().join("trust-policy.toml");
    let commented = format!("# the release signers\n{}", fs::read_to_string(&policy).unwrap());
    fs::write(&policy, &commented).unwrap();
    rlp_snapshot!(&w, w.expect_output(0, &["trust", "allow", "dev", "--add-caps", "kb_write:drafts"]));
    w.expect(0, &["agent", "install", &greedy]);
    assert_eq!(installed_names(&w), ["greedy", "mailer"]);
    assert!(fs::read_to_string(&policy).unwrap().starts_with("# the release signers\n"));
    rlp_snapshot!(
        &w,
        w.expect_output(0, &["trust", "allow", "dev", "--remove-caps", "kb_write:drafts", "--format", "json"])
    );
    w.expect(3, &["bundle", "verify", &greedy]);
    rlp_snapshot!(&w, w.expect_output(2, &["trust", "allow", "nobody", "--exec"]));
    rlp_snapshot!(&w, w.expect_output(2, &["trust", "allow", "dev"]));

    // exec needs --allow-exec even when the list is "any".
    let (public2, key2) = keygen(&w, "ops");
    w.expect(0, &["trust", "add", &public2, "--name", "ops", "--allow-caps", "any"]);
    let runner = write_mailer(&w, "runner", "0.1.0", "[capabilities]\nexec = true\n");
    w.expect(0, &["digest", &runner]);
    w.expect(0, &["sign", &runner, "--key", &key2]);
    rlp_snapshot!(&w, w.expect_output(3, &["agent", "install", &runner]));
    w.expect(0, &["trust", "allow", "ops", "--exec"]);
    w.expect(0, &["agent", "install", &runner]);
}

/// A policy kept in a file that is not listed with a digest of its own
/// (the manifest, the tools file, a signature) would be granted from
/// without being checked against the signer's rule: every reader refuses it.
#[test]
fn a_policy_in_the_manifest_or_another_reserved_file_is_refused() {
    let w = TestDir::new();
    let (public, key) = keygen(&w, "dev");
    w.expect(0, &["trust", "add", &public, "--name", "dev", "--allow-caps", "time"]);
    for (file, reserved) in [
        ("manifest.toml", "the manifest itself"),
        ("tools.json", "the tools file"),
        ("SIGNATURES/manifest.sig", "a signature"),
    ] {
        let bundle = write_mailer(&w, "greedy", "0.1.0", "");
        fs::remove_file(w.join(&bundle).join("policy.caps")).unwrap();
        let manifest = MANIFEST.replace("mailer", "greedy").replace("VERSION", "0.1.0");
        let manifest = manifest.replace("file = \"policy.caps\"", &format!("file = \"{file}\""));
        fs::write(w.join(&bundle).join("manifest.toml"), format!("{manifest}\n[capabilities]\nexec = true\n")).unwrap();
        let problem = format!("`[caps] file` names `{file}`, {reserved}, which cannot hold the bundle's policy");
        let (stdout, _) = w.expect(1, &["lint", &bundle]);
        assert_contains(&stdout, &format!("error[RLP007]: {problem}"));
        // What the author's tools write is refused before anything else.
        w.expect(0, &["digest", &bundle]);
        let (_, stderr) = w.expect(1, &["sign", &bundle, "--key", &key]);
        assert_contains(&stderr, &problem);
        let (_, stderr) = w.expect(1, &["bundle", "verify", &bundle]);
        assert_eq!(
            stderr,
            format!("error: manifest.toml is invalid: {problem}\n  help: run `rlp lint` on the bundle to see where\n")
        );
        w.expect(1, &["agent", "install", &bundle]);
        assert!(installed_names(&w).is_empty(), "{file}");
        fs::remove_dir_all(w.join(&bundle)).unwrap();
    }
}

/// A manifest.toml or SIGNATURES/ that is a link leads outside the bundle:
/// every command refuses it, and none quotes what the link points to.
#[test]
fn a_linked_manifest_or_signatures_folder_is_refused_without_quoting_its_target() {
    let w = TestDir::new();
    let (_, key) = keygen(&w, "dev");
    let bundle = write_mailer(&w, "mailer", "0.1.0", CAPS);
    fs::write(w.join("secret.env"), "API_TOKEN=hunter2-value\n").unwrap();
    let manifest = w.join(&bundle).join("manifest.toml");
    fs::remove_file(&manifest).unwrap();
    std::os::unix::fs::symlink(w.join("secret.env"), &manifest).unwrap();
    let refused = format!("{bundle}/manifest.toml cannot be part of a bundle: it is a symbolic link");
    for (code, args) in [
        (1, vec!["digest", &bundle]),
        (1, vec!["digest", "--check", &bundle]),
        (1, vec!["sign", &bundle, "--key", &key]),
        (1, vec!["bundle", "pack", &bundle, "-o", "out.tar.gz"]),
    ] {
        let (stdout, stderr) = w.expect(code, &args);
        assert!(!format!("{stdout}{stderr}").contains("hunter2"), "{args:?} quoted the link's target:\n{stderr}");
        assert_contains(&stderr, &refused);
    }
    let (stdout, _) = w.expect(1, &["lint", &bundle]);
    assert!(!stdout.contains("hunter2"), "{stdout}");
    assert_contains(&stdout, "`manifest.toml` cannot be part of a bundle: it is a symbolic link");

    // SIGNATURES/ linked to a folder elsewhere.
    fs::remove_file(&manifest).unwrap();
    fs::write(&manifest, MANIFEST.replace("VERSION", "0.1.0")).unwrap();
    w.expect(0, &["digest", &bundle]);
    fs::create_dir(w.join("elsewhere")).unwrap();
    std::os::unix::fs::symlink(w.join("elsewhere"), w.join(&bundle).join("SIGNATURES")).unwrap();
    let (stdout, _) = w.expect(1, &["lint", &bundle]);
    assert_contains(&stdout, "`SIGNATURES` cannot be part of a bundle: it is a symbolic link");
}

/// Compressed input that inflates to nothing (empty deflate blocks) is
/// bounded like any other look-ahead of the canonical check: refused once
/// it runs 16 MiB ahead, instead of being held in memory whole.
#[test]
fn empty_deflate_blocks_cannot_make_the_canonical_check_hold_the_archive() {
    let w = TestDir::new();
    let bundle = write_mailer(&w, "mailer", "0.1.0", CAPS);
    w.expect(0, &["digest", &bundle]);
    w.expect(0, &["bundle", "pack", &bundle, "-o", "good.tar.gz"]);
    let good = fs::read(w.join("good.tar.gz")).unwrap();
    // After the 10-byte gzip header: 18 MiB of empty stored blocks, then the real stream.
    let empty_block: &[u8] = &[0x00, 0x00, 0x00, 0xff, 0xff];
    let mut padded = good[..10].to_vec();
    padded.extend(empty_block.repeat((18 << 20) / empty_block.len()));
    padded.extend(&good[10..]);
    fs::write(w.join("padded.tar.gz"), padded).unwrap();
    let (_, stderr) = w.expect(1, &["bundle", "verify", "--canonical", "padded.tar.gz"]);
    assert_eq!(
        stderr,
        "error: the archive is corrupt: its compressed bytes run more than 16 MiB ahead of their content, which `rlp bundle pack` never writes\n  help: the archive is damaged or was not made by `rlp bundle pack`\n"
    );
    w.expect(1, &["agent", "install", "--allow-unsigned", "padded.tar.gz"]);
    // The content is intact: the default verification, which accepts any encoding, passes.
    w.expect(0, &["bundle", "verify", "padded.tar.gz"]);
}

/// The blake3 value of `[artifacts.caps]` in a manifest's text.
fn caps_before(manifest: &str) -> String {
    let entry = &manifest[manifest.find("[artifacts.caps]").unwrap()..];
    let start = entry.find("blake3 = \"").unwrap() + "blake3 = \"".len();
    entry[start..start + 64].to_string()
}

#[test]
fn digest_rewrites_only_digest_values_and_check_names_each_problem() {
    let w = TestDir::new();
    let dir = w.join("agents/notes");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("tools.json"), TOOLS).unwrap();
    fs::write(dir.join("policy.caps"), "[capabilities]\ntime = true\n").unwrap();
    fs::write(dir.join("gone.txt"), "x").unwrap();
    let zeros = "0".repeat(64);
    let manifest = format!(
        "# Notes agent\n[agent]\nname = \"notes\"     # the name\nversion = \"1.0.0\"\n\n[caps]\nfile = \"policy.caps\"\n\n[artifacts.tools]   # tools first\npath    = \"tools.json\"\nblake3  = \"{zeros}\"   # placeholder\nsize    = 0\nversion = 1\n\n[artifacts.\"old.txt\"]\npath = \"old.txt\"\nblake3 = \"{zeros}\"\nsize = 1\n"
    );
    fs::write(dir.join("manifest.toml"), &manifest).unwrap();
    let (stdout, stderr) = w.expect(1, &["digest", "agents/notes", "--check"]);
    assert_eq!(
        stdout,
        "extra: gone.txt (in the bundle but not listed)\nmissing: old.txt (listed but not in the bundle)\nextra: policy.caps (in the bundle but not listed)\nstale: tools.json (size or digest changed)\n"
    );
    assert_eq!(
        stderr,
        "error: manifest.toml is out of date: 4 entries\n  help: run `rlp digest agents/notes` to update it\n"
    );
    assert_eq!(fs::read_to_string(dir.join("manifest.toml")).unwrap(), manifest, "--check wrote");

    fs::remove_file(dir.join("gone.txt")).unwrap();
    let (stdout, _) = w.expect(0, &["digest", "agents/notes"]);
    assert_eq!(
        stdout,
        "removed old.txt\nadded policy.caps\nupdated tools.json\nupdated manifest.toml: 1 added, 1 updated, 1 removed\n"
    );
    let tools = blake3::hash(TOOLS.as_bytes()).to_hex().to_string();
    let caps = blake3::hash(b"[capabilities]\ntime = true\n").to_hex().to_string();
    assert_eq!(
        fs::read_to_string(dir.join("manifest.toml")).unwrap(),
        format!(
            "# Notes agent\n[agent]\nname = \"notes\"     # the name\nversion = \"1.0.0\"\n\n[caps]\nfile = \"policy.caps\"\n\n[artifacts.tools]   # tools first\npath    = \"tools.json\"\nblake3  = \"{tools}\"   # placeholder\nsize    = {}\nversion = 1\n\n[artifacts.caps]\npath = \"policy.caps\"\nblake3 = \"{caps}\"\nsize = 27\n",
            TOOLS.len()
        )
    );
    let (stdout, _) = w.expect(0, &["digest", "agents/notes", "--format", "json"]);
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"bundle": "agents/notes", "up_to_date": true, "written": false, "changes": []})
    );

    // A manifest with CRLF line endings keeps them.
    let crlf = fs::read_to_string(dir.join("manifest.toml")).unwrap().replace('\n', "\r\n");
    fs::write(dir.join("manifest.toml"), &crlf).unwrap();
    fs::write(dir.join("policy.caps"), "[capabilities]\n").unwrap();
    w.expect(0, &["digest", "agents/notes"]);
    let caps = blake3::hash(b"[capabilities]\n").to_hex().to_string();
    let expected = crlf.replace(&caps_before(&crlf), &caps).replace("size = 27\r\n", "size = 15\r\n");
    assert_eq!(fs::read_to_string(dir.join("manifest.toml")).unwrap(), expected);

    // Links are refused, naming the entry.
    std::os::unix::fs::symlink("/etc/passwd", dir.join("passwd")).unwrap();
    rlp_snapshot!(&w, w.expect_output(1, &["digest", "agents/notes"]));
    fs::remove_file(dir.join("passwd")).unwrap();
    fs::hard_link(dir.join("tools.json"), w.join("elsewhere.json")).unwrap();
    rlp_snapshot!(&w, w.expect_output(1, &["digest", "agents/notes", "--check"]));
    let (_, stderr) = w.expect(2, &["digest", "agents/none"]);
    assert!(stderr.starts_with("error: agents/none does not exist\n"), "{stderr}");
    let (stdout, _) = w.expect(2, &["digest", "agents/none", "--format", "json"]);
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["error"]["message"], "agents/none does not exist");
    let (_, stderr) = w.expect(2, &["digest", "agents/notes/tools.json"]);
    assert!(stderr.starts_with("error: agents/notes/tools.json is a file, not a bundle folder\n"), "{stderr}");
    fs::create_dir_all(w.join("agents/empty")).unwrap();
    let (_, stderr) = w.expect(2, &["digest", "agents/empty"]);
    assert!(stderr.starts_with("error: agents/empty has no manifest.toml\n"), "{stderr}");
}

#[test]
fn keys_signing_and_packing_refuse_unsafe_or_stale_input() {
    let w = TestDir::new();
    let (_, key) = keygen(&w, "release");
    rlp_snapshot!(&w, w.expect_output(2, &["keygen", "--out", "keys", "--name", "release"]));

    let bundle = write_mailer(&w, "mailer", "0.1.0", CAPS);
    rlp_snapshot!(&w, w.expect_output(1, &["sign", &bundle, "--key", &key]));
    rlp_snapshot!(&w, w.expect_output(1, &["bundle", "pack", &bundle]));
    w.expect(0, &["digest", &bundle]);

    fs::set_permissions(w.join(&key), fs::Permissions::from_mode(0o644)).unwrap();
    rlp_snapshot!(&w, w.expect_output(2, &["sign", &bundle, "--key", &key]));
    fs::set_permissions(w.join(&key), fs::Permissions::from_mode(0o600)).unwrap();
    rlp_snapshot!(&w, w.expect_output(2, &["sign", &bundle, "--key", "keys/release.pub"]));

    // Sign refuses what verify would refuse: stray signature files, lint errors.
    fs::create_dir_all(w.join(&bundle).join("SIGNATURES")).unwrap();
    fs::write(w.join(&bundle).join("SIGNATURES/junk"), "x").unwrap();
    let (_, stderr) = w.expect(1, &["sign", &bundle, "--key", &key]);
    assert!(stderr.starts_with("error: `SIGNATURES/junk` is not part of a bundle"), "{stderr}");
    fs::remove_file(w.join(&bundle).join("SIGNATURES/junk")).unwrap();
    let manifest = fs::read_to_string(w.join(&bundle).join("manifest.toml")).unwrap();
    fs::write(w.join(&bundle).join("manifest.toml"), manifest.replace("\"mailer\"", "\"Mailer\"")).unwrap();
    rlp_snapshot!(&w, w.expect_output(1, &["sign", &bundle, "--key", &key]));
    fs::write(w.join(&bundle).join("manifest.toml"), manifest).unwrap();

    // A mounted secret is a symbolic link: it is followed, and its target checked.
    std::os::unix::fs::symlink(w.join(&key), w.join("linked.key")).unwrap();
    w.expect(0, &["sign", &bundle, "--key", "linked.key"]);

    // A signature the bundle has outgrown stops pack: the archive could never be verified.
    w.expect(0, &["sign", &bundle, "--key", &key]);
    fs::write(w.join(&bundle).join("README.md"), "# Mailer, edited\n").unwrap();
    rlp_snapshot!(&w, w.expect_output(0, &["digest", &bundle]));
    rlp_snapshot!(&w, w.expect_output(1, &["bundle", "pack", &bundle]));
    w.expect(0, &["bundle", "pack", &bundle, "--key", &key, "-o", "resigned.tar.gz"]);

    // Lint errors stop pack.
    fs::write(w.join(&bundle).join("tools.json"), "{\"version\": 7, \"tools\": []}\n").unwrap();
    w.expect(0, &["digest", &bundle]);
    rlp_snapshot!(&w, w.expect_output(1, &["bundle", "pack", &bundle]));

    // A placeholder digest for a not-yet-built entry binary stops pack.
    fs::write(w.join(&bundle).join("tools.json"), TOOLS).unwrap();
    let manifest = fs::read_to_string(w.join(&bundle).join("manifest.toml")).unwrap().replace(
        "description = \"Sends drafts\"\n",
        &format!(
            "description = \"Sends drafts\"\nkind = \"wasm32-wasip1\"\nentry_wasm = {{ path = \"bin/mailer.wasm\", blake3 = \"{}\" }}\n",
            "0".repeat(64)
        ),
    );
    fs::write(w.join(&bundle).join("manifest.toml"), manifest).unwrap();
    w.expect(0, &["digest", &bundle]);
    rlp_snapshot!(&w, w.expect_output(1, &["bundle", "pack", &bundle]));
    assert!(!w.join("mailer-0.1.0.bundle.tar.gz").exists());
}

#[test]
fn trust_policy_is_strict_and_listed_as_json() {
    let w = TestDir::new();
    let (public, _) = keygen(&w, "release");
    fs::create_dir_all(w.home()).unwrap();
    let policy = w.home().join("trust-policy.toml");
    fs::write(&policy, "version = 1\n[anchors.release]\nkey = \"ed25519:AAAA\"\n").unwrap();
    let (_, stderr) = w.expect(2, &["trust", "list"]);
    assert!(stderr.starts_with(&format!("error: {}:3:7: expected 32 bytes of base64", policy.display())), "{stderr}");
    w.expect(2, &["trust", "add", &public, "--name", "release"]);
    let (stdout, _) = w.expect(2, &["bundle", "verify", "agents", "--format", "json"]);
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["ok"], false);
    assert!(report["error"]["message"].as_str().unwrap().contains("expected 32 bytes of base64"), "{report}");
    fs::write(&policy, "# operators: keep this list short\nversion = 1\n").unwrap();
    let (_, stderr) = w.expect(2, &["trust", "add", &public, "--name", "deadbeefdeadbeef"]);
    assert!(stderr.starts_with("error: anchor name `deadbeefdeadbeef` looks like a key id\n"), "{stderr}");
    w.expect(0, &["trust", "add", &public, "--name", "release", "--allow-caps", "kb_read,exec"]);
    rlp_snapshot!(&w, w.expect_output(2, &["trust", "add", &public, "--name", "again"]));
    rlp_snapshot!(&w, w.expect_output(2, &["trust", "add", &public, "--name", "x", "--allow-caps", "teleport"]));
    let text = fs::read_to_string(&policy).unwrap();
    assert!(text.starts_with("# operators: keep this list short\nversion = 1\n"), "{text}");
    assert_contains(&text, "[rules.release]\nallow_caps = [\"kb_read\", \"exec\"]\nallow_exec = true\n");
    let (stdout, _) = w.expect(0, &["trust", "list", "--format", "json"]);
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["anchors"][0]["name"], "release");
    assert_eq!(json["anchors"][0]["allow_caps"], serde_json::json!(["kb_read", "exec"]));
    assert_eq!(json["anchors"][0]["allow_exec"], true);
    assert_eq!(json["revoked"], serde_json::json!([]));
}

#[test]
fn installed_bundles_are_re_verified_by_list() {
    let w = TestDir::new();
    let (public, key) = keygen(&w, "release");
    w.expect(0, &["trust", "add", &public, "--name", "release"]);
    let bundle = signed_bundle(&w, "mailer", "0.1.0", &key);
    w.expect(0, &["agent", "install", &bundle]);
    let installed = w.home().join("agents/mailer");
    fs::write(installed.join("tools.json"), TOOLS.replace("[]", "[ ]")).unwrap();
    let (stdout, _) = w.expect(1, &["agent", "list", "--format", "json"]);
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["agents"][0]["status"], "digest mismatch");
    assert_eq!(json["agents"][0]["detail"], "`tools.json` is 29 bytes, but manifest.toml says 28");
    // A later, good install replaces the damaged copy.
    w.expect(0, &["agent", "install", &bundle, "--force"]);
    let (stdout, _) = w.expect(0, &["agent", "list"]);
    assert!(stdout.starts_with("mailer  0.1.0  ok"), "{stdout}");
}

#[test]
fn snapshots_of_tampered_verify_and_digest_check() {
    let w = TestDir::new();
    let (public, key) = keygen(&w, "release");
    let bundle = signed_bundle(&w, "mailer", "0.1.0", &key);
    w.expect(0, &["bundle", "pack", &bundle, "-o", "mailer.tar.gz"]);
    fs::write(w.join(&bundle).join("tools.json"), TOOLS.replace("\"tools\"", "\"tooly\"")).unwrap();
    let (stdout, stderr) = w.expect(1, &["bundle", "verify", &bundle, "--key", &public]);
    insta::assert_snapshot!("verify_tampered_folder", format!("stdout:\n{stdout}stderr:\n{stderr}"));

    // The archive with tools.json changed inside, recompressed the way pack does.
    let mut tar_bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(fs::File::open(w.join("mailer.tar.gz")).unwrap()),
        &mut tar_bytes,
    )
    .unwrap();
    let at = tar_bytes.windows(7).position(|x| x == b"\"tools\"").unwrap();
    tar_bytes[at + 5] = b'y';
    gzip_to(&w.join("mailer.tar.gz"), |out| out.write_all(&tar_bytes).unwrap());
    let (stdout, stderr) = w.expect(1, &["bundle", "verify", "mailer.tar.gz", "--key", &public]);
    insta::assert_snapshot!("verify_tampered_archive", format!("stdout:\n{stdout}stderr:\n{stderr}"));

    fs::write(w.join(&bundle).join("extra.md"), "x").unwrap();
    fs::remove_file(w.join(&bundle).join("README.md")).unwrap();
    let (stdout, stderr) = w.expect(1, &["digest", &bundle, "--check"]);
    insta::assert_snapshot!("digest_check", format!("stdout:\n{stdout}stderr:\n{stderr}"));
}

// ---------------------------------------------------------------------------
// Hostile archives, built by hand.

/// A ustar header in the canonical form except for what the test changes.
fn header(name: &[u8], entry_type: tar::EntryType, size: u64, mode: u32) -> tar::Header {
    let mut header = tar::Header::new_ustar();
    header.as_ustar_mut().unwrap().name[..name.len()].copy_from_slice(name);
    header.set_entry_type(entry_type);
    header.set_size(size);
    header.set_mode(mode);
    header.set_uid(0);
    header.set_gid(0);
    header.set_mtime(0);
    header.set_username("").unwrap();
    header.set_groupname("").unwrap();
    header.set_device_major(0).unwrap();
    header.set_device_minor(0).unwrap();
    header.set_cksum();
    header
}

/// Tar blocks for one entry.
fn entry(out: &mut dyn Write, name: &str, entry_type: tar::EntryType, data: &[u8]) {
    let mode = if entry_type == tar::EntryType::Directory { 0o755 } else { 0o644 };
    out.write_all(header(name.as_bytes(), entry_type, data.len() as u64, mode).as_bytes()).unwrap();
    out.write_all(data).unwrap();
    out.write_all(&vec![0u8; (512 - data.len() % 512) % 512]).unwrap();
}

/// A manifest listing `files` (path, size, content digest).
fn manifest_for(files: &[(String, u64, String)]) -> String {
    let mut text = String::from("[agent]\nname = \"evil\"\nversion = \"0.1.0\"\n");
    for (path, size, digest) in files {
        text.push_str(&format!("\n[artifacts.\"{path}\"]\npath = \"{path}\"\nblake3 = \"{digest}\"\nsize = {size}\n"));
    }
    text
}

/// Writes a gzip file exactly as `rlp bundle pack` encodes it (fixed header,
/// canonical chunked deflate), so only the hostile content can be refused.
fn gzip_to(path: &Path, build: impl FnOnce(&mut dyn Write)) {
    let file = fs::File::create(path).unwrap();
    let mut gz = GzipWriter::new(std::io::BufWriter::new(file)).unwrap();
    build(&mut gz);
    gz.finish().unwrap().flush().unwrap();
}

/// A manifest listing `notes.txt` (`hello\n`).
fn notes_manifest() -> String {
    let notes = b"hello\n";
    manifest_for(&[("notes.txt".into(), notes.len() as u64, blake3::hash(notes).to_hex().to_string())])
}

/// A format 1 archive: manifest.toml (listing `notes.txt`) followed by `rest`.
fn archive_with(path: &Path, rest: impl FnOnce(&mut dyn Write)) {
    gzip_to(path, |out| {
        entry(out, "manifest.toml", tar::EntryType::Regular, notes_manifest().as_bytes());
        rest(out);
        out.write_all(&[0u8; 1024]).unwrap();
    });
}

/// A format 2 archive: the folder `agent.bundle/`, then
/// `agent.bundle/manifest.toml` (listing `notes.txt`), followed by `rest`.
fn archive_v2_with(path: &Path, rest: impl FnOnce(&mut dyn Write)) {
    gzip_to(path, |out| {
        entry(out, "agent.bundle/", tar::EntryType::Directory, b"");
        entry(out, "agent.bundle/manifest.toml", tar::EntryType::Regular, notes_manifest().as_bytes());
        rest(out);
        out.write_all(&[0u8; 1024]).unwrap();
    });
}

/// A well-formed gzip file whose tar stream is a manifest listing a 1 GiB
/// file, that file's header, then 2 GiB of zeros: about 2 MB on disk. It is
/// the canonical encoding `rlp bundle pack` would write — each 1 MiB chunk of
/// zeros compresses on its own to the same bytes, which are repeated — so only
/// the expansion limit can stop it.
fn write_bomb(path: &Path) {
    let gib = 1u64 << 30;
    let digest = blake3::hash(b"not reached").to_hex().to_string();
    let manifest = manifest_for(&[("zeros.bin".into(), gib, digest)]);
    let mut first = Vec::new();
    entry(&mut first, "manifest.toml", tar::EntryType::Regular, manifest.as_bytes());
    first.extend_from_slice(header(b"zeros.bin", tar::EntryType::Regular, gib, 0o644).as_bytes());
    let content_len = first.len() as u64 + 2 * gib;
    first.resize(CHUNK, 0);
    let chunks = content_len.div_ceil(CHUNK as u64);
    let zeros = vec![0u8; CHUNK];

    let mut file = std::io::BufWriter::new(fs::File::create(path).unwrap());
    file.write_all(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]).unwrap();
    file.write_all(&encode_chunk(&first, false).unwrap()).unwrap();
    let steady = encode_chunk(&zeros, false).unwrap();
    for _ in 1..chunks - 1 {
        file.write_all(&steady).unwrap();
    }
    let tail = (content_len - (chunks - 1) * CHUNK as u64) as usize;
    file.write_all(&encode_chunk(&zeros[..tail], true).unwrap()).unwrap();
    let mut crc = Crc::new();
    crc.update(&first);
    let mut zero_crc = Crc::new();
    zero_crc.update(&zeros);
    for _ in 1..chunks - 1 {
        crc.combine(&zero_crc);
    }
    crc.update(&zeros[..tail]);
    file.write_all(&crc.sum().to_le_bytes()).unwrap();
    file.write_all(&(content_len as u32).to_le_bytes()).unwrap();
    file.flush().unwrap();
}

/// 100,000 entries after a manifest that lists 10,000 files, each in its own folder.
fn write_many_entries(path: &Path) {
    let empty = blake3::hash(b"").to_hex().to_string();
    let listed: Vec<(String, u64, String)> = (0..10_000).map(|i| (format!("d{i:05}/x"), 0, empty.clone())).collect();
    let manifest = manifest_for(&listed);
    gzip_to(path, |out| {
        entry(out, "manifest.toml", tar::EntryType::Regular, manifest.as_bytes());
        for i in 0..50_000 {
            entry(out, &format!("d{i:05}/"), tar::EntryType::Directory, b"");
            entry(out, &format!("d{i:05}/x"), tar::EntryType::Regular, b"");
        }
        out.write_all(&[0u8; 1024]).unwrap();
    });
}

/// Writes one hostile archive.
type Build = Box<dyn Fn(&Path)>;

/// An archive of manifest.toml (listing `notes.txt`) and one more entry.
fn one_entry(name: &'static str, entry_type: tar::EntryType, data: &'static [u8]) -> Build {
    Box::new(move |p: &Path| archive_with(p, |out| entry(out, name, entry_type, data)))
}

/// The same in format 2: the folder `agent.bundle/`, its manifest.toml, and one more entry.
fn one_entry_v2(name: &'static str, entry_type: tar::EntryType, data: &'static [u8]) -> Build {
    Box::new(move |p: &Path| archive_v2_with(p, |out| entry(out, name, entry_type, data)))
}

#[test]
fn hostile_archives_are_refused_and_leave_nothing_behind() {
    let w = TestDir::new();
    let notes = b"hello\n";
    let cases: Vec<(&str, Build, &str)> = vec![
        (
            "dotdot",
            one_entry("../evil", tar::EntryType::Regular, notes),
            "entry `../evil` climbs out of the bundle with `..`",
        ),
        (
            "dotdot-first",
            Box::new(|p: &Path| gzip_to(p, |out| entry(out, "a/../../evil", tar::EntryType::Regular, notes))),
            "entry `a/../../evil` climbs out of the bundle with `..`",
        ),
        (
            "absolute",
            one_entry("/tmp/rlp-evil", tar::EntryType::Regular, notes),
            "entry `/tmp/rlp-evil` has an absolute path",
        ),
        (
            "newline",
            one_entry("a\nverified mailer 1.0", tar::EntryType::Regular, notes),
            "entry `a\\u{a}verified mailer 1.0` is not a valid bundle path",
        ),
        ("symlink", one_entry("notes.txt", tar::EntryType::Symlink, b""), "entry `notes.txt` is a symbolic link"),
        ("hardlink", one_entry("notes.txt", tar::EntryType::Link, b""), "entry `notes.txt` is a hard link"),
        ("device", one_entry("notes.txt", tar::EntryType::Char, b""), "entry `notes.txt` is a device file"),
        ("fifo", one_entry("notes.txt", tar::EntryType::Fifo, b""), "entry `notes.txt` is a FIFO"),
        (
            "pax",
            one_entry("notes.txt", tar::EntryType::XHeader, b"9 a=b\n"),
            "entry `notes.txt` is a tar extension header",
        ),
        (
            "duplicate",
            Box::new(|p: &Path| {
                archive_with(p, |out| {
                    entry(out, "notes.txt", tar::EntryType::Regular, notes);
                    entry(out, "notes.txt", tar::EntryType::Regular, notes);
                })
            }),
            "entry `notes.txt` appears twice in the archive",
        ),
        (
            "unlisted",
            Box::new(|p: &Path| {
                archive_with(p, |out| {
                    entry(out, "notes.txt", tar::EntryType::Regular, notes);
                    entry(out, "zzz.sh", tar::EntryType::Regular, b"rm -rf /\n");
                })
            }),
            "entry `zzz.sh` is in the archive but not listed in manifest.toml",
        ),
        (
            "manifest-not-first",
            Box::new(|p: &Path| gzip_to(p, |out| entry(out, "notes.txt", tar::EntryType::Regular, notes))),
            "the archive must start with manifest.toml, not `notes.txt`",
        ),
        (
            "not-canonical",
            Box::new(|p: &Path| {
                archive_with(p, |out| {
                    let mut h = header(b"notes.txt", tar::EntryType::Regular, notes.len() as u64, 0o4755);
                    h.set_cksum();
                    out.write_all(h.as_bytes()).unwrap();
                    out.write_all(notes).unwrap();
                    out.write_all(&[0u8; 506]).unwrap();
                })
            }),
            "entry `notes.txt`: its tar header is not in the form `rlp bundle pack` writes",
        ),
        ("bomb", Box::new(|p: &Path| write_bomb(p)), "the archive expands more than 256×"),
        // The same refusals in format 2, where every entry is under agent.bundle/.
        (
            "v2-dotdot",
            one_entry_v2("agent.bundle/../evil", tar::EntryType::Regular, notes),
            "entry `agent.bundle/../evil` climbs out of the bundle with `..`",
        ),
        (
            "v2-absolute",
            one_entry_v2("/agent.bundle/evil", tar::EntryType::Regular, notes),
            "entry `/agent.bundle/evil` has an absolute path",
        ),
        (
            "v2-symlink",
            one_entry_v2("agent.bundle/notes.txt", tar::EntryType::Symlink, b""),
            "entry `agent.bundle/notes.txt` is a symbolic link",
        ),
        (
            "v2-unlisted",
            Box::new(|p: &Path| {
                archive_v2_with(p, |out| {
                    entry(out, "agent.bundle/notes.txt", tar::EntryType::Regular, notes);
                    entry(out, "agent.bundle/zzz.sh", tar::EntryType::Regular, b"rm -rf /\n");
                })
            }),
            "entry `agent.bundle/zzz.sh` is in the archive but not listed in manifest.toml",
        ),
        (
            "v2-duplicate",
            Box::new(|p: &Path| {
                archive_v2_with(p, |out| {
                    entry(out, "agent.bundle/notes.txt", tar::EntryType::Regular, notes);
                    entry(out, "agent.bundle/notes.txt", tar::EntryType::Regular, notes);
                })
            }),
            "entry `agent.bundle/notes.txt` appears twice in the archive",
        ),
        (
            "v2-folder-twice",
            one_entry_v2("agent.bundle/", tar::EntryType::Directory, b""),
            "entry `agent.bundle/` appears twice in the archive",
        ),
        (
            "v2-no-folder",
            Box::new(|p: &Path| {
                gzip_to(p, |out| {
                    entry(out, "agent.bundle/manifest.toml", tar::EntryType::Regular, notes_manifest().as_bytes())
                })
            }),
            "the archive must start with the folder `agent.bundle/`, not `agent.bundle/manifest.toml`",
        ),
        (
            "v2-manifest-not-second",
            Box::new(|p: &Path| {
                gzip_to(p, |out| {
                    entry(out, "agent.bundle/", tar::EntryType::Directory, b"");
                    entry(out, "agent.bundle/notes.txt", tar::EntryType::Regular, notes);
                })
            }),
            "the archive must go on with `agent.bundle/manifest.toml` after `agent.bundle/`, not `agent.bundle/notes.txt`",
        ),
        (
            "v2-mixed",
            one_entry_v2("notes.txt", tar::EntryType::Regular, notes),
            "entry `notes.txt` lies outside `agent.bundle/`",
        ),
        (
            "v1-mixed",
            one_entry("agent.bundle/notes.txt", tar::EntryType::Regular, notes),
            "entry `agent.bundle/notes.txt` is under `agent.bundle/`, but the archive starts with `manifest.toml`",
        ),
        ("many", Box::new(|p: &Path| write_many_entries(p)), "the archive holds more than 20000 entries; refusing it"),
    ];
    for (name, build, message) in &cases {
        let file = format!("{name}.tar.gz");
        build(&w.join(&file));
        let size = fs::metadata(w.join(&file)).unwrap().len();
        assert!(size < 4 << 20, "{name} is {size} bytes");
        let (_, stderr) = w.expect(1, &["bundle", "verify", &file]);
        assert!(stderr.starts_with(&format!("error: {message}")), "{name}: {stderr}");
        let (_, stderr) = w.expect(1, &["agent", "install", &file, "--allow-unsigned"]);
        assert!(stderr.starts_with(&format!("error: {message}")), "{name}: {stderr}");
        assert!(installed_names(&w).is_empty(), "{name}: left {:?}", installed_names(&w));
        assert!(!w.home().join("evil").exists() && !w.join("evil").exists(), "{name} escaped");
        assert!(!Path::new("/tmp/rlp-evil").exists(), "{name} wrote an absolute path");
    }
    // A well-formed hand-made archive is accepted (unsigned) and installed.
    archive_with(&w.join("fine.tar.gz"), |out| entry(out, "notes.txt", tar::EntryType::Regular, notes));
    w.expect(0, &["bundle", "verify", "fine.tar.gz"]);
    w.expect(0, &["agent", "install", "fine.tar.gz", "--allow-unsigned"]);
    assert_eq!(installed_names(&w), ["evil"]);
    assert_eq!(fs::read(w.home().join("agents/evil/notes.txt")).unwrap(), notes);
}

#[test]
fn trust_add_and_revoke_report_as_json() {
    let w = TestDir::new();
    let (public, _) = keygen(&w, "release");
    let policy = w.home().join("trust-policy.toml");
    let (stdout, _) =
        w.expect(0, &["trust", "add", &public, "--name", "release", "--allow-caps", "kb_read", "--format", "json"]);
    let added: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let key_id = added["key_id"].as_str().unwrap().to_string();
    assert_eq!(key_id.len(), 16, "{added}");
    assert_eq!(
        added,
        serde_json::json!({"anchor": "release", "key_id": key_id, "policy": policy, "allow_caps": ["kb_read"], "allow_exec": false})
    );
    let (stdout, _) = w.expect(0, &["trust", "revoke", "release", "--format", "json"]);
    let revoked: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        revoked,
        serde_json::json!({"key_id": key_id, "policy": policy, "newly_revoked": true, "anchor": "release"})
    );
    let (stdout, _) = w.expect(0, &["trust", "revoke", &key_id, "--format", "json"]);
    let again: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(again["newly_revoked"], false);
    let (stdout, _) = w.expect(0, &["trust", "revoke", "0123456789abcdef", "--format", "json"]);
    let loose: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(loose["anchor"], serde_json::Value::Null);
    let (stdout, _) = w.expect(0, &["trust", "revoke", "fedcba9876543210"]);
    assert_eq!(
        stdout,
        format!(
            "revoked key fedcba9876543210 in {}\n(no anchor uses this key yet; bundles it signs are refused from now on)\n",
            policy.display()
        )
    );
}

/// The deflate stream of `archive` compressed again as one stream at `level`,
/// between the same gzip header and trailer: the same content, another encoding.
fn recompressed(archive: &[u8], level: u32) -> Vec<u8> {
    let mut tar = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(archive), &mut tar).unwrap();
    let mut deflate = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::new(level));
    deflate.write_all(&tar).unwrap();
    let mut out = archive[..10].to_vec();
    out.extend(deflate.finish().unwrap());
    out.extend_from_slice(&archive[archive.len() - 8..]);
    out
}

#[test]
fn another_compression_of_the_same_files_passes_verify_but_not_canonical_or_pack_check() {
    let w = TestDir::new();
    let (public, key) = keygen(&w, "release");
    let bundle = signed_bundle(&w, "mailer", "0.1.0", &key);
    // 2.5 MiB of noise: three chunks, inflated in parallel.
    fs::write(w.join(format!("{bundle}/noise.bin")), noise(5 << 19, 0x9e37_79b9_7f4a_7c15)).unwrap();
    w.expect(0, &["digest", &bundle]);
    w.expect(0, &["sign", &bundle, "--key", &key]);
    w.expect(0, &["bundle", "pack", &bundle, "-o", "good.tar.gz"]);
    let good = fs::read(w.join("good.tar.gz")).unwrap();
    w.expect(0, &["bundle", "verify", "good.tar.gz", "--key", &public]);
    w.expect(0, &["bundle", "verify", "good.tar.gz", "--key", &public, "--canonical"]);
    // The archive holds a signature by a fresh key: its size varies by a few bytes.
    rlp_snapshot!(
        w.filters().regex(r"\d+ bytes, identical", "[SIZE] bytes, identical"),
        w.expect_output(0, &["bundle", "pack", &bundle, "--check", "-o", "good.tar.gz"])
    );

    fs::write(w.join("other.tar.gz"), recompressed(&good, 9)).unwrap();
    rlp_snapshot!(&w, w.expect_output(0, &["bundle", "verify", "other.tar.gz", "--key", &public]));
    let (_, canonical) = w.expect(1, &["bundle", "verify", "other.tar.gz", "--key", &public, "--canonical"]);
    let (_, check) = w.expect(1, &["bundle", "pack", &bundle, "--check", "-o", "other.tar.gz"]);
    insta::assert_snapshot!(
        "recompressed_archive_refused",
        format!(
            "$ rlp bundle verify other.tar.gz --canonical\n{canonical}$ rlp bundle pack --check\n{}",
            first_difference_as_n(&check.replace(&bundle, "BUNDLE"))
        )
    );
}

/// `text` with the offset of "differ from byte N on" written `N`: it
/// depends on the signature, which a new key changes on every run; it must
/// lie past the gzip header (10 bytes), which the two archives share.
fn first_difference_as_n(text: &str) -> String {
    let (before, rest) = text.split_once("differ from byte ").expect("a first difference");
    let (offset, after) = rest.split_once(" on").expect("an offset");
    assert!(offset.parse::<u64>().expect("a byte offset") >= 10, "{text}");
    format!("{before}differ from byte N on{after}")
}

#[test]
fn pack_check_names_the_first_difference() {
    let w = TestDir::new();
    let bundle = write_mailer(&w, "mailer", "0.1.0", CAPS);
    w.expect(0, &["digest", &bundle]);
    w.expect(0, &["bundle", "pack", &bundle, "-o", "mailer.tar.gz"]);
    w.expect(0, &["bundle", "pack", &bundle, "--check", "-o", "mailer.tar.gz"]);
    // The default archive name, absent: unreadable input.
    rlp_snapshot!(&w, w.expect_output(2, &["bundle", "pack", &bundle, "--check"]));
    // A file changed in the bundle since the archive was written.
    fs::write(w.join(format!("{bundle}/extra.txt")), "new\n").unwrap();
    w.expect(0, &["digest", &bundle]);
    rlp_snapshot!(&w, w.expect_output(1, &["bundle", "pack", &bundle, "--check", "-o", "mailer.tar.gz"]));
    w.expect(0, &["bundle", "pack", &bundle, "-o", "mailer.tar.gz"]);
    w.expect(0, &["bundle", "pack", &bundle, "--check", "-o", "mailer.tar.gz"]);
    // A damaged archive.
    let mut bytes = fs::read(w.join("mailer.tar.gz")).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    fs::write(w.join("mailer.tar.gz"), &bytes).unwrap();
    rlp_snapshot!(&w, w.expect_output(1, &["bundle", "pack", &bundle, "--check", "-o", "mailer.tar.gz"]));
    // Standard output is not an archive to compare with.
    w.expect(2, &["bundle", "pack", &bundle, "--check", "-o", "-"]);
}
