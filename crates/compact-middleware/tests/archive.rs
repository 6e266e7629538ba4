//! The archive: filesystem layout, crash safety, session id validation,
//! tamper evidence, and the manager's archive-before-drop and redaction.

mod manager_support;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use compact_middleware::BoxFuture;
use compact_middleware::archive::{
    self, Archive, ArchiveError, FsAdapter, Problem, SessionId, StorageAdapter,
};
use compact_middleware::config::Config;
use compact_middleware::events::{CollectingExporter, Event};
use compact_middleware::model::{Format, Request};
use compact_middleware::{CompactError, CompactManager, Message};
use serde_json::{Value, json};

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"))
}

fn sid(s: &str) -> SessionId {
    SessionId::parse(s).unwrap_or_else(|e| panic!("{e}"))
}

fn rt() -> tokio::runtime::Runtime {
    manager_support::two_worker_runtime()
}

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/archive/session-abc-123")
}

/// The fixture session written through the adapter.
async fn write_fixture(a: &FsAdapter) {
    let a = Archive::new(a);
    let s = sid("session-abc-123");
    let t1 = vec![
        json!({"role": "system", "content": "You are a careful agent."}),
        json!({"role": "user", "content": "Rename `foo` to `bar` in src/lib.rs"}),
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "edit", "arguments": "{\"path\":\"src/lib.rs\"}"}}]}),
        json!({"role": "tool", "tool_call_id": "call_1", "content": "ok: 3 replacements"}),
    ];
    a.save_transcript(&s, 1, &t1)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    a.save_summary(&s, 1, &json!({"session_id": "session-abc-123", "step": 1, "summary_version": 1, "message": {"role": "system", "content": "COMPACT-SUMMARY v1\nGoal: rename foo to bar."}}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    a.save_events(&s, &[json!({"type": "span", "trace_id": "session-abc-123", "span_id": "s1", "name": "compact.archival", "started_at": "2026-01-01T00:00:00.000Z", "data": {"step": 1}, "status": "ok"})])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut t2 = t1.clone();
    t2.push(json!({"role": "user", "content": "Now run the tests."}));
    a.save_transcript(&s, 2, &t2)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    a.save_summary(&s, 2, &json!({"session_id": "session-abc-123", "step": 2, "summary_version": 2, "message": {"role": "system", "content": "COMPACT-SUMMARY v2\nGoal: rename foo to bar; run tests."}}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    a.save_events(&s, &[json!({"type": "span", "trace_id": "session-abc-123", "span_id": "s2", "name": "compact.archival", "started_at": "2026-01-01T00:00:01.000Z", "data": {"step": 2}, "status": "ok"}), json!({"type": "span", "trace_id": "session-abc-123", "span_id": "s3", "name": "compact.preflight", "started_at": "2026-01-01T00:00:01.000Z", "data": {}, "status": "ok"})])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn filesystem_layout_is_byte_for_byte_the_fixture() {
    let dir = tmp();
    let a = FsAdapter::new(dir.path().join("archive"));
    rt().block_on(write_fixture(&a));
    let got_dir = dir.path().join("archive/session-abc-123");
    let mut got: Vec<String> = std::fs::read_dir(&got_dir)
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    got.sort();
    let expected = [
        "events.jsonl",
        "manifest.jsonl",
        "summary-001.json",
        "summary-002.json",
        "transcript-pre-compact-001.jsonl",
        "transcript-pre-compact-002.jsonl",
    ];
    assert_eq!(
        got, expected,
        "exactly the fixture layout plus the manifest, no temp files"
    );
    let bless = std::env::var_os("COMPACT_BLESS").is_some();
    for name in expected {
        let bytes = std::fs::read(got_dir.join(name)).unwrap_or_default();
        let fixture = fixture_dir().join(name);
        if bless {
            let _ = std::fs::create_dir_all(fixture_dir());
            let _ = std::fs::write(&fixture, &bytes);
        }
        let want = std::fs::read(&fixture).unwrap_or_else(|e| panic!("{}: {e}", fixture.display()));
        assert!(bytes == want, "{name} differs from {}", fixture.display());
    }
    let v = rt()
        .block_on(archive::verify(&a, &sid("session-abc-123")))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(v.is_ok(), "{:?}", v.problem);
    assert_eq!(v.entries, 6);
}

/// The committed fixture, written by an earlier version, still verifies:
/// archives already on disk stay valid.
#[test]
fn an_archive_written_earlier_still_verifies() {
    let root = fixture_dir()
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let fs = FsAdapter::new(root);
    let a = Archive::new(&fs);
    let v = rt()
        .block_on(a.verify(&sid("session-abc-123")))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(v.is_ok(), "{:?}", v.problem);
    assert_eq!(v.entries, 6);
    assert_eq!(
        rt().block_on(a.last_step(&sid("session-abc-123"))).ok(),
        Some(2)
    );
    let step = rt()
        .block_on(a.step(&sid("session-abc-123"), 2))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(step.transcript.len(), 5);
    assert_eq!(step.summary.map(|s| s["step"].clone()), Some(json!(2)));
}

#[test]
fn adapters_refuse_unsafe_keys() {
    let dir = tmp();
    let root = dir.path().join("archive");
    let fs = FsAdapter::new(&root);
    let rt = rt();
    for key in [
        "../escaped",
        "/tmp/absolute",
        "s1/../../escaped",
        "s1//x",
        "s1/.hidden",
        "s1\\x",
        "s1/%2e%2e",
        "",
    ] {
        let unsafe_key =
            |r: Result<(), ArchiveError>| matches!(r, Err(ArchiveError::InvalidKey { .. }));
        assert!(
            unsafe_key(rt.block_on(fs.put(key, b"x\n".to_vec()))),
            "put {key:?}"
        );
        assert!(
            unsafe_key(rt.block_on(fs.append(key, b"x\n".to_vec())).map(|_| ())),
            "append {key:?}"
        );
        assert!(
            unsafe_key(rt.block_on(fs.get(key)).map(|_| ())),
            "get {key:?}"
        );
    }
    for prefix in ["..", "../", "s1", "/"] {
        assert!(
            matches!(
                rt.block_on(fs.list(prefix)),
                Err(ArchiveError::InvalidKey { .. })
            ),
            "list {prefix:?}"
        );
    }
    assert!(!root.exists(), "nothing was written");
    assert!(!dir.path().join("escaped").exists());
    // Through the archive only layout names are readable.
    assert!(matches!(
        rt.block_on(Archive::new(&fs).read(&sid("s1"), "../manifest.jsonl")),
        Err(ArchiveError::InvalidName(_))
    ));
}

/// A backend that keeps bytes but cannot append (S3 is one): the trait's
/// default `append` serves the manifest, and events become one object per
/// batch.
#[derive(Debug)]
struct NoAppend(FsAdapter);

impl StorageAdapter for NoAppend {
    fn kind(&self) -> &str {
        "no-append"
    }
    fn root(&self) -> String {
        self.0.root()
    }
    fn location(&self, key: &str) -> String {
        self.0.location(key)
    }
    fn put<'a>(&'a self, key: &'a str, bytes: Vec<u8>) -> BoxFuture<'a, Result<(), ArchiveError>> {
        self.0.put(key, bytes)
    }
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Vec<u8>, ArchiveError>> {
        self.0.get(key)
    }
    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Vec<String>, ArchiveError>> {
        self.0.list(prefix)
    }
}

#[test]
fn a_backend_without_append_gets_one_object_per_events_batch() {
    let dir = tmp();
    let root = dir.path().join("archive");
    let backend = NoAppend(FsAdapter::new(&root));
    let a = Archive::new(&backend);
    let s = sid("objects");
    let rt = rt();
    let msgs = vec![json!({"role": "user", "content": "hello"})];
    rt.block_on(a.save_transcript(&s, 1, &msgs))
        .unwrap_or_else(|e| panic!("{e}"));
    let e1 = rt
        .block_on(a.save_events(&s, &[json!({"n": 1})]))
        .unwrap_or_else(|e| panic!("{e}"));
    let e2 = rt
        .block_on(a.save_events(&s, &[json!({"n": 2}), json!({"n": 3})]))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(e1.name, "events-000001.jsonl");
    assert_eq!(e2.name, "events-000002.jsonl");
    assert_eq!(
        e2.location,
        root.join("objects/events-000002.jsonl")
            .display()
            .to_string()
    );
    assert_eq!(
        rt.block_on(a.files(&s)).unwrap_or_default(),
        [
            "events-000001.jsonl",
            "events-000002.jsonl",
            "manifest.jsonl",
            "transcript-pre-compact-001.jsonl"
        ]
    );
    let v = rt.block_on(a.verify(&s)).unwrap_or_else(|e| panic!("{e}"));
    assert!(v.is_ok(), "{:?}", v.problem);
    assert_eq!(v.entries, 3);
    assert_eq!(v.head, Some(e2.manifest_head));
    // The same bytes as a backend that appends.
    assert_eq!(
        std::fs::read(root.join("objects/transcript-pre-compact-001.jsonl")).unwrap_or_default(),
        archive::encode_lines(&msgs).unwrap_or_default()
    );
}

#[test]
fn traversal_ids_are_rejected_everywhere() {
    let dir = tmp();
    let root = dir.path().join("archive");
    let mut config = Config::default();
    config.storage.path = root.display().to_string();
    config.storage.spool_path = dir.path().join("spool").display().to_string();
    config.max_context_tokens = Some(100_000);
    let m = CompactManager::builder(config)
        .without_config_exporters()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    for bad in [
        "../x",
        "a/b",
        "%2e%2e",
        "a\0b",
        "..",
        "a\\b",
        "x\ny",
        &"z".repeat(200),
    ] {
        let e = SessionId::parse(bad)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.starts_with("invalid session id"), "{bad:?}: {e}");
        let r = rt().block_on(m.manual_compact(bad, history(6), "x"));
        assert!(
            matches!(r, Err(CompactError::InvalidSession(_))),
            "{bad:?}: {r:?}"
        );
    }
    assert!(!root.exists(), "nothing was written for a rejected id");
    assert!(!dir.path().join("x").exists());
}

fn chat(v: Vec<Value>) -> Vec<Message> {
    Request::from_value(Value::Array(v), Format::Chat)
        .unwrap_or_else(|e| panic!("{e}"))
        .messages
}

fn history(turns: usize) -> Vec<Message> {
    let mut v = vec![json!({"role": "system", "content": "You are a careful agent."})];
    for i in 0..turns {
        v.push(json!({"role": "user", "content": format!("turn {i}: refactor module m{i} and keep tests green")}));
        v.push(json!({"role": "assistant", "content": format!("module m{i} done: renamed {} functions", i * 3)}));
    }
    chat(v)
}

// ---- crash safety -------------------------------------------------------

const BIG: usize = 1 << 20;

/// Not a test on its own: the child process of `killed_writes_leave_old_or_new`.
#[test]
#[ignore = "run as a child process by killed_writes_leave_old_or_new"]
fn crash_child_writer() {
    let Some(dir) = std::env::var_os("COMPACT_CRASH_DIR") else {
        return;
    };
    let fs = FsAdapter::new(PathBuf::from(dir));
    let a = Archive::new(&fs);
    let s = sid("crash");
    let rt = rt();
    let docs = [
        json!({"fill": "a".repeat(BIG)}),
        json!({"fill": "b".repeat(BIG)}),
    ];
    let mut i = 0usize;
    loop {
        let _ = rt.block_on(a.save_summary(&s, 1, &docs[i % 2]));
        let _ = rt.block_on(a.save_events(&s, &[json!({"i": i, "pad": "e".repeat(BIG / 4)})]));
        i += 1;
    }
}

#[test]
fn killed_writes_leave_old_or_new() {
    let dir = tmp();
    let root = dir.path().join("archive");
    let valid: Vec<Vec<u8>> = ["a", "b"]
        .iter()
        .map(|c| archive::encode_summary(&json!({"fill": c.repeat(BIG)})).unwrap_or_default())
        .collect();
    for round in 0..3 {
        let exe = std::env::current_exe().unwrap_or_else(|e| panic!("{e}"));
        let mut child = std::process::Command::new(exe)
            .args([
                "--exact",
                "crash_child_writer",
                "--include-ignored",
                "--nocapture",
            ])
            .env("COMPACT_CRASH_DIR", &root)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn child: {e}"));
        let summary = root.join("crash").join(archive::summary_name(1));
        // However slow the machine, the child writes the summary first;
        // only its death could stop that.
        while !summary.exists() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("round {round}: the writer exited ({status}) before writing");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // Let it get into the middle of a write loop, at a varying point
        // (any point is a valid one to kill it at).
        std::thread::sleep(Duration::from_millis(150 + 70 * round));
        let _ = child.kill(); // SIGKILL on unix
        let _ = child.wait();
        let bytes = std::fs::read(&summary).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            valid.contains(&bytes),
            "round {round}: summary is neither the old nor the new version ({} bytes)",
            bytes.len()
        );
        // The next append repairs any torn tail; every line is then whole.
        let fs = FsAdapter::new(&root);
        let a = Archive::new(&fs);
        rt().block_on(a.save_events(&sid("crash"), &[json!({"after": round})]))
            .unwrap_or_else(|e| panic!("append after crash: {e}"));
        let events = std::fs::read(root.join("crash/events.jsonl")).unwrap_or_default();
        assert!(events.ends_with(b"\n"));
        for (n, line) in events
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .enumerate()
        {
            assert!(
                serde_json::from_slice::<Value>(line).is_ok(),
                "round {round}: events line {n} is torn"
            );
        }
        let manifest = std::fs::read(root.join("crash/manifest.jsonl")).unwrap_or_default();
        assert!(
            archive::parse_manifest(&manifest).is_ok(),
            "round {round}: manifest chain broken"
        );
        let files = rt().block_on(a.files(&sid("crash"))).unwrap_or_default();
        assert!(
            files.iter().all(|f| !f.starts_with('.')),
            "temp files are not listed: {files:?}"
        );
    }
}

// ---- tamper evidence ----------------------------------------------------

fn fixture_copy() -> (tempfile::TempDir, FsAdapter, PathBuf) {
    let dir = tmp();
    let a = FsAdapter::new(dir.path().join("archive"));
    rt().block_on(write_fixture(&a));
    let s = dir.path().join("archive/session-abc-123");
    (dir, a, s)
}

fn problem(a: &FsAdapter) -> Option<Problem> {
    rt().block_on(archive::verify(a, &sid("session-abc-123")))
        .unwrap_or_else(|e| panic!("{e}"))
        .problem
}

#[test]
fn verify_detects_a_deleted_file() {
    let (_d, a, s) = fixture_copy();
    let _ = std::fs::remove_file(s.join("summary-001.json"));
    assert_eq!(
        problem(&a),
        Some(Problem::Missing {
            file: "summary-001.json".into()
        })
    );
}

#[test]
fn verify_detects_one_changed_byte() {
    for name in ["transcript-pre-compact-002.jsonl", "events.jsonl"] {
        let (_d, a, s) = fixture_copy();
        let mut b = std::fs::read(s.join(name)).unwrap_or_default();
        let mid = b.len() / 2;
        b[mid] ^= 0x01;
        let _ = std::fs::write(s.join(name), b);
        assert_eq!(
            problem(&a),
            Some(Problem::Edited { file: name.into() }),
            "{name}"
        );
    }
}

#[test]
fn verify_detects_two_swapped_files() {
    let (_d, a, s) = fixture_copy();
    let one = s.join("summary-001.json");
    let two = s.join("summary-002.json");
    let tmp = s.join("swap");
    let _ = std::fs::rename(&one, &tmp);
    let _ = std::fs::rename(&two, &one);
    let _ = std::fs::rename(&tmp, &two);
    let p = problem(&a);
    assert_eq!(
        p,
        Some(Problem::Reordered {
            file: "summary-001.json".into(),
            holds: "summary-002.json".into()
        })
    );
    assert_eq!(
        p.map(|p| p.to_string()).unwrap_or_default(),
        "reordered file summary-001.json (it holds the content recorded for summary-002.json)"
    );
}

#[test]
fn verify_detects_a_truncated_manifest() {
    // Cut mid-line.
    let (_d, a, s) = fixture_copy();
    let m = s.join("manifest.jsonl");
    let b = std::fs::read(&m).unwrap_or_default();
    let _ = std::fs::write(&m, &b[..b.len() - 30]);
    let p = problem(&a);
    assert!(
        matches!(
            p,
            Some(Problem::Manifest(archive::ManifestError::Truncated {
                line: 6
            }))
        ),
        "{p:?}"
    );
    // Cut at a line boundary: the last write is then unrecorded.
    let lines: Vec<&[u8]> = b.split_inclusive(|c| *c == b'\n').collect();
    let _ = std::fs::write(&m, lines[..4].concat());
    assert_eq!(
        problem(&a),
        Some(Problem::Unrecorded {
            file: "events.jsonl".into(),
            trailing_bytes: Some(
                std::fs::read(s.join("events.jsonl"))
                    .map(|e| e.len())
                    .unwrap_or(0) as u64
                    - std::fs::read_to_string(s.join("events.jsonl"))
                        .map(|e| e.lines().next().map_or(0, |l| l.len() + 1))
                        .unwrap_or(0) as u64
            )
        })
    );
    // Reordered manifest lines break the chain.
    let mut swapped = lines.clone();
    swapped.swap(1, 2);
    let _ = std::fs::write(&m, swapped.concat());
    assert!(matches!(
        problem(&a),
        Some(Problem::Manifest(archive::ManifestError::Chain {
            line: 2,
            ..
        }))
    ));
}

#[test]
fn verify_flags_files_outside_the_manifest() {
    let (_d, a, s) = fixture_copy();
    let _ = std::fs::write(s.join("summary-009.json"), b"{}\n");
    assert_eq!(
        problem(&a),
        Some(Problem::Unrecorded {
            file: "summary-009.json".into(),
            trailing_bytes: None
        })
    );
}

// ---- the manager --------------------------------------------------------

struct Harness {
    _dir: tempfile::TempDir,
    root: PathBuf,
    spool: PathBuf,
    collect: Arc<CollectingExporter>,
    manager: CompactManager,
}

fn harness_with(max_tokens: usize, tweak: impl FnOnce(&mut Config)) -> Harness {
    let dir = tmp();
    let root = dir.path().join("archive");
    let spool = dir.path().join("spool");
    let mut config = Config {
        max_context_tokens: Some(max_tokens),
        ..Config::default()
    };
    config.storage.path = root.display().to_string();
    config.storage.spool_path = spool.display().to_string();
    tweak(&mut config);
    let (manager, collect) = manager_support::collecting(config);
    Harness {
        _dir: dir,
        root,
        spool,
        collect,
        manager,
    }
}

fn archived_lines(root: &Path, session: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let dir = root.join(session);
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return out;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("transcript-pre-compact-") {
            let text = std::fs::read_to_string(e.path()).unwrap_or_default();
            out.extend(
                text.lines()
                    .filter_map(|l| serde_json::from_str::<Value>(l).ok()),
            );
        }
    }
    out
}

/// A 100-turn tool-heavy session with several compactions: every message
/// the agent sent is in an archived transcript or in the final context.
#[test]
fn nothing_is_lost_across_a_long_session() {
    let h = harness_with(6_000, |_| {});
    let rt = rt();
    let mut sent: Vec<Message> = Vec::new();
    let mut context: Vec<Message> = Vec::new();
    let mut compactions = 0;
    let push = |m: Message, sent: &mut Vec<Message>, ctx: &mut Vec<Message>| {
        sent.push(m.clone());
        ctx.push(m);
    };
    push(
        chat(vec![
            json!({"role": "system", "content": "You are a coding agent."}),
        ])
        .remove(0),
        &mut sent,
        &mut context,
    );
    for i in 0..100 {
        push(chat(vec![json!({"role": "user", "content": format!("turn {i}: fix bug #{i} in src/m{i}.rs, it must not regress")})]).remove(0), &mut sent, &mut context);
        if i % 2 == 0 {
            let call = format!("call_{i}");
            for m in chat(vec![
                json!({"role": "assistant", "content": null, "tool_calls": [{"id": call, "type": "function", "function": {"name": "read_file", "arguments": format!("{{\"path\":\"src/m{i}.rs\"}}")}}]}),
                json!({"role": "tool", "tool_call_id": call, "content": format!("fn m{i}() {{ {} }}", "let x = 1; ".repeat(40 + i))}),
            ]) {
                push(m, &mut sent, &mut context);
            }
        }
        let out = rt
            .block_on(h.manager.preflight("long-session", context.clone()))
            .unwrap_or_else(|e| panic!("turn {i}: {e}"));
        if out.report.capped + out.report.cleared + out.report.summarized + out.report.dropped > 0 {
            compactions += 1;
        }
        context = out.messages;
        push(
            chat(vec![
                json!({"role": "assistant", "content": format!("fixed bug #{i}")}),
            ])
            .remove(0),
            &mut sent,
            &mut context,
        );
    }
    assert!(compactions >= 3, "only {compactions} compactions");
    let mut have: HashSet<String> = archived_lines(&h.root, "long-session")
        .iter()
        .map(Value::to_string)
        .collect();
    have.extend(context.iter().map(|m| m.to_value().to_string()));
    let missing: Vec<String> = sent
        .iter()
        .map(|m| m.to_value().to_string())
        .filter(|m| !have.contains(m))
        .collect();
    assert!(
        missing.is_empty(),
        "{} of {} messages lost, first: {:?}",
        missing.len(),
        sent.len(),
        missing.first()
    );
    // Numbering is gapless and the archive verifies.
    let files = rt
        .block_on(Archive::new(&FsAdapter::new(&h.root)).files(&sid("long-session")))
        .unwrap_or_default();
    let steps: Vec<u32> = files
        .iter()
        .filter_map(|f| {
            archive::FileKind::parse(f).and_then(|k| match k {
                archive::FileKind::Transcript(s) => Some(s),
                _ => None,
            })
        })
        .collect();
    assert_eq!(steps, (1..=compactions).collect::<Vec<_>>());
    let v = rt
        .block_on(archive::verify(
            &FsAdapter::new(&h.root),
            &sid("long-session"),
        ))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(v.is_ok(), "{:?}", v.problem);
    // Each archival was announced.
    assert!(h.manager.dispatcher().flush(Duration::from_secs(5)));
    let archivals: Vec<_> = h
        .collect
        .events()
        .into_iter()
        .filter(|e| e.name() == Some("compact.archival"))
        .collect();
    assert_eq!(archivals.len(), compactions as usize);
    let d = archivals[0]
        .as_span()
        .map(|s| s.data.clone())
        .unwrap_or_default();
    assert_eq!(d.get("session_id"), Some(&json!("long-session")));
    assert_eq!(d.get("step"), Some(&json!(1)));
    assert_eq!(d.get("storage_adapter"), Some(&json!("filesystem")));
    assert!(
        d.get("path")
            .and_then(Value::as_str)
            .is_some_and(|p| p.ends_with("long-session/transcript-pre-compact-001.jsonl"))
    );
}

#[test]
fn step_numbering_survives_a_restart() {
    let dir = tmp();
    let root = dir.path().join("archive");
    let make = || {
        let mut config = Config {
            max_context_tokens: Some(100_000),
            ..Config::default()
        };
        config.storage.path = root.display().to_string();
        config.storage.spool_path = dir.path().join("spool").display().to_string();
        CompactManager::builder(config)
            .without_config_exporters()
            .build()
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let rt = rt();
    for _ in 0..2 {
        let m = make();
        rt.block_on(m.manual_compact("restart", history(10), "x"))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let files = rt
        .block_on(Archive::new(&FsAdapter::new(&root)).files(&sid("restart")))
        .unwrap_or_default();
    assert!(
        files.contains(&"transcript-pre-compact-002.jsonl".to_string()),
        "{files:?}"
    );
    assert!(files.contains(&"summary-002.json".to_string()), "{files:?}");
    let v = rt
        .block_on(archive::verify(&FsAdapter::new(&root), &sid("restart")))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(v.is_ok(), "{:?}", v.problem);
}

/// The audit step of docs/archive.md, run as an auditor would: the
/// `manifest_head` of the session's last `compact.archival` event, as the
/// exporter received it, is the head `verify` prints.
#[test]
fn the_last_archival_event_carries_the_head_verify_prints() {
    let h = harness_with(100_000, |_| {});
    let rt = rt();
    let first = rt
        .block_on(h.manager.manual_compact("audited", history(10), "first"))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut next = first.messages.clone();
    next.extend(history(3).into_iter().skip(1));
    rt.block_on(h.manager.manual_compact("audited", next, "second"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(h.manager.dispatcher().flush(Duration::from_secs(5)));
    let archivals: Vec<_> = h
        .collect
        .events()
        .into_iter()
        .filter(|e| e.name() == Some("compact.archival"))
        .filter_map(|e| e.as_span().cloned())
        .filter(|s| s.data.get("session_id") == Some(&json!("audited")))
        .collect();
    assert_eq!(archivals.len(), 2, "{archivals:#?}");
    let exported_head = archivals
        .last()
        .and_then(|s| s.data.get("manifest_head"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    assert!(exported_head.is_some(), "{archivals:#?}");

    let v = rt
        .block_on(archive::verify(&FsAdapter::new(&h.root), &sid("audited")))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(v.is_ok(), "{:?}", v.problem);
    assert_eq!(
        exported_head, v.head,
        "the last compact.archival event's manifest_head is the head verify prints"
    );

    // The copy inside events.jsonl cannot hold the hash of the entry that
    // records it: it carries the head before its own batch, the `prev` of
    // that entry.
    let dir = h.root.join("audited");
    let manifest =
        archive::parse_manifest(&std::fs::read(dir.join("manifest.jsonl")).unwrap_or_default())
            .unwrap_or_else(|e| panic!("{e}"));
    let events = std::fs::read(dir.join("events.jsonl")).unwrap_or_default();
    let mut checked = 0;
    for entry in manifest.iter().filter(|e| e.file == "events.jsonl") {
        let (a, b) = (entry.offset as usize, (entry.offset + entry.len) as usize);
        for line in events[a..b]
            .split(|c| *c == b'\n')
            .filter(|l| !l.is_empty())
        {
            let ev: Value = serde_json::from_slice(line).unwrap_or_default();
            if ev["name"] == "compact.archival" {
                assert_eq!(ev["data"]["manifest_head"], json!(entry.prev), "{ev}");
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 2);
}

#[test]
fn a_failing_backend_spools_and_preflight_continues() {
    let h = harness_with(100_000, |_| {});
    // A file where the archive root should be: every write fails.
    let _ = std::fs::write(&h.root, b"not a directory");
    let rt = rt();
    let out = rt
        .block_on(h.manager.manual_compact("spooled", history(10), "x"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.report.summarized > 0);
    assert!(h.manager.dispatcher().flush(Duration::from_secs(5)));
    let ev = h.collect.take();
    assert!(ev.iter().any(|e| {
        e.name() == Some("compact.error")
            && e.as_span()
                .is_some_and(|s| s.data.get("fallback") == Some(&json!("spool")))
    }));
    let spooled = std::fs::read_dir(&h.spool).map(|d| d.count()).unwrap_or(0);
    assert_eq!(spooled, 3);
    // The backend comes back: delivery empties the spool and the archive verifies.
    let _ = std::fs::remove_file(&h.root);
    let d = rt
        .block_on(h.manager.deliver_spool())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(d.delivered.len(), 3);
    assert!(d.error.is_none());
    assert_eq!(
        std::fs::read_dir(&h.spool).map(|d| d.count()).unwrap_or(99),
        0
    );
    let v = rt
        .block_on(archive::verify(&FsAdapter::new(&h.root), &sid("spooled")))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(v.is_ok(), "{:?}", v.problem);
    assert_eq!(archived_lines(&h.root, "spooled").len(), history(10).len());
}

#[test]
fn redaction_disabled_is_reported_once_before_the_first_export() {
    let h = harness_with(100_000, |c| c.redaction.enabled = false);
    let rt = rt();
    for _ in 0..2 {
        rt.block_on(h.manager.preflight("nored", history(2)))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    assert!(h.manager.dispatcher().flush(Duration::from_secs(5)));
    let ev = h.collect.events();
    let names: Vec<_> = ev.iter().filter_map(Event::name).collect();
    assert_eq!(
        names.first(),
        Some(&"compact.redaction_disabled"),
        "{names:?}"
    );
    assert_eq!(
        names
            .iter()
            .filter(|n| **n == "compact.redaction_disabled")
            .count(),
        1
    );
    let span = ev.iter().find_map(|e| {
        e.as_span()
            .filter(|s| s.name.as_deref() == Some("compact.redaction_disabled"))
    });
    assert_eq!(span.map(|s| s.status.as_str()), Some("error"));
}

mod redaction_property {
    use super::*;
    use proptest::prelude::*;

    /// `(secret text, the part that must never leak)` for every default kind.
    fn arb_secret() -> impl Strategy<Value = (String, String)> {
        prop_oneof![
            "[A-Za-z0-9]{12,24}".prop_map(|v| (format!("api_key={v}"), v)),
            "[A-Za-z0-9]{12,24}".prop_map(|v| (format!("API-Key: {v}"), v)),
            "[A-Za-z0-9!#]{10,20}".prop_map(|v| (format!("password: {v}"), v)),
            "[A-Za-z0-9._-]{20,40}".prop_map(|v| (format!("Authorization: Bearer {v}"), v)),
            "[A-Za-z0-9]{24,40}".prop_map(|v| (format!("sk-{v}"), v)),
            "[A-Za-z0-9]{24,40}".prop_map(|v| (format!("sk-proj-{v}"), v)),
            "[0-9A-Z]{16}".prop_map(|v| (format!("AKIA{v}"), format!("AKIA{v}"))),
            "[A-Za-z0-9/+]{40}".prop_map(|v| (format!("aws_secret_access_key = {v}"), v)),
            "[A-Za-z0-9+/]{40,80}".prop_map(|v| (
                format!("-----BEGIN RSA PRIVATE KEY-----\n{v}\n-----END RSA PRIVATE KEY-----"),
                v
            )),
            ("[A-Za-z0-9_-]{10,30}", "[A-Za-z0-9_-]{16,40}").prop_map(|(p, s)| {
                let jwt = format!("eyJhbGciOiJIUzI1NiJ9.eyJ{p}.{s}");
                (jwt.clone(), jwt)
            }),
        ]
    }

    /// Where in a history the secret goes.
    #[derive(Debug, Clone, Copy)]
    enum Spot {
        User,
        Assistant,
        ToolArguments,
        ToolOutput,
    }

    fn arb_spot() -> impl Strategy<Value = Spot> {
        prop_oneof![
            Just(Spot::User),
            Just(Spot::Assistant),
            Just(Spot::ToolArguments),
            Just(Spot::ToolOutput)
        ]
    }

    fn build(secrets: &[((String, String), Spot, usize, String)]) -> Vec<Message> {
        let mut v = vec![json!({"role": "system", "content": "You are a careful agent."})];
        for (i, ((text, _), spot, turn_pad, filler)) in secrets.iter().enumerate() {
            let wrapped = format!("{filler} {text} {}", "x".repeat(*turn_pad));
            let call = format!("call_{i}");
            let (user, asst, args, out) = match spot {
                Spot::User => (
                    wrapped.clone(),
                    "ok".to_string(),
                    "{}".to_string(),
                    "done".to_string(),
                ),
                Spot::Assistant => (
                    "go".to_string(),
                    wrapped.clone(),
                    "{}".to_string(),
                    "done".to_string(),
                ),
                Spot::ToolArguments => (
                    "go".to_string(),
                    "ok".to_string(),
                    serde_json::to_string(&json!({"cmd": wrapped})).unwrap_or_default(),
                    "done".to_string(),
                ),
                Spot::ToolOutput => (
                    "go".to_string(),
                    "ok".to_string(),
                    "{}".to_string(),
                    wrapped.clone(),
                ),
            };
            v.push(json!({"role": "user", "content": user}));
            v.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": call, "type": "function", "function": {"name": "shell", "arguments": args}}]}));
            v.push(json!({"role": "tool", "tool_call_id": call, "content": out}));
            v.push(json!({"role": "assistant", "content": asst}));
        }
        // Recent turns stay in the context; these push the secrets out of
        // it, into the summary and the archived transcript.
        for i in 0..8 {
            v.push(json!({"role": "user", "content": format!("filler turn {i}")}));
            v.push(json!({"role": "assistant", "content": "noted"}));
        }
        chat(v)
    }

    fn all_archived_bytes(root: &Path) -> Vec<u8> {
        let mut out = Vec::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    out.extend(std::fs::read(&p).unwrap_or_default());
                }
            }
        }
        out
    }

    proptest! {
        // Each case compacts and writes an archive with fsyncs: a few dozen
        // cases cover every kind at every spot many times over.
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
        #[test]
        fn no_secret_reaches_an_exporter_or_the_archive(
            secrets in prop::collection::vec((arb_secret(), arb_spot(), 0usize..20, "[a-z ]{0,12}"), 1..6),
        ) {
            let h = harness_with(100_000, |_| {});
            let messages = build(&secrets);
            let before: Vec<Value> = messages.iter().map(Message::to_value).collect();
            let kept = messages.clone();
            let rt = rt();
            rt.block_on(h.manager.manual_compact("redact", messages, "x")).unwrap_or_else(|e| panic!("{e}"));
            prop_assert_eq!(kept.iter().map(Message::to_value).collect::<Vec<_>>(), before);
            prop_assert!(h.manager.dispatcher().flush(Duration::from_secs(5)));
            let exported = serde_json::to_string(&h.collect.events()).unwrap_or_default();
            let archived = String::from_utf8_lossy(&all_archived_bytes(&h.root)).into_owned();
            prop_assert!(h.root.join("redact/transcript-pre-compact-001.jsonl").exists());
            for ((_, core), spot, _, _) in &secrets {
                prop_assert!(!exported.contains(core.as_str()), "{:?} secret {} reached an exporter", spot, core);
                prop_assert!(!archived.contains(core.as_str()), "{:?} secret {} reached the archive", spot, core);
                // JSON escaping (private keys carry `\n`, `/`) must not hide a leak.
                let escaped = serde_json::to_string(core).unwrap_or_default();
                prop_assert!(!archived.contains(escaped.trim_matches('"')));
            }
        }
    }
}

#[test]
fn events_a_killed_writer_left_unrecorded_are_recorded_by_the_next_append() {
    // A replica SIGKILLed between appending its events and appending their
    // manifest line leaves whole lines the manifest does not cover.
    let dir = tmp();
    let fs = FsAdapter::new(dir.path().join("archive"));
    let a = Archive::new(&fs);
    let s = sid("killed");
    let rt = rt();
    rt.block_on(a.save_events(&s, &[json!({"n": 1})]))
        .unwrap_or_else(|e| panic!("{e}"));
    let orphan = archive::encode_lines(&[json!({"n": 2}), json!({"n": 3})]).unwrap_or_default();
    rt.block_on(fs.append("killed/events.jsonl", orphan))
        .unwrap_or_else(|e| panic!("{e}"));
    let v = rt.block_on(a.verify(&s)).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        matches!(v.problem, Some(Problem::Unrecorded { .. })),
        "{:?}",
        v.problem
    );

    // The next preflight's events: the orphan lines are recorded first.
    rt.block_on(a.save_events(&s, &[json!({"n": 4})]))
        .unwrap_or_else(|e| panic!("{e}"));
    let v = rt.block_on(a.verify(&s)).unwrap_or_else(|e| panic!("{e}"));
    assert!(v.is_ok(), "{:?}", v.problem);
    assert_eq!(v.entries, 3);
    let text =
        std::fs::read_to_string(dir.path().join("archive/killed/events.jsonl")).unwrap_or_default();
    assert_eq!(text.lines().count(), 4, "nothing was dropped: {text}");
}

#[test]
fn files_a_killed_writer_left_unrecorded_are_recorded_by_the_next_compaction() {
    // A replica SIGKILLed between writing a compaction's summary and
    // appending its manifest line leaves a whole file the manifest does not
    // record; the call is retried, and its compaction archived as the next
    // step, by another replica.
    let dir = tmp();
    let fs = FsAdapter::new(dir.path().join("archive"));
    let a = Archive::new(&fs);
    let s = sid("killed");
    let rt = rt();
    rt.block_on(a.save_transcript(&s, 1, &[json!({"role": "user", "content": "hi"})]))
        .unwrap_or_else(|e| panic!("{e}"));
    let orphan = json!({"summary_version": 1, "message": {"content": "COMPACT-SUMMARY v1"}});
    let bytes = serde_json::to_vec_pretty(&orphan).unwrap_or_default();
    rt.block_on(fs.put("killed/summary-001.json", bytes))
        .unwrap_or_else(|e| panic!("{e}"));
    let v = rt.block_on(a.verify(&s)).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        matches!(v.problem, Some(Problem::Unrecorded { ref file, trailing_bytes: None }) if file == "summary-001.json"),
        "{:?}",
        v.problem
    );

    // The retried compaction, step 2: the orphan is recorded as it is, first.
    rt.block_on(a.save_transcript(&s, 2, &[json!({"role": "user", "content": "hi"})]))
        .unwrap_or_else(|e| panic!("{e}"));
    rt.block_on(a.save_summary(&s, 2, &orphan))
        .unwrap_or_else(|e| panic!("{e}"));
    let v = rt.block_on(a.verify(&s)).unwrap_or_else(|e| panic!("{e}"));
    assert!(v.is_ok(), "{:?}", v.problem);
    assert_eq!(v.entries, 4);
    let manifest = std::fs::read_to_string(dir.path().join("archive/killed/manifest.jsonl"))
        .unwrap_or_default();
    let files: Vec<String> = manifest
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|e| e["file"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        files,
        [
            "transcript-pre-compact-001.jsonl",
            "summary-001.json",
            "transcript-pre-compact-002.jsonl",
            "summary-002.json"
        ]
    );

    // Nothing left over: the next compaction records nothing more.
    rt.block_on(a.save_transcript(&s, 3, &[json!({"role": "user", "content": "hi"})]))
        .unwrap_or_else(|e| panic!("{e}"));
    let v = rt.block_on(a.verify(&s)).unwrap_or_else(|e| panic!("{e}"));
    assert!(v.is_ok(), "{:?}", v.problem);
    assert_eq!(v.entries, 5);
}
