//! Bundles through a real OCI registry (the distribution registry, started
//! on 127.0.0.1 by each test): `rlp bundle push`, `rlp bundle pull`,
//! `rlp agent install oci://…`, cross-checked with an independent client
//! (oras-py) and against a registry's storage altered behind its back.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::support::http::{self, Server};
use crate::support::output::{self, stderr, stdout, stdout_json};
use crate::support::registry::{self, PASSWORD, Registry, USER};
use crate::support::rlp_snapshot;
use crate::support::testdir::TestDir;

const ARTIFACT_TYPE: &str = "application/vnd.runloop.bundle.v1";
const LAYER_TYPE: &str = "application/vnd.runloop.bundle.layer.v1.tar+gzip";

/// A signed, packed bundle `mailer` 0.1.0 in the test folder; returns the signer's key id.
fn packed(w: &TestDir) -> String {
    w.expect(0, &["agent", "scaffold", "mailer", "--non-interactive"]);
    let (stdout, _) = w.expect(0, &["keygen", "--out", "keys", "--name", "release"]);
    let key_id = stdout.lines().find_map(|l| l.strip_prefix("key id ")).expect("a key id").to_string();
    w.expect(0, &["sign", "agents/mailer", "--key", "keys/release.key"]);
    w.expect(0, &["bundle", "pack", "agents/mailer"]);
    key_id
}

/// `rlp <args>` in the test folder with `DOCKER_CONFIG=<docker>`; returns the output.
fn rlp_with(w: &TestDir, docker: &Path, args: &[&str]) -> std::process::Output {
    w.command().env("DOCKER_CONFIG", docker).args(args).stdin(std::process::Stdio::null()).output().unwrap()
}

fn assert_exit(out: &std::process::Output, code: i32) {
    assert_eq!(out.status.code(), Some(code), "{}{}", stdout(out), stderr(out));
}

fn oras_python() -> std::path::PathBuf {
    crate::support::process::venv_python("tests/oci/setup.sh", "oci-venv", "the OCI cross-checks with oras")
}

