//! Retention across processes equals retention in one process
//! (docs/design.md §13): 50-turn sessions of the retention corpus
//! (`compact_bench::corpus`, probed with `compact_bench::retention::check`)
//! driven
//!
//! - in one process, by one `CompactManager`;
//! - through a separate `compact preflight --state FILE` process per turn;
//! - alternating between two `compact serve` replicas on one PostgreSQL
//!   database, one of them SIGKILLed and replaced halfway;
//!
//! answer every turn with the same messages, write one summary chain
//! (versions 1, 2, 3, … with no gap and no nested header), and so keep the
//! same facts: the ones `compact bench retention` counts for the session.
//! Both calling modes: the agent feeds our provider-clean output back, or
//! resends its raw history.

#[path = "../../compact-middleware/tests/postgres_support/mod.rs"]
mod postgres_support;
#[path = "../../../tests/support/mod.rs"]
mod support;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use compact_bench::corpus::{self, Agent, SessionShape, Transcript};
use compact_bench::retention::{CallingMode, check};
use compact_middleware::config::Config;
use compact_middleware::model::{Format, Request};
use compact_middleware::{CompactManager, Message};
use serde_json::{Value, json};
use support::Serve;

/// The context window of every run: small enough that a 50-turn session
/// compacts often and its summary is rewritten many times.
const WINDOW: usize = 16_000;
const TURNS: usize = 50;
const HEADER: &str = "COMPACT-SUMMARY v";

/// One session of the corpus, as wire items per turn and decoded.
struct Case {
    wire: Format,
    opening: Vec<Value>,
    turns: Vec<Vec<Value>>,
    transcript: Transcript,
}

fn case(seed: u64, agent: Agent, wire: Format) -> Case {
    let shape = SessionShape {
        turns: (TURNS, TURNS),
        ..SessionShape::FULL
    };
    let s = corpus::generate(seed, agent, wire, &shape);
    assert_eq!(s.turns.len(), TURNS);
    let transcript = s.transcript().expect("the corpus decodes");
    assert!(!transcript.facts.is_empty());
    Case {
        wire: s.wire,
        opening: s.opening,
        turns: s.turns,
        transcript,
    }
}

fn format_name(wire: Format) -> &'static str {
    if wire == Format::Responses {
        "responses"
    } else {
        "chat"
    }
}

fn decode(items: &[Value], wire: Format) -> Vec<Message> {
    Request::from_value(Value::Array(items.to_vec()), wire)
        .expect("items decode")
        .messages
}

/// What one driver saw at each turn: the messages returned (provider-clean
/// JSON) and the summary version written, if any.
#[derive(Debug, Default)]
struct Run {
    outputs: Vec<Value>,
    versions: Vec<Option<u64>>,
}

impl Run {
    fn record(&mut self, turn: usize, messages: Value, report: &Value) {
        let items = messages.as_array().expect("an array of messages");
        for m in items {
            let text = m.to_string();
            assert!(
                text.matches(HEADER).count() <= 1,
                "turn {turn}: nested summary"
            );
        }
        if turn > 0 {
            assert_ne!(report["continuation"], "fresh", "turn {turn}: {report}");
        }
        self.versions.push(report["summary_version"].as_u64());
        self.outputs.push(messages);
    }

    /// The summary chain: 1, 2, 3, … with no gap.
    fn chain(&self) -> Vec<u64> {
        let chain: Vec<u64> = self.versions.iter().flatten().copied().collect();
        let expected: Vec<u64> = (1..=chain.len() as u64).collect();
        assert_eq!(chain, expected, "one chain, one step per summary");
        chain
    }

    /// Which facts the final context keeps.
    fn retained(&self, c: &Case) -> Vec<bool> {
        let last = self.outputs.last().expect("a final context");
        let context = decode(last.as_array().expect("array"), c.wire);
        check(&context, &c.transcript).0
    }
}

/// The next call's items: our last answer (fed back) or the raw history,
/// plus turn `t`.
fn next_input(c: &Case, mode: CallingMode, last: Option<&Value>, t: usize) -> Vec<Value> {
    let mut items = match (mode, last) {
        (CallingMode::FedBack, Some(out)) => out.as_array().expect("array").clone(),
        _ => {
            let mut raw = c.opening.clone();
            raw.extend(c.turns[..t].iter().flatten().cloned());
            raw
        }
    };
    items.extend(c.turns[t].iter().cloned());
    items
}

/// One manager, never restarted; checked against the benchmark's own
/// in-process figure, so "as in one process" means what `compact bench
/// retention` reports.
fn in_process(c: &Case, mode: CallingMode) -> Run {
    let config = Config {
        max_context_tokens: Some(WINDOW),
        ..Config::default()
    };
    let manager = CompactManager::builder(config)
        .without_config_exporters()
        .without_storage()
        .build()
        .expect("manager");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let mut run = Run::default();
    for t in 0..TURNS {
        let items = next_input(c, mode, run.outputs.last(), t);
        let out = rt
            .block_on(manager.preflight("s", decode(&items, c.wire)))
            .unwrap_or_else(|e| panic!("turn {t}: {e}"));
        let report = serde_json::to_value(&out.report).expect("report");
        run.record(t, Value::Array(out.provider_messages()), &report);
    }
    assert!(
        run.chain().len() >= 3,
        "the session must compact: {:?}",
        run.versions
    );
    assert_eq!(
        run.retained(c),
        bench_retention(c, mode),
        "an agent feeding back provider-clean output keeps what the benchmark's agent (meta kept) keeps"
    );
    run
}

