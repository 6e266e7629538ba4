//! What the tests of `compact serve`'s session API share: replicas (a
//! spawned `compact serve`, killed when dropped), JSON over HTTP, and a
//! session driven turn by turn with each answer fed back; and what the
//! one-shot CLI tests share: `compact` confined to a sandbox, started with
//! piped streams, run with an input.
#![allow(dead_code)]

use std::ffi::OsString;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use serde_json::{Value, json};

/// The `compact` binary: cargo's own path for the root package's tests;
/// for another crate's tests (compact-bench's, which spawn the product as
/// users run it), the one cargo built into the same target directory
/// (`cargo test --workspace` builds it; `COMPACT_BIN` overrides).
pub(crate) fn compact_bin() -> std::path::PathBuf {
    if let Some(bin) = option_env!("CARGO_BIN_EXE_compact") {
        return bin.into();
    }
    if let Some(bin) = std::env::var_os("COMPACT_BIN") {
        return bin.into();
    }
    let name = format!("compact{}", std::env::consts::EXE_SUFFIX);
    // target/<profile>/deps/<test> → target/<profile>/compact
    std::env::current_exe()
        .ok()
        .and_then(|exe| {
            exe.ancestors()
                .skip(1)
                .take(2)
                .map(|dir| dir.join(&name))
                .find(|c| c.is_file())
        })
        .unwrap_or_else(|| {
            panic!("these tests spawn the `compact` binary: build it (`cargo build -p compact`) or set COMPACT_BIN")
        })
}

/// `compact` confined to `sandbox`: it runs there, and the places it writes
/// by default (the archive, the spool) are under it too, never in the
/// source tree or the user's data directory; none of the caller's
/// environment that picks a model, a trigger, a store, logs, colours or an
/// exporter reaches it.
pub(crate) fn cli(sandbox: &Path) -> Command {
    let mut c = Command::new(compact_bin());
    c.current_dir(sandbox)
        .env("XDG_DATA_HOME", sandbox.join("data"))
        .env("HOME", sandbox.join("home"));
    for var in [
        "COMPACT_MODEL",
        "COMPACT_TRIGGER_PCT",
        "COMPACT_STORAGE_PATH",
        "COMPACT_LOG",
        "NO_COLOR",
        "COMPACT_TELEMETRY_EXPORTER",
        "COMPACT_EXPORTER",
        "COMPACT_ARIADNE_URL",
    ] {
        c.env_remove(var);
    }
    c
}

/// `cmd` started with its three streams piped.
pub(crate) fn spawn_piped(cmd: &mut Command) -> Child {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn compact")
}

/// `cmd` run to its end with `stdin` as its input. A command that refuses
/// its arguments exits before reading its input: the closed pipe is then
/// part of the outcome the test checks, not a failure of the harness.
pub(crate) fn run_with_input(cmd: &mut Command, stdin: &str) -> Output {
    let mut child = spawn_piped(cmd);
    let written = child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes());
    if let Err(e) = written
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        panic!("write stdin: {e}");
    }
    child.wait_with_output().expect("wait")
}

/// `compact serve` on loopback port `port` with its data in `dir`.
pub(crate) fn serve_command(dir: &Path, port: u16) -> Command {
    let mut c = Command::new(compact_bin());
    c.args([
        "serve",
        "--addr",
        &format!("127.0.0.1:{port}"),
        "--data-dir",
    ])
    .arg(dir);
    c
}

