//! The session API of `compact serve` over real HTTP: two replicas sharing
//! one SQLite state file answer a session's alternating turns exactly as one
//! process does; a SIGKILLed replica's session continues on the other; the
//! errors have their documented shapes; tokens guard the routes.

mod support;

use serde_json::json;
use support::{Serve, drive, post, status, version};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_sessions_and_a_killed_one_loses_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state.sqlite3");
    let client = reqwest::Client::new();
    let a = Serve::sqlite(&dir.path().join("a"), &state)
        .start(&client)
        .await;
    let mut b = Serve::sqlite(&dir.path().join("b"), &state)
        .start(&client)
        .await;

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

    let seen = status(&client, &a.base, "alt").await;
    let before = version(&seen);
    assert!(before >= 2, "{seen}");
    assert_eq!(seen["store"], "sqlite");

    // SIGKILL b, continue on a: the chain goes on at n+1.
    b.kill();
    drive(&client, &[&a.base], |_| 0, "alt", 14..15, &mut fed).await;
    assert_eq!(version(&status(&client, &a.base, "alt").await), before + 1);

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
    assert_eq!(status(&client, &a.base, "alt").await["known"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_guard_the_session_api() {
    let dir = tempfile::tempdir().expect("tempdir");
    let client = reqwest::Client::new();
    let state = dir.path().join("state.sqlite3");
    let r = Serve {
        args: vec!["--ingest-token", "w-secret", "--read-token", "r-secret"],
        ..Serve::sqlite(dir.path(), &state)
    }
    .start(&client)
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
