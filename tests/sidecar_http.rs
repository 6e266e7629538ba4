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

    // SIGKILL b, continue on a until the next compaction (when it comes
    // depends on the session's pace, `policy.cache`): the chain goes on at
    // n+1.
    b.kill();
    let mut next = before;
    for t in 14..40 {
        drive(&client, &[&a.base], |_| 0, "alt", t..t + 1, &mut fed).await;
        next = version(&status(&client, &a.base, "alt").await);
        if next != before {
            break;
        }
    }
    assert_eq!(next, before + 1);

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
    // The path is the one in the caller's body, `input` included.
    let (s, body) = post(
        &client,
        url.clone(),
        &json!({"session_id": "e", "input": [{"role": "user", "content": "hi"}, {"role": "bogus"}]}),
    )
    .await;
    assert_eq!(
        (s, body["details"][0]["path"].as_str()),
        (400, Some("$.input[1].role")),
        "{body}"
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

/// The same layers as `/v1/preflight` on `/compact` and `/overflow`: an
/// agent layer from the configuration, the conversation's persisted layer
/// and the request's `config`, each visible in `config_sources` and in what
/// the call did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_and_overflow_compaction_apply_the_layers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("compact.yaml");
    std::fs::write(
        &config,
        "agents:\n  terse:\n    policy:\n      keep_recent_turns: 2\n      mode: compact\n",
    )
    .expect("config");
    let state = dir.path().join("state.sqlite3");
    let client = reqwest::Client::new();
    let r = Serve {
        args: vec!["--config", config.to_str().expect("utf-8")],
        ..Serve::sqlite(dir.path(), &state)
    }
    .start(&client)
    .await;
    let mut history = vec![json!({"role": "system", "content": "You are a coding agent."})];
    for t in 0..8 {
        support::add_turn(&mut history, t);
    }
    let source = |report: &serde_json::Value, key: &str| {
        report["config_sources"]
            .as_array()
            .expect("config_sources")
            .iter()
            .find(|s| s["key"] == key)
            .map(|s| s["level"].clone())
            .unwrap_or(json!("default"))
    };

    // No layers: the defaults.
    let (s, plain) = post(
        &client,
        format!("{}/v1/sessions/plain/compact", r.base),
        &json!({"messages": history}),
    )
    .await;
    assert_eq!(s, 200, "{plain}");
    let plain = &plain["report"];
    assert_eq!(plain["config_sources"], json!([]));
    assert_eq!(
        (&plain["mode"], &plain["target"]),
        (&json!("auto"), &json!(1500))
    );

    // The conversation's layer overrides the agent's mode; the request's
    // target wins over the defaults.
    let r2 = client
        .patch(format!("{}/v1/conversations/c1/memory", r.base))
        .json(&json!({"policy": {"mode": "summarize"}}))
        .send()
        .await
        .expect("patch");
    assert_eq!(r2.status().as_u16(), 200);
    let (s, body) = post(
        &client,
        format!("{}/v1/sessions/c1/compact", r.base),
        &json!({"messages": history, "agent": "terse", "note": "by hand",
                "config": {"policy": {"target_pct": 0.45}}}),
    )
    .await;
    assert_eq!(s, 200, "{body}");
    let report = &body["report"];
    assert_eq!(source(report, "policy.keep_recent_turns"), "agent");
    assert_eq!(source(report, "policy.mode"), "conversation");
    assert_eq!(source(report, "policy.target_pct"), "request");
    assert_eq!(report["forced"], "manual");
    assert_eq!(report["note"], "by hand");
    assert_eq!(
        (&report["mode"], &report["target"]),
        (&json!("summarize"), &json!(1350))
    );
    assert!(
        report["kept"]["recent_turns"].as_u64().expect("kept") <= 2,
        "{report}"
    );
    assert!(report["summary_version"].as_u64().is_some(), "{report}");
    let fed = body["messages"].as_array().expect("messages").clone();

    // Overflow: the request's keep_recent_turns wins over the agent's.
    let mut next = fed.clone();
    support::add_turn(&mut next, 8);
    let (s, body) = post(
        &client,
        format!("{}/v1/sessions/c1/overflow", r.base),
        &json!({"messages": next, "agent": "terse", "error": "context_length_exceeded",
                "config": {"policy": {"keep_recent_turns": 1, "reactive_target_pct": 0.25}}}),
    )
    .await;
    assert_eq!(s, 200, "{body}");
    let report = &body["report"];
    assert_eq!(source(report, "policy.keep_recent_turns"), "request");
    assert_eq!(source(report, "policy.mode"), "conversation");
    assert_eq!(source(report, "policy.reactive_target_pct"), "request");
    assert_eq!(report["forced"], "context_overflow");
    assert_eq!(report["note"], "context_length_exceeded");
    assert_eq!(report["target"], 750);
    assert!(
        report["kept"]["recent_turns"].as_u64().expect("kept") <= 1,
        "{report}"
    );
    // The layered managers share the session: it continues the chain.
    assert_eq!(report["continuation"], "output_prefix", "{report}");
    assert_eq!(version(&status(&client, &r.base, "c1").await), 2);
    let text = body["messages"].to_string();
    assert_eq!(text.matches("COMPACT-SUMMARY v").count(), 1, "{text}");

    // Their errors name the JSON path, as /v1/preflight's do.
    let (s, body) = post(
        &client,
        format!("{}/v1/sessions/c1/compact", r.base),
        &json!({"messages": history, "agent": "nobody"}),
    )
    .await;
    assert_eq!(
        (s, body["details"][0]["path"].as_str()),
        (400, Some("$.agent"))
    );
    let (s, body) = post(
        &client,
        format!("{}/v1/sessions/c1/overflow", r.base),
        &json!({"messages": history, "config": {"policy": {"trigger_pct": 7}}}),
    )
    .await;
    assert_eq!(s, 400, "{body}");
    assert!(
        body["details"][0]["path"]
            .as_str()
            .is_some_and(|p| p.starts_with("$.config.policy")),
        "{body}"
    );
}

