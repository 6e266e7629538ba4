//! `compact proxy` and `compact serve --proxy` as users run them: the
//! binary in front of a scripted provider on loopback. One process runs
//! the trace server and the proxy; the proxy's calls are on the server's
//! timeline and in its `/metrics`. Bad flags exit 2 naming the key.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use axum::Router;
use axum::routing::post;
use serde_json::{Value, json};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A provider that answers every chat completion with one text and usage.
async fn upstream() -> String {
    let app = Router::new().route(
        "/v1/chat/completions",
        post(|| async {
            axum::Json(json!({"id": "c1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 20, "completion_tokens": 2, "total_tokens": 22}}))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    url
}

async fn healthy(client: &reqwest::Client, url: &str) {
    for _ in 0..400 {
        if client
            .get(url)
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{url} never answered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_with_proxy_puts_each_call_on_the_servers_timeline_and_metrics() {
    let up = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let (server, proxy) = (free_port(), free_port());
    let _child = Killed(
        Command::new(env!("CARGO_BIN_EXE_compact"))
            .args([
                "serve",
                "--addr",
                &format!("127.0.0.1:{server}"),
                "--data-dir",
            ])
            .arg(dir.path())
            .args([
                "--proxy",
                &up,
                "--proxy-addr",
                &format!("127.0.0.1:{proxy}"),
            ])
            .env("HOME", dir.path())
            .env("COMPACT_STORAGE_ADAPTER", "none")
            .env_remove("COMPACT_INGEST_TOKEN")
            .env_remove("COMPACT_READ_TOKEN")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("compact serve --proxy"),
    );
    let client = reqwest::Client::new();
    healthy(&client, &format!("http://127.0.0.1:{server}/healthz")).await;
    healthy(&client, &format!("http://127.0.0.1:{proxy}/healthz")).await;
    let r = client
        .post(format!("http://127.0.0.1:{proxy}/v1/chat/completions"))
        .header("authorization", "Bearer sk-test-SECRET-cli")
        .header("x-compact-session", "cli-1")
        .json(&json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let answer: Value = r.json().await.unwrap();
    assert_eq!(answer["choices"][0]["message"]["content"], "hello");
    // The span reaches the server's store through the manager's dispatcher.
    let mut trace = String::new();
    for _ in 0..200 {
        let r = client
            .get(format!("http://127.0.0.1:{server}/api/traces/cli-1"))
            .send()
            .await
            .unwrap();
        trace = r.text().await.unwrap();
        if trace.contains("compact.model_call") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(trace.contains("compact.model_call"), "{trace}");
    assert!(trace.contains("compact.preflight"), "{trace}");
    assert!(!trace.contains("SECRET"), "{trace}");
    let metrics = client
        .get(format!("http://127.0.0.1:{server}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("compact_proxy_calls_total{api=\"chat_completions\",status=\"200\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("compact_proxy_tokens_total{api=\"chat_completions\",kind=\"input\"} 20"),
        "{metrics}"
    );
}

#[test]
fn bad_proxy_flags_exit_2_naming_the_key() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_compact"))
            .args(args)
            .env_remove("COMPACT_PROXY_UPSTREAM")
            .env_remove("COMPACT_PROXY_UPSTREAMS")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&["proxy", "--upstream", "api.openai.com"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("proxy.upstream") && err.contains("--upstream"),
        "{err}"
    );
    let (code, err) = run(&["proxy"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("no upstream"), "{err}");
    // Advertising a tool the proxy does not answer is refused at startup.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("compact.yaml");
    std::fs::write(&config, "recall: {enabled: true, advertise: true}\n").unwrap();
    let config = config.to_string_lossy().into_owned();
    let (code, err) = run(&[
        "proxy",
        "--upstream",
        "http://127.0.0.1:9",
        "--config",
        &config,
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("recall.advertise") && err.contains("compact_recall"),
        "{err}"
    );
}
