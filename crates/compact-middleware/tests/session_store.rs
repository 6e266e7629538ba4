//! Session state in a store: managers that share a store (separate
//! processes, restarts, replicas) continue one summary chain exactly as one
//! manager does; status, delete and the conversation layer go through it.

use std::sync::Arc;

use compact_middleware::config::Config;
use compact_middleware::state::{
    MemorySessionStore, SessionRecord, SessionStore, SqliteSessionStore,
};
use compact_middleware::{CompactManager, Message};

fn turn(i: usize) -> Vec<Message> {
    vec![
        Message::user(format!(
            "turn {i}: ticket OPS-{i} belongs to team-{i}. {}",
            "lorem ipsum ".repeat(40)
        )),
        Message::assistant(format!("Done with OPS-{i}. {}", "dolor sit ".repeat(40))),
    ]
}

fn config(dir: &std::path::Path) -> Config {
    let mut config = Config {
        max_context_tokens: Some(2_000),
        ..Config::default()
    };
    config.storage.path = dir.join("archive").display().to_string();
    config.storage.spool_path = dir.join("spool").display().to_string();
    config.telemetry.exporter = compact_middleware::config::ExporterKind::None;
    config
}

fn manager(config: &Config, store: Option<Arc<dyn SessionStore>>) -> CompactManager {
    let mut b = CompactManager::builder(config.clone());
    if let Some(store) = store {
        b = b.session_store(store);
    }
    b.build().unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `turns` turns of one session, the agent feeding our output back
/// (`feed_back`) or resending its raw history; `pick(i)` chooses the manager
/// of turn `i`. Returns every output.
async fn drive(
    managers: &[CompactManager],
    pick: impl Fn(usize) -> usize,
    turns: usize,
    feed_back: bool,
) -> Vec<Vec<Message>> {
    let mut raw = vec![Message::system("You are an agent.")];
    let mut fed = raw.clone();
    let mut outputs = Vec::new();
    for i in 0..turns {
        raw.extend(turn(i));
        fed.extend(turn(i));
        let input = if feed_back { fed.clone() } else { raw.clone() };
        let out = managers[pick(i)]
            .preflight("s1", input)
            .await
            .unwrap_or_else(|e| panic!("turn {i}: {e}"));
        fed = out.messages.clone();
        outputs.push(out.messages);
    }
    outputs
}

#[tokio::test]
async fn alternating_managers_on_one_store_match_one_manager() {
    let dir = tempfile::tempdir().expect("tempdir");
    for feed_back in [true, false] {
        let one = drive(
            &[manager(&config(&dir.path().join("one")), None)],
            |_| 0,
            24,
            feed_back,
        )
        .await;
        let sqlite: Arc<dyn SessionStore> = Arc::new(
            SqliteSessionStore::open(dir.path().join(format!("s{feed_back}.sqlite3")))
                .expect("sqlite store"),
        );
        let memory: Arc<dyn SessionStore> = Arc::new(MemorySessionStore::new());
        for (name, store) in [("sqlite", sqlite), ("memory", memory)] {
            let cfg = config(&dir.path().join(format!("{name}{feed_back}")));
            // Two "replicas", and a third built fresh at turn 10 (a restart).
            let managers = [
                manager(&cfg, Some(store.clone())),
                manager(&cfg, Some(store.clone())),
                manager(&cfg, Some(store.clone())),
            ];
            let shared = drive(
                &managers,
                |i| if i >= 10 && i % 3 == 0 { 2 } else { i % 2 },
                24,
                feed_back,
            )
            .await;
            assert_eq!(
                shared, one,
                "{name}, feed_back {feed_back}: outputs differ from one manager's"
            );
            let record = store
                .load(&compact_middleware::archive::SessionId::parse("s1").expect("id"))
                .await
                .expect("load")
                .expect("a record");
            assert!(record.summary.as_ref().is_some_and(|s| s.version > 1));
        }
    }
}

#[tokio::test]
async fn status_delete_and_conversation_layer_go_through_the_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store: Arc<dyn SessionStore> =
        Arc::new(SqliteSessionStore::open(dir.path().join("state.sqlite3")).expect("sqlite store"));
    let cfg = config(dir.path());
    let a = manager(&cfg, Some(store.clone()));
    let b = manager(&cfg, Some(store.clone()));
    drive(std::slice::from_ref(&a), |_| 0, 12, true).await;

    let status = b.status("s1").await.expect("status");
    assert!(status.known);
    assert_eq!(status.store, "sqlite");
    let version = status.summary.as_ref().map(|s| s.version).expect("summary");
    assert!(version >= 1);
    let layers = status.layers.expect("layers");
    assert_eq!(layers.summary.messages, 1);
    assert!(layers.recent.messages > 0);
    assert_eq!(
        layers.total_tokens,
        status.last_report.as_ref().expect("report")["tokens_after"]
            .as_u64()
            .expect("tokens_after") as usize
    );

    // Unknown sessions are reported as such and not remembered.
    let before = b.session_count();
    assert!(!b.status("nobody").await.expect("status").known);
    assert_eq!(b.session_count(), before);

    // The conversation layer is validated and persisted.
    assert!(
        a.set_conversation_layer("s1", Some(serde_json::json!({"policy": {"nope": 1}})))
            .await
            .is_err()
    );
    a.set_conversation_layer(
        "s1",
        Some(serde_json::json!({"policy": {"keep_recent_turns": 2}})),
    )
    .await
    .expect("layer");
    assert!(b.conversation_layer("s1").await.expect("read").is_some());

    // Deleting on one manager forgets the session on the other.
    assert!(b.delete_session("s1").await.expect("delete"));
    let status = a.status("s1").await.expect("status");
    assert!(!status.known && status.summary.is_none());
    assert!(!a.delete_session("s1").await.expect("delete again"));
}

#[test]
fn records_tolerate_fields_they_do_not_know() {
    // A record written by a newer version (say with a fact ledger) loads.
    let r = SessionRecord::from_json(br#"{"format":2,"step":3,"ledger":{"facts":[]}}"#)
        .expect("record");
    assert_eq!(r.step, Some(3));
}
