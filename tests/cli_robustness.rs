//! The CLI where the world around it misbehaves: a reader that closes
//! stdout early (`compact status S | head`) ends a command quietly with exit
//! 0, never a panic; an exporter that accepts connections and never answers
//! costs a one-shot command its flush timeout, not the result.

mod support;

use std::io::Write;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use support::{cli, spawn_piped};

const HISTORY: &str =
    r#"[{"role":"system","content":"You are terse."},{"role":"user","content":"hello"}]"#;

fn write_stdin(child: &mut Child, text: &str) {
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(text.as_bytes()).expect("write stdin");
    }
}

/// Waits for `child`; a hang guard only (a debug build on a loaded machine
/// may be slow), not a measurement.
fn wait(mut child: Child, what: &str) -> Output {
    for _ in 0..2400 {
        if child.try_wait().expect("try_wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = child.kill();
    panic!("{what} never exited");
}

/// Runs `compact args` with its stdout's read end closed before it writes.
fn with_stdout_closed(dir: &Path, args: &[&str], stdin: &str) -> Output {
    let mut child = spawn_piped(cli(dir).args(args));
    // The only read end is ours: dropping it makes every write an EPIPE.
    drop(child.stdout.take());
    write_stdin(&mut child, stdin);
    wait(child, &format!("compact {args:?}"))
}

#[test]
fn a_closed_stdout_ends_commands_quietly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state.sqlite3");
    let state_arg = state.to_str().expect("utf-8 path");

    // A session to show, written normally first.
    let mut child =
        spawn_piped(cli(dir.path()).args(["preflight", "--session", "s1", "--state", state_arg]));
    write_stdin(&mut child, HISTORY);
    let first = wait(child, "compact preflight");
    assert!(first.status.success(), "{first:?}");
    assert!(!first.stdout.is_empty());

    for args in [
        vec!["status", "s1", "--state", state_arg],
        vec!["preflight", "--session", "s1", "--state", state_arg],
        vec!["config", "print"],
        vec!["config", "print", "--json"],
        vec!["estimate"],
    ] {
        let out = with_stdout_closed(dir.path(), &args, HISTORY);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!stderr.contains("Broken pipe"), "{args:?}: {stderr}");
    }
}

/// A collector that accepts every connection and never answers; counts them.
fn black_hole() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming().flatten() {
            count.fetch_add(1, Ordering::SeqCst);
            held.push(conn);
        }
    });
    (port, accepted)
}

#[test]
fn a_dead_exporter_costs_the_flush_timeout_not_the_result() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (port, accepted) = black_hole();
    for exporter in ["ariadne", "otlp"] {
        let before = accepted.load(Ordering::SeqCst);
        let mut child = spawn_piped(
            cli(dir.path())
                .args(["preflight", "--force", "--session", exporter])
                .env("COMPACT_TELEMETRY_EXPORTER", exporter)
                .env("COMPACT_ARIADNE_URL", format!("http://127.0.0.1:{port}"))
                .env(
                    "COMPACT_OTLP_ENDPOINT",
                    format!("http://127.0.0.1:{port}/v1/traces"),
                ),
        );
        write_stdin(&mut child, HISTORY);
        let out = wait(child, "compact preflight with a dead exporter");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{exporter}: {stderr}");
        let messages: serde_json::Value =
            serde_json::from_slice(&out.stdout).expect("the compacted history on stdout");
        assert!(messages.is_array(), "{messages}");
        // The exporter did try: the collector saw a connection, and the
        // events it never acknowledged are reported, not waited for.
        assert!(accepted.load(Ordering::SeqCst) > before, "{exporter}");
        assert!(
            stderr.contains(&format!("exporter {exporter} did not take"))
                && stderr.contains("flush timeout"),
            "{exporter}: {stderr}"
        );
    }
}
