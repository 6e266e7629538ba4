//! The PostgreSQL stores over TLS, against a real server that takes TLS
//! connections only, with a certificate for `localhost` signed by a CA made
//! for the test (`scripts/postgres.sh` with `POSTGRES_TLS=1`): libpq's
//! `sslmode` and `sslrootcert` in the URL decide whether the connection is
//! encrypted and what is checked.

mod manager_support;
mod postgres_support;

use std::sync::Arc;

use compact_middleware::archive::SessionId;
use compact_middleware::memory::PostgresMemoryStore;
use compact_middleware::state::{PostgresSessionStore, SessionStore};
use compact_middleware::{CompactManager, Message};
use manager_support::config_in;

#[tokio::test]
async fn sslmode_and_sslrootcert_decide_what_is_encrypted_and_checked() {
    let server = postgres_support::tls_server();
    let ca = server.tls.join("ca.crt");
    let other = server.tls.join("other-ca.crt");
    let url = |host: &str, query: &str| {
        format!(
            "postgresql://postgres:hunter2@{host}:{}/postgres{query}",
            server.port
        )
    };
    let full = url(
        "localhost",
        &format!("?sslmode=verify-full&sslrootcert={}", ca.display()),
    );

    // Plain connections are rejected by this server: a store that connects
    // at all is on TLS.
    let err = PostgresSessionStore::connect(&url("127.0.0.1", "?sslmode=disable"))
        .await
        .expect_err("plain is rejected");
    let text = err.to_string();
    assert!(text.contains("no encryption"), "{text}");
    assert!(!text.contains("hunter2"), "the password leaked: {text}");

    // Encrypted without a check (libpq's prefer, the default, and require).
    for query in ["", "?sslmode=prefer", "?sslmode=require"] {
        PostgresSessionStore::connect(&url("127.0.0.1", query))
            .await
            .unwrap_or_else(|e| panic!("{query}: {e}"));
    }

    // verify-full: the chain and the name; verify-ca: the chain only.
    PostgresSessionStore::connect(&full)
        .await
        .unwrap_or_else(|e| panic!("verify-full: {e}"));
    let by_ip = url(
        "127.0.0.1",
        &format!("?sslmode=verify-full&sslrootcert={}", ca.display()),
    );
    let err = PostgresSessionStore::connect(&by_ip)
        .await
        .expect_err("the certificate names localhost, not 127.0.0.1");
    assert!(err.to_string().contains("certificate"), "{err}");
    PostgresSessionStore::connect(&url(
        "127.0.0.1",
        &format!("?sslmode=verify-ca&sslrootcert={}", ca.display()),
    ))
    .await
    .unwrap_or_else(|e| panic!("verify-ca: {e}"));
    // require with roots checks the chain, as libpq does.
    for query in [
        format!("?sslmode=verify-ca&sslrootcert={}", other.display()),
        format!("?sslmode=require&sslrootcert={}", other.display()),
        // The bundled public roots did not sign a test CA's certificate.
        "?sslmode=verify-full&sslrootcert=system".to_owned(),
    ] {
        let err = PostgresSessionStore::connect(&url("localhost", &query))
            .await
            .expect_err("a CA that did not sign the certificate");
        assert!(err.to_string().contains("certificate"), "{query}: {err}");
    }
    assert!(
        PostgresSessionStore::connect(&url("localhost", "?sslmode=sometimes"))
            .await
            .is_err()
    );

    // A session over verify-full: a manager continues its chain through a
    // second connection's store.
    let dir = tempfile::tempdir().expect("tempdir");
    let store: Arc<dyn SessionStore> =
        Arc::new(PostgresSessionStore::connect(&full).await.expect("store"));
    let manager = CompactManager::builder(config_in(dir.path(), 2_000))
        .session_store(store)
        .build()
        .expect("manager");
    let mut fed = vec![Message::system("You are an agent.")];
    for i in 0..10 {
        fed.push(Message::user(format!(
            "turn {i}: ticket OPS-{i}. {}",
            "lorem ipsum ".repeat(60)
        )));
        fed.push(Message::assistant(format!("Done with OPS-{i}.")));
        fed = manager.preflight("s1", fed).await.expect("turn").messages;
    }
    let other_connection = PostgresSessionStore::connect(&full).await.expect("store");
    let record = other_connection
        .load(&SessionId::parse("s1").expect("id"))
        .await
        .expect("load")
        .expect("a record");
    assert!(record.summary.is_some_and(|s| s.version >= 1));

    // The same from the configuration's keys, for a URL without them.
    let mut settings = compact_middleware::config::StateSettings {
        url: Some(url("localhost", "?application_name=compact-test")),
        ssl_mode: Some("verify-full".into()),
        ssl_root_cert: Some(ca.display().to_string()),
        ..Default::default()
    };
    let configured = settings.postgres_url().expect("url");
    PostgresSessionStore::connect(&configured)
        .await
        .unwrap_or_else(|e| panic!("state.ssl_mode, state.ssl_root_cert: {e}"));
    // The URL's own parameters win over the keys.
    settings.url = Some(url("localhost", "?sslmode=disable"));
    assert!(
        PostgresSessionStore::connect(&settings.postgres_url().expect("url"))
            .await
            .is_err()
    );

    // The memory store takes the same URL (its calls are synchronous).
    let memory = tokio::task::spawn_blocking(move || PostgresMemoryStore::connect(&full))
        .await
        .expect("task");
    memory.expect("memory store over TLS");
}
