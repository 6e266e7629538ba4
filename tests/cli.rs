//! The CLI contract of docs/design.md §11: shapes on stdout, messages on stderr,
//! exit codes 0 / 2 bad input / 3 insufficient budget / 1 other.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};
use support::{cli, run_with_input};

/// `compact preflight --report` of `req` for claude-sonnet-4-5 with
/// `--usage usage`: the report, the last line of stderr.
fn usage_report(req: &Value, usage: &str) -> Value {
    let o = compact(
        &[
            "preflight",
            "--model",
            "claude-sonnet-4-5",
            "--usage",
            usage,
            "--report",
        ],
        &req.to_string(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_str(stderr(&o).lines().last().unwrap_or_default())
        .expect("the report is the last line of stderr")
}

/// `o` is a usage error (exit 2) that printed nothing and whose message
/// says `says`.
fn assert_bad_input(o: &Output, says: &str) {
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty());
    assert!(stderr(o).contains(says), "{}", stderr(o));
}

fn sandbox() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temporary directory")
}

/// Runs `compact args` in a fresh sandbox with `stdin`.
fn compact(args: &[&str], stdin: &str) -> Output {
    let dir = sandbox();
    compact_in(dir.path(), args, stdin)
}

fn compact_in(dir: &Path, args: &[&str], stdin: &str) -> Output {
    run_with_input(cli(dir).args(args), stdin)
}

fn stdout_json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A tool-heavy chat history of `turns` turns.
fn history(turns: usize, output_chars: usize) -> Value {
    let mut items = vec![
        json!({"role": "system", "content": "You are a coding agent."}),
        json!({"role": "developer", "content": "Never log secrets.", "meta": {"protected": true}}),
    ];
    for t in 0..turns {
        let id = format!("call_{t}");
        items.push(json!({"role": "user", "content": format!("Turn {t}: look at ticket OPS-{t}")}));
        items.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "read", "arguments": "{}"}}]}));
        items.push(
            json!({"role": "tool", "tool_call_id": id, "content": "x ".repeat(output_chars / 2)}),
        );
        items.push(json!({"role": "assistant", "content": format!("Ticket OPS-{t} handled.")}));
    }
    Value::Array(items)
}

#[test]
fn estimate_prints_the_breakdown() {
    let req = json!({"messages": [
        {"role": "system", "content": "You are helpful."},
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": "Hello there"}
    ], "tools": [{"type": "function", "function": {"name": "f", "description": "does f", "parameters": {"type": "object", "properties": {}}}}]});
    let o = compact(&["estimate", "--model", "gpt-4o"], &req.to_string());
    assert!(o.status.success(), "{}", stderr(&o));
    let v = stdout_json(&o);
    assert_eq!(v["model"], "gpt-4o");
    assert_eq!(v["max_tokens"], 128000);
    let b = &v["breakdown"];
    let total = ["system", "developer", "tools_schema", "messages"]
        .iter()
        .map(|k| b[k].as_u64().expect("number"))
        .sum::<u64>();
    assert_eq!(v["t_est"].as_u64(), Some(total));
    assert!(b["system"].as_u64() > Some(3) && b["tools_schema"].as_u64() > Some(0));
    assert!((v["usage_pct"].as_f64().unwrap_or(0.0) - total as f64 / 128000.0).abs() < 1e-3);
}

