//! A PostgreSQL server of the distribution's packages, started by a test on
//! 127.0.0.1 in a temporary folder and stopped when the test ends.
//!
//! `initdb` runs once per test run into a template under the target folder;
//! each server starts from a copy of it on a free port, with password
//! authentication (SCRAM) over TCP. As root, the server runs as the
//! `postgres` user (PostgreSQL refuses to run as root). Missing binaries
//! fail the test, naming `tests/postgres/setup.sh`: never a silent skip.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The superuser's password.
pub const ADMIN_PASSWORD: &str = "admin-Pw-7";
/// The password of the `rlp` role the tests connect as.
pub const RLP_PASSWORD: &str = "rlp-S3cret-pw";

/// A running server; dropping it stops it.
pub struct Postgres {
    dir: tempfile::TempDir,
    /// The port it listens on (127.0.0.1).
    pub port: u16,
}

fn bin_dir() -> PathBuf {
    let found = std::fs::read_dir("/usr/lib/postgresql").ok().and_then(|dirs| {
        let mut bins: Vec<PathBuf> =
            dirs.flatten().map(|d| d.path().join("bin")).filter(|b| b.join("initdb").is_file()).collect();
        bins.sort();
        bins.pop()
    });
    found.unwrap_or_else(|| {
        panic!(
            "no PostgreSQL server under /usr/lib/postgresql: run tests/postgres/setup.sh (apt-get install postgresql)"
        )
    })
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// `program` from the server's folder, run as the `postgres` user when root.
fn server_command(program: &str) -> Command {
    let path = bin_dir().join(program);
    if is_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(path);
        command
    } else {
        Command::new(path)
    }
}

fn check(what: &str, output: std::io::Result<Output>) -> Output {
    let output = output.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Gives the `postgres` user `path` (when root).
fn hand_over(path: &Path) {
    if is_root() {
        check("chown", Command::new("chown").args(["-R", "postgres:postgres"]).arg(path).output());
    }
}

/// A folder the server's user may enter, under the target folder.
fn scratch(name: &str) -> tempfile::TempDir {
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&base).unwrap();
    let dir = tempfile::Builder::new().prefix(name).tempdir_in(base).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// The cluster `initdb` made once for this test run.
fn template() -> &'static Path {
    static TEMPLATE: OnceLock<tempfile::TempDir> = OnceLock::new();
    TEMPLATE
        .get_or_init(|| {
            let dir = scratch("pg-template-");
            let data = dir.path().join("data");
            let pwfile = dir.path().join("pw");
            std::fs::write(&pwfile, ADMIN_PASSWORD).unwrap();
            hand_over(dir.path());
            check(
                "initdb",
                server_command("initdb")
                    .args(["--auth-host=scram-sha-256", "--auth-local=trust", "--username=postgres", "--no-sync"])
                    .arg("--pwfile")
                    .arg(&pwfile)
                    .arg("-D")
                    .arg(&data)
                    .output(),
            );
            dir
        })
        .path()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Postgres {
    /// Starts a server from a copy of the template, with role `rlp`
    /// (password [`RLP_PASSWORD`]) owning database `rlp`.
    pub fn start() -> Postgres {
        Self::start_with("")
    }

    /// [`Postgres::start`] with TLS: a certificate for 127.0.0.1 signed by a
    /// new certificate authority, in the returned folder as `ca.pem`.
    pub fn start_tls() -> (Postgres, tempfile::TempDir) {
        let certs = scratch("pg-certs-");
        let dir = certs.path();
        let openssl = |args: &[&str]| check("openssl", Command::new("openssl").args(args).current_dir(dir).output());
        let key = ["-newkey", "rsa:2048", "-nodes"];
        openssl(
            &[
                &["req", "-x509", "-days", "2", "-subj", "/CN=rlp test CA", "-keyout", "ca.key", "-out", "ca.pem"][..],
                &key,
            ]
            .concat(),
        );
        openssl(
            &[&["req", "-subj", "/CN=127.0.0.1", "-keyout", "server.key", "-out", "server.csr"][..], &key].concat(),
        );
        std::fs::write(dir.join("san.ext"), "subjectAltName = IP:127.0.0.1\nbasicConstraints = CA:FALSE\n").unwrap();
        openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "san.ext",
            "-out",
            "server.pem",
        ]);
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.join("server.key"), std::fs::Permissions::from_mode(0o600)).unwrap();
        hand_over(dir);
        let options = format!(
            "-c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
            dir.join("server.pem").display(),
            dir.join("server.key").display()
        );
        (Self::start_with(&options), certs)
    }

    fn start_with(extra: &str) -> Postgres {
        let dir = scratch("pg-");
        check("cp", Command::new("cp").arg("-a").arg(template().join("data")).arg(dir.path()).output());
        hand_over(dir.path());
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port();
            let options = format!("-p {port} -c listen_addresses=127.0.0.1 -k {} {extra}", dir.path().display());
            let started = server_command("pg_ctl")
                .arg("-D")
                .arg(dir.path().join("data"))
                .args(["-w", "-t", "60", "-o", &options, "-l"])
                .arg(dir.path().join("log"))
                .arg("start")
                .output()
                .unwrap();
            if started.status.success() {
                let server = Postgres { dir, port };
                server.admin("postgres", &format!("CREATE ROLE rlp LOGIN PASSWORD '{RLP_PASSWORD}'"));
                server.admin("postgres", "CREATE DATABASE rlp OWNER rlp");
                return server;
            }
            last = std::fs::read_to_string(dir.path().join("log")).unwrap_or_default();
        }
        panic!("PostgreSQL did not start: {last}");
    }

    /// The URL of database `rlp` as role `rlp`, with its password.
    pub fn url(&self) -> String {
        format!("postgres://rlp:{RLP_PASSWORD}@127.0.0.1:{}/rlp", self.port)
    }

    /// The URL of database `rlp` as `user`, without a password.
    pub fn url_as(&self, user: &str) -> String {
        format!("postgres://{user}@127.0.0.1:{}/rlp", self.port)
    }

    /// Runs `sql` with psql as the superuser in `database`; returns its
    /// unaligned, tuples-only output.
    pub fn admin(&self, database: &str, sql: &str) -> String {
        let output = check(
            &format!("psql {sql}"),
            Command::new("psql")
                .env("PGPASSWORD", ADMIN_PASSWORD)
                .args(["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-U", "postgres"])
                .args(["-p", &self.port.to_string(), "-d", database, "-c", sql])
                .output(),
        );
        String::from_utf8_lossy(&output.stdout).trim_end().to_string()
    }

    /// [`Postgres::admin`] in database `rlp`.
    pub fn psql(&self, sql: &str) -> String {
        self.admin("rlp", sql)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = server_command("pg_ctl")
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-m", "immediate", "stop"])
            .output();
    }
}
