//! Session state in a store: managers that share a store (separate
//! processes, restarts, replicas) continue one summary chain exactly as one
//! manager does; status, delete and the conversation layer go through it.

mod manager_support;

use std::sync::Arc;

use compact_middleware::state::{
    MemorySessionStore, SessionRecord, SessionStore, SqliteSessionStore,
};
use compact_middleware::{CompactManager, Message};
use manager_support::{manager, store_config as config, ticket_turn};

/// Runs `turns` turns of one session (see [`manager_support::drive`]).
async fn drive(
    managers: &[CompactManager],
    pick: impl Fn(usize) -> usize,
    turns: usize,
    feed_back: bool,
) -> Vec<Vec<Message>> {
    manager_support::drive(managers, pick, turns, feed_back, |i| ticket_turn(i, false)).await
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

/// The table and the row of a record as versions before records were
/// stored in parts wrote them: the whole record, as JSON, in `record`.
const OLD_SQLITE_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS compact_sessions (
    session_id TEXT    PRIMARY KEY,
    etag       INTEGER NOT NULL,
    format     INTEGER NOT NULL,
    record     TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
);
";

fn write_old_row(path: &std::path::Path, session: &str, record: &SessionRecord) {
    let conn = rusqlite::Connection::open(path).expect("sqlite");
    conn.execute_batch(OLD_SQLITE_SCHEMA).expect("old schema");
    let text = String::from_utf8(record.to_json().expect("json")).expect("utf-8");
    conn.execute(
        "INSERT INTO compact_sessions (session_id, etag, format, record, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT(session_id) DO UPDATE SET
             etag = excluded.etag, format = excluded.format,
             record = excluded.record, updated_at = excluded.updated_at",
        rusqlite::params![session, 12345_i64, record.format, text, 0_i64],
    )
    .expect("old row");
}

/// `(format, length of record, rows)` of a session in a SQLite file.
fn stored_layout(path: &std::path::Path, session: &str) -> (i64, usize, i64) {
    let conn = rusqlite::Connection::open(path).expect("sqlite");
    conn.query_row(
        "SELECT format, length(record),
                (SELECT count(*) FROM compact_session_rows WHERE session_id = ?1)
         FROM compact_sessions WHERE session_id = ?1",
        [session],
        |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as usize, r.get(2)?)),
    )
    .expect("layout")
}

#[tokio::test]
async fn a_record_stored_whole_by_an_earlier_version_continues_and_is_stored_in_parts() {
    let dir = tempfile::tempdir().expect("tempdir");
    for feed_back in [true, false] {
        let one = drive(
            &[manager(
                &config(&dir.path().join(format!("one{feed_back}"))),
                None,
            )],
            |_| 0,
            30,
            feed_back,
        )
        .await;

        // Turns 0-14 on a manager whose record ends up in a SQLite file the
        // way an earlier version stored it.
        let memory = Arc::new(MemorySessionStore::new());
        let cfg = config(&dir.path().join(format!("m{feed_back}")));
        let first = manager(&cfg, Some(memory.clone()));
        let mut raw = vec![Message::system("You are an agent.")];
        let mut fed = raw.clone();
        let mut outputs = Vec::new();
        let path = dir.path().join(format!("old{feed_back}.sqlite3"));
        let mut current = first;
        for i in 0..30 {
            if i == 15 {
                let id = compact_middleware::archive::SessionId::parse("s1").expect("id");
                let record = memory.load(&id).await.expect("load").expect("a record");
                assert!(record.summary.is_some() && !record.ledger.is_empty());
                write_old_row(&path, "s1", &record);
                let store: Arc<dyn SessionStore> =
                    Arc::new(SqliteSessionStore::open(&path).expect("opens the old file"));
                // It loads as it was written.
                let back = store
                    .load(&id)
                    .await
                    .expect("load")
                    .expect("the old record");
                assert_eq!(
                    back.to_json().expect("json"),
                    record.to_json().expect("json")
                );
                assert_eq!(stored_layout(&path, "s1").2, 0);
                current = manager(&cfg, Some(store));
            }
            raw.extend(ticket_turn(i, false));
            fed.extend(ticket_turn(i, false));
            let input = if feed_back { fed.clone() } else { raw.clone() };
            let out = current
                .preflight("s1", input)
                .await
                .unwrap_or_else(|e| panic!("turn {i}: {e}"));
            fed = out.messages.clone();
            outputs.push(out.messages);
            if i == 15 {
                // Converted by its first save: the head and rows.
                let (format, record_len, rows) = stored_layout(&path, "s1");
                assert_eq!((format, record_len), (2, 0));
                assert!(rows > 10, "{rows} rows");
            }
        }
        assert_eq!(
            outputs, one,
            "feed_back {feed_back}: the chain did not continue"
        );
    }
}

