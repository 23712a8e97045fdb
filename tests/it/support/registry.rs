//! The distribution registry (Debian's `docker-registry`), started by a test
//! on a free 127.0.0.1 port with its storage in a temporary folder, and
//! stopped when the test ends; optionally with one htpasswd user. Missing
//! programs fail the test, naming `tests/oci/setup.sh`: never a silent skip.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The user of a registry started with a password.
pub const USER: &str = "alice";
/// That user's password.
pub const PASSWORD: &str = "regi-S3cret-pw";

/// A running registry; dropping it stops it.
pub struct Registry {
    dir: tempfile::TempDir,
    child: Child,
    /// `127.0.0.1:PORT`.
    pub host: String,
    password: bool,
}

fn program(name: &str) -> PathBuf {
    let found = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join(name))
        .find(|path| path.is_file());
    found
        .unwrap_or_else(|| panic!("`{name}` is not installed: run tests/oci/setup.sh (docker-registry, apache2-utils)"))
}

impl Registry {
    /// A registry anyone may push to and pull from.
    pub fn start() -> Registry {
        Registry::launch(false)
    }

    /// A registry that wants [`USER`] and [`PASSWORD`] (basic auth).
    pub fn start_with_password() -> Registry {
        Registry::launch(true)
    }

    fn launch(password: bool) -> Registry {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let host = format!("127.0.0.1:{port}");
        let mut config = format!(
            "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {host}\n",
            dir.path().join("storage").display()
        );
        if password {
            let out = Command::new(program("htpasswd")).args(["-Bbn", USER, PASSWORD]).output().unwrap();
            assert!(out.status.success(), "htpasswd: {}", String::from_utf8_lossy(&out.stderr));
            std::fs::write(dir.path().join("htpasswd"), &out.stdout).unwrap();
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: rlp-tests\n    path: {}\n",
                dir.path().join("htpasswd").display()
            ));
        }
        std::fs::write(dir.path().join("config.yml"), config).unwrap();
        let log = std::fs::File::create(dir.path().join("registry.log")).unwrap();
        let child = Command::new(program("docker-registry"))
            .arg("serve")
            .arg(dir.path().join("config.yml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let registry = Registry { dir, child, host, password };
        registry.wait_until_up();
        registry
    }

    fn wait_until_up(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(response) = self.get("/v2/", None)
                && (response.status() == 200 || response.status() == 401)
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the registry on {} did not answer within 20 s:\n{}", self.host, self.log());
    }

    /// What the registry logged.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// `GET http://HOST<path>` with `accept`, as [`USER`] when the registry wants a password.
    pub fn get(&self, path: &str, accept: Option<&str>) -> reqwest::Result<reqwest::blocking::Response> {
        let mut request = reqwest::blocking::Client::new().get(format!("http://{}{path}", self.host));
        if let Some(accept) = accept {
            request = request.header("Accept", accept);
        }
        if self.password {
            request = request.basic_auth(USER, Some(PASSWORD));
        }
        request.send()
    }

    /// `PUT http://HOST<path>` of `body` with content type `content_type`.
    pub fn put(&self, path: &str, content_type: &str, body: Vec<u8>) -> reqwest::blocking::Response {
        let mut request = reqwest::blocking::Client::new()
            .put(format!("http://{}{path}", self.host))
            .header("Content-Type", content_type)
            .body(body);
        if self.password {
            request = request.basic_auth(USER, Some(PASSWORD));
        }
        request.send().unwrap()
    }

    /// The JSON document at `path` (the OCI manifest type accepted).
    pub fn json(&self, path: &str) -> serde_json::Value {
        let response = self.get(path, Some("application/vnd.oci.image.manifest.v1+json")).unwrap();
        assert_eq!(response.status(), 200, "GET {path}");
        response.json().unwrap()
    }

    /// The file in the registry's storage holding the blob `digest` (`sha256:…`).
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
        self.dir.path().join("storage/docker/registry/v2/blobs/sha256").join(&hex[..2]).join(hex).join("data")
    }

    /// A Docker configuration folder (for `DOCKER_CONFIG`) holding `user`
    /// and `password` for this registry, inside `parent`.
    pub fn docker_config(&self, parent: &Path, user: &str, password: &str) -> PathBuf {
        docker_config(parent, &self.host, user, password)
    }
}

/// A Docker configuration folder (for `DOCKER_CONFIG`) holding `user` and
/// `password` for the registry `host` (`HOST:PORT`), inside `parent`.
pub fn docker_config(parent: &Path, host: &str, user: &str, password: &str) -> PathBuf {
    let dir = parent.join(format!("docker-{user}-{}", password.len()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = serde_json::json!({"auths": {host: {"auth": basic_auth(user, password)}}});
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    dir
}

/// `user:password` in base64: the `auth` of a Docker configuration entry
/// and the value of an `Authorization: Basic` header.
pub fn basic_auth(user: &str, password: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
