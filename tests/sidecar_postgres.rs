//! Two `compact serve` replicas on one PostgreSQL database (a real server):
//! a session's alternating turns answer exactly as one process does, and a
//! SIGKILLed replica loses nothing (the next turn is version n+1).

#[path = "../crates/compact-middleware/tests/postgres_support/mod.rs"]
mod postgres_support;

mod support;

use std::process::Command;

use serde_json::json;
use support::{Serve, drive, status, version};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_on_one_postgres_match_one_process_and_a_killed_one_loses_nothing() {
    let solo_db = postgres_support::database().await;
    let shared_db = postgres_support::database().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let client = reqwest::Client::new();
    let solo = Serve::postgres(&dir.path().join("solo"), &solo_db.url)
        .start(&client)
        .await;
    let a = Serve::postgres(&dir.path().join("a"), &shared_db.url)
        .start(&client)
        .await;
    let mut b = Serve::postgres(&dir.path().join("b"), &shared_db.url)
        .start(&client)
        .await;

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

    // SIGKILL b, continue on a until the next compaction (when it comes
    // depends on the session's pace, `policy.cache`): the chain goes on at
    // n+1.
    b.kill();
    let mut next = before;
    for t in 14..40 {
        drive(&client, &[&a.base], |_| 0, "s", t..t + 1, &mut fed).await;
        next = version(&status(&client, &a.base, "s").await);
        if next != before {
            break;
        }
    }
    assert_eq!(next, before + 1);
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