/// With `state.store: memory`, a session that moves between layered and
/// plain calls stays one session: the managers share the in-memory store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn layered_and_plain_calls_share_sessions_in_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let client = reqwest::Client::new();
    let r = Serve {
        env: vec![("COMPACT_STATE_STORE", "memory".into())],
        ..Serve::sqlite(dir.path(), &dir.path().join("unused.sqlite3"))
    }
    .start(&client)
    .await;
    let mut fed = vec![json!({"role": "system", "content": "You are a coding agent."})];
    let mut versions = Vec::new();
    for t in 0..14 {
        support::add_turn(&mut fed, t);
        let mut body = json!({"session_id": "m", "messages": fed});
        if t % 2 == 1 {
            body["config"] = json!({"policy": {"keep_tool_io_pairs": 3}});
        }
        let (s, out) = post(&client, format!("{}/v1/preflight", r.base), &body).await;
        assert_eq!(s, 200, "turn {t}: {out}");
        if t > 0 {
            assert_ne!(out["report"]["continuation"], "fresh", "turn {t}: {out}");
        }
        let text = out["messages"].to_string();
        assert!(
            text.matches("COMPACT-SUMMARY v").count() <= 1,
            "turn {t}: nested"
        );
        if let Some(v) = out["report"]["summary_version"].as_u64() {
            versions.push(v);
        }
        fed = out["messages"].as_array().expect("messages").clone();
    }
    assert!(versions.len() >= 2, "{versions:?}");
    let expected: Vec<u64> = (1..=versions.len() as u64).collect();
    assert_eq!(versions, expected, "one chain, one step at a time");
    let seen = status(&client, &r.base, "m").await;
    assert_eq!(seen["store"], "memory");
}

/// What the session API returns about a session is redacted like every
/// export, its events land in the server's own store, a body past
/// `server.limits.preflight_body_bytes` is refused, and another id sees
/// nothing of the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_api_redacts_stores_its_events_and_limits_bodies() {
    const SECRET: &str = "sk-proj-Zq8vT3mW9xK2pL7rN4bY6cH1";
    let dir = tempfile::tempdir().expect("tempdir");
    let client = reqwest::Client::new();
    let state = dir.path().join("state.sqlite3");
    let mut serve = Serve::sqlite(dir.path(), &state);
    serve.env.push((
        "COMPACT_SERVER_LIMITS_PREFLIGHT_BODY_BYTES",
        "200000".into(),
    ));
    let r = serve.start(&client).await;

    let mut history = vec![
        json!({"role": "system", "content": "You are a coding agent."}),
        json!({"role": "user", "content": format!("We must deploy with the key {SECRET} before Friday.")}),
        json!({"role": "assistant", "content": format!("Noted: the key is {SECRET}.")}),
    ];
    for t in 0..6 {
        support::add_turn(&mut history, t);
    }
    let (s, body) = post(
        &client,
        format!("{}/v1/preflight", r.base),
        &json!({"session_id": "red", "messages": history, "force": true}),
    )
    .await;
    assert_eq!(s, 200, "{body}");
    assert!(
        body["report"]["summary_version"].as_u64().is_some(),
        "{body}"
    );

    let seen = status(&client, &r.base, "red").await;
    assert_eq!(seen["known"], true);
    let text = seen.to_string();
    assert!(!text.contains(SECRET), "status leaks the secret: {text}");
    assert!(text.contains("REDACTED"), "{text}");

    // The preflight's spans, straight into this server's store (a hang
    // guard only: the dispatcher delivers on its own thread).
    let mut trace = serde_json::Value::Null;
    for _ in 0..2400 {
        let got = client
            .get(format!("{}/api/traces/red", r.base))
            .send()
            .await
            .expect("trace");
        if got.status().is_success() {
            trace = got.json().await.expect("json");
            if trace.to_string().contains("compact.preflight") {
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    let events = trace.to_string();
    assert!(events.contains("compact.preflight"), "{events}");
    assert!(events.contains("compact.summary_created"), "{events}");
    assert!(!events.contains(SECRET), "events leak the secret");

    // Another session id sees nothing of it.
    let other = status(&client, &r.base, "red2").await;
    assert_eq!(other["known"], false);
    assert!(
        other["summary"].is_null() && other["last_report"].is_null(),
        "{other}"
    );

    // Past the configured body limit: 413, nothing read.
    let big = json!({"session_id": "big", "messages": [{"role": "user", "content": "x".repeat(250_000)}]});
    let (s, _) = post(&client, format!("{}/v1/preflight", r.base), &big).await;
    assert_eq!(s, 413);
    let (s, _) = post(
        &client,
        format!("{}/v1/sessions/big/overflow", r.base),
        &json!({"messages": big["messages"]}),
    )
    .await;
    assert_eq!(s, 413);
    assert_eq!(status(&client, &r.base, "big").await["known"], false);
}
