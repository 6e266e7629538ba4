//! The `compact` CLI on sessions of the retention corpus
//! (`compact_bench::corpus`): tests of the product that need the
//! benchmarks' generators live here, so that the product's own crate does
//! not depend on the benchmarks. They spawn the `compact` binary that
//! `cargo test --workspace` builds into the same target directory.

#[path = "../../../tests/support/mod.rs"]
mod support;

use compact_bench::corpus::{self, Agent, SessionShape};
use compact_middleware::model::{Format, Request};
use serde_json::Value;
use support::cli;

fn sandbox() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temporary directory")
}

#[test]
fn replay_out_keeps_the_responses_wire_format() {
    let sandbox = sandbox();
    let dir = sandbox.path();
    let shape = SessionShape {
        turns: (12, 12),
        output_chars: (200, 3_000),
    };
    let session = corpus::generate(2, Agent::Research, Format::Responses, &shape);
    let path = dir.join("session.jsonl");
    std::fs::write(&path, session.to_jsonl()).expect("write");
    let out = dir.join("final.json");
    let o = cli(dir)
        .args([
            "replay",
            path.to_str().expect("utf8"),
            "--max-context-tokens",
            "8000",
            "--out",
            out.to_str().expect("utf8"),
        ])
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let value: Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("final")).expect("JSON");
    let items = value.as_array().expect("an array");
    assert!(items.iter().any(|m| m["type"] == "function_call_output"));
    assert!(
        items.iter().all(|m| m["role"] != "tool"),
        "no chat tool messages"
    );
    let decoded = Request::from_value(value.clone(), Format::Responses).expect("Responses items");
    assert_eq!(decoded.messages.len(), items.len());
    // The last turn is there as it was sent.
    let last_turn = session.turns.last().expect("turns");
    assert!(items.ends_with(last_turn));
}
