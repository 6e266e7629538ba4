//! `compact recall` on a PostgreSQL index: a session compacted by
//! `compact preflight` with `recall.path` a `postgres://` URL is searched
//! and read back by another process, through the configuration and through
//! `--index URL`; another session's id is not found (exit 4).

#[path = "../crates/compact-middleware/tests/postgres_support/mod.rs"]
mod postgres_support;

mod recall_support;

use std::process::Output;

use recall_support::{agent_history, compact_s1, first_recall_id, run};
use serde_json::Value;

fn json_out(o: &Output) -> Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e})"))
}

#[tokio::test]
async fn recall_reads_a_postgres_index_from_another_process() {
    let db = postgres_support::database().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("compact.yaml");
    std::fs::write(
        &config,
        format!(
            "recall:\n  enabled: true\n  path: {}\npolicy:\n  mode: compact\n  keep_task: false\n  keep_recent_turns: 1\n  keep_tool_io_pairs: 1\n",
            db.url
        ),
    )
    .expect("config");
    let config = config.to_str().expect("utf-8");
    let state = dir.path().join("state.sqlite3");
    let state = state.to_str().expect("utf-8");
    let out = json_out(&compact_s1(dir.path(), config, state, &agent_history()));
    let rid = first_recall_id(&out);
    assert!(!dir.path().join("recall.sqlite3").exists(), "no file index");

    // Through the configuration's recall.path.
    let q = "which test was flaky in module 0?";
    let hits = json_out(&run(
        dir.path(),
        &["recall", "s1", q, "--config", config],
        "",
    ))["hits"]
        .clone();
    assert!(
        hits.as_array()
            .expect("hits")
            .iter()
            .take(3)
            .any(|h| h["excerpt"]
                .as_str()
                .is_some_and(|e| e.contains("quux_0_timeout"))),
        "{hits}"
    );
    // Through --index URL, by id.
    let entry = json_out(&run(
        dir.path(),
        &["recall", "s1", "--id", &rid, "--index", &db.url],
        "",
    ))["entry"]
        .clone();
    assert!(
        entry["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("module ")),
        "{entry}"
    );
    // Another session does not have the id.
    let o = run(
        dir.path(),
        &["recall", "s2", "--id", &rid, "--index", &db.url],
        "",
    );
    assert_eq!(
        o.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
