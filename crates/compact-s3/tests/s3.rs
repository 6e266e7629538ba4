//! The S3 adapter against a real S3-compatible server (moto), started by
//! the test itself, behind a fault-injecting proxy.

mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use aws_config::{BehaviorVersion, SdkConfig};
use aws_sdk_s3::config::{Credentials, Region, SharedCredentialsProvider};
use compact_middleware::archive::{self, Archive, ArchiveError, SessionId, StorageAdapter};
use compact_middleware::config::{Config, S3Settings};
use compact_middleware::events::{CollectingExporter, Event};
use compact_middleware::{CompactManager, Message};
use compact_s3::{RetryOptions, S3Adapter};
use serde_json::json;

fn sdk() -> SdkConfig {
    // Static test credentials: production code takes them from the AWS chain.
    SdkConfig::builder()
        .credentials_provider(SharedCredentialsProvider::new(Credentials::new(
            "testing",
            "testing",
            None,
            None,
            "compact-test",
        )))
        .region(Region::new("us-east-1"))
        .behavior_version(BehaviorVersion::latest())
        .build()
}

fn settings(endpoint: std::net::SocketAddr, bucket: &str, kms: Option<&str>) -> S3Settings {
    S3Settings {
        bucket: Some(bucket.to_string()),
        prefix: "archive/v1".to_string(),
        region: Some("us-east-1".to_string()),
        endpoint_url: Some(format!("http://{endpoint}")),
        kms_key_id: kms.map(str::to_owned),
    }
}

fn fast_retries() -> RetryOptions {
    RetryOptions {
        max_attempts: 3,
        initial_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(100),
    }
}

async fn adapter(endpoint: std::net::SocketAddr, bucket: &str, kms: Option<&str>) -> S3Adapter {
    let a = S3Adapter::from_sdk_config(&sdk(), &settings(endpoint, bucket, kms), fast_retries())
        .unwrap_or_else(|e| panic!("adapter: {e}"));
    a.client()
        .create_bucket()
        .bucket(bucket)
        .send()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "create bucket: {}",
                aws_sdk_s3::error::DisplayErrorContext(&e)
            )
        });
    a
}

