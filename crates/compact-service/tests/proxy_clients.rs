//! Real clients through `compact proxy` against the scripted provider on
//! loopback: the official `openai` and `anthropic` Python SDKs and the
//! OpenAI Agents SDK (`tests/python/proxy_*.py`, run in the venv
//! `scripts/test.sh` builds under the target directory from
//! `crates/compact-py/requirements-test.txt`), and Codex CLI from npm
//! (`codex exec`, a `[model_providers.NAME]` whose `base_url` is the
//! proxy). Each runs multi-turn tool sessions; the upstream must receive
//! provider-valid requests, compacted once the small configured window
//! filled, with thinking blocks and reasoning items byte-identical, and
//! each client must get its streams intact (the scripts check what they
//! parsed).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use compact_middleware::model::Format;
use serde_json::Value;
use support::harness::{Running, provider_valid, proxy};
use support::upstream::{Logged, Upstream};

/// The test venv's python (`scripts/test.sh` creates it).
fn python() -> PathBuf {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory")
        .to_path_buf();
    let python = target.join("py-venv").join("bin").join("python");
    let ok = Command::new(&python)
        .args(["-c", "import openai, anthropic, agents"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{} lacks openai, anthropic or openai-agents: run scripts/test.sh, or `python3 -m venv {}` and `pip install -r crates/compact-py/requirements-test.txt` into it",
        python.display(),
        target.join("py-venv").display()
    );
    python
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/python")
        .join(name)
}

/// Runs a client script against `base`; its stdout's last line as JSON.
async fn run_client(name: &str, base: &str) -> Value {
    let (python, script) = (python(), script(name));
    let base = base.to_owned();
    let out = tokio::task::spawn_blocking(move || {
        // Bounded: a client that never stops fails the test instead.
        Command::new("timeout")
            .arg("300")
            .arg(python)
            .arg(script)
            .arg(base)
            .env_remove("OPENAI_API_KEY")
            .env_remove("OPENAI_BASE_URL")
            .env_remove("ANTHROPIC_BASE_URL")
            .output()
            .expect("the venv's python runs")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{name} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap_or(Value::Null)
}

fn compacted(l: &Logged) -> bool {
    let text = String::from_utf8_lossy(&l.body);
    text.contains("COMPACT-SUMMARY")
        || text.contains("removed: tool output")
        || text.contains("truncated:")
}

fn format_of(path: &str) -> Format {
    match path {
        "/v1/chat/completions" => Format::Chat,
        "/v1/responses" => Format::Responses,
        _ => Format::Anthropic,
    }
}

/// What every client run must show: valid requests only, at least one
/// compacted one per session, a span per call with the session's id.
fn check_sessions(px: &Running, up: &Upstream, sessions: &[&str]) {
    let calls = up.model_calls();
    for l in &calls {
        provider_valid(&l.json(), format_of(&l.path));
        assert!(
            !String::from_utf8_lossy(&l.body).contains("\"meta\""),
            "our fields never go upstream"
        );
    }
    let spans = px.model_calls();
    for session in sessions {
        let mine: Vec<&Value> = spans.iter().filter(|s| s["trace_id"] == *session).collect();
        assert!(!mine.is_empty(), "no call of {session}");
        assert!(
            mine.iter()
                .all(|s| s["data"]["status"] == 200 && s["data"]["session_source"] == "header")
        );
        assert!(
            mine.iter().any(|s| s["data"]["compaction"] == "applied"),
            "{session} was never compacted: {:?}",
            mine.iter()
                .map(|s| (&s["data"]["compaction"], &s["data"]["tokens_before"]))
                .collect::<Vec<_>>()
        );
    }
    assert!(
        calls.iter().any(compacted),
        "the upstream never saw a compacted request"
    );
    let exported = serde_json::to_string(&px.events.events()).unwrap();
    assert!(!exported.contains("SECRET"), "a key was exported");
}

const WINDOW: &str = "max_context_tokens: 3000\npolicy: {keep_recent_turns: 1, keep_tool_io_pairs: 1, hard_cap_buffer: 200}";

#[tokio::test(flavor = "multi_thread")]
async fn the_openai_sdk_runs_chat_and_responses_sessions_through_the_proxy() {
    let up = Upstream::start().await;
    up.script(|s| s.tool_output_size = 1500);
    let px = proxy(&up.url, WINDOW).await;
    let report = run_client("proxy_openai.py", &format!("{}/v1", px.url)).await;
    assert_eq!(
        report["calls"].as_u64(),
        Some(up.model_calls().len() as u64)
    );
    check_sessions(&px, &up, &["py-chat", "py-chat-stream", "py-responses"]);
    let streamed = px
        .model_calls()
        .into_iter()
        .filter(|s| s["data"]["stream"] == true)
        .count();
    assert!(streamed >= 12, "{streamed} streamed calls");
    // Reasoning items went back byte-identical: each one the upstream sent
    // is in the next request of the session unchanged (or gone with its
    // turn).
    let sent: Vec<Value> = up
        .model_calls()
        .iter()
        .filter(|l| l.path == "/v1/responses")
        .flat_map(|l| {
            String::from_utf8_lossy(&l.answer)
                .lines()
                .filter_map(|line| line.strip_prefix("data: "))
                .filter_map(|d| serde_json::from_str::<Value>(d).ok())
                .filter(|e| {
                    e["type"] == "response.output_item.done" && e["item"]["type"] == "reasoning"
                })
                .map(|e| e["item"].clone())
                .collect::<Vec<_>>()
        })
        .collect();
    for l in up
        .model_calls()
        .iter()
        .filter(|l| l.path == "/v1/responses")
    {
        for item in l.json()["input"].as_array().unwrap() {
            if item["type"] == "reasoning" {
                assert!(sent.contains(item), "a reasoning item changed: {item}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_anthropic_sdk_runs_thinking_sessions_through_the_proxy() {
    let up = Upstream::start().await;
    up.script(|s| s.tool_output_size = 1500);
    let px = proxy(&up.url, WINDOW).await;
    let report = run_client("proxy_anthropic.py", &px.url).await;
    assert_eq!(
        report["calls"].as_u64(),
        Some(up.model_calls().len() as u64)
    );
    check_sessions(&px, &up, &["py-anthropic-0", "py-anthropic-1"]);
    // Every thinking block that went up is one the upstream signed, byte for byte.
    let mut signed = Vec::new();
    for l in up.model_calls() {
        let answer = String::from_utf8_lossy(&l.answer).into_owned();
        if let Ok(v) = serde_json::from_str::<Value>(&answer) {
            signed.extend(
                v["content"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|b| b["type"] == "thinking")
                    .cloned(),
            );
        } else {
            // A stream: the thinking text and signature deltas.
            let events: Vec<Value> = answer
                .lines()
                .filter_map(|x| x.strip_prefix("data: "))
                .filter_map(|d| serde_json::from_str(d).ok())
                .collect();
            let text = events
                .iter()
                .find(|e| e["delta"]["type"] == "thinking_delta")
                .map(|e| e["delta"]["thinking"].clone());
            let sig = events
                .iter()
                .find(|e| e["delta"]["type"] == "signature_delta")
                .map(|e| e["delta"]["signature"].clone());
            if let (Some(t), Some(s)) = (text, sig) {
                signed.push(serde_json::json!({"type": "thinking", "thinking": t, "signature": s}));
            }
        }
    }
    let mut seen = 0;
    for l in up.model_calls() {
        assert_eq!(
            l.headers["anthropic-beta"],
            "interleaved-thinking-2025-05-14"
        );
        let key = l
            .headers
            .get("x-api-key")
            .or_else(|| l.headers.get("authorization"));
        assert!(
            key.is_some_and(|k| k.to_str().unwrap().ends_with("sk-ant-test-SECRET")),
            "{:?}",
            l.headers.keys().collect::<Vec<_>>()
        );
        let body = l.json();
        assert_eq!(body["system"][0]["cache_control"]["type"], "ephemeral");
        for m in body["messages"].as_array().unwrap() {
            for b in m["content"].as_array().into_iter().flatten() {
                if b["type"] == "thinking" {
                    seen += 1;
                    assert!(signed.contains(b), "a thinking block changed: {b}");
                }
            }
        }
    }
    assert!(seen > 0, "the SDK sent thinking blocks back");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_openai_agents_sdk_runs_through_the_proxy_by_base_url() {
    let up = Upstream::start().await;
    up.script(|s| s.tool_output_size = 1500);
    let px = proxy(&up.url, WINDOW).await;
    let report = run_client("proxy_agents.py", &format!("{}/v1", px.url)).await;
    assert_eq!(report["turns"], 6);
    check_sessions(&px, &up, &["py-agents-responses", "py-agents-chat"]);
}

/// Codex CLI, installed from npm (`npm i -g @openai/codex`;
/// `scripts/test.sh` does), runs `codex exec` on a scripted multi-step
/// task: the scripted provider has it run `seq` four times through its
/// `exec_command` tool, then answers. Codex resends its whole history
/// (`store: false`) on every streamed `POST /v1/responses`; once its
/// context crosses the small window, the upstream gets it compacted.
#[tokio::test(flavor = "multi_thread")]
async fn codex_exec_runs_a_multi_step_task_through_the_proxy() {
    let codex = which("codex").expect(
        "codex is not on PATH: install Codex CLI from npm (`npm i -g @openai/codex`; scripts/test.sh does)",
    );
    let up = Upstream::start().await;
    up.script(|s| s.tool_rounds = 4);
    let px = proxy(
        &up.url,
        "max_context_tokens: 14000\npolicy: {keep_recent_rounds: 1, keep_tool_io_pairs: 1, tool_result_max_chars: 1000}",
    )
    .await;
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    // The provider block docs/integrations.md shows, only its address replaced.
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/integrations.md"),
    )
    .unwrap();
    let from = doc
        .find("### Codex CLI")
        .expect("the Codex section of docs/integrations.md");
    let start = doc[from..].find("```toml\n").expect("its toml block") + from + "```toml\n".len();
    let block = &doc[start..start + doc[start..].find("```").unwrap()];
    assert!(block.contains("http://127.0.0.1:5176/v1"), "{block}");
    let config = format!(
        "model = \"gpt-5.1-codex\"\n{}",
        block.replace("http://127.0.0.1:5176", &px.url)
    );
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let (home_path, work_path) = (home.path().to_owned(), work.path().to_owned());
    let out = tokio::task::spawn_blocking(move || {
        Command::new("timeout")
            .arg("300")
            .arg(codex)
            .args([
                "exec",
                "--skip-git-repo-check",
                "Count to a few thousand with seq, step by step, then say done.",
            ])
            .current_dir(work_path)
            .env("CODEX_HOME", home_path)
            .env("OPENAI_API_KEY", "sk-test-SECRET-codex")
            .env_remove("OPENAI_BASE_URL")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("codex runs")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "codex exec failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("Done after 4 tool calls."), "{stdout}");
    let calls = up.model_calls();
    assert_eq!(calls.len(), 5, "four tool rounds and the answer");
    for l in &calls {
        assert_eq!(l.path, "/v1/responses");
        assert_eq!(l.headers["authorization"], "Bearer sk-test-SECRET-codex");
        let body = l.json();
        assert_eq!(body["stream"], true);
        provider_valid(&body, Format::Responses);
    }
    let spans = px.model_calls();
    let session = calls[0].json()["prompt_cache_key"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        spans.iter().all(|s| s["trace_id"] == session.as_str()
            && s["data"]["session_source"] == "prompt_cache_key")
    );
    assert!(
        spans.iter().any(|s| s["data"]["compaction"] == "applied"),
        "{:?}",
        spans
            .iter()
            .map(|s| (&s["data"]["compaction"], &s["data"]["tokens_before"]))
            .collect::<Vec<_>>()
    );
    assert!(
        calls.iter().any(compacted),
        "the upstream's log shows no compacted request"
    );
    assert!(
        spans
            .iter()
            .all(|s| s["data"]["ttft_ms"].as_u64().is_some())
    );
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}
