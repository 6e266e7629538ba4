//! `compact recall` on a PostgreSQL index: a session compacted by
//! `compact preflight` with `recall.path` a `postgres://` URL is searched
//! and read back by another process, through the configuration and through
//! `--index URL`; another session's id is not found (exit 4).

#[path = "../crates/compact-middleware/tests/postgres_support/mod.rs"]
mod postgres_support;

mod recall_support;
mod support;

use std::process::Output;

use recall_support::{
    agent_history, assert_exit, assert_finds_the_flaky_test, compact_s1, first_recall_id,
    recall_config, run,
};
use serde_json::Value;

fn json_out(o: &Output) -> Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e})"))
}

#[tokio::test]
async fn recall_reads_a_postgres_index_from_another_process() {
    let db = postgres_support::database().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = recall_config(dir.path(), &format!("  path: {}\n", db.url), "");
    let config = config.as_str();
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
    assert_finds_the_flaky_test(&hits);
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
    assert_exit(&o, 4);
}
