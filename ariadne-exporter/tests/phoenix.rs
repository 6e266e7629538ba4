//! The OTLP exporter against a real OTLP backend: Arize Phoenix (from PyPI,
//! `phoenix serve`, offline, on free loopback ports). Our spans arrive as
//! OTLP/HTTP protobuf (the only form Phoenix takes) with their data and the
//! GenAI semantic conventions as attributes, and Phoenix's REST API gives
//! them back.
//!
//! Phoenix is `COMPACT_TEST_PHOENIX` (its `phoenix` executable), else
//! `target/phoenix-venv/bin/phoenix` (scripts/test.sh installs it there);
//! without it the test skips with a message.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ariadne_exporter::{HttpOptions, OtlpExporter, OtlpProtocol, span_id_for, trace_id_for};
use compact_events::{Event, Exporter, SpanBuilder, SpanStatus, TraceEvent};
use serde_json::{Value, json};

/// Phoenix runs its migrations on first start: slow on a busy machine. A
/// hang guard, not a measurement.
const START_GUARD: Duration = Duration::from_secs(300);

fn phoenix_bin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("COMPACT_TEST_PHOENIX").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let venv = root.join("target/phoenix-venv/bin/phoenix");
    venv.is_file().then_some(venv)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

struct Phoenix {
    child: Child,
    base: String,
    _dir: tempfile::TempDir,
}

impl Drop for Phoenix {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn start(bin: &PathBuf) -> Phoenix {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let child = Command::new(bin)
        .arg("serve")
        .env("PHOENIX_WORKING_DIR", dir.path())
        .env("PHOENIX_HOST", "127.0.0.1")
        .env("PHOENIX_PORT", port.to_string())
        .env("PHOENIX_GRPC_PORT", free_port().to_string())
        .env("PHOENIX_TELEMETRY_ENABLED", "false")
        .env("DO_NOT_TRACK", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("phoenix serve starts");
    let p = Phoenix {
        child,
        base: format!("http://127.0.0.1:{port}"),
        _dir: dir,
    };
    let client = reqwest::Client::new();
    let deadline = Instant::now() + START_GUARD;
    while Instant::now() < deadline {
        if let Ok(r) = client
            .get(format!("{}/v1/projects/default/spans?limit=1", p.base))
            .send()
            .await
            && r.status().is_success()
        {
            return p;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("phoenix did not start within {START_GUARD:?}");
}

/// A preflight as the manager reports it: the session's trace, the parent
/// span, the estimate and a model's summary.
fn preflight(session: &str) -> Vec<Event> {
    let root = SpanBuilder::start(session, "compact.preflight").kind("compaction");
    let estimate = SpanBuilder::start(session, "compact.token_estimate")
        .kind("compaction")
        .parent(root.span_id())
        .data("model", "gpt-4o")
        .data("t_est", 112_345)
        .data("max_tokens", 128_000)
        .data("usage_pct", 0.877)
        .finish(SpanStatus::Ok);
    let summary = SpanBuilder::start(session, "compact.summary_created")
        .kind("compaction")
        .parent(root.span_id())
        .data("strategy", "task_state")
        .data("summarizer", "openai")
        .data("model", "gpt-4o-mini")
        .data("prompt_tokens", 11_980)
        .data("completion_tokens", 480)
        .data("summary_tokens", 480)
        .data("output_text", "Goals: ship the release.")
        .finish(SpanStatus::Ok);
    let root = root
        .data("session_id", session)
        .data("tokens_after", 60_210)
        .data("triggered", true)
        .finish(SpanStatus::Ok);
    vec![
        TraceEvent::session(session, "phoenix-test-agent").into(),
        estimate,
        summary,
        root,
    ]
}

/// A span attribute as Phoenix's REST API gives it: a flat object.
fn attribute<'a>(span: &'a Value, key: &str) -> Option<&'a Value> {
    span["attributes"].as_object()?.get(key)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phoenix_receives_our_spans_with_their_attributes() {
    let Some(bin) = phoenix_bin() else {
        eprintln!(
            "skipped: no Arize Phoenix (pip install arize-phoenix into target/phoenix-venv, or set COMPACT_TEST_PHOENIX; scripts/test.sh does)"
        );
        return;
    };
    let phoenix = start(&bin).await;
    let exporter = OtlpExporter::new(
        &format!("{}/v1/traces", phoenix.base),
        "compact-test",
        HttpOptions::default(),
    )
    .expect("exporter")
    .with_protocol(OtlpProtocol::HttpProtobuf);
    let session = format!("phoenix-{}", std::process::id());
    exporter
        .export(&preflight(&session))
        .await
        .expect("phoenix accepts the protobuf export");

    // Phoenix ingests asynchronously: poll its REST API (a hang guard).
    let client = reqwest::Client::new();
    let trace = trace_id_for(&session);
    let url = format!(
        "{}/v1/projects/default/spans?limit=100&trace_id={trace}",
        phoenix.base
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let spans = loop {
        let body: Value = client
            .get(&url)
            .send()
            .await
            .expect("spans")
            .json()
            .await
            .expect("json");
        let spans = body["data"].as_array().cloned().unwrap_or_default();
        if spans.len() >= 3 || Instant::now() > deadline {
            break spans;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let by_name = |n: &str| {
        spans
            .iter()
            .find(|s| s["name"] == n)
            .unwrap_or_else(|| panic!("{n} not in Phoenix: {spans:?}"))
    };
    let root = by_name("compact.preflight");
    let estimate = by_name("compact.token_estimate");
    let summary = by_name("compact.summary_created");
    assert_eq!(root["context"]["trace_id"], json!(trace));
    assert_eq!(
        estimate["parent_id"],
        json!(span_id_for(
            root["context"]["span_id"].as_str().unwrap_or_default()
        )),
        "the estimate is a child of the preflight"
    );
    // Our own data, and the GenAI conventions derived from it.
    assert_eq!(
        attribute(estimate, "gen_ai.request.model"),
        Some(&json!("gpt-4o")),
        "{estimate}"
    );
    assert_eq!(
        attribute(estimate, "gen_ai.operation.name"),
        Some(&json!("chat"))
    );
    assert_eq!(
        attribute(estimate, "gen_ai.usage.input_tokens"),
        Some(&json!(112_345))
    );
    // Phoenix reads the GenAI conventions into its own (OpenInference) names.
    assert_eq!(
        attribute(estimate, "llm.model_name"),
        Some(&json!("gpt-4o"))
    );
    assert_eq!(attribute(estimate, "usage_pct"), Some(&json!(0.877)));
    assert_eq!(
        attribute(summary, "gen_ai.request.model"),
        Some(&json!("gpt-4o-mini"))
    );
    assert_eq!(
        attribute(summary, "output_text"),
        Some(&json!("Goals: ship the release."))
    );
    assert_eq!(attribute(root, "session.id"), Some(&json!(session)));
}