/// The facts `compact bench retention` counts for this session in one
/// process (`retention::measure`, whose agent feeds back our output with
/// its `meta`).
fn bench_retention(c: &Case, mode: CallingMode) -> Vec<bool> {
    let manager = CompactManager::builder(compact_bench::retention::config_for(WINDOW))
        .without_config_exporters()
        .without_storage()
        .build()
        .expect("manager");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(compact_bench::retention::measure(
        &manager,
        "m",
        &c.transcript,
        mode,
    ))
    .retained
}

/// One `compact preflight --state FILE` process per turn.
fn cli(c: &Case, mode: CallingMode, dir: &Path) -> Run {
    let state = dir.join("state.sqlite3");
    let mut run = Run::default();
    for t in 0..TURNS {
        let items = next_input(c, mode, run.outputs.last(), t);
        let mut child = Command::new(support::compact_bin())
            .args(["preflight", "--session", "s", "--report", "--format"])
            .arg(format_name(c.wire))
            .arg("--max-context-tokens")
            .arg(WINDOW.to_string())
            .arg("--state")
            .arg(&state)
            .current_dir(dir)
            .env("HOME", dir)
            .env("XDG_DATA_HOME", dir.join("data"))
            .env_remove("COMPACT_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("compact preflight");
        let body = serde_json::to_vec(&items).expect("json");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(&body)
            .expect("write stdin");
        let out = child.wait_with_output().expect("wait");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "turn {t}: {stderr}");
        let messages: Value = serde_json::from_slice(&out.stdout).expect("stdout JSON");
        let report: Value = stderr
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str(l).ok())
            .expect("the report on stderr");
        run.record(t, messages, &report);
    }
    run
}

/// Turns alternating between two `compact serve` replicas on one
/// PostgreSQL database; the second is SIGKILLed after turn 24 and replaced
/// by a new process.
async fn replicas(c: &Case, mode: CallingMode, dir: &Path, url: &str) -> Run {
    let client = reqwest::Client::new();
    let dirs = ["a", "b", "b2"].map(|name| dir.join(name));
    let serve = |dir| Serve {
        window: WINDOW,
        ..Serve::postgres(dir, url)
    };
    let a = serve(&dirs[0]).start(&client).await;
    let mut b = serve(&dirs[1]).start(&client).await;
    let mut run = Run::default();
    for t in 0..TURNS {
        if t == TURNS / 2 {
            b.kill();
            b = serve(&dirs[2]).start(&client).await;
        }
        let base = if t % 2 == 0 { &a.base } else { &b.base };
        let items = next_input(c, mode, run.outputs.last(), t);
        let (status, body) = support::post(
            &client,
            format!("{base}/v1/preflight"),
            &json!({"session_id": "s", "messages": items, "format": format_name(c.wire)}),
        )
        .await;
        assert_eq!(status, 200, "turn {t}: {body}");
        run.record(t, body["messages"].clone(), &body["report"]);
    }
    run
}

/// `got` answered every turn as `expected` did, kept the same summary
/// chain, and so retains the same facts.
fn assert_same(what: &str, c: &Case, expected: &Run, got: &Run) {
    for (t, (e, g)) in expected.outputs.iter().zip(&got.outputs).enumerate() {
        assert!(e == g, "{what}: turn {t} differs from one process");
    }
    assert_eq!(got.outputs.len(), TURNS);
    assert_eq!(expected.chain(), got.chain(), "{what}: the summary chain");
    let (e, g) = (expected.retained(c), got.retained(c));
    assert_eq!(e, g, "{what}: retention");
    eprintln!(
        "{what}: {} summaries, {}/{} facts retained, as in one process",
        got.chain().len(),
        g.iter().filter(|k| **k).count(),
        g.len()
    );
}

#[test]
fn separate_cli_processes_keep_what_one_process_keeps() {
    for (c, mode) in [
        (case(1, Agent::Coding, Format::Chat), CallingMode::FedBack),
        (
            case(2, Agent::Support, Format::Responses),
            CallingMode::RawResent,
        ),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let expected = in_process(&c, mode);
        let got = cli(&c, mode, dir.path());
        assert_same(
            &format!("{} {} via the CLI", c.transcript.name, mode.name()),
            &c,
            &expected,
            &got,
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alternating_and_restarted_replicas_keep_what_one_process_keeps() {
    for (c, mode) in [
        (case(1, Agent::Coding, Format::Chat), CallingMode::RawResent),
        (
            case(2, Agent::Support, Format::Responses),
            CallingMode::FedBack,
        ),
    ] {
        let db = postgres_support::database().await;
        let dir = tempfile::tempdir().expect("tempdir");
        let expected = tokio::task::block_in_place(|| in_process(&c, mode));
        let got = replicas(&c, mode, dir.path(), &db.url).await;
        assert_same(
            &format!("{} {} via two replicas", c.transcript.name, mode.name()),
            &c,
            &expected,
            &got,
        );
    }
}