#[test]
fn a_bundle_pushed_and_pulled_arrives_byte_identical_and_oras_reads_it() {
    let w = TestDir::new();
    let key_id = packed(&w);
    let registry = Registry::start_with_password();
    let docker = registry.docker_config(w.path(), USER, PASSWORD);
    let target = format!("oci://{}/agents/mailer", registry.host);

    // Without a tag, the version is the tag.
    let out = rlp_with(&w, &docker, &["bundle", "push", "mailer-0.1.0.bundle.tar.gz", &target, "--plain-http"]);
    assert_exit(&out, 0);
    let archive = std::fs::read(w.join("mailer-0.1.0.bundle.tar.gz")).unwrap();
    let lines: Vec<String> = stdout(&out).lines().map(str::to_string).collect();
    assert_eq!(
        lines[0],
        format!(
            "pushed mailer-0.1.0.bundle.tar.gz (mailer 0.1.0, signed by key {key_id}: {} bytes) to {target}:0.1.0",
            archive.len()
        )
    );
    let digest = lines[1].strip_prefix("digest ").expect("the manifest digest").to_string();
    assert!(!stdout(&out).contains(PASSWORD) && !stderr(&out).contains(PASSWORD));

    // The registry's API shows the tag, the artifact type and the labels.
    assert_eq!(
        registry.json("/v2/agents/mailer/tags/list"),
        serde_json::json!({"name": "agents/mailer", "tags": ["0.1.0"]})
    );
    let manifest = registry.json("/v2/agents/mailer/manifests/0.1.0");
    assert_eq!(manifest["artifactType"], ARTIFACT_TYPE);
    assert_eq!(manifest["mediaType"], "application/vnd.oci.image.manifest.v1+json");
    assert_eq!(manifest["layers"].as_array().unwrap().len(), 1);
    let layer = &manifest["layers"][0];
    assert_eq!(layer["mediaType"], LAYER_TYPE);
    assert_eq!(layer["size"], archive.len());
    assert_eq!(layer["annotations"]["org.opencontainers.image.title"], "mailer-0.1.0.bundle.tar.gz");
    assert_eq!(
        manifest["annotations"],
        serde_json::json!({
            "dev.runloop.bundle.name": "mailer",
            "dev.runloop.bundle.signer": key_id,
            "dev.runloop.bundle.version": "0.1.0",
            "org.opencontainers.image.title": "mailer",
            "org.opencontainers.image.version": "0.1.0",
        })
    );
    let served =
        registry.get("/v2/agents/mailer/manifests/0.1.0", Some("application/vnd.oci.image.manifest.v1+json")).unwrap();
    assert_eq!(served.headers()["docker-content-digest"].to_str().unwrap(), digest);

    // Pull by tag and by digest: the same bytes.
    let out =
        rlp_with(&w, &docker, &["bundle", "pull", &format!("{target}:0.1.0"), "--plain-http", "-o", "pulled.tar.gz"]);
    assert_exit(&out, 0);
    assert_eq!(std::fs::read(w.join("pulled.tar.gz")).unwrap(), archive);
    assert!(stdout(&out).starts_with(&format!(
        "pulled {target}:0.1.0 into pulled.tar.gz (mailer 0.1.0, signed by key {key_id}: 4 files, {} bytes)\ndigest {digest}, layer sha256:",
        archive.len()
    )));
    let by_digest = format!("{target}@{digest}");
    let out = rlp_with(
        &w,
        &docker,
        &["bundle", "pull", &by_digest, "--plain-http", "-o", "by-digest.tar.gz", "--format", "json"],
    );
    assert_exit(&out, 0);
    let doc: serde_json::Value = stdout_json(&out);
    assert_eq!(
        (doc["digest"].as_str(), doc["name"].as_str(), doc["signer"].as_str()),
        (Some(digest.as_str()), Some("mailer"), Some(key_id.as_str()))
    );
    assert_eq!(std::fs::read(w.join("by-digest.tar.gz")).unwrap(), archive);

    // The default output name is the bundle's.
    std::fs::create_dir(w.join("elsewhere")).unwrap();
    let out = w
        .command()
        .current_dir(w.join("elsewhere"))
        .env("DOCKER_CONFIG", &docker)
        .args(["bundle", "pull", &format!("{target}:0.1.0"), "--plain-http"])
        .output()
        .unwrap();
    assert_exit(&out, 0);
    assert_eq!(std::fs::read(w.join("elsewhere/mailer-0.1.0.bundle.tar.gz")).unwrap(), archive);

    // An independent client reads what rlp pushed.
    let script = format!(
        "import oras.client, sys\nc = oras.client.OrasClient(hostname='{host}', insecure=True, auth_backend='basic')\nc.login(username='{USER}', password='{PASSWORD}', hostname='{host}')\nprint(c.pull(target='{host}/agents/mailer:0.1.0', outdir=sys.argv[1]))\n",
        host = registry.host
    );
    let out = std::process::Command::new(oras_python())
        .args(["-c", &script])
        .arg(w.join("oras"))
        .env("DOCKER_CONFIG", w.join("oras-docker"))
        .output()
        .unwrap();
    assert!(out.status.success(), "oras pull: {}", stderr(&out));
    assert_eq!(std::fs::read(w.join("oras/mailer-0.1.0.bundle.tar.gz")).unwrap(), archive);
}

#[test]
fn install_from_a_registry_applies_the_trust_policy() {
    let w = TestDir::new();
    let key_id = packed(&w);
    let registry = Registry::start();
    let reference = format!("oci://{}/mailer:stable", registry.host);
    w.expect(0, &["bundle", "push", "mailer-0.1.0.bundle.tar.gz", &reference, "--plain-http"]);

    let (_, err) = w.expect(3, &["agent", "install", &reference, "--plain-http"]);
    assert_eq!(
        err,
        format!(
            "error: the bundle is signed by key {key_id}, which is not a trust anchor in trust-policy.toml\n  help: if you trust this signer, add their key: `rlp trust add <their.pub> --name NAME`\n"
        )
    );
    assert!(!w.home().join("agents/mailer").exists());

    w.expect(0, &["trust", "add", "keys/release.pub", "--name", "release"]);
    let (out, _) = w.expect(0, &["agent", "install", &reference, "--plain-http"]);
    assert_eq!(
        out,
        format!(
            "installed mailer 0.1.0 (signed by `release`, key {key_id}) in {}\n",
            w.home().join("agents/mailer").display()
        )
    );
    let (list, _) = w.expect(0, &["agent", "list"]);
    assert_eq!(list, format!("mailer  0.1.0  ok  release ({key_id})\n"));

    // --plain-http belongs to oci:// sources only.
    let (_, err) = w.expect(2, &["agent", "install", "mailer-0.1.0.bundle.tar.gz", "--plain-http"]);
    assert!(err.starts_with("error: --plain-http applies to an oci:// source only"), "{err}");
}