#[test]
fn usage_anchors_the_estimate_and_the_report_says_so() {
    let req = json!({"system": "You are helpful.", "messages": [
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": [{"type": "text", "text": "Paris."}]},
        {"role": "user", "content": "And of Germany?"}
    ]});
    let plain = stdout_json(&compact(
        &["estimate", "--model", "claude-sonnet-4-5"],
        &req.to_string(),
    ));
    assert_eq!(plain["basis"], "estimate");
    let o = compact(
        &["estimate", "--model", "claude-sonnet-4-5", "--usage", "40"],
        &req.to_string(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v = stdout_json(&o);
    assert_eq!(v["basis"], "usage");
    let a = &v["anchor"];
    assert_eq!(a["usage_tokens"], 40);
    // The system and the first question were the request the usage reports on.
    assert_eq!(a["covered"], 2);
    let estimated = a["estimated"].as_u64().expect("number");
    let appended = plain["t_est"].as_u64().expect("number") - estimated;
    assert_eq!(v["t_est"].as_u64(), Some(40 + appended));
    let error = (estimated as f64 - 40.0) / 40.0;
    assert!((a["error"].as_f64().expect("number") - error).abs() < 1e-4);

    let report = usage_report(&req, "40");
    assert_eq!(report["basis"], "usage");
    assert_eq!(report["tokens_before"], v["t_est"]);
    assert_eq!(report["estimate_error"], a["error"]);

    // No reply in the input: nothing to anchor, and the CLI says so.
    let o = compact(
        &["estimate", "--usage", "40"],
        r#"[{"role":"user","content":"hi"}]"#,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout_json(&o)["basis"], "estimate");
    assert!(stderr(&o).contains("--usage ignored"), "{}", stderr(&o));
}

#[test]
fn usage_takes_the_providers_usage_object_and_reports_its_cache_figures() {
    let req = json!([
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": "Paris."},
        {"role": "user", "content": "And of Germany?"}
    ]);
    let usage = r#"{"input_tokens": 20, "cache_read_input_tokens": 1500, "cache_creation_input_tokens": 300, "output_tokens": 9}"#;
    let report = usage_report(&req, usage);
    assert_eq!(report["basis"], "usage");
    assert_eq!(report["anchor"]["usage_tokens"], 1820);
    assert_eq!(
        report["cache"]["reported"],
        json!({"input_tokens": 1820, "cache_read": 1500, "cache_write": 300,
               "cache_write_1h": 0, "output_tokens": 9})
    );
    assert_eq!(report["cache"]["rule"], "anthropic");
    // A bad figure is a usage error naming its path, and nothing is printed.
    let o = compact(
        &[
            "preflight",
            "--usage",
            r#"{"input_tokens": 20, "cache_read_input_tokens": -1}"#,
        ],
        &req.to_string(),
    );
    assert_bad_input(&o, "$.usage.cache_read_input_tokens");
}

#[test]
fn bad_input_exits_2_naming_the_json_path_and_prints_nothing() {
    let o = compact(
        &["preflight"],
        r#"[{"role":"user","content":"a"},{"role":"user","content":7}]"#,
    );
    assert_bad_input(
        &o,
        "$[1].content: expected string or array of parts, got number",
    );

    let o = compact(&["estimate"], "{not json");
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("invalid JSON at line 1"),
        "{}",
        stderr(&o)
    );

    let o = compact(&["estimate", "--model", "no-such-model"], "[]");
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("max_context_tokens"), "{}", stderr(&o));
}

#[test]
fn preflight_keeps_the_shape_and_compacts() {
    let mut req = json!({"session_id": "s1", "messages": history(40, 4000), "config": {"k": 1}});
    let o = compact(
        &[
            "preflight",
            "--max-context-tokens",
            "20000",
            "--report",
            "--keep-meta",
        ],
        &req.to_string(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v = stdout_json(&o);
    assert_eq!(
        v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()),
        Some(vec![
            "session_id".to_string(),
            "messages".into(),
            "config".into()
        ])
    );
    let out = v["messages"].as_array().expect("messages");
    let before = req["messages"].as_array_mut().expect("messages").len();
    assert!(out.len() < before);
    // The protected developer message comes back byte-identical, meta included.
    assert!(out.iter().any(|m| m == &json!({"role": "developer", "content": "Never log secrets.", "meta": {"protected": true}})));
    let report: Value = serde_json::from_str(stderr(&o).lines().last().unwrap_or(""))
        .expect("report JSON on stderr");
    assert_eq!(report["triggered"], true);
    assert!(report["tokens_after"].as_u64() <= report["budget"].as_u64());

    // By default (and with the old --provider) our fields are stripped: the
    // output is what the provider may receive.
    for extra in [None, Some("--provider")] {
        let mut args = vec!["preflight", "--max-context-tokens", "20000"];
        args.extend(extra);
        let o = compact(&args, &req.to_string());
        assert!(o.status.success(), "{}", stderr(&o));
        let v = stdout_json(&o);
        assert!(
            v["messages"]
                .as_array()
                .expect("messages")
                .iter()
                .all(|m| m.get("meta").is_none() && m.get("compacted").is_none())
        );
    }
}

/// `COMPACT-SUMMARY vN` headers in a history, in order.
fn summary_versions(messages: &Value) -> Vec<u64> {
    let text = messages.to_string();
    text.match_indices("COMPACT-SUMMARY v")
        .filter_map(|(i, m)| {
            let digits: String = text[i + m.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse().ok()
        })
        .collect()
}

/// One more turn on `messages`: a user request with a planted fact, a tool
/// call and its result, an answer.
fn add_turn(messages: &mut Vec<Value>, t: usize) {
    let id = format!("call_{t}");
    messages.push(json!({"role": "user", "content": format!("Turn {t}: remember that ticket OPS-{t} is owned by team-{t}.")}));
    messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "read", "arguments": "{}"}}]}));
    messages.push(json!({"role": "tool", "tool_call_id": id, "content": "log line ".repeat(150)}));
    messages.push(json!({"role": "assistant", "content": format!("Ticket OPS-{t} handled.")}));
}

