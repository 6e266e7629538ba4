//! A real PostgreSQL for tests: the server `COMPACT_TEST_POSTGRES_URL` names
//! (scripts/test.sh starts one), or else one started by
//! `scripts/postgres.sh` for this test and stopped when it ends. Each test
//! gets a fresh database on it. No PostgreSQL is a failure, not a skip.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

const HOW: &str = "these tests need PostgreSQL: install it (Debian: apt-get install -y postgresql) \
                   or set COMPACT_TEST_POSTGRES_URL to a server where the user may CREATE DATABASE";

/// A fresh database; the server this test started, if any, stops on drop.
pub(crate) struct TestDb {
    /// The database's URL.
    pub(crate) url: String,
    server: Option<Server>,
}

struct Server {
    dir: tempfile::TempDir,
    script: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new(&self.script)
            .arg("stop")
            .arg(self.dir.path())
            .status();
    }
}

fn script() -> PathBuf {
    let mut dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    loop {
        let candidate = dir.join("scripts/postgres.sh");
        if candidate.is_file() {
            return candidate;
        }
        assert!(dir.pop(), "scripts/postgres.sh not found above the crate");
    }
}

/// `url` with its database replaced by `name`.
pub(crate) fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (url, String::new()),
    };
    let host_start = base.find("://").map_or(0, |i| i + 3);
    let host_end = base[host_start..]
        .find('/')
        .map_or(base.len(), |i| host_start + i);
    format!("{}/{name}{query}", &base[..host_end])
}

/// A server of this test's own that takes TLS connections only (plain
/// ones are rejected), with a certificate for `localhost`: its URL's port,
/// and the directory of `ca.crt` (the root that signed it) and
/// `other-ca.crt` (one that did not). Stopped on drop.
pub(crate) struct TlsServer {
    pub(crate) port: u16,
    pub(crate) tls: PathBuf,
    _server: Server,
}

/// Starts a [`TlsServer`] (`POSTGRES_TLS=1 scripts/postgres.sh start`).
pub(crate) fn tls_server() -> TlsServer {
    let (url, server) = start(true);
    let port = url
        .rsplit_once(':')
        .and_then(|(_, rest)| rest.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {url}"));
    TlsServer {
        port,
        tls: server.dir.path().join("tls"),
        _server: server,
    }
}

/// Starts a server of this test's own in a new directory (TLS only with
/// `tls`): its URL, and the server, stopped on drop.
fn start(tls: bool) -> (String, Server) {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = script();
    let mut command = Command::new(&script);
    command.arg("start").arg(dir.path());
    if tls {
        command.env("POSTGRES_TLS", "1");
    }
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}\n{HOW}", script.display()));
    let what = if tls {
        "PostgreSQL with TLS"
    } else {
        "PostgreSQL"
    };
    assert!(
        out.status.success(),
        "{what} did not start: {}\n{HOW}",
        String::from_utf8_lossy(&out.stderr)
    );
    let url = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (url, Server { dir, script })
}

/// A plain server of this test's own, which the test may restart (as a
/// crash: `scripts/postgres.sh restart`). Stopped on drop.
pub(crate) struct OwnServer {
    /// The server's URL (its `postgres` database).
    pub(crate) url: String,
    server: Server,
}

/// Starts an [`OwnServer`].
pub(crate) fn own_server() -> OwnServer {
    let (url, server) = start(false);
    OwnServer { url, server }
}

impl OwnServer {
    /// Restarts the server, waiting until it takes connections again.
    pub(crate) fn restart(&self) {
        let out = Command::new(&self.server.script)
            .arg("restart")
            .arg(self.server.dir.path())
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", self.server.script.display()));
        assert!(
            out.status.success(),
            "PostgreSQL did not restart: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A fresh, empty database on a real server.
pub(crate) async fn database() -> TestDb {
    let (base, server) = match std::env::var("COMPACT_TEST_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => (url, None),
        _ => {
            let (url, server) = start(false);
            (url, Some(server))
        }
    };
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "compact_test_{}_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
    );
    let (client, connection) = tokio_postgres::connect(&base, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {base}: {e}\n{HOW}"));
    let task = tokio::spawn(connection);
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap_or_else(|e| panic!("CREATE DATABASE {name}: {e}\n{HOW}"));
    drop(client);
    let _ = task.await;
    TestDb {
        url: with_database(&base, &name),
        server,
    }
}