#[tokio::test]
async fn a_long_session_writes_what_changed_not_the_whole_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(SqliteSessionStore::open(dir.path().join("s.sqlite3")).expect("store"));
    let m = manager(&config(dir.path()), Some(store.clone()));
    let id = compact_middleware::archive::SessionId::parse("s1").expect("id");
    let mut raw = vec![Message::system("You are an agent.")];
    let mut whole = 0;
    let mut before = store.write_stats();
    for i in 0..200 {
        raw.extend(ticket_turn(i, false));
        m.preflight("s1", raw.clone())
            .await
            .unwrap_or_else(|e| panic!("turn {i}: {e}"));
        if i == 149 {
            before = store.write_stats();
        }
        if i >= 150 {
            // What an earlier version wrote at this save: the whole record.
            let record = store.load(&id).await.expect("load").expect("record");
            whole += record.to_json().expect("json").len() as u64;
        }
    }
    let after = store.write_stats();
    let saves = after.saves - before.saves;
    let (now, then) = ((after.bytes - before.bytes) / saves, whole / 50);
    println!("turns 150-199: {now} bytes written per save, the whole record {then} bytes");
    assert_eq!(saves, 50);
    assert!(now * 5 < then, "{now} bytes per save, whole record {then}");
}

/// An Anthropic agent that keeps what it gets, its calls served in turn by
/// two managers sharing a SQLite store: the breakpoints compact placed are
/// known from the stored record, taken off what comes back and placed anew.
#[tokio::test]
async fn breakpoints_placed_by_one_manager_are_taken_off_by_the_next() {
    use compact_middleware::cache::breakpoints::Layer;
    use compact_middleware::manager::ContinuationKind;
    use compact_middleware::model::{Format, Request};
    use serde_json::{Value, json};

    let dir = tempfile::tempdir().expect("tempdir");
    let store: Arc<dyn SessionStore> =
        Arc::new(SqliteSessionStore::open(dir.path().join("state.sqlite3")).expect("sqlite store"));
    let mut config = config(dir.path());
    config.max_context_tokens = Some(200_000);
    let managers = [
        manager(&config, Some(store.clone())),
        manager(&config, Some(store)),
    ];
    let decode = |v: Value| {
        Request::from_value(v, Format::Anthropic)
            .map(|r| r.messages)
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let mut history = decode(json!({"system": "You are an agent.",
        "messages": [{"role": "user", "content": "Check the logs."}]}));
    for i in 0..6 {
        let o = managers[i % 2]
            .preflight("anthropic-agent", history.clone())
            .await
            .unwrap_or_else(|e| panic!("call {i}: {e}"));
        if i > 0 {
            assert_eq!(
                o.report.continuation,
                ContinuationKind::OutputPrefix,
                "call {i}"
            );
        }
        let layers: Vec<Layer> = o.report.cache_breakpoints.iter().map(|p| p.layer).collect();
        assert!(layers.contains(&Layer::End), "call {i}: {layers:?}");
        let total: usize = o.messages.iter().map(|m| m.cache_markers().count).sum();
        assert!(total <= 4, "call {i}: {total} breakpoints");
        // Ours, never mistaken for the caller's: as many as the first time.
        assert_eq!(total, o.report.cache_breakpoints.len(), "call {i}");
        history = o.messages;
        history.extend(decode(json!([
            {"role": "assistant", "content": format!("Step {i} done.")},
            {"role": "user", "content": format!("Go on with step {}.", i + 1)}
        ])));
    }
}
