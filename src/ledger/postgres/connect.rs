//! From a `postgres://` URL to a connection: the defaults libpq takes from
//! the environment (`PGHOST`, `PGPORT`, `PGUSER`, `PGDATABASE`), the
//! password from the URL, `PGPASSWORD` or the password file, and TLS
//! through rustls (the URL's `sslmode`: `disable`, `prefer` (the default)
//! or `require`; certificates are checked against the Mozilla roots plus
//! the file `PGSSLROOTCERT` names).
//!
//! The password is kept out of everything shown: the URL is displayed
//! rebuilt from its parts without it, and [`Credentials::scrub`] takes it
//! out of any message before it is shown.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tokio_postgres::Config;
use tokio_postgres::config::{Host, SslMode};
use tokio_postgres_rustls::MakeRustlsConnect;
use zeroize::Zeroizing;

use crate::ledger::postgres::pgpass;

/// Largest `PGSSLROOTCERT` file read.
const MAX_ROOT_CERT_BYTES: u64 = 4 << 20;
/// How long connecting may take when the URL does not say (`connect_timeout`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Where Debian's (and most distributions') server listens when no host is given.
const DEFAULT_SOCKET_DIR: &str = "/var/run/postgresql";

/// A PostgreSQL ledger's address: the URL as given (which may hold a
/// password) and its display form (which never does).
#[derive(Clone)]
pub struct PostgresUrl {
    /// Boxed: a location is passed around by value, and most are files.
    config: Box<Config>,
    shown: String,
}

/// Two URLs that differ only in their password name the same ledger.
impl PartialEq for PostgresUrl {
    fn eq(&self, other: &Self) -> bool {
        self.shown == other.shown
    }
}

impl Eq for PostgresUrl {}

impl fmt::Debug for PostgresUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PostgresUrl").field(&self.shown).finish()
    }
}

impl fmt::Display for PostgresUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The user libpq would connect as when the URL names none: `PGUSER`,
/// else the login name in `USER`.
fn default_user() -> Option<String> {
    env("PGUSER").or_else(|| env("USER"))
}

/// The TLS mode when the URL names none: `PGSSLMODE`, else `require` for
/// a server off the machine and `prefer` for a loopback address or a socket.
fn default_ssl_mode(config: &Config) -> Result<SslMode, String> {
    if let Some(mode) = env("PGSSLMODE") {
        return match mode.as_str() {
            "disable" => Ok(SslMode::Disable),
            "allow" | "prefer" => Ok(SslMode::Prefer),
            "require" | "verify-ca" | "verify-full" => Ok(SslMode::Require),
            _ => Err(format!("PGSSLMODE is `{mode}`: write disable, prefer or require")),
        };
    }
    let local = config.get_hosts().iter().all(|host| match host {
        Host::Unix(_) => true,
        Host::Tcp(name) => name == "localhost" || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback()),
    });
    Ok(if local { SslMode::Prefer } else { SslMode::Require })
}

impl PostgresUrl {
    /// Reads a `postgres://` (or `postgresql://`) URL, filling what it
    /// leaves out the way libpq does. The error never quotes the URL.
    pub fn parse(text: &str) -> Result<PostgresUrl, String> {
        // The client ends the user and password at the first `@` anywhere:
        // a second `@` (one left in a password) would make the rest of the
        // password the host or database, and shown.
        if text.split_once("://").is_some_and(|(_, rest)| rest.matches('@').count() > 1) {
            return Err("the PostgreSQL URL holds more than one `@`: write an `@` in the user, password or \
                        database as %40"
                .into());
        }
        // rlp always verifies certificates: libpq's verifying modes are `require` here.
        let text =
            text.replace("sslmode=verify-full", "sslmode=require").replace("sslmode=verify-ca", "sslmode=require");
        let mut config = Config::from_str(&text).map_err(|e| format!("the PostgreSQL URL cannot be read: {e}"))?;
        if config.get_user().is_none() {
            let user = default_user().ok_or("the PostgreSQL URL names no user, and neither PGUSER nor USER is set; write postgres://USER@HOST/DATABASE")?;
            config.user(user);
        }
        if config.get_hosts().is_empty() {
            match env("PGHOST") {
                Some(host) => config.host(host),
                None if std::path::Path::new(DEFAULT_SOCKET_DIR).is_dir() => config.host_path(DEFAULT_SOCKET_DIR),
                None => config.host("localhost"),
            };
        }
        if config.get_ports().is_empty() {
            let port = match env("PGPORT") {
                Some(text) => text.parse().map_err(|_| format!("PGPORT is `{text}`, not a port number"))?,
                None => 5432,
            };
            config.port(port);
        }
        if config.get_dbname().is_none() {
            let database = env("PGDATABASE").or_else(|| config.get_user().map(str::to_string)).unwrap_or_default();
            config.dbname(database);
        }
        if !text.contains("sslmode=") {
            config.ssl_mode(default_ssl_mode(&config)?);
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("rlp");
        }
        let shown = shown(&config);
        Ok(PostgresUrl { config: Box::new(config), shown })
    }

