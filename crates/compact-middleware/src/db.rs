//! What the SQLite and PostgreSQL stores of `state` (session records) and
//! `memory` (the memory store) share, so that the two stacks open, connect
//! and set up their schemas one way: opening a SQLite file, and for
//! PostgreSQL the URL (its password never shown), the database's own error
//! text, a connection whose task runs on the current runtime, and schema
//! creation under a two-key advisory lock (replicas starting together
//! create it once). Errors are plain sentences; each store wraps them in
//! its own error type.

use std::path::Path;
use std::time::Duration;

use tokio_postgres::{Client, NoTls};

use crate::config::redact_url_password;

/// Opens (creating if needed) the SQLite database at `path`, parent
/// directories included; `:memory:` is a private in-memory one. A file is
/// put in WAL mode (readers go on while a writer commits). `Err` says
/// which path failed.
pub(crate) fn open_sqlite(
    path: &Path,
    busy: Duration,
) -> Result<(rusqlite::Connection, bool), String> {
    let in_memory = path.as_os_str() == ":memory:";
    let conn = if in_memory {
        rusqlite::Connection::open_in_memory().map_err(|e| e.to_string())?
    } else {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        let conn =
            rusqlite::Connection::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(|e| e.to_string())?;
        conn
    };
    conn.busy_timeout(busy).map_err(|e| e.to_string())?;
    Ok((conn, in_memory))
}

/// A PostgreSQL server to connect to: the client's configuration and the
/// TLS connector of its `sslmode` (`crate::pgtls`).
#[derive(Clone)]
pub(crate) struct Postgres {
    config: tokio_postgres::Config,
    tls: Option<crate::pgtls::MakeRustls>,
}

/// A PostgreSQL URL (`postgres://user:password@host:port/db`, with libpq's
/// `sslmode` and `sslrootcert` if wanted) as the client's configuration
/// (10 s to connect unless it says otherwise) and its label, the URL with
/// the password masked: the only form that is shown.
pub(crate) fn postgres_config(url: &str) -> Result<(Postgres, String), String> {
    let label = redact_url_password(url);
    let tls = crate::pgtls::settings(url).map_err(|e| format!("{label}: {e}"))?;
    let mut config: tokio_postgres::Config = tls
        .url
        .parse()
        .map_err(|e| format!("{label}: not a PostgreSQL URL: {e}"))?;
    config.ssl_mode(tls.mode.ssl_mode());
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(10));
    }
    let tls = crate::pgtls::connector(&tls).map_err(|e| format!("{label}: {e}"))?;
    Ok((Postgres { config, tls }, label))
}

/// The database's own message (`42P01: relation … does not exist`), more
/// useful than the client's generic "db error".
pub(crate) fn postgres_detail(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(d) => format!("{}: {}", d.code().code(), d.message()),
        None => match std::error::Error::source(e) {
            Some(source) => format!("{e}: {source}"),
            None => e.to_string(),
        },
    }
}

/// A new connection (over TLS when its `sslmode` asks for it); its task runs
/// on the current runtime until the connection closes.
pub(crate) async fn postgres_connect(pg: &Postgres, label: &str) -> Result<Client, String> {
    let failed = |e: tokio_postgres::Error| {
        format!("postgres {label}: cannot connect: {}", source_chain(&e))
    };
    let label = label.to_owned();
    let client = match &pg.tls {
        None => {
            let (client, connection) = pg.config.connect(NoTls).await.map_err(failed)?;
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!(url = %label, error = %e, "postgres connection closed");
                }
            });
            client
        }
        Some(tls) => {
            let (client, connection) = pg.config.connect(tls.clone()).await.map_err(failed)?;
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!(url = %label, error = %e, "postgres connection closed");
                }
            });
            client
        }
    };
    Ok(client)
}

fn source_chain(e: &tokio_postgres::Error) -> String {
    match std::error::Error::source(e) {
        Some(source) => format!("{e}: {source}"),
        None => e.to_string(),
    }
}

/// Runs `schema` in one transaction holding the advisory lock `lock`
/// (two keys, so it never collides with the one-key session locks).
/// `Err` is `(what failed, the error)`.
pub(crate) async fn postgres_schema(
    client: &Client,
    lock: (i32, i32),
    schema: &str,
) -> Result<(), (&'static str, tokio_postgres::Error)> {
    let step = |what: &'static str| move |e| (what, e);
    client
        .batch_execute("BEGIN")
        .await
        .map_err(step("schema"))?;
    client
        .execute("SELECT pg_advisory_xact_lock($1, $2)", &[&lock.0, &lock.1])
        .await
        .map_err(step("schema"))?;
    client
        .batch_execute(schema)
        .await
        .map_err(step("creating"))?;
    client.batch_execute("COMMIT").await.map_err(step("schema"))
}
