//! `compact preflight --archive DIR` and `compact archive list|show|verify`
//! through the real binary: output and exit codes.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn compact(args: &[&str], stdin: &str, cwd: &std::path::Path) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_compact"))
        .args(args)
        .current_dir(cwd)
        .env("XDG_DATA_HOME", cwd.join("data"))
        .env_remove("COMPACT_STORAGE_PATH")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn compact: {e}"));
    if let Some(mut i) = child.stdin.take() {
        let _ = i.write_all(stdin.as_bytes());
    }
    child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("wait: {e}"))
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn preflight_archives_and_the_audit_commands_read_it() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let archive = dir.path().join("arch");
    let arch = archive.to_str().unwrap_or_default();
    let mut msgs = vec![serde_json::json!({"role": "system", "content": "Be careful."})];
    for i in 0..10 {
        msgs.push(serde_json::json!({"role": "user", "content": format!("step {i}: deploy with password: hunter{i}2024")}));
        msgs.push(serde_json::json!({"role": "assistant", "content": format!("deployed {i}")}));
    }
    let input = serde_json::to_string(&msgs).unwrap_or_default();
    let o = compact(
        &[
            "preflight",
            "--force",
            "--session",
            "audit-1",
            "--archive",
            arch,
            "--max-context-tokens",
            "100000",
        ],
        &input,
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // The in-memory result keeps the messages; the archive is redacted.
    let transcript =
        std::fs::read_to_string(archive.join("audit-1/transcript-pre-compact-001.jsonl"))
            .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(transcript.lines().count(), msgs.len());
    assert!(!transcript.contains("hunter3"), "{transcript}");
    assert!(transcript.contains("<REDACTED>"));

    let o = compact(&["archive", "list", "--archive", arch], "", dir.path());
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "audit-1\n",
        "{}",
        text(&o)
    );
    let o = compact(
        &["archive", "show", "audit-1", "1", "--archive", arch],
        "",
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let shown: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
    assert_eq!(shown["step"], 1);
    assert_eq!(
        shown["transcript"].as_array().map(Vec::len),
        Some(msgs.len())
    );
    assert!(
        shown["summary"]["message"]["content"]
            .as_str()
            .is_some_and(|c| c.starts_with("COMPACT-SUMMARY v1"))
    );

    let o = compact(
        &["archive", "verify", "audit-1", "--archive", arch],
        "",
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("ok: session audit-1"));

    // One changed byte: exit 1, naming the file.
    let p = archive.join("audit-1/summary-001.json");
    let mut b = std::fs::read(&p).unwrap_or_default();
    b[5] ^= 1;
    let _ = std::fs::write(&p, b);
    let o = compact(
        &["archive", "verify", "audit-1", "--archive", arch],
        "",
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("edited file summary-001.json"),
        "{}",
        text(&o)
    );

    // A rejected session id: exit 2, and nothing is touched.
    for bad in ["../x", "a/b", "%2e%2e"] {
        let o = compact(
            &["archive", "verify", bad, "--archive", arch],
            "",
            dir.path(),
        );
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", text(&o));
        assert!(String::from_utf8_lossy(&o.stderr).contains("invalid session id"));
        let o = compact(
            &["preflight", "--force", "--session", bad, "--archive", arch],
            &input,
            dir.path(),
        );
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", text(&o));
    }
}

/// The audit step of docs/archive.md through the binary: the
/// `manifest_head` of the last `compact.archival` event in the events file
/// is the head `compact archive verify` prints.
#[test]
fn the_exported_manifest_head_matches_verify() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let archive = dir.path().join("arch");
    let events = dir.path().join("events.jsonl");
    let (arch, ev) = (
        archive.to_str().unwrap_or_default(),
        events.to_str().unwrap_or_default(),
    );
    let mut msgs = vec![serde_json::json!({"role": "system", "content": "Be careful."})];
    for i in 0..10 {
        msgs.push(
            serde_json::json!({"role": "user", "content": format!("step {i}: run the migration")}),
        );
        msgs.push(serde_json::json!({"role": "assistant", "content": format!("migrated {i}")}));
    }
    let input = serde_json::to_string(&msgs).unwrap_or_default();
    for _ in 0..2 {
        let o = compact(
            &[
                "preflight",
                "--force",
                "--session",
                "audit-2",
                "--archive",
                arch,
                "--events",
                ev,
                "--max-context-tokens",
                "100000",
            ],
            &input,
            dir.path(),
        );
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    }
    let exported = std::fs::read_to_string(&events).unwrap_or_else(|e| panic!("{e}"));
    let head = exported
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["name"] == "compact.archival" && e["data"]["session_id"] == "audit-2")
        .and_then(|e| e["data"]["manifest_head"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no compact.archival with a manifest_head in {exported}"));
    let o = compact(
        &["archive", "verify", "audit-2", "--archive", arch],
        "",
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.trim_end().ends_with(&format!("head {head}")),
        "verify prints the head of the last compact.archival event ({head}): {}",
        text(&o)
    );
}