    /// The first host, shown (a socket folder percent-encoded, as in libpq URLs).
    fn host(&self) -> String {
        host_shown(self.config.get_hosts().first())
    }

    /// The settings to connect with and the password to use, looked up
    /// now; `warnings` receives why a password file was not read.
    pub(crate) fn credentials(&self, warnings: &mut Vec<String>) -> Credentials {
        let mut config = (*self.config).clone();
        // The URL's password is sent as given (bytes); its text is kept only
        // to take it out of messages.
        let in_url = config.get_password().is_some();
        let from_url = config.get_password().map(|p| Zeroizing::new(String::from_utf8_lossy(p).into_owned()));
        let password = from_url.or_else(|| env("PGPASSWORD").map(Zeroizing::new)).or_else(|| {
            let file = pgpass::default_file()?;
            let host = match config.get_hosts().first() {
                Some(Host::Tcp(name)) => name.clone(),
                Some(Host::Unix(dir)) => dir.display().to_string(),
                None => "localhost".to_string(),
            };
            let target = pgpass::Target {
                host: &host,
                port: config.get_ports().first().copied().unwrap_or(5432),
                database: config.get_dbname().unwrap_or_default(),
                user: config.get_user().unwrap_or_default(),
            };
            match pgpass::lookup(&file, target) {
                pgpass::Lookup::Found(password) => Some(password),
                pgpass::Lookup::None => None,
                pgpass::Lookup::Ignored(why) => {
                    warnings.push(why);
                    None
                }
            }
        });
        if let Some(password) = password.as_ref().filter(|_| !in_url) {
            config.password(password.as_bytes());
        }
        Credentials { config, password }
    }

    /// Whether the URL asks for no TLS (`sslmode=disable`).
    fn tls_disabled(&self) -> bool {
        self.config.get_ssl_mode() == SslMode::Disable
    }

    /// The TLS connector: the Mozilla roots, plus `PGSSLROOTCERT`'s certificates.
    pub(crate) fn tls(&self) -> Result<MakeRustlsConnect, String> {
        self.tls_with(env("PGSSLROOTCERT").map(PathBuf::from))
    }

