//! The session API of `compact serve` over real HTTP: two replicas sharing
//! one SQLite state file answer a session's alternating turns exactly as one
//! process does; a SIGKILLed replica's session continues on the other; the
//! errors have their documented shapes; tokens guard the routes.

use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// `compact serve` with its own data directory and the shared state file.
fn start(dir: &Path, state: &Path, port: u16, extra: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_compact"))
        .args([
            "serve",
            "--addr",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
        ])
        .arg(dir)
        .args(extra)
        .env("COMPACT_STATE_STORE", "sqlite")
        .env("COMPACT_STATE_PATH", state)
        .env("COMPACT_MAX_CONTEXT_TOKENS", "3000")
        .env("HOME", dir)
        .env_remove("COMPACT_INGEST_TOKEN")
        .env_remove("COMPACT_READ_TOKEN")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("compact serve starts")
}

async fn wait_healthy(client: &reqwest::Client, base: &str) {
    // A hang guard only: a debug build on a loaded machine may be slow.
    for _ in 0..4800 {
        if let Ok(r) = client.get(format!("{base}/healthz")).send().await
            && r.status().is_success()
        {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("{base} never became healthy");
}

struct Replica {
    child: Child,
    base: String,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn replica(client: &reqwest::Client, dir: &Path, state: &Path, extra: &[&str]) -> Replica {
    let port = free_port();
    let r = Replica {
        child: start(dir, state, port, extra),
        base: format!("http://127.0.0.1:{port}"),
    };
    wait_healthy(client, &r.base).await;
    r
}

async fn post(client: &reqwest::Client, url: String, body: &Value) -> (u16, Value) {
    let r = client.post(url).json(body).send().await.expect("request");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

fn add_turn(messages: &mut Vec<Value>, t: usize) {
    let id = format!("call_{t}");
    messages.push(json!({"role": "user", "content": format!("Turn {t}: ticket OPS-{t} belongs to team-{t}. {}", "lorem ".repeat(60))}));
    messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "read", "arguments": "{}"}}]}));
    messages.push(json!({"role": "tool", "tool_call_id": id, "content": "log line ".repeat(80)}));
    messages.push(json!({"role": "assistant", "content": format!("OPS-{t} handled.")}));
}

/// `turns` turns of `session`, the agent feeding the output back; turn `i`
/// goes to `pick(i)`. Returns the outputs and the summary versions seen.
async fn drive(
    client: &reqwest::Client,
    bases: &[&str],
    pick: impl Fn(usize) -> usize,
    session: &str,
    turns: std::ops::Range<usize>,
    fed: &mut Vec<Value>,
) -> Vec<Value> {
    let mut outputs = Vec::new();
    for t in turns {
        add_turn(fed, t);
        let (status, body) = post(
            client,
            format!("{}/v1/preflight", bases[pick(t)]),
            &json!({"session_id": session, "messages": fed}),
        )
        .await;
        assert_eq!(status, 200, "turn {t}: {body}");
        let text = body["messages"].to_string();
        assert!(
            text.matches("COMPACT-SUMMARY v").count() <= 1,
            "turn {t}: nested summaries"
        );
        assert!(!text.contains("\"meta\""), "turn {t}: not provider-clean");
        if t > 0 {
            assert_ne!(body["report"]["continuation"], "fresh", "turn {t}");
        }
        *fed = body["messages"].as_array().expect("messages").clone();
        outputs.push(body["messages"].clone());
    }
    outputs
}

