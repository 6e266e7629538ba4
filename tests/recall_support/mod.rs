//! What the `compact recall` CLI tests share: the binary run in a sandbox,
//! an agent history whose early outputs a 2,500-token window clears, its
//! compaction as session `s1`, and the recall id a placeholder carries.
// Each test file that includes this uses only part of it.
#![allow(dead_code)]

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

/// `compact args` run in `dir` with `stdin`; its data and home under `dir`
/// ([`crate::support::cli`]).
pub(crate) fn run(dir: &Path, args: &[&str], stdin: &str) -> Output {
    crate::support::run_with_input(crate::support::cli(dir).args(args), stdin)
}

/// [`compact_s1`] of the [`agent_history`] with its state in
/// `dir/state.sqlite3`, which must succeed: the state's path and the
/// output.
pub(crate) fn compact_s1_in(dir: &Path, config: &str) -> (String, Output) {
    let state = dir.join("state.sqlite3");
    let state = state.to_str().expect("utf-8").to_owned();
    let o = compact_s1(dir, config, &state, &agent_history());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (state, o)
}

/// `dir/compact.yaml` with recall on (`recall`: more of its keys, e.g.
/// `"  advertise: true\n"`), the top-level sections `more`, and a policy
/// that keeps only the last turn and tool pair; its path.
pub(crate) fn recall_config(dir: &Path, recall: &str, more: &str) -> String {
    let path = dir.join("compact.yaml");
    std::fs::write(
        &path,
        format!(
            "recall:\n  enabled: true\n{recall}{more}policy:\n  mode: compact\n  keep_task: false\n  keep_recent_turns: 1\n  keep_tool_io_pairs: 1\n"
        ),
    )
    .expect("config");
    path.to_str().expect("utf-8").to_owned()
}

/// `o` exited with `code` (its stderr shown if not).
pub(crate) fn assert_exit(o: &Output, code: i32) {
    assert_eq!(
        o.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `hits` (a recall answer's) has, among its first three, the excerpt
/// that names module 0's flaky test.
pub(crate) fn assert_finds_the_flaky_test(hits: &Value) {
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
}

/// Six turns of a coding agent, each reading a module whose output names
/// its flaky test (`quux_N_timeout`) amid 150 log words: enough to clear
/// the early outputs at a 2,500-token window.
pub(crate) fn agent_history() -> Vec<Value> {
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

/// `compact preflight` of `messages` as session `s1` at a 2,500-token
/// window, its state in `state`.
pub(crate) fn compact_s1(dir: &Path, config: &str, state: &str, messages: &[Value]) -> Output {
    preflight_s1(dir, config, state, &json!({ "messages": messages }), &[])
}

/// `compact preflight` of the request `body` as session `s1` at a
/// 2,500-token window, its state in `state`, with `extra` flags.
pub(crate) fn preflight_s1(
    dir: &Path,
    config: &str,
    state: &str,
    body: &Value,
    extra: &[&str],
) -> Output {
    let mut args = vec![
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
    args.extend_from_slice(extra);
    run(dir, &args, &body.to_string())
}

/// The recall id of the first placeholder in a preflight's output.
pub(crate) fn first_recall_id(out: &Value) -> String {
    out["messages"]
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
        .unwrap_or_else(|| panic!("no recall id in {out}"))
}