#[test]
fn preflight_with_state_rolls_one_summary_chain_across_processes() {
    let dir = sandbox();
    let state = dir.path().join("state.sqlite3");
    let state = state.to_str().expect("utf-8 path");
    let args = [
        "preflight",
        "--max-context-tokens",
        "4000",
        "--session",
        "s1",
        "--state",
        state,
        "--report",
    ];
    // The agent feeds our output back (fed) or resends its raw history (raw):
    // both continue the chain.
    for resend_raw in [false, true] {
        let session = if resend_raw { "raw" } else { "fed" };
        let mut args = args.to_vec();
        args[4] = session;
        let mut raw: Vec<Value> =
            vec![json!({"role": "system", "content": "You are a coding agent."})];
        let mut fed = raw.clone();
        let mut versions = Vec::new();
        for t in 0..30 {
            add_turn(&mut raw, t);
            add_turn(&mut fed, t);
            let input = if resend_raw { &raw } else { &fed };
            let o = compact_in(dir.path(), &args, &json!({ "messages": input }).to_string());
            assert!(o.status.success(), "turn {t}: {}", stderr(&o));
            let out = stdout_json(&o)["messages"].clone();
            let headers = summary_versions(&out);
            assert!(headers.len() <= 1, "turn {t}: nested summaries {headers:?}");
            versions.extend(headers);
            let report: Value = serde_json::from_str(stderr(&o).lines().last().unwrap_or(""))
                .expect("report JSON on stderr");
            if t > 0 {
                assert_ne!(report["continuation"], "fresh", "turn {t}: {report}");
            }
            fed = out.as_array().expect("messages").clone();
        }
        // The version grows across processes: each compaction folds the
        // previous summary into the next one.
        versions.dedup();
        assert!(versions.len() >= 3, "{session}: {versions:?}");
        assert!(
            versions.windows(2).all(|w| w[1] == w[0] + 1),
            "{versions:?}"
        );

        let o = compact_in(dir.path(), &["status", session, "--state", state], "");
        assert!(o.status.success(), "{}", stderr(&o));
        let status = stdout_json(&o);
        assert_eq!(status["known"], true);
        assert_eq!(status["store"], "sqlite");
        assert_eq!(
            status["summary"]["version"].as_u64(),
            versions.last().copied()
        );
        assert!(status["layers"]["recent"]["messages"].as_u64() > Some(0));
        assert_eq!(status["last_report"]["session_id"], session);
    }
    // A session never seen is not known, and is not created by asking.
    let o = compact_in(dir.path(), &["status", "nobody", "--state", state], "");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout_json(&o)["known"], false);
}

#[test]
fn preflight_below_trigger_returns_input_unchanged() {
    let h = history(2, 100);
    let o = compact(&["preflight", "--keep-meta"], &h.to_string());
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout_json(&o), h);
}

