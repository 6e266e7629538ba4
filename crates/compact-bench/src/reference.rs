//! A reference trace server measured beside ours in one run.
//!
//! Throughput figures from different days on a shared two-core machine do
//! not compare; a ratio from one run does. `COMPACT_BENCH_REFERENCE` holds
//! the command that starts the reference (Ariadne's own server, built as
//! `../shared/tools/README.md` says), with `{port}` where its port goes:
//!
//! ```sh
//! COMPACT_BENCH_REFERENCE='env PORT={port} node ariadne/api/dist/index.js' compact bench server
//! ```
//!
//! For each connection count the same client drives a fresh reference
//! process right after our fresh server. Ours runs inside the bench process
//! and shares its threads with the client, the reference has a process of
//! its own: the comparison leans in the reference's favour, not ours.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::server::{BenchOptions, drive_ingest};

const VAR: &str = "COMPACT_BENCH_REFERENCE";

/// The reference command from the environment, when one is set.
pub(crate) fn from_env() -> Option<String> {
    std::env::var(VAR)
        .ok()
        .map(|c| c.trim().to_owned())
        .filter(|c| !c.is_empty())
}

/// Measures the reference at `opts`'s connection count and adds
/// `reference` (its figures or its error) and `ratio` (ours / its) to `ours`.
pub(crate) async fn compare(ours: &mut Value, cmd: &str, opts: &BenchOptions) {
    let theirs = measure(cmd, opts)
        .await
        .unwrap_or_else(|e| json!({ "error": e }));
    let ratio = match (
        ours.get("events_per_sec").and_then(Value::as_f64),
        theirs.get("events_per_sec").and_then(Value::as_f64),
    ) {
        (Some(a), Some(b)) if b > 0.0 => json!(a / b),
        _ => Value::Null,
    };
    if let Some(doc) = ours.as_object_mut() {
        doc.insert("reference".into(), theirs);
        doc.insert("ratio".into(), ratio);
    }
}

async fn measure(cmd: &str, opts: &BenchOptions) -> Result<Value, String> {
    let port = free_port()?;
    let mut server = Reference::start(&cmd.replace("{port}", &port.to_string()))?;
    let base = format!("http://127.0.0.1:{port}");
    server.wait_ready(&base).await?;
    let (events, secs) = drive_ingest(&base, opts).await?;
    drop(server);
    Ok(json!({
        "command": cmd,
        "events": events,
        "seconds": secs,
        "events_per_sec": events as f64 / secs,
    }))
}

fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("{VAR}: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("{VAR}: {e}"))
}

/// The reference's process, killed when dropped.
struct Reference(Child);

impl Reference {
    fn start(cmd: &str) -> Result<Self, String> {
        // `exec` so the shell becomes the server and a kill reaches it.
        Command::new("sh")
            .arg("-c")
            .arg(format!("exec {cmd}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map(Reference)
            .map_err(|e| format!("{VAR}: could not start {cmd:?}: {e}"))
    }

    async fn wait_ready(&mut self, base: &str) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let client = reqwest::Client::new();
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.0.try_wait() {
                return Err(format!(
                    "{VAR}: the reference exited ({status}) before it answered"
                ));
            }
            if let Ok(resp) = client.get(format!("{base}/healthz")).send().await
                && resp.status().is_success()
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(format!(
            "{VAR}: the reference did not answer {base}/healthz in 30 s"
        ))
    }
}

impl Drop for Reference {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_reference_that_does_not_start_is_an_error_beside_our_figures() {
        let mut ours = json!({ "clients": 1, "events_per_sec": 1000.0 });
        let opts = BenchOptions {
            ingest_secs: 0.1,
            ..BenchOptions::default()
        };
        compare(&mut ours, "exit 3", &opts).await;
        let error = ours["reference"]["error"].as_str().unwrap_or_default();
        assert!(error.contains("exited"), "{ours}");
        assert!(ours["ratio"].is_null());
        assert_eq!(ours["events_per_sec"], 1000.0);
    }

    /// A stand-in reference (python3's http.server answering 200 to every
    /// request) is started, driven and stopped: its figures and the ratio
    /// are reported.
    #[tokio::test]
    async fn a_reference_is_driven_by_the_same_client_and_compared() {
        let script = r#"import http.server as h, sys
class H(h.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def reply(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"{}")
    do_GET = do_POST = reply
    def log_message(self, *a): pass
h.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"#;
        let dir = std::env::temp_dir().join(format!("compact-bench-ref-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("reference.py");
        std::fs::write(&path, script).expect("script written");
        let mut ours = json!({ "clients": 2, "events_per_sec": 1000.0 });
        let opts = BenchOptions {
            ingest_secs: 0.3,
            ingest_clients: 2,
            batch: 10,
            ..BenchOptions::default()
        };
        let cmd = format!("python3 {} {{port}}", path.display());
        compare(&mut ours, &cmd, &opts).await;
        let _ = std::fs::remove_dir_all(&dir);
        let theirs = &ours["reference"];
        let events = theirs["events"].as_u64().unwrap_or_default();
        assert!(events > 0 && events.is_multiple_of(10), "{ours}");
        let rate = theirs["events_per_sec"].as_f64().unwrap_or_default();
        let ratio = ours["ratio"].as_f64().unwrap_or_default();
        assert!((ratio - 1000.0 / rate).abs() < 1e-9, "{ours}");
    }
}