fn sid(s: &str) -> SessionId {
    SessionId::parse(s).unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_list_show_verify() {
    let Some(moto) = support::start_moto() else {
        return;
    };
    let s3 = adapter(moto.addr, "audit", None).await;
    let a = Archive::new(&s3);
    let s = sid("session-abc-123");
    let msgs = vec![
        json!({"role":"user","content":"hello"}),
        json!({"role":"assistant","content":"hi"}),
    ];
    let t = a
        .save_transcript(&s, 1, &msgs)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        t.location,
        "s3://audit/archive/v1/session-abc-123/transcript-pre-compact-001.jsonl"
    );
    a.save_summary(&s, 1, &json!({"step":1}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let e1 = a
        .save_events(&s, &[json!({"n":1})])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let e2 = a
        .save_events(&s, &[json!({"n":2}), json!({"n":3})])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(e1.name, "events-000001.jsonl");
    assert_eq!(e2.name, "events-000002.jsonl");
    a.save_transcript(&sid("other"), 1, &msgs)
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    assert_eq!(
        a.sessions().await.ok(),
        Some(vec!["other".to_string(), "session-abc-123".to_string()])
    );
    let files = a.files(&s).await.unwrap_or_default();
    assert_eq!(
        files,
        vec![
            "events-000001.jsonl",
            "events-000002.jsonl",
            "manifest.jsonl",
            "summary-001.json",
            "transcript-pre-compact-001.jsonl"
        ]
    );
    // Same bytes as the filesystem layout.
    let body = a
        .read(&s, &archive::transcript_name(1))
        .await
        .unwrap_or_default();
    assert_eq!(body, archive::encode_lines(&msgs).unwrap_or_default());
    let v = archive::verify(&s3, &s)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(v.is_ok(), "{:?}", v.problem);
    assert_eq!(v.entries, 4);
    assert_eq!(archive::last_step(&s3, &s).await.ok(), Some(1));

    // A fresh adapter (a restart) continues the event numbering.
    let b = S3Adapter::from_sdk_config(&sdk(), &settings(moto.addr, "audit", None), fast_retries())
        .unwrap_or_else(|e| panic!("{e}"));
    let e3 = Archive::new(&b)
        .save_events(&s, &[json!({"n":4})])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(e3.name, "events-000003.jsonl");

    // Tampering is detected through S3 as well.
    s3.client()
        .put_object()
        .bucket("audit")
        .key("archive/v1/session-abc-123/summary-001.json")
        .body(b"{\"step\":2}\n".to_vec().into())
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let v = a.verify(&s).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        v.problem.map(|p| p.to_string()),
        Some("edited file summary-001.json (its SHA-256 does not match the manifest)".to_string())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_kms_header_on_every_put() {
    let Some(moto) = support::start_moto() else {
        return;
    };
    let (proxy, state) = support::start_proxy(moto.addr).await;
    let key_id = "arn:aws:kms:us-east-1:123456789012:key/compact-test-key";
    let s3 = adapter(proxy, "encrypted", Some(key_id)).await;
    let a = Archive::new(&s3);
    let s = sid("kms-session");
    a.save_transcript(&s, 1, &[json!({"role":"user","content":"x"})])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    a.save_events(&s, &[json!({"n":1})])
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    let heads = state.heads.lock().map(|h| h.clone()).unwrap_or_default();
    let puts: Vec<&String> = heads
        .iter()
        .filter(|h| h.starts_with("put /encrypted/archive/"))
        .collect();
    assert_eq!(
        puts.len(),
        4,
        "transcript, event object and two manifest writes: {heads:#?}"
    );
    for h in puts {
        assert!(
            h.contains("x-amz-server-side-encryption: aws:kms\r\n"),
            "{h}"
        );
        assert!(
            h.contains(&format!(
                "x-amz-server-side-encryption-aws-kms-key-id: {}\r\n",
                key_id.to_ascii_lowercase()
            )),
            "{h}"
        );
    }
    // And the server stored the objects encrypted under that key.
    let head = s3
        .client()
        .head_object()
        .bucket("encrypted")
        .key("archive/v1/kms-session/transcript-pre-compact-001.jsonl")
        .send()
        .await
        .unwrap_or_else(|e| panic!("{}", aws_sdk_s3::error::DisplayErrorContext(&e)));
    assert_eq!(
        head.server_side_encryption().map(|s| s.as_str()),
        Some("aws:kms")
    );
    assert_eq!(head.ssekms_key_id(), Some(key_id));

    // Without a key id no SSE header is sent.
    let plain = adapter(proxy, "plain", None).await;
    Archive::new(&plain)
        .save_transcript(&s, 1, &[json!({"role":"user","content":"x"})])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let heads = state.heads.lock().map(|h| h.clone()).unwrap_or_default();
    assert!(
        heads
            .iter()
            .filter(|h| h.starts_with("put /plain/archive/"))
            .all(|h| !h.contains("x-amz-server-side-encryption"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsafe_keys_never_reach_s3() {
    let Some(moto) = support::start_moto() else {
        return;
    };
    let (proxy, state) = support::start_proxy(moto.addr).await;
    let s3 = adapter(proxy, "guarded", None).await;
    let requests = || state.heads.lock().map(|h| h.len()).unwrap_or(0);
    let before = requests();
    for key in [
        "../other-prefix/x",
        "s1/../../x",
        "/abs",
        "s1//x",
        "s1/%2e%2e",
        "s1/a?x=1",
    ] {
        let refused =
            |r: Result<(), ArchiveError>| matches!(r, Err(ArchiveError::InvalidKey { .. }));
        assert!(refused(s3.put(key, b"x\n".to_vec()).await), "put {key:?}");
        assert!(refused(s3.get(key).await.map(|_| ())), "get {key:?}");
        assert!(
            refused(s3.append(key, b"x\n".to_vec()).await.map(|_| ())),
            "append {key:?}"
        );
    }
    assert!(matches!(
        s3.list("../").await,
        Err(ArchiveError::InvalidKey { .. })
    ));
    assert_eq!(requests(), before, "no request was sent for an unsafe key");
}

fn history(turns: usize) -> Vec<Message> {
    let mut m = vec![Message::system("You are a careful agent.")];
    for i in 0..turns {
        m.push(Message::user(format!(
            "turn {i}: please refactor module {i} and keep the tests green; password: hunter{i}"
        )));
        m.push(Message::assistant(format!(
            "done with module {i}: renamed {} functions",
            i * 3
        )));
    }
    m
}

fn names(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| e.name().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_spool_then_deliver() {
    let Some(moto) = support::start_moto() else {
        return;
    };
    let (proxy, state) = support::start_proxy(moto.addr).await;
    let s3 = adapter(proxy, "flaky", None).await;
    let spool = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut config = Config {
        max_context_tokens: Some(100_000),
        ..Config::default()
    };
    config.storage.spool_path = spool.path().display().to_string();
    let collect = Arc::new(CollectingExporter::new());
    let manager = CompactManager::builder(config)
        .without_config_exporters()
        .exporter(collect.clone())
        .storage(Arc::new(s3))
        .build()
        .unwrap_or_else(|e| panic!("{e}"));

    // The server fails: the preflight still succeeds, the archive goes to
    // the spool, and compact.error says so.
    state.fail.store(true, Ordering::SeqCst);
    let first = manager
        .manual_compact("flaky-1", history(12), "test")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(first.report.summarized > 0, "{:?}", first.report);
    assert!(
        state.failed.load(Ordering::SeqCst) >= 3,
        "the SDK retried before giving up"
    );
    assert!(manager.dispatcher().flush(Duration::from_secs(5)));
    let ev = collect.take();
    let errors: Vec<&Event> = ev
        .iter()
        .filter(|e| e.name() == Some("compact.error"))
        .collect();
    assert!(!errors.is_empty(), "{:?}", names(&ev));
    let data = &errors[0]
        .as_span()
        .map(|s| s.data.clone())
        .unwrap_or_default();
    assert_eq!(data.get("fallback"), Some(&json!("spool")));
    assert_eq!(data.get("storage_adapter"), Some(&json!("s3")));
    let spooled = std::fs::read_dir(spool.path())
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(spooled, 3, "transcript, summary and events are spooled");

    // The server recovers: the next preflight delivers the spool first.
    state.fail.store(false, Ordering::SeqCst);
    let mut next = first.messages.clone();
    next.push(Message::user(
        "one more thing: api_key=sk-live-1234567890abcdef",
    ));
    manager
        .manual_compact("flaky-1", next, "test 2")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        std::fs::read_dir(spool.path())
            .map(|d| d.count())
            .unwrap_or(99),
        0
    );
    assert!(manager.dispatcher().flush(Duration::from_secs(5)));
    let ev = collect.take();
    let archival: Vec<_> = ev
        .iter()
        .filter(|e| e.name() == Some("compact.archival"))
        .filter_map(|e| e.as_span())
        .collect();
    let delivered: usize = archival
        .iter()
        .filter_map(|s| {
            s.data
                .get("delivered_from_spool")
                .and_then(|d| d.as_array())
                .map(Vec::len)
        })
        .sum();
    assert_eq!(delivered, 3, "{archival:#?}");
    let exported_head = archival
        .last()
        .and_then(|s| s.data.get("manifest_head"))
        .cloned();

    let check =
        S3Adapter::from_sdk_config(&sdk(), &settings(moto.addr, "flaky", None), fast_retries())
            .unwrap_or_else(|e| panic!("{e}"));
    let sid = sid("flaky-1");
    let v = archive::verify(&check, &sid)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(v.is_ok(), "{:?}", v.problem);
    // The audit step holds after a spool delivery too.
    assert_eq!(exported_head, v.head.map(serde_json::Value::from));
    let files = Archive::new(&check).files(&sid).await.unwrap_or_default();
    for f in [
        "transcript-pre-compact-001.jsonl",
        "summary-001.json",
        "transcript-pre-compact-002.jsonl",
        "summary-002.json",
        "events-000001.jsonl",
        "events-000002.jsonl",
    ] {
        assert!(files.iter().any(|x| x == f), "{f} in {files:?}");
    }
    // Redacted before it reached S3.
    for f in &files {
        let body = Archive::new(&check).read(&sid, f).await.unwrap_or_default();
        let text = String::from_utf8_lossy(&body);
        assert!(
            !text.contains("hunter3") && !text.contains("sk-live-1234567890abcdef"),
            "{f}: {text}"
        );
    }
}