#[test]
fn insufficient_budget_exits_3_with_guidance() {
    let req = json!([
        {"role": "system", "content": "policy ".repeat(3000)},
        {"role": "user", "content": "hi"}
    ]);
    let o = compact(
        &["preflight", "--max-context-tokens", "2000"],
        &req.to_string(),
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    assert!(
        stderr(&o).contains("insufficient budget")
            && stderr(&o).contains("Reduce protected memory"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn strict_rejects_orphans_and_lenient_reports_them() {
    let req = json!([
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "ghost", "content": "x"}
    ]);
    let o = compact(&["preflight", "--strict"], &req.to_string());
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("$[1]") && stderr(&o).contains("ghost"),
        "{}",
        stderr(&o)
    );
    let o = compact(&["preflight", "--report"], &req.to_string());
    assert!(o.status.success());
    assert!(stderr(&o).contains("orphan_result"), "{}", stderr(&o));
}

#[test]
fn broken_pairing_is_warned_about_fixed_on_request_or_rejected() {
    let req = json!([
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "ghost", "content": "x"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    ]);
    // Default (policy.repair: report): passed on, with a warning on stderr.
    let o = compact(&["preflight"], &req.to_string());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("warning: the input already has 2 tool pairing problem(s)")
            && stderr(&o).contains("ghost"),
        "{}",
        stderr(&o)
    );
    assert_eq!(stdout_json(&o), req);
    // --repair fix: the orphan goes, the call gets a placeholder result.
    let o = compact(
        &["preflight", "--repair", "fix", "--provider"],
        &req.to_string(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("repaired 2 tool pairing problem(s)"),
        "{}",
        stderr(&o)
    );
    let out = stdout_json(&o);
    assert_eq!(out.as_array().map(Vec::len), Some(3));
    assert_eq!(out[2]["tool_call_id"], "c1");
    assert!(out[2].get("meta").is_none());
    // --repair strict is --strict: exit 2.
    let o = compact(&["preflight", "--repair", "strict"], &req.to_string());
    assert_eq!(o.status.code(), Some(2));
    let o = compact(&["preflight", "--repair", "sometimes"], &req.to_string());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("policy.repair"), "{}", stderr(&o));
}

#[test]
fn force_summarizes_and_writes_events() {
    let dir = sandbox();
    let events = dir.path().join("events.jsonl");
    let h = history(10, 200);
    let o = compact(
        &[
            "preflight",
            "--force",
            "--session",
            "forced",
            "--events",
            events.to_str().expect("utf8"),
        ],
        &h.to_string(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout_json(&o);
    let summaries: Vec<&Value> = out
        .as_array()
        .expect("array")
        .iter()
        .filter(|m| {
            m["content"]
                .as_str()
                .is_some_and(|c| c.starts_with("COMPACT-SUMMARY v1"))
        })
        .collect();
    assert_eq!(summaries.len(), 1);
    let text = std::fs::read_to_string(&events).expect("events file");
    let names: Vec<String> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).expect("jsonl")["name"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    for n in [
        "compact.token_estimate",
        "compact.trigger_decision",
        "compact.summary_created",
        "compact.pruned_messages",
        "compact.preflight",
    ] {
        assert!(names.iter().any(|x| x == n), "{n} missing from {names:?}");
    }
}

/// A 30-turn [`history`] written to `dir/transcript.jsonl`, one message a
/// line, as the archive stores transcripts: its path and its items.
fn write_transcript(dir: &Path) -> (std::path::PathBuf, Vec<Value>) {
    let items = history(30, 3000).as_array().expect("array").clone();
    let path = dir.join("transcript.jsonl");
    let lines: Vec<String> = items.iter().map(Value::to_string).collect();
    std::fs::write(&path, lines.join("\n")).expect("write");
    (path, items)
}

/// `compact replay` of the transcript at `path` in a 12,000-token window,
/// with `extra` flags.
fn replay(dir: &Path, path: &Path, extra: &[&str]) -> Output {
    cli(dir)
        .args([
            "replay",
            path.to_str().expect("utf8"),
            "--max-context-tokens",
            "12000",
        ])
        .args(extra)
        .output()
        .expect("run")
}

#[test]
fn replay_drives_a_recorded_transcript_turn_by_turn() {
    let sandbox = sandbox();
    let dir = sandbox.path();
    let (path, _) = write_transcript(dir);
    let o = replay(dir, &path, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let rows = text
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|w| w.parse::<usize>().is_ok())
        })
        .count();
    assert_eq!(rows, 30, "{text}");
    let compactions: usize = text
        .lines()
        .find(|l| l.starts_with("compactions"))
        .and_then(|l| l.split_whitespace().last()?.parse().ok())
        .expect("compactions row");
    assert!(compactions > 0, "{text}");

    let bad = dir.join("bad.jsonl");
    std::fs::write(&bad, "{\"role\":\"user\",\"content\":\"a\"}\nnot json\n").expect("write");
    let o = cli(dir)
        .args(["replay", bad.to_str().expect("utf8")])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("line 2"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn config_check_and_print() {
    let sandbox = sandbox();
    let dir = sandbox.path();
    let good = dir.join("good.yaml");
    std::fs::write(&good, "model: gpt-4o\npolicy:\n  trigger_pct: 0.9\n").expect("write");
    let o = compact(&["config", "check", good.to_str().expect("utf8")], "");
    assert!(o.status.success(), "{}", stderr(&o));

    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, "policy:\n  trigger_pct: 1.5\n  bogus: 1\n").expect("write");
    let o = compact(&["config", "check", bad.to_str().expect("utf8")], "");
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("policy.trigger_pct") && e.contains("policy.bogus"),
        "{e}"
    );

    let o = cli(dir)
        .args(["config", "print", "--config", good.to_str().expect("utf8")])
        .env("COMPACT_TARGET_PCT", "0.5")
        .output()
        .expect("run");
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    let line = |key: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{key} ")))
            .unwrap_or("")
            .to_string()
    };
    assert!(
        line("policy.trigger_pct").contains("0.9") && line("policy.trigger_pct").contains("file"),
        "{text}"
    );
    assert!(
        line("policy.target_pct").contains("0.5")
            && line("policy.target_pct").contains("env COMPACT_TARGET_PCT"),
        "{text}"
    );
    assert!(
        line("policy.keep_recent_turns").contains("default"),
        "{text}"
    );
}