/// A loopback port nobody listens on right now.
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// One `compact serve` process.
pub(crate) struct Replica {
    pub(crate) child: Child,
    /// `http://127.0.0.1:PORT`.
    pub(crate) base: String,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How to start a replica: its data directory, the environment that picks
/// its session store, extra flags.
pub(crate) struct Serve<'a> {
    pub(crate) dir: &'a Path,
    pub(crate) env: Vec<(&'static str, OsString)>,
    pub(crate) args: Vec<&'a str>,
    /// `COMPACT_MAX_CONTEXT_TOKENS`.
    pub(crate) window: usize,
    /// Where its stderr goes (appended); discarded when `None`.
    pub(crate) log: Option<std::path::PathBuf>,
}

impl<'a> Serve<'a> {
    /// State in the SQLite file `state`.
    pub(crate) fn sqlite(dir: &'a Path, state: &Path) -> Self {
        Self {
            dir,
            env: vec![
                ("COMPACT_STATE_STORE", "sqlite".into()),
                ("COMPACT_STATE_PATH", state.into()),
            ],
            args: Vec::new(),
            window: 3000,
            log: None,
        }
    }

    /// State in the PostgreSQL database at `url`.
    pub(crate) fn postgres(dir: &'a Path, url: &str) -> Self {
        Self {
            dir,
            env: vec![
                ("COMPACT_STATE_STORE", "postgres".into()),
                ("COMPACT_STATE_URL", url.into()),
            ],
            args: Vec::new(),
            window: 3000,
            log: None,
        }
    }

    /// Starts the replica and waits until it answers `/healthz`.
    pub(crate) async fn start(&self, client: &reqwest::Client) -> Replica {
        let port = free_port();
        let stderr = match &self.log {
            Some(path) => std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map(Stdio::from)
                .expect("the replica's log file opens"),
            None => Stdio::null(),
        };
        let child = serve_command(self.dir, port)
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("COMPACT_MAX_CONTEXT_TOKENS", self.window.to_string())
            .env("HOME", self.dir)
            .env_remove("COMPACT_INGEST_TOKEN")
            .env_remove("COMPACT_READ_TOKEN")
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("compact serve starts");
        let mut r = Replica {
            child,
            base: format!("http://127.0.0.1:{port}"),
        };
        r.wait_healthy(client).await;
        r
    }
}

impl Replica {
    async fn wait_healthy(&mut self, client: &reqwest::Client) {
        // A hang guard only: a debug build on a loaded machine may be slow.
        for _ in 0..4800 {
            if let Ok(r) = client.get(format!("{}/healthz", self.base)).send().await
                && r.status().is_success()
            {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("{} exited: {status}", self.base);
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        panic!("{} never became healthy", self.base);
    }

    /// SIGKILL, and reap it.
    pub(crate) fn kill(&mut self) {
        self.child.kill().expect("kill");
        self.child.wait().expect("reaped");
    }
}

/// POSTs `body` as JSON; the status and the JSON answer (`null` if none).
pub(crate) async fn post(client: &reqwest::Client, url: String, body: &Value) -> (u16, Value) {
    let r = client.post(url).json(body).send().await.expect("request");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// `GET /v1/sessions/{session}`.
pub(crate) async fn status(client: &reqwest::Client, base: &str, session: &str) -> Value {
    client
        .get(format!("{base}/v1/sessions/{session}"))
        .send()
        .await
        .expect("status")
        .json()
        .await
        .expect("json")
}

/// The summary version a status shows (0 without one).
pub(crate) fn version(status: &Value) -> u64 {
    status["summary"]["version"].as_u64().unwrap_or(0)
}

/// Appends turn `t`: a user message, a tool call and its result, a reply.
pub(crate) fn add_turn(messages: &mut Vec<Value>, t: usize) {
    let id = format!("call_{t}");
    messages.push(json!({"role": "user", "content": format!("Turn {t}: ticket OPS-{t} belongs to team-{t}. {}", "lorem ".repeat(60))}));
    messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "read", "arguments": "{}"}}]}));
    messages.push(json!({"role": "tool", "tool_call_id": id, "content": "log line ".repeat(80)}));
    messages.push(json!({"role": "assistant", "content": format!("OPS-{t} handled.")}));
}

/// `turns` turns of `session`, the agent feeding each answer back; turn `t`
/// goes to `bases[pick(t)]`. Every answer is a 200, provider-clean, with at
/// most one summary header, and (after the first) continues the session.
/// Returns the answers' messages.
pub(crate) async fn drive(
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