#[test]
fn a_blob_altered_in_the_registry_fails_the_pull_with_a_digest_error() {
    let w = TestDir::new();
    packed(&w);
    let registry = Registry::start();
    let reference = format!("oci://{}/mailer:0.1.0", registry.host);
    w.expect(0, &["bundle", "push", "mailer-0.1.0.bundle.tar.gz", &reference, "--plain-http"]);
    let manifest = registry.json("/v2/mailer/manifests/0.1.0");
    let layer_digest = manifest["layers"][0]["digest"].as_str().unwrap().to_string();
    let blob = registry.blob_file(&layer_digest);
    let original = std::fs::read(&blob).unwrap();

    // One byte changed, the size kept.
    let mut altered = original.clone();
    altered[original.len() / 2] ^= 0x01;
    std::fs::write(&blob, &altered).unwrap();
    let (_, err) = w.expect(1, &["bundle", "pull", &reference, "--plain-http", "-o", "out.tar.gz"]);
    assert!(
        err.starts_with(&format!(
            "error: {reference}: the bundle's bytes do not match their digest (Invalid digest. Expected {layer_digest}, got sha256:"
        )),
        "{err}"
    );
    assert!(err.ends_with("\n  help: the registry's copy was altered or damaged; nothing was kept\n"), "{err}");
    // The digests are those of a signed archive: they change with its key.
    rlp_snapshot!(
        w.filters().digests(),
        w.expect_output(1, &["agent", "install", &reference, "--plain-http", "--allow-unsigned"])
    );

    // Bytes added.
    let mut longer = original.clone();
    longer.extend_from_slice(b"tail");
    std::fs::write(&blob, &longer).unwrap();
    let declared = format!("the {} bytes", original.len());
    rlp_snapshot!(
        w.filters().literal(&declared, "the [ORIGINAL SIZE] bytes"),
        w.expect_output(1, &["bundle", "pull", &reference, "--plain-http", "-o", "out.tar.gz"])
    );

    // Nothing was written or left behind, and nothing installed.
    let mut left: Vec<String> =
        std::fs::read_dir(w.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    left.sort();
    assert_eq!(left, ["agents", "home", "keys", "mailer-0.1.0.bundle.tar.gz"]);
    let installed: Vec<_> =
        std::fs::read_dir(w.home().join("agents")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(installed.is_empty(), "{installed:?}");
}

#[test]
fn annotations_that_disagree_with_the_archive_are_refused() {
    let w = TestDir::new();
    let key_id = packed(&w);
    let registry = Registry::start();
    w.expect(
        0,
        &[
            "bundle",
            "push",
            "mailer-0.1.0.bundle.tar.gz",
            &format!("oci://{}/mailer:0.1.0", registry.host),
            "--plain-http",
        ],
    );
    let mut manifest = registry.json("/v2/mailer/manifests/0.1.0");
    manifest["annotations"]["dev.runloop.bundle.version"] = "9.9.9".into();
    let put = registry.put(
        "/v2/mailer/manifests/relabelled",
        "application/vnd.oci.image.manifest.v1+json",
        serde_json::to_vec(&manifest).unwrap(),
    );
    assert_eq!(put.status(), 201);
    let reference = format!("oci://{}/mailer:relabelled", registry.host);
    let (_, err) = w.expect(1, &["bundle", "pull", &reference, "--plain-http", "-o", "out.tar.gz"]);
    assert_eq!(
        err,
        format!(
            "error: {reference}: the registry's annotation dev.runloop.bundle.version says `9.9.9`, but the archive holds `0.1.0`\n  help: the artifact was altered after `rlp bundle push`; push the bundle again\n"
        )
    );
    assert!(!w.join("out.tar.gz").exists());

    // The standard annotations registries show are compared too, and a
    // signer annotation removed from a signed bundle's manifest is a change.
    for (key, value, _holds) in [
        ("org.opencontainers.image.version", serde_json::json!("1.0.0"), "0.1.0".to_string()),
        ("dev.runloop.bundle.signer", serde_json::Value::Null, key_id.clone()),
    ] {
        let mut manifest = registry.json("/v2/mailer/manifests/0.1.0");
        match value {
            serde_json::Value::Null => manifest["annotations"].as_object_mut().unwrap().remove(key),
            value => manifest["annotations"].as_object_mut().unwrap().insert(key.to_string(), value),
        };
        let put = registry.put(
            "/v2/mailer/manifests/relabelled",
            "application/vnd.oci.image.manifest.v1+json",
            serde_json::to_vec(&manifest).unwrap(),
        );
        assert_eq!(put.status(), 201);
        rlp_snapshot!(&w, w.expect_output(1, &["bundle", "pull", &reference, "--plain-http", "-o", "out.tar.gz"]));
    }
}

#[test]
fn other_artifacts_are_not_taken_for_bundles() {
    let w = TestDir::new();
    let registry = Registry::start();
    std::fs::write(w.join("notes.txt"), "not a bundle\n").unwrap();
    let script = format!(
        "import oras.client, os\nos.chdir(os.environ['WORK'])\nc = oras.client.OrasClient(hostname='{host}', insecure=True)\nc.push(target='{host}/notes:1', files=['notes.txt'])\n",
        host = registry.host
    );
    let out = std::process::Command::new(oras_python())
        .args(["-c", &script])
        .env("WORK", w.path())
        .env("DOCKER_CONFIG", w.join("oras-docker"))
        .output()
        .unwrap();
    assert!(out.status.success(), "oras push: {}", stderr(&out));
    let reference = format!("oci://{}/notes:1", registry.host);
    let (_, err) = w.expect(2, &["bundle", "pull", &reference, "--plain-http"]);
    assert!(err.starts_with(&format!("error: {reference} is not an rlp bundle: its artifact type is `")), "{err}");
    assert!(err.ends_with("\n  help: push bundles with `rlp bundle push`; check the repository and tag\n"), "{err}");
}

#[test]
fn credentials_are_used_and_never_shown_and_refusals_say_what_to_do() {
    let w = TestDir::new();
    packed(&w);
    let registry = Registry::start_with_password();
    let reference = format!("oci://{}/mailer:0.1.0", registry.host);
    let push = ["bundle", "push", "mailer-0.1.0.bundle.tar.gz", reference.as_str(), "--plain-http"];

    let (_, err) = w.expect(2, &push);
    assert_eq!(
        err,
        format!(
            "error: {reference}: the registry asks for credentials, and none were found\n  help: log in (basic credentials under `auths` in ~/.docker/config.json, e.g. by `docker login {host}`), or set RLP_REGISTRY_TOKEN\n",
            host = registry.host
        )
    );
    let wrong = registry.docker_config(w.path(), USER, "not-the-Pw-42");
    let out = rlp_with(&w, &wrong, &push);
    assert_exit(&out, 2);
    assert!(stderr(&out).starts_with(&format!(
        "error: {reference}: the registry refused user `alice` from {} (or their rights)",
        wrong.join("config.json").display()
    )));
    assert!(!stderr(&out).contains("not-the-Pw-42") && !stdout(&out).contains("not-the-Pw-42"));

    // A credential helper rlp does not run is named, not silently skipped.
    let helper = w.join("helper-docker");
    std::fs::create_dir(&helper).unwrap();
    std::fs::write(helper.join("config.json"), r#"{"credsStore": "desktop"}"#).unwrap();
    let out = rlp_with(&w, &helper, &push);
    assert_exit(&out, 2);
    assert!(stderr(&out).starts_with("warning: "), "{}", stderr(&out));
    rlp_snapshot!(&w, &out);

    // A broken configuration file is named with its position, not quoted.
    std::fs::write(helper.join("config.json"), r#"{"auths": "hunter2-secret"}"#).unwrap();
    let out = rlp_with(&w, &helper, &push);
    assert_exit(&out, 2);
    assert!(stderr(&out).starts_with(&format!("error: {}:1:", helper.join("config.json").display())));
    assert!(!stderr(&out).contains("hunter2"));
}

#[test]
fn a_registry_token_is_sent_as_a_bearer_credential_and_never_printed() {
    let w = TestDir::new();
    packed(&w);
    let server =
        Server::start(|_| http::reply(401, r#"{"errors":[{"code":"UNAUTHORIZED","message":"token refused"}]}"#));
    let reference = format!("oci://127.0.0.1:{}/mailer:0.1.0", server.port);
    let token = "tok-7f3a9c-Secret";
    let host = format!("127.0.0.1:{}", server.port);
    let with_token = |token_host: Option<&str>, token: &str| {
        let mut command = w.command();
        command.env("RLP_REGISTRY_TOKEN", token).args(["bundle", "pull", &reference, "--plain-http"]);
        if let Some(token_host) = token_host {
            command.env("RLP_REGISTRY_TOKEN_HOST", token_host);
        }
        command.output().unwrap()
    };
    // Without the registry it is for, the token is not used at all.
    let out = with_token(None, token);
    assert_exit(&out, 2);
    assert_eq!(
        stderr(&out),
        "error: RLP_REGISTRY_TOKEN is set but RLP_REGISTRY_TOKEN_HOST is not: rlp sends a token only to the registry it is for\n  help: set RLP_REGISTRY_TOKEN_HOST=HOST[:PORT], the registry the token was issued for\n"
    );
    assert!(server.requests().is_empty());
    // A token for another registry is not sent to this one.
    let out = with_token(Some("ghcr.io"), token);
    assert_exit(&out, 2);
    rlp_snapshot!(&w, &out);
    assert!(server.requests().iter().all(|r| r.header("authorization").is_none()));
    let before = server.requests().len();

    let out = with_token(Some(&host), token);
    assert_exit(&out, 2);
    assert!(
        stderr(&out).starts_with(&format!(
            "error: {reference}: the registry refused the token in RLP_REGISTRY_TOKEN (or their rights)\n"
        )),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains(token) && !stdout(&out).contains(token));
    let requests = server.requests()[before..].to_vec();
    assert!(!requests.is_empty());
    assert!(requests.iter().all(|r| r.header("authorization") == Some(&format!("Bearer {token}"))), "{requests:?}");
    let requests = server.requests();

    // A token that cannot be a header value is refused before anything is sent.
    let out = with_token(Some(&host), "line\nbreak");
    assert_exit(&out, 2);
    assert!(stderr(&out).starts_with("error: RLP_REGISTRY_TOKEN is empty or holds characters a token cannot have"));
    let out = with_token(Some(&host), &"t".repeat((16 << 10) + 1));
    assert_exit(&out, 2);
    assert!(stderr(&out).starts_with("error: RLP_REGISTRY_TOKEN is longer than 16384 bytes"), "{}", stderr(&out));
    assert_eq!(server.requests().len(), requests.len());
}

#[test]
fn a_registry_that_answers_nonsense_gets_an_error_not_a_crash() {
    let w = TestDir::new();
    packed(&w);
    // An upload location that is not a URL (the client crate would unwrap it).
    let server = Server::start(|request| {
        if request.line.starts_with("POST ") {
            http::Reply { status: 202, headers: vec![("Location".into(), "http://[bad".into())], body: String::new() }
        } else {
            http::reply(200, "{}")
        }
    });
    let reference = format!("oci://127.0.0.1:{}/mailer:0.1.0", server.port);
    let (_, err) = w.expect(2, &["bundle", "push", "mailer-0.1.0.bundle.tar.gz", &reference, "--plain-http"]);
    assert_eq!(
        err,
        format!(
            "error: the registry 127.0.0.1:{} sent an answer rlp cannot use\n  help: check that the address names an OCI registry\n",
            server.port
        )
    );
    // A manifest that is no OCI manifest.
    let server = Server::start(|_| {
        http::reply(
            200,
            r#"{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []}"#,
        )
    });
    let reference = format!("oci://127.0.0.1:{}/mailer:0.1.0", server.port);
    let (_, err) = w.expect(2, &["bundle", "pull", &reference, "--plain-http"]);
    assert!(
        err.starts_with(&format!(
            "error: {reference} is not an rlp bundle: its manifest is a `application/vnd.oci.image.index.v1+json`"
        )),
        "{err}"
    );
}

/// A manifest for a bundle layer of `size` bytes with digest `digest`, as a fake registry serves it.
fn fake_manifest(digest: &str, size: usize) -> String {
    serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "artifactType": ARTIFACT_TYPE,
        "config": {"mediaType": ARTIFACT_TYPE, "digest": format!("sha256:{}", "4".repeat(64)), "size": 2},
        "layers": [{"mediaType": LAYER_TYPE, "digest": digest, "size": size}],
    })
    .to_string()
}

#[test]
fn a_registry_that_serves_another_manifest_or_misses_the_blob_is_caught() {
    let w = TestDir::new();
    let manifest = fake_manifest(&format!("sha256:{}", "7".repeat(64)), 10);
    let served = manifest.clone();
    let server = Server::start(move |request| {
        if request.path().contains("/manifests/") {
            http::Reply {
                status: 200,
                headers: vec![("Content-Type".into(), "application/vnd.oci.image.manifest.v1+json".into())],
                body: served.clone(),
            }
        } else {
            http::reply(404, r#"{"errors":[{"code":"BLOB_UNKNOWN","message":"blob unknown"}]}"#)
        }
    });
    let base = format!("oci://127.0.0.1:{}/mailer", server.port);
    // Pinned by digest: the manifest served is not the one named.
    let pinned = format!("{base}@sha256:{}", "a".repeat(64));
    let (_, err) = w.expect(1, &["bundle", "pull", &pinned, "--plain-http"]);
    assert!(err.starts_with(&format!("error: {pinned}: the bundle's bytes do not match their digest (")), "{err}");
    // By tag: the manifest is taken, the blob is missing.
    let (_, err) = w.expect(2, &["bundle", "pull", &format!("{base}:0.1.0"), "--plain-http"]);
    assert_eq!(
        err,
        format!(
            "error: {base}:0.1.0: the registry has no such blob\n  help: the artifact is incomplete in the registry; push the bundle again\n"
        )
    );
    let left: Vec<_> = std::fs::read_dir(w.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn basic_credentials_never_go_to_a_plain_http_token_service() {
    // Alone, or behind a basic challenge the client may pass over.
    for challenge in [
        r#"Bearer realm="http://auth.example.com/token",service="registry""#,
        r#"Basic realm="registry", Bearer realm="http://auth.example.com/token""#,
    ] {
        let w = TestDir::new();
        let server = Server::start(move |_| http::Reply {
            status: 401,
            headers: vec![("WWW-Authenticate".into(), challenge.into())],
            body: String::new(),
        });
        let registry_host = format!("127.0.0.1:{}", server.port);
        let docker = registry::docker_config(w.path(), &registry_host, USER, PASSWORD);
        let reference = format!("oci://{registry_host}/mailer:0.1.0");
        let out = rlp_with(&w, &docker, &["bundle", "pull", &reference, "--plain-http"]);
        assert_exit(&out, 2);
        assert_eq!(
            stderr(&out),
            format!(
                "error: the registry {registry_host} sends credentials to a token service that is not HTTPS (`http://auth.example.com/token`); rlp does not send them there\n  help: fix the registry's token service address, or use RLP_REGISTRY_TOKEN with a token issued for the registry\n"
            )
        );
        // Only the challenge was asked for, with no credentials.
        let requests = server.requests();
        assert_eq!(requests.len(), 1);
        assert_eq!(requests[0].path(), "/v2/");
        assert!(requests[0].header("authorization").is_none());
    }
}

/// A `401` whose challenge names the token service on 127.0.0.1:`port`.
fn token_challenge(port: u16) -> http::Reply {
    http::Reply {
        status: 401,
        headers: vec![(
            "WWW-Authenticate".into(),
            format!(r#"Bearer realm="http://127.0.0.1:{port}/token",service="fake-registry""#),
        )],
        body: r#"{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}"#.into(),
    }
}

#[test]
fn basic_credentials_go_only_to_the_token_service_of_the_challenge_rlp_checked() {
    const TOKEN: &str = "tok-checked-5e1d";
    let w = TestDir::new();
    packed(&w);
    let not_known = r#"{"errors":[{"code":"NAME_UNKNOWN","message":"repository name not known"}]}"#;
    let pull_error = "the registry answered: repository name not known\n  help: check the repository and tag\n";
    let push_error = format!("the registry answered HTTP 404: {not_known}\n");
    for (command, scope, error) in [
        (vec!["bundle", "pull"], "repository%3Amailer%3Apull", pull_error.to_string()),
        (vec!["bundle", "push", "mailer-0.1.0.bundle.tar.gz"], "repository%3Amailer%3Apull%2Cpush", push_error),
    ] {
        let checked = Server::start(|_| http::reply(200, &format!(r#"{{"token": "{TOKEN}"}}"#)));
        let evil = Server::start(|_| http::reply(200, r#"{"token": "tok-from-elsewhere"}"#));
        let (checked_port, evil_port) = (checked.port, evil.port);
        // The first challenge names one token service, every later one
        // (and any request without the token) another.
        let challenges = AtomicUsize::new(0);
        let server = Server::start(move |request| {
            let first = request.path() == "/v2/" && challenges.fetch_add(1, Ordering::SeqCst) == 0;
            if first {
                token_challenge(checked_port)
            } else if request.header("authorization") == Some(&format!("Bearer {TOKEN}")) {
                http::reply(404, not_known)
            } else {
                token_challenge(evil_port)
            }
        });
        let host = format!("127.0.0.1:{}", server.port);
        let docker = registry::docker_config(w.path(), &host, USER, PASSWORD);
        let reference = format!("oci://{host}/mailer:0.1.0");
        let args: Vec<&str> = command.iter().copied().chain([reference.as_str(), "--plain-http"]).collect();
        let out = rlp_with(&w, &docker, &args);

        assert!(evil.requests().is_empty(), "another token service was asked: {:?}", evil.requests());
        assert_exit(&out, 2);
        assert_eq!(stderr(&out), format!("error: {reference}: {error}"));
        assert!(!stderr(&out).contains(PASSWORD) && !stdout(&out).contains(PASSWORD));
        // The credentials went to the token service of the one challenge,
        // for the scope of the command; the registry saw only the token.
        let exchanged = checked.requests();
        assert_eq!(exchanged.len(), 1, "{exchanged:?}");
        assert_eq!(
            exchanged[0].header("authorization"),
            Some(format!("Basic {}", registry::basic_auth(USER, PASSWORD)).as_str())
        );
        assert!(exchanged[0].path().starts_with("/token?"), "{}", exchanged[0].path());
        assert!(exchanged[0].path().contains(&format!("scope={scope}")), "{}", exchanged[0].path());
        assert!(exchanged[0].path().contains("service=fake-registry"), "{}", exchanged[0].path());
        let requests = server.requests();
        assert_eq!(requests.iter().filter(|r| r.path() == "/v2/").count(), 1, "{requests:?}");
        assert_eq!((requests[0].path(), requests[0].header("authorization")), ("/v2/", None));
        assert!(
            requests[1..].iter().all(|r| r.header("authorization") == Some(&format!("Bearer {TOKEN}"))),
            "{requests:?}"
        );
    }
}

#[test]
fn references_and_plain_http_are_checked_before_anything_is_sent() {
    let w = TestDir::new();
    packed(&w);
    let (_, err) = w.expect(
        2,
        &["bundle", "push", "mailer-0.1.0.bundle.tar.gz", "oci://registry.example.com/mailer:1", "--plain-http"],
    );
    assert_eq!(
        err,
        "error: --plain-http is allowed only for a registry on this machine, not registry.example.com\n  help: serve the registry over HTTPS; plain HTTP would carry the bundle and any credentials in clear\n"
    );
    let err =
        output::stderr(&rlp_snapshot!(&w, w.expect_output(2, &["bundle", "pull", "oci://user:pw@host/mailer:1"])));
    assert!(!err.contains("user:pw"), "{err}");
    let (_, err) = w.expect(2, &["bundle", "pull", "oci://127.0.0.1:5000/mailer", "--plain-http"]);
    assert_eq!(
        err,
        "error: oci://127.0.0.1:5000/mailer names neither a tag nor a digest\n  help: pull a tag or a digest: oci://127.0.0.1:5000/mailer:TAG or oci://127.0.0.1:5000/mailer@sha256:…\n"
    );
    // A broken archive is never pushed.
    std::fs::write(w.join("broken.bundle.tar.gz"), b"\x1f\x8b not really").unwrap();
    let (_, err) =
        w.expect(1, &["bundle", "push", "broken.bundle.tar.gz", "oci://127.0.0.1:9/mailer:1", "--plain-http"]);
    assert!(err.starts_with("error: "), "{err}");
    assert!(!err.contains("cannot reach"), "{err}");
}
