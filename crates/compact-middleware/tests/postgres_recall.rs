//! Recall (issue 25) with the index in PostgreSQL, against a real server:
//! the SQLite index's behaviour (ids, natural words, isolation, redaction;
//! `recall_support`), the index chosen with the session store
//! (`state.store: postgres`), two replicas on one database answering the
//! same ids, and the schema version.

mod postgres_support;
mod recall_support;

use std::sync::Arc;

use compact_middleware::CompactManager;
use compact_middleware::config::{Config, StateStoreKind};
use compact_middleware::recall::{Location, POSTGRES_SCHEMA_VERSION, RecallIndex, RecallQuery};
use recall_support::{config, history, placeholder_ids};

/// A manager whose index is `index` (a replica: its own connection).
fn replica(index: Arc<RecallIndex>) -> CompactManager {
    CompactManager::builder(config())
        .without_storage()
        .recall_index(index)
        .build()
        .expect("manager")
}

fn connect(url: &str) -> Arc<RecallIndex> {
    Arc::new(RecallIndex::connect(url).unwrap_or_else(|e| panic!("{e}")))
}

/// Recall on through the configuration: the session store's database.
fn on_postgres(url: &str) -> Config {
    let mut c = config();
    c.recall.path = None;
    c.state.store = StateStoreKind::Postgres;
    c.state.url = Some(url.to_owned());
    c
}

#[tokio::test]
async fn ids_give_the_original_back() {
    let db = postgres_support::database().await;
    recall_support::ids_give_the_original_back(&replica(connect(&db.url))).await;
}

#[tokio::test]
async fn natural_words_rank_the_cleared_output_first() {
    let db = postgres_support::database().await;
    recall_support::natural_words_rank_the_cleared_output_first(&replica(connect(&db.url))).await;
}

#[tokio::test]
async fn other_sessions_answer_nothing() {
    let db = postgres_support::database().await;
    recall_support::other_sessions_answer_nothing(&replica(connect(&db.url))).await;
}

#[tokio::test]
async fn redacted_secrets_are_not_found() {
    let db = postgres_support::database().await;
    recall_support::redacted_secrets_are_not_found(&replica(connect(&db.url))).await;
}

#[tokio::test]
async fn state_store_postgres_keeps_the_index_in_the_database() {
    let db = postgres_support::database().await;
    let c = on_postgres(&db.url);
    assert_eq!(
        compact_middleware::manager::recall_location(&c),
        Location::Postgres(db.url.clone())
    );
    let m = CompactManager::builder(c.clone())
        .without_storage()
        .build()
        .expect("manager");
    let index = m.recall_index().expect("recall is on").clone();
    assert_eq!(index.backend(), "postgres");
    assert_eq!(
        index.schema_version().unwrap(),
        i64::from(POSTGRES_SCHEMA_VERSION)
    );
    // Managers of one process share the database's index.
    let other = CompactManager::builder(c)
        .without_storage()
        .build()
        .unwrap();
    assert!(Arc::ptr_eq(&index, other.recall_index().unwrap()));
    // `recall.path` set to a file still wins.
    let mut c = on_postgres(&db.url);
    c.recall.path = Some(":memory:".into());
    assert_eq!(
        compact_middleware::manager::recall_location(&c),
        Location::File(":memory:".into())
    );
}

#[tokio::test]
async fn two_replicas_on_one_database_answer_the_same_ids() {
    let db = postgres_support::database().await;
    let (ia, ib) = (connect(&db.url), connect(&db.url));
    let (a, b) = (replica(ia.clone()), replica(ib.clone()));
    let out_a = a.preflight("s1", history(8)).await.unwrap();
    a.flush_recall(None).await;
    let ids = placeholder_ids(&out_a.messages);
    assert!(ids.len() >= 3, "{ids:?}");
    // Replica b answers replica a's ids, whole, and the same words the same way.
    for (_, rid) in &ids {
        let ea = a.recall("s1", RecallQuery::id(rid)).await.unwrap().entry;
        let eb = b.recall("s1", RecallQuery::id(rid)).await.unwrap().entry;
        assert!(eb.is_some(), "{rid}");
        assert_eq!(ea, eb);
    }
    let q = RecallQuery::text("which port was reserved for the ledger?");
    let (ha, hb) = (
        a.recall("s1", q.clone()).await.unwrap().hits,
        b.recall("s1", q).await.unwrap().hits,
    );
    assert!(!ha.is_empty());
    assert_eq!(ha, hb);
    // Compacting the same history on b writes the same placeholders (the
    // secret is the database's) and indexes nothing twice.
    let n = ia.count("s1").unwrap();
    let out_b = b.preflight("s1", history(8)).await.unwrap();
    b.flush_recall(None).await;
    assert_eq!(out_b.messages, out_a.messages);
    assert_eq!(ib.count("s1").unwrap(), n);
    // A third process, connecting later, derives the same ids too.
    let c = connect(&db.url);
    assert_eq!(
        c.key("s1").output_id("x", "y"),
        ia.key("s1").output_id("x", "y")
    );
    assert_ne!(
        c.key("s2").output_id("x", "y"),
        ia.key("s1").output_id("x", "y")
    );
}

#[tokio::test]
async fn a_newer_schema_is_refused_naming_the_database_and_both_versions() {
    let db = postgres_support::database().await;
    drop(connect(&db.url));
    let newer = POSTGRES_SCHEMA_VERSION + 1;
    let (client, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let task = tokio::spawn(conn);
    client
        .execute("UPDATE compact_recall_meta SET version = $1", &[&newer])
        .await
        .unwrap();
    let e = RecallIndex::connect(&db.url).unwrap_err().to_string();
    let db_name = db.url.rsplit('/').next().unwrap();
    assert!(e.contains(db_name), "{e}");
    assert!(e.contains(&format!("version {newer}")), "{e}");
    assert!(e.contains(&format!("({POSTGRES_SCHEMA_VERSION})")), "{e}");
    let e = CompactManager::builder(on_postgres(&db.url))
        .without_storage()
        .build()
        .unwrap_err()
        .to_string();
    assert!(e.contains("recall index") && e.contains("newer"), "{e}");
    // Nothing was changed by the refused opens.
    let v: i32 = client
        .query_one("SELECT version FROM compact_recall_meta", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(v, newer);
    drop(client);
    let _ = task.await;
}