    /// [`PostgresUrl::tls`] with `root_file` as `PGSSLROOTCERT`.
    fn tls_with(&self, root_file: Option<PathBuf>) -> Result<MakeRustlsConnect, String> {
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        if !self.tls_disabled()
            && let Some(file) = root_file
        {
            let unreadable = |e: &dyn fmt::Display| format!("PGSSLROOTCERT names {}: {e}", file.display());
            // A plain file of bounded size: never a FIFO that blocks, a device that never ends.
            let pem = crate::fsutil::read_regular(&file, MAX_ROOT_CERT_BYTES).map_err(|e| unreadable(&e))?;
            for cert in CertificateDer::pem_slice_iter(&pem) {
                roots.add(cert.map_err(|e| unreadable(&e))?).map_err(|e| unreadable(&e))?;
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS cannot be set up: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(MakeRustlsConnect::new(config))
    }

    /// The host and port, for messages.
    pub(crate) fn server(&self) -> String {
        format!("{}:{}", self.host(), self.config.get_ports().first().copied().unwrap_or(5432))
    }
}

/// The connection settings with the password filled in.
pub(crate) struct Credentials {
    /// What to connect with.
    pub config: Config,
    password: Option<Zeroizing<String>>,
}

impl Credentials {
    /// Whether a password is known (from the URL, `PGPASSWORD` or the file).
    pub(crate) fn has_password(&self) -> bool {
        self.password.is_some()
    }

    /// `message` with every occurrence of the password replaced.
    pub(crate) fn scrub(&self, message: String) -> String {
        match &self.password {
            Some(password) if !password.is_empty() => message.replace(password.as_str(), "[redacted]"),
            _ => message,
        }
    }
}

/// What a shown URL escapes: all but RFC 3986's unreserved characters.
const ESCAPED: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

fn host_shown(host: Option<&Host>) -> String {
    match host {
        Some(Host::Tcp(name)) if name.contains(':') => format!("[{name}]"),
        Some(Host::Tcp(name)) => name.clone(),
        Some(Host::Unix(dir)) => utf8_percent_encode(&dir.to_string_lossy(), ESCAPED).to_string(),
        None => String::new(),
    }
}

/// `postgres://user@host:port/database`: the parts that name the ledger,
/// never the password or other options.
fn shown(config: &Config) -> String {
    let user = utf8_percent_encode(config.get_user().unwrap_or_default(), ESCAPED);
    let database = utf8_percent_encode(config.get_dbname().unwrap_or_default(), ESCAPED);
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!("postgres://{user}@{}:{port}/{database}", host_shown(config.get_hosts().first()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shown_url_never_holds_the_password() {
        for text in [
            "postgres://ada:s3cr%40t@db.example:6543/ledger",
            "postgresql://ada@db.example:6543/ledger?password=s3cr%40t&sslmode=require",
        ] {
            let url = PostgresUrl::parse(text).unwrap();
            assert_eq!(url.to_string(), "postgres://ada@db.example:6543/ledger");
            assert!(!format!("{url:?}").contains("s3cr"));
            let credentials = url.credentials(&mut Vec::new());
            assert!(credentials.has_password());
            assert_eq!(credentials.scrub("no s3cr@t here".into()), "no [redacted] here");
        }
        for text in [
            "postgres://ada:s3cret@db.example:notaport/x",
            "postgres://ada:s3c@ret@db.example/x",
            "postgres://ada:s3c@r/et@db.example/x",
        ] {
            let error = PostgresUrl::parse(text).err().unwrap();
            assert!(!error.contains("s3c") && !error.contains("ret"), "{error}");
        }
    }

    #[test]
    fn tls_is_required_off_the_machine_unless_the_url_says_otherwise() {
        let mode = |text: &str| PostgresUrl::parse(text).unwrap().config.get_ssl_mode();
        assert_eq!(mode("postgres://ada@db.example/x"), SslMode::Require);
        assert_eq!(mode("postgres://ada@10.0.0.7/x"), SslMode::Require);
        assert_eq!(mode("postgres://ada@127.0.0.1/x"), SslMode::Prefer);
        assert_eq!(mode("postgres://ada@localhost/x"), SslMode::Prefer);
        assert_eq!(mode("postgres://ada@db.example/x?sslmode=disable"), SslMode::Disable);
        assert_eq!(mode("postgres://ada@127.0.0.1/x?sslmode=verify-full"), SslMode::Require);
    }

    #[test]
    fn a_root_certificate_file_must_be_a_bounded_plain_file() {
        let url = PostgresUrl::parse("postgres://ada@db.example/x").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let big = dir.path().join("big.pem");
        std::fs::write(&big, vec![b'A'; 5 << 20]).unwrap();
        for (file, said) in [(fifo, "not a regular file"), (big, "larger than")] {
            let error = url.tls_with(Some(file)).err().expect("refused");
            assert!(error.contains(said), "{error}");
        }
    }

    #[test]
    fn the_shown_url_escapes_only_what_a_url_must() {
        let url = PostgresUrl::parse("postgres://fleet_writer@db.example/rlp_ledger-2.x~y").unwrap();
        assert_eq!(url.to_string(), "postgres://fleet_writer@db.example:5432/rlp_ledger-2.x~y");
        let url = PostgresUrl::parse("postgres://a%20b@%2Fvar%2Frun%2Fpostgresql/l%2Fm").unwrap();
        assert_eq!(url.to_string(), "postgres://a%20b@%2Fvar%2Frun%2Fpostgresql:5432/l%2Fm");
    }

    #[test]
    fn urls_differing_only_in_password_are_the_same_ledger() {
        let a = PostgresUrl::parse("postgres://ada:one@h:1/d").unwrap();
        let b = PostgresUrl::parse("postgres://ada:two@h:1/d").unwrap();
        assert_eq!(a, b);
        assert_ne!(a, PostgresUrl::parse("postgres://ada:one@h:1/e").unwrap());
    }
}
