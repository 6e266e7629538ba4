//! The real OpenAI Agents SDK (`openai-agents` from pip, in a venv this test
//! creates once under the target directory) compacting through a real
//! `compact serve`: `tests/python/openai_agents_compaction.py` runs an agent
//! under the `RunConfig(call_model_input_filter=...)` docs/integrations.md
//! shows, with an offline scripted model. The script asserts and so does
//! this test: every model call received the compacted input, tool calls
//! stay paired with their outputs, the model was called as scripted.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;
use support::{free_port, serve_command};

/// The SDK release the test is written against (its `CallModelData`,
/// `ModelInputData` and `Model` interface); a new release is a deliberate bump.
const SDK: &str = "openai-agents==0.24.0";
/// Model calls the script makes: 3 user turns of 4 tool calls and a reply.
const MODEL_CALLS: usize = 15;
const MARKER: &str = "COMPACT-SUMMARY";

fn run(cmd: &mut Command) -> bool {
    cmd.status().map(|s| s.success()).unwrap_or(false)
}

/// The venv's python, with the SDK installed (created or repaired if needed).
fn venv_python() -> PathBuf {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory")
        .to_path_buf();
    let venv = target.join("py-venv");
    let python = venv.join("bin").join("python");
    let version = SDK.split("==").nth(1).expect("a pinned version");
    let installed = format!(
        "import importlib.metadata as m, sys; sys.exit(m.version('openai-agents') != '{version}')"
    );
    if run(Command::new(&python).args(["-c", &installed])) {
        return python;
    }
    assert!(
        python.exists() || run(Command::new("python3").args(["-m", "venv"]).arg(&venv)),
        "cannot create a Python venv at {} (`python3 -m venv` failed: install python3 and python3-venv)",
        venv.display()
    );
    assert!(
        run(Command::new(&python).args(["-m", "pip", "install", "--quiet", SDK])),
        "`pip install {SDK}` failed in {}: this test needs the package index (or a pip \
         configured with a mirror)",
        venv.display()
    );
    python
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn serve(dir: &Path, port: u16) -> Server {
    let server = Server(
        serve_command(dir, port)
            // Small, so that a few large tool outputs overflow it.
            .env("COMPACT_MAX_CONTEXT_TOKENS", "4000")
            .env("HOME", dir)
            .env_remove("COMPACT_INGEST_TOKEN")
            .env_remove("COMPACT_READ_TOKEN")
            .env_remove("COMPACT_STATE_STORE")
            .env_remove("COMPACT_STATE_PATH")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("compact serve starts"),
    );
    let client = reqwest::Client::new();
    // A hang guard only: a debug build on a loaded machine may be slow.
    for _ in 0..4800 {
        if let Ok(r) = client
            .get(format!("http://127.0.0.1:{port}/healthz"))
            .send()
            .await
            && r.status().is_success()
        {
            return server;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("compact serve never became healthy");
}

/// Call ids whose pairing is broken: an output with no call before it, a
/// second output, or a call never answered.
fn unpaired(items: &[Value]) -> Vec<String> {
    let (mut calls, mut answered, mut bad) = (Vec::new(), Vec::new(), Vec::new());
    for item in items {
        let id = item["call_id"].as_str().unwrap_or_default().to_owned();
        match item["type"].as_str() {
            Some("function_call") => calls.push(id),
            Some("function_call_output") if !calls.contains(&id) || answered.contains(&id) => {
                bad.push(id)
            }
            Some("function_call_output") => answered.push(id),
            _ => {}
        }
    }
    bad.extend(calls.into_iter().filter(|c| !answered.contains(c)));
    bad
}

#[tokio::test]
async fn the_sdk_filter_compacts_every_model_call_through_preflight() {
    let python = venv_python();
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let _server = serve(dir.path(), port).await;
    let base = format!("http://127.0.0.1:{port}");
    let report_path = dir.path().join("report.json");
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/openai_agents_compaction.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg(&base)
        .arg(&report_path)
        .env("OPENAI_AGENTS_DISABLE_TRACING", "1")
        .env_remove("OPENAI_API_KEY")
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "the script failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let report: Value =
        serde_json::from_slice(&std::fs::read(&report_path).expect("the script's report"))
            .expect("report JSON");
    assert_eq!(report["failures"], Value::Array(vec![]), "{report}");
    assert_eq!(report["model_calls"], MODEL_CALLS);
    let inputs = report["inputs"].as_array().expect("inputs");
    let sent = report["sent_lengths"].as_array().expect("sent lengths");
    let sizes = report["sent_sizes"].as_array().expect("sent sizes");
    assert_eq!((inputs.len(), sent.len()), (MODEL_CALLS, MODEL_CALLS));

    let summaries = |items: &[Value]| {
        items
            .iter()
            .filter(|i| i.to_string().contains(MARKER))
            .count()
    };
    let mut compacted = false;
    for (n, input) in inputs.iter().enumerate() {
        let items = input.as_array().expect("a list of items");
        assert_eq!(unpaired(items), Vec::<String>::new(), "model call {n}");
        compacted |= summaries(items) > 0;
        if compacted {
            assert_eq!(summaries(items), 1, "model call {n}: {input}");
            // Smaller than the raw history sent: fewer items, or the same
            // and one more (the summary) with outputs capped or cleared.
            assert!(
                (input.to_string().len() as u64) < sizes[n].as_u64().expect("a size"),
                "model call {n} got the raw history ({} of {} items)",
                items.len(),
                sent[n]
            );
        }
    }
    assert!(compacted, "no model call received a COMPACT-SUMMARY");

    // The server holds the chain the filter never had to keep.
    let status: Value = reqwest::get(format!("{base}/v1/sessions/my-session"))
        .await
        .expect("status")
        .json()
        .await
        .expect("status JSON");
    assert_eq!(status["known"], true, "{status}");
    assert!(
        status["summary"]["version"].as_u64().unwrap_or(0) >= 1,
        "{status}"
    );
}