#[test]
fn demo_runs_scripted() {
    let sandbox = sandbox();
    let o = cli(sandbox.path())
        .args(["demo", "--turns", "12", "--no-serve", "--pace", "0"])
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("compactions") && text.contains("saved"),
        "{text}"
    );
    assert_eq!(
        text.lines()
            .filter(|l| l
                .split_whitespace()
                .next()
                .is_some_and(|w| w.parse::<usize>().is_ok()))
            .count(),
        12,
        "{text}"
    );
}

#[test]
fn bench_prints_one_document_of_the_documented_shape() {
    // The shape is a public contract (docs/performance.md); the figures are not tested.
    let keys = |v: &Value| -> Vec<String> {
        v.as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default()
    };
    let o = compact(&["bench", "tokens", "--quick"], "");
    assert!(o.status.success(), "{}", stderr(&o));
    let v = stdout_json(&o);
    assert_eq!(keys(&v), ["machine", "tokens"]);
    assert_eq!(keys(&v["machine"]), ["cores", "os", "arch"]);
    assert_eq!(
        keys(&v["tokens"]),
        [
            "counting_1mb_mixed",
            "history",
            "reestimate_after_append",
            "cold_estimate"
        ]
    );
    assert_eq!(
        keys(&v["tokens"]["counting_1mb_mixed"]),
        ["bpe", "tiktoken"]
    );
    assert_eq!(
        keys(&v["tokens"]["cold_estimate"]),
        ["runs", "p50_us", "p90_us", "p99_us", "min_us", "max_us"]
    );

    let o = compact(&["bench", "preflight", "--quick", "--json"], "");
    assert!(o.status.success(), "{}", stderr(&o));
    let v = stdout_json(&o);
    assert_eq!(keys(&v), ["machine", "preflight"]);
    assert_eq!(
        keys(&v["preflight"]),
        [
            "history",
            "no_trigger_warm",
            "no_trigger_warm_anthropic",
            "forced_summary_extractive",
            "raw_history_mode_b",
            "triggered_auto"
        ]
    );
    assert_eq!(
        keys(&v["preflight"]["triggered_auto"]),
        ["stats", "tokens_after"]
    );

    let o = compact(&["bench", "nonsense"], "");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn logs_on_a_pipe_carry_no_colour_codes() {
    let dir = sandbox();
    // An events file under a regular file: the exporter fails and the
    // dispatcher logs a warning on stderr, which here is a pipe.
    let not_a_dir = dir.path().join("not-a-dir");
    std::fs::write(&not_a_dir, "x").expect("write");
    let events = not_a_dir.join("events.jsonl");
    let o = compact_in(
        dir.path(),
        &[
            "preflight",
            "--force",
            "--events",
            events.to_str().expect("utf8"),
        ],
        &history(4, 100).to_string(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("export failed"), "a warning was logged: {e}");
    assert!(!e.contains('\u{1b}'), "ANSI escape codes on a pipe: {e:?}");
}

#[test]
fn replay_writes_the_final_context_and_every_event() {
    let sandbox = sandbox();
    let dir = sandbox.path();
    let (path, items) = write_transcript(dir);
    let (out, events) = (dir.join("final.json"), dir.join("events.jsonl"));
    let o = replay(
        dir,
        &path,
        &[
            "--session",
            "replayed",
            "--out",
            out.to_str().expect("utf8"),
            "--events",
            events.to_str().expect("utf8"),
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // The final context: chat messages, smaller than the transcript, one
    // summary, ending with the transcript's last turn unchanged.
    let text = std::fs::read_to_string(&out).expect("final context");
    let final_context: Vec<Value> = serde_json::from_str(&text).expect("a JSON array");
    assert!(final_context.len() < items.len(), "{}", final_context.len());
    assert!(final_context.iter().all(|m| m["role"].is_string()));
    let summaries = final_context
        .iter()
        .filter(|m| {
            m["content"]
                .as_str()
                .is_some_and(|c| c.starts_with("COMPACT-SUMMARY v"))
        })
        .count();
    assert_eq!(summaries, 1);
    assert_eq!(final_context.last(), items.last());
    assert_eq!(final_context[0], items[0], "the system prompt is pinned");
    // What the table says is what was written.
    let table = String::from_utf8_lossy(&o.stdout);
    let rows = table
        .lines()
        .find(|l| l.starts_with("final context messages"))
        .and_then(|l| l.split_whitespace().last()?.parse::<usize>().ok());
    assert_eq!(rows, Some(final_context.len()), "{table}");

    // Every event, one JSON object a line: a preflight span per turn.
    let text = std::fs::read_to_string(&events).expect("events file");
    let events: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("jsonl"))
        .collect();
    let named = |n: &str| events.iter().filter(|e| e["name"] == n).count();
    assert_eq!(named("compact.preflight"), 30);
    assert!(named("compact.summary_created") > 0);
    assert!(named("compact.trigger_decision") >= 30);
}

#[test]
fn replay_of_a_transcript_without_turns_is_bad_input() {
    let sandbox = sandbox();
    let dir = sandbox.path();
    for (name, content) in [
        ("empty.jsonl", ""),
        ("blank.jsonl", "\n  \n"),
        ("empty-array.json", "[]"),
        ("no-messages.json", r#"{"messages": []}"#),
        (
            "no-user-turn.json",
            r#"[{"role": "system", "content": "You are terse."}]"#,
        ),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, content).expect("write");
        let o = cli(dir)
            .args(["replay", path.to_str().expect("utf8")])
            .output()
            .expect("run");
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{name}: {e}");
        assert!(e.contains(name), "{name}: the message names the file: {e}");
        assert!(o.stdout.is_empty(), "{name}: no table");
    }
}

#[test]
fn one_shot_commands_archive_under_the_data_directory_not_the_working_directory() {
    let sandbox = sandbox();
    let (cwd, data, home) = (
        sandbox.path().join("cwd"),
        sandbox.path().join("data"),
        sandbox.path().join("home"),
    );
    std::fs::create_dir_all(&cwd).expect("cwd");
    let entries = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let input = history(12, 200).to_string();
    let run = |cmd: &mut Command, args: &[&str]| -> Output {
        run_with_input(cmd.current_dir(&cwd).args(args), &input)
    };
    let preflight = |session: &'static str| ["preflight", "--force", "--session", session];

    // $XDG_DATA_HOME/compact/archive; the working directory stays empty.
    let o = run(&mut cli(sandbox.path()), &preflight("s1"));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(entries(&cwd), Vec::<String>::new());
    assert!(data.join("compact/archive/s1/manifest.jsonl").is_file());
    // replay archives too (session "replay"); the transcript sits outside cwd.
    std::fs::write(sandbox.path().join("t.json"), history(12, 2000).to_string()).expect("write");
    let o = run(
        &mut cli(sandbox.path()),
        &["replay", "../t.json", "--max-context-tokens", "8000"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(entries(&cwd), Vec::<String>::new());
    let mut archived = entries(&data.join("compact/archive"));
    archived.sort();
    assert_eq!(archived, ["replay", "s1"]);

    // The audit commands read the same place.
    let o = run(&mut cli(sandbox.path()), &["archive", "list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let listed = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(listed.lines().any(|l| l == "s1"), "{listed}");

    // --archive DIR still wins.
    let explicit = sandbox.path().join("explicit");
    let o = run(
        &mut cli(sandbox.path()),
        &[
            "preflight",
            "--force",
            "--session",
            "s2",
            "--archive",
            explicit.to_str().expect("utf8"),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(explicit.join("s2/manifest.jsonl").is_file());
    assert!(!data.join("compact/archive/s2").exists());

    // So does a configured path (here from the environment).
    let configured = sandbox.path().join("configured");
    let o = run(
        cli(sandbox.path()).env("COMPACT_STORAGE_PATH", &configured),
        &preflight("s3"),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(configured.join("s3/manifest.jsonl").is_file());

    // Without XDG_DATA_HOME: $HOME/.local/share/compact/archive.
    let o = run(
        cli(sandbox.path()).env_remove("XDG_DATA_HOME"),
        &preflight("s4"),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        home.join(".local/share/compact/archive/s4/manifest.jsonl")
            .is_file()
    );
    assert_eq!(entries(&cwd), Vec::<String>::new());
}
