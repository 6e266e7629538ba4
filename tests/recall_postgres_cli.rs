//! `compact recall` on a PostgreSQL index: a session compacted by
//! `compact preflight` with `recall.path` a `postgres://` URL is searched
//! and read back by another process, through the configuration and through
//! `--index URL`; another session's id is not found (exit 4).

#[path = "../crates/compact-middleware/tests/postgres_support/mod.rs"]
mod postgres_support;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

fn run(dir: &Path, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_compact"))
        .current_dir(dir)
        .env("XDG_DATA_HOME", dir.join("data"))
        .env("HOME", dir.join("home"))
        .env_remove("COMPACT_LOG")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn compact");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    child.wait_with_output().expect("wait")
}

fn json_out(o: &Output) -> Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e})"))
}

/// Six turns, each reading a module whose output names its flaky test.
fn agent_history() -> Vec<Value> {
    let mut messages = vec![json!({"role": "system", "content": "You are a coding agent."})];
    for t in 0..6 {
        let id = format!("call_{t}");
        messages.push(json!({"role": "user", "content": format!("Turn {t}: check module {t}")}));
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "read_file", "arguments": format!("{{\"path\":\"src/m{t}.rs\"}}")}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": format!("module {t}: the flaky test is named quux_{t}_timeout\n{}", "log line ".repeat(150))}));
        messages.push(json!({"role": "assistant", "content": format!("Module {t} checked.")}));
    }
    messages
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
    let args = [
        "preflight",
        "--config",
        config,
        "--max-context-tokens",
        "2500",
        "--session",
        "s1",
        "--state",
        state,
    ];
    let out = json_out(&run(
        dir.path(),
        &args,
        &json!({ "messages": agent_history() }).to_string(),
    ));
    let rid = out["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find_map(|m| {
            let text = m["content"].as_str()?;
            Some(
                text.split("— recall ")
                    .nth(1)?
                    .strip_suffix('⟧')?
                    .to_owned(),
            )
        })
        .unwrap_or_else(|| panic!("no recall id in {out}"));
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
