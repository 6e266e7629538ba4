//! Two `compact serve` replicas on one PostgreSQL database (a real server):
//! a session's alternating turns answer exactly as one process does, and a
//! SIGKILLed replica loses nothing (the next turn is version n+1).

#[path = "../crates/compact-middleware/tests/postgres_support/mod.rs"]
mod postgres_support;

use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// `compact serve` with its own data directory, state in PostgreSQL.
fn start(dir: &Path, url: &str, port: u16) -> Child {
    Command::new(env!("CARGO_BIN_EXE_compact"))
        .args([
            "serve",
            "--addr",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
        ])
        .arg(dir)
        .env("COMPACT_STATE_STORE", "postgres")
        .env("COMPACT_STATE_URL", url)
        .env("COMPACT_MAX_CONTEXT_TOKENS", "3000")
        .env("HOME", dir)
        .env_remove("COMPACT_INGEST_TOKEN")
        .env_remove("COMPACT_READ_TOKEN")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("compact serve starts")
}

async fn wait_healthy(client: &reqwest::Client, base: &str, child: &mut Child) {
    // A hang guard only: a debug build on a loaded machine may be slow.
    for _ in 0..4800 {
        if let Ok(r) = client.get(format!("{base}/healthz")).send().await
            && r.status().is_success()
        {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{base} exited: {status}");
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

async fn replica(client: &reqwest::Client, dir: &Path, url: &str) -> Replica {
    let port = free_port();
    let mut r = Replica {
        child: start(dir, url, port),
        base: format!("http://127.0.0.1:{port}"),
    };
    wait_healthy(client, &r.base, &mut r.child).await;
    r
}

fn add_turn(messages: &mut Vec<Value>, t: usize) {
    let id = format!("call_{t}");
    messages.push(json!({"role": "user", "content": format!("Turn {t}: ticket OPS-{t} belongs to team-{t}. {}", "lorem ".repeat(60))}));
    messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "read", "arguments": "{}"}}]}));
    messages.push(json!({"role": "tool", "tool_call_id": id, "content": "log line ".repeat(80)}));
    messages.push(json!({"role": "assistant", "content": format!("OPS-{t} handled.")}));
}

/// `turns` turns of `session`, the agent feeding the output back; turn `t`
/// goes to `bases[pick(t)]`.
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
        let r = client
            .post(format!("{}/v1/preflight", bases[pick(t)]))
            .json(&json!({"session_id": session, "messages": fed}))
            .send()
            .await
            .expect("request");
        let status = r.status().as_u16();
        let body: Value = r.json().await.unwrap_or(Value::Null);
        assert_eq!(status, 200, "turn {t}: {body}");
        let text = body["messages"].to_string();
        assert!(
            text.matches("COMPACT-SUMMARY v").count() <= 1,
            "turn {t}: nested summaries"
        );
        *fed = body["messages"].as_array().expect("messages").clone();
        outputs.push(body["messages"].clone());
    }
    outputs
}

async fn status(client: &reqwest::Client, base: &str, session: &str) -> Value {
    client
        .get(format!("{base}/v1/sessions/{session}"))
        .send()
        .await
        .expect("status")
        .json()
        .await
        .expect("json")
}

fn version(status: &Value) -> u64 {
    status["summary"]["version"].as_u64().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_on_one_postgres_match_one_process_and_a_killed_one_loses_nothing() {
    let solo_db = postgres_support::database().await;
    let shared_db = postgres_support::database().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let client = reqwest::Client::new();
    let solo = replica(&client, &dir.path().join("solo"), &solo_db.url).await;
    let a = replica(&client, &dir.path().join("a"), &shared_db.url).await;
    let mut b = replica(&client, &dir.path().join("b"), &shared_db.url).await;

    let mut fed = vec![json!({"role": "system", "content": "You are a coding agent."})];
    let one = drive(&client, &[&solo.base], |_| 0, "s", 0..14, &mut fed.clone()).await;
    let alt = drive(
        &client,
        &[&a.base, &b.base],
        |t| t % 2,
        "s",
        0..14,
        &mut fed,
    )
    .await;
    assert_eq!(alt, one, "two replicas answer as one process");

    let seen = status(&client, &b.base, "s").await;
    assert_eq!(seen["store"], "postgres");
    let before = version(&seen);
    assert!(before >= 2, "{seen}");

    // SIGKILL b, continue on a: the chain goes on at n+1.
    b.child.kill().expect("kill");
    b.child.wait().expect("reaped");
    drive(&client, &[&a.base], |_| 0, "s", 14..15, &mut fed).await;
    assert_eq!(version(&status(&client, &a.base, "s").await), before + 1);
}

#[test]
fn an_unreachable_database_is_refused_at_start_without_the_password() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_compact"))
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .env("COMPACT_STATE_STORE", "postgres")
        .env("COMPACT_STATE_URL", "postgres://u:s3cret@127.0.0.1:1/x")
        .env("HOME", dir.path())
        .output()
        .expect("compact serve runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot connect"), "{stderr}");
    assert!(!stderr.contains("s3cret"), "{stderr}");
}