fn version(client_status: &Value) -> u64 {
    client_status["summary"]["version"].as_u64().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_sessions_and_a_killed_one_loses_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state.sqlite3");
    let client = reqwest::Client::new();
    let a = replica(&client, &dir.path().join("a"), &state, &[]).await;
    let mut b = replica(&client, &dir.path().join("b"), &state, &[]).await;

    // One process, then two alternating: the same outputs.
    let mut fed = vec![json!({"role": "system", "content": "You are a coding agent."})];
    let solo = drive(&client, &[&a.base], |_| 0, "solo", 0..14, &mut fed.clone()).await;
    let alt = drive(
        &client,
        &[&a.base, &b.base],
        |t| t % 2,
        "alt",
        0..14,
        &mut fed,
    )
    .await;
    assert_eq!(alt, solo);

    let status: Value = client
        .get(format!("{}/v1/sessions/alt", a.base))
        .send()
        .await
        .expect("status")
        .json()
        .await
        .expect("json");
    let before = version(&status);
    assert!(before >= 2, "{status}");
    assert_eq!(status["store"], "sqlite");

    // SIGKILL b, continue on a: the chain goes on at n+1.
    b.child.kill().expect("kill");
    b.child.wait().expect("reaped");
    drive(&client, &[&a.base], |_| 0, "alt", 14..15, &mut fed).await;
    let status: Value = client
        .get(format!("{}/v1/sessions/alt", a.base))
        .send()
        .await
        .expect("status")
        .json()
        .await
        .expect("json");
    assert_eq!(version(&status), before + 1);

    // Errors: a bad session id and a bad message name their JSON path; a
    // layer key that is not a compaction setting is refused; a history
    // whose pinned part cannot fit is a 422 with guidance.
    let url = format!("{}/v1/preflight", a.base);
    let (s, body) = post(
        &client,
        url.clone(),
        &json!({"session_id": "../x", "messages": []}),
    )
    .await;
    assert_eq!(
        (s, body["details"][0]["path"].as_str()),
        (400, Some("$.session_id"))
    );
    let (s, body) = post(
        &client,
        url.clone(),
        &json!({"session_id": "e", "messages": [{"role": "bogus"}]}),
    )
    .await;
    assert_eq!(
        (s, body["details"][0]["path"].as_str()),
        (400, Some("$.messages[0].role"))
    );
    let (s, body) = post(
        &client,
        url.clone(),
        &json!({"session_id": "e", "messages": [], "config": {"state": {"store": "memory"}}}),
    )
    .await;
    assert_eq!(
        (s, body["details"][0]["path"].as_str()),
        (400, Some("$.config.state"))
    );
    let big = json!([{"role": "system", "content": "pinned ".repeat(5000)}, {"role": "user", "content": "hi"}]);
    let (s, body) = post(
        &client,
        url.clone(),
        &json!({"session_id": "e", "messages": big}),
    )
    .await;
    assert_eq!(s, 422, "{body}");
    assert_eq!(body["error"], "InsufficientBudget");
    assert!(body["guidance"].as_str().is_some_and(|g| !g.is_empty()));

    // A request layer wins over the defaults, and the report says so.
    let (s, body) = post(
        &client,
        url.clone(),
        &json!({"session_id": "layered", "messages": fed, "config": {"policy": {"keep_recent_turns": 2}}}),
    )
    .await;
    assert_eq!(s, 200, "{body}");
    assert!(
        body["report"]["config_sources"]
            .as_array()
            .expect("sources")
            .contains(&json!({"key": "policy.keep_recent_turns", "level": "request"}))
    );

    // The provider's usage anchors the estimate (Anthropic's cache fields
    // count); a malformed one names its field.
    let anchored = json!([
        {"role": "user", "content": "hello there"},
        {"role": "assistant", "content": "hi"},
        {"role": "user", "content": "and now?"}
    ]);
    let (s, body) = post(
        &client,
        url.clone(),
        &json!({"session_id": "anchored", "messages": anchored,
                "usage": {"input_tokens": 900, "cache_read_input_tokens": 100}}),
    )
    .await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["report"]["basis"], "usage", "{body}");
    let before = body["report"]["tokens_before"]
        .as_u64()
        .expect("tokens_before");
    assert!(
        before > 1000,
        "1000 reported tokens plus the new turn: {body}"
    );
    let (s, body) = post(
        &client,
        url.clone(),
        &json!({"session_id": "anchored", "messages": [], "usage": {"input_tokens": "many"}}),
    )
    .await;
    assert_eq!(
        (s, body["details"][0]["path"].as_str()),
        (400, Some("$.usage.input_tokens"))
    );

    // Overflow returns a history for one retry; DELETE forgets.
    let (s, body) = post(
        &client,
        format!("{}/v1/sessions/alt/overflow", a.base),
        &json!({"messages": fed, "error": "context_length_exceeded"}),
    )
    .await;
    assert_eq!(
        (s, &body["report"]["forced"]),
        (200, &json!("context_overflow"))
    );
    let r = client
        .delete(format!("{}/v1/sessions/alt", a.base))
        .send()
        .await
        .expect("delete");
    assert_eq!(r.status().as_u16(), 200);
    let status: Value = client
        .get(format!("{}/v1/sessions/alt", a.base))
        .send()
        .await
        .expect("status")
        .json()
        .await
        .expect("json");
    assert_eq!(status["known"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_guard_the_session_api() {
    let dir = tempfile::tempdir().expect("tempdir");
    let client = reqwest::Client::new();
    let r = replica(
        &client,
        dir.path(),
        &dir.path().join("state.sqlite3"),
        &["--ingest-token", "w-secret", "--read-token", "r-secret"],
    )
    .await;
    let body = json!({"session_id": "t", "messages": [{"role": "user", "content": "hi"}]});
    let url = format!("{}/v1/preflight", r.base);
    assert_eq!(post(&client, url.clone(), &body).await.0, 401);
    let ok = client
        .post(&url)
        .bearer_auth("w-secret")
        .json(&body)
        .send()
        .await
        .expect("post");
    assert_eq!(ok.status().as_u16(), 200);
    let status_url = format!("{}/v1/sessions/t", r.base);
    let denied = client.get(&status_url).send().await.expect("get");
    assert_eq!(denied.status().as_u16(), 401);
    let read = client
        .get(&status_url)
        .bearer_auth("r-secret")
        .send()
        .await
        .expect("get");
    assert_eq!(read.status().as_u16(), 200);
}
