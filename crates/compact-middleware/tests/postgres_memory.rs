//! Seed 002's memory store in PostgreSQL against a real server: the memory
//! table's version chain, one `processing` row per conversation across
//! stores on separate connections (replicas), recovery of a crashed
//! summarization, and managers that pick it with the session store's
//! configuration (`state.store: postgres`) sharing cross-session memory and
//! sliding-window rows.

mod memory_support;
mod postgres_support;

use std::sync::Arc;
use std::time::Duration;

use compact_middleware::config::{Config, Mode, StateStoreKind};
use compact_middleware::memory::{MemoryStatus, MemoryStore, PostgresMemoryStore};
use compact_middleware::{CompactManager, Message};
use memory_support::{
    begins_on_threads, compact_users_session_a, conversation,
    crash_mid_summarization_is_recoverable, seed_002_evolution,
};

fn connect(url: &str) -> Arc<PostgresMemoryStore> {
    Arc::new(PostgresMemoryStore::connect(url).unwrap_or_else(|e| panic!("{e}")))
}

#[tokio::test]
async fn the_seed_002_memory_table_evolution() {
    let db = postgres_support::database().await;
    let store = connect(&db.url);
    seed_002_evolution(store.clone(), &conversation(20, "please check")).await;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64;
    for r in store.history("c1").expect("history") {
        assert!(!r.memory_text.is_empty());
        assert!(r.generation_time_ms.is_some());
        // The database's clock, in the same unit as SQLite's.
        assert!(
            (r.created_at_ms - now_ms).abs() < 3_600_000,
            "{}",
            r.created_at_ms
        );
    }
    assert_eq!(store.get(3).expect("get").map(|r| r.end_sequence), Some(13));
    assert!(store.get(99).expect("get").is_none());
    assert!(store.latest_completed("c2").expect("latest").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_never_hold_two_processing_rows() {
    let db = postgres_support::database().await;
    // Four stores, four connections: four replicas on one database.
    let stores: Vec<Arc<PostgresMemoryStore>> = (0..4).map(|_| connect(&db.url)).collect();
    let mut tasks = begins_on_threads(&stores);
    // Also straight from async tasks (as the sliding window's trigger is).
    for store in &stores {
        let store = store.clone();
        tasks.push(tokio::spawn(async move { store.begin("c", 0, 9, None) }));
    }
    let mut won = Vec::new();
    for t in tasks {
        if let Some(id) = t.await.expect("join").expect("begin") {
            won.push(id);
        }
    }
    assert_eq!(won.len(), 1, "{won:?}");
    let processing: Vec<_> = stores[3]
        .history("c")
        .expect("history")
        .into_iter()
        .filter(|r| r.status == MemoryStatus::Processing)
        .map(|r| r.memory_id)
        .collect();
    assert_eq!(processing, won);
    // Another conversation is not held up by it.
    assert!(
        stores[1]
            .begin("other", 0, 5, None)
            .expect("begin")
            .is_some()
    );
    // Once it completes, the next one may begin, on any replica.
    assert!(stores[2].complete(won[0], "done", 3).expect("complete"));
    assert!(!stores[0].complete(won[0], "twice", 3).expect("complete"));
    assert!(
        stores[0]
            .begin("c", 0, 11, Some(won[0]))
            .expect("begin")
            .is_some()
    );
}

#[tokio::test]
async fn a_crashed_replicas_summarization_is_recoverable() {
    let db = postgres_support::database().await;
    crash_mid_summarization_is_recoverable(
        || connect(&db.url) as Arc<dyn MemoryStore>,
        &conversation(12, "please check"),
    )
    .await;
}

fn config(dir: &std::path::Path, url: &str, yaml: &str) -> Config {
    let mut config = Config::from_yaml_str(yaml).unwrap_or_else(|e| panic!("{e}"));
    config.max_context_tokens = Some(2_000);
    config.state.store = StateStoreKind::Postgres;
    config.state.url = Some(url.to_owned());
    // Where SQLite would be: it must stay empty.
    config.memory.store_path = dir.join("memory.sqlite3").display().to_string();
    config.telemetry.exporter = compact_middleware::config::ExporterKind::None;
    config
}

fn manager(config: &Config) -> CompactManager {
    CompactManager::builder(config.clone())
        .without_storage()
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

async fn rows(url: &str, sql: &str) -> i64 {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    client
        .query_one(sql, &[])
        .await
        .expect("query")
        .get::<_, i64>(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managers_pick_it_with_the_session_store_and_share_cross_session_memory() {
    let db = postgres_support::database().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = config(
        dir.path(),
        &db.url,
        "policy:\n  keep_recent_turns: 1\nmemory:\n  injection: true\n",
    );
    // Two managers, as two replicas would build them from one file.
    let (a, b) = (manager(&config), manager(&config));
    let store = a.memory_store().expect("a memory store");
    assert!(
        format!("{store:?}").contains("PostgresMemoryStore"),
        "{store:?}"
    );
    assert!(!format!("{store:?}").contains("secret"));

    compact_users_session_a(&a).await;
    assert_eq!(
        rows(
            &db.url,
            "SELECT count(*) FROM compact_session_memory WHERE memory_key = 'user-42'"
        )
        .await,
        1
    );

    // The other replica's new session for the same user gets it.
    b.bind_memory_key("b", "user-42").await;
    let out = b
        .preflight(
            "b",
            vec![
                Message::system("You are a support agent."),
                Message::user("Hi again"),
            ],
        )
        .await
        .expect("preflight");
    assert_eq!(out.report.injected, ["cross_session"]);
    assert!(
        out.messages[0]
            .plain_text()
            .contains("Cross-session memory:")
    );
    assert!(out.messages[0].plain_text().contains("RT-"));
    assert!(
        !dir.path().join("memory.sqlite3").exists(),
        "nothing went to SQLite"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sliding_window_mode_keeps_its_rows_in_postgres() {
    let db = postgres_support::database().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = config(
        dir.path(),
        &db.url,
        "memory:\n  summarize_after_seq: 3\n  rolling_window_size: 6\n",
    );
    config.policy.mode = Mode::SlidingWindow;
    let (a, b) = (manager(&config), manager(&config));
    let mut history = vec![Message::system("You are an agent.")];
    for i in 0..3 {
        history.push(Message::user(format!("Question {i} about ticket Q-{i}.")));
        history.push(Message::assistant(format!("Answer {i}: resolved Q-{i}.")));
    }
    history.push(Message::user("Question 3."));
    a.preflight("w", history.clone()).await.expect("preflight");
    let store = a.memory_store().expect("store").clone();
    // A hang guard only, far beyond what a loaded machine needs.
    let ready = tokio::time::timeout(Duration::from_secs(120), async {
        while store.latest_completed("w").expect("latest").is_none() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(ready.is_ok(), "the background summary completes");
    assert_eq!(
        rows(
            &db.url,
            "SELECT count(*) FROM compact_memory WHERE conversation_id = 'w' AND status = 'completed'"
        )
        .await,
        1
    );

    // The next round, on the other replica, reads that memory.
    history.push(Message::assistant("Answer 3."));
    history.push(Message::user("Question 4."));
    let out = b.preflight("w", history).await.expect("preflight");
    assert_eq!(out.report.injected, ["conversation_memory"]);
    assert!(
        out.messages[0]
            .plain_text()
            .contains("Previous context: (messages 0-5)")
    );
}

#[test]
fn an_unreachable_database_is_a_configuration_error_without_the_password() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = config(
        dir.path(),
        "postgres://u:s3cret@127.0.0.1:1/x",
        "memory:\n  injection: true\n",
    );
    let err = CompactManager::builder(config)
        .without_storage()
        .build()
        .expect_err("no database there");
    let text = err.to_string();
    assert!(text.contains("state.url"), "{text}");
    assert!(text.contains("cannot connect"), "{text}");
    assert!(!text.contains("s3cret"), "{text}");
}
