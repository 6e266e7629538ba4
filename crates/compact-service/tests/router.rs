//! The session API through its router, in process (`tower::ServiceExt::
//! oneshot`): the body shapes and their errors, overlays applied by the
//! manager with one session between plain and overlaid calls, and the
//! OpenAPI document, which names every route the server answers. The
//! binary's own tests (`tests/sidecar_http.rs`) keep the HTTP contract
//! over a real listener, replicas and tokens.

use std::collections::BTreeSet;

use ariadne_server::{AppState, ServerConfig};
use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use compact_middleware::config::Config;
use compact_service::{Service, router};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

struct App {
    router: Router,
    _dir: tempfile::TempDir,
    _stop: tokio::sync::watch::Sender<bool>,
}

/// The server and the service on a fresh data directory, sessions in
/// memory, no archive.
fn app(yaml: &str) -> App {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = Config::from_yaml_str(yaml).expect("config");
    config.max_context_tokens = Some(3000);
    config.storage.adapter = compact_middleware::config::StorageAdapterKind::None;
    config.server.limits.preflight_body_bytes = 200_000;
    // No part here connects anywhere (memory sessions, no archive, no
    // exporter), so the runtime `Parts::new` asks for is never used.
    let parts = tokio::task::block_in_place(|| {
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        compact_wiring::Parts::new(&config, &rt)
    })
    .expect("parts");
    let service = Service::new(config, parts).expect("service");
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let server = AppState::new(
        ServerConfig {
            data_dir: dir.path().join("server"),
            ..ServerConfig::default()
        },
        stopped,
    )
    .expect("server state");
    App {
        router: router(server, service),
        _dir: dir,
        _stop: stop,
    }
}

async fn call(app: &App, method: Method, uri: &str, body: Option<Value>) -> (StatusCode, Value) {
    let body = match body {
        Some(v) => Body::from(v.to_string()),
        None => Body::empty(),
    };
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(body)
        .expect("request");
    let res = app.router.clone().oneshot(req).await.expect("answer");
    let status = res.status();
    let bytes = res.into_body().collect().await.expect("body").to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

async fn raw(app: &App, uri: &str, body: &'static str) -> (StatusCode, Value) {
    let req = Request::builder()
        .method(Method::POST)
        .uri(uri)
        .body(Body::from(body))
        .expect("request");
    let res = app.router.clone().oneshot(req).await.expect("answer");
    let status = res.status();
    let bytes = res.into_body().collect().await.expect("body").to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn path(body: &Value) -> Option<&str> {
    body["details"][0]["path"].as_str()
}

fn turn(messages: &mut Vec<Value>, t: usize) {
    let id = format!("call_{t}");
    messages.push(json!({"role": "user", "content": format!("Turn {t}: ticket OPS-{t} belongs to team-{t}. {}", "lorem ".repeat(60))}));
    messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "read", "arguments": "{}"}}]}));
    messages.push(json!({"role": "tool", "tool_call_id": id, "content": "log line ".repeat(80)}));
    messages.push(json!({"role": "assistant", "content": format!("OPS-{t} handled.")}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_are_typed_and_refusals_name_their_json_path() {
    let app = app("");
    let url = "/v1/preflight";
    // Not JSON, not an object, a field of the wrong type, a missing field.
    let (s, body) = raw(&app, url, "{not json").await;
    assert_eq!((s, path(&body)), (StatusCode::BAD_REQUEST, Some("$")));
    assert_eq!(body["error"], "Validation failed");
    assert!(
        body["details"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("invalid JSON"))
    );
    let (s, body) = raw(&app, url, "[1, 2]").await;
    assert_eq!(
        (s, path(&body)),
        (StatusCode::BAD_REQUEST, Some("$")),
        "{body}"
    );
    let (s, body) = call(
        &app,
        Method::POST,
        url,
        Some(json!({"session_id": 5, "messages": []})),
    )
    .await;
    assert_eq!(
        (s, path(&body)),
        (StatusCode::BAD_REQUEST, Some("$.session_id")),
        "{body}"
    );
    let (s, body) = call(
        &app,
        Method::POST,
        url,
        Some(json!({"session_id": "a", "messages": [], "keep_meta": "yes"})),
    )
    .await;
    assert_eq!(
        (s, path(&body)),
        (StatusCode::BAD_REQUEST, Some("$.keep_meta")),
        "{body}"
    );
    let (s, body) = call(&app, Method::POST, url, Some(json!({"messages": []}))).await;
    assert_eq!(
        (s, path(&body)),
        (StatusCode::BAD_REQUEST, Some("$.session_id")),
        "{body}"
    );
    let (s, body) = call(&app, Method::POST, url, Some(json!({"session_id": "a"}))).await;
    assert_eq!(
        (s, path(&body)),
        (StatusCode::BAD_REQUEST, Some("$.messages")),
        "{body}"
    );
    // Errors of the library keep their paths: the session id, a message of
    // `input`, the usage, an overlay key, an unknown agent.
    let (s, body) = call(
        &app,
        Method::POST,
        url,
        Some(json!({"session_id": "../x", "messages": []})),
    )
    .await;
    assert_eq!(
        (s, path(&body)),
        (StatusCode::BAD_REQUEST, Some("$.session_id")),
        "{body}"
    );
    let (s, body) = call(&app, Method::POST, url, Some(json!({"session_id": "a", "input": [{"role": "user", "content": "hi"}, {"role": "bogus"}]}))).await;
    assert_eq!(
        (s, path(&body)),
        (StatusCode::BAD_REQUEST, Some("$.input[1].role")),
        "{body}"
    );
    let (s, body) = call(
        &app,
        Method::POST,
        url,
        Some(json!({"session_id": "a", "messages": [], "usage": {"input_tokens": "many"}})),
    )
    .await;
    assert_eq!(
        (s, path(&body)),
        (StatusCode::BAD_REQUEST, Some("$.usage.input_tokens")),
        "{body}"
    );
    let (s, body) = call(
        &app,
        Method::POST,
        url,
        Some(json!({"session_id": "a", "messages": [], "config": {"state": {"store": "memory"}}})),
    )
    .await;
    assert_eq!(
        (s, path(&body)),
        (StatusCode::BAD_REQUEST, Some("$.config.state")),
        "{body}"
    );
    let (s, body) = call(
        &app,
        Method::POST,
        "/v1/sessions/a/compact",
        Some(json!({"messages": [], "agent": "nobody"})),
    )
    .await;
    assert_eq!(
        (s, path(&body)),
        (StatusCode::BAD_REQUEST, Some("$.agent")),
        "{body}"
    );
    // A history whose pinned part cannot fit: 422 with guidance.
    let big = json!([{"role": "system", "content": "pinned ".repeat(5000)}, {"role": "user", "content": "hi"}]);
    let (s, body) = call(
        &app,
        Method::POST,
        url,
        Some(json!({"session_id": "e", "messages": big})),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"], "InsufficientBudget");
    assert!(body["guidance"].as_str().is_some_and(|g| !g.is_empty()));
    // Past the body limit: 413.
    let huge = json!({"session_id": "big", "messages": [{"role": "user", "content": "x".repeat(250_000)}]});
    let (s, _) = call(&app, Method::POST, url, Some(huge)).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_providers_cache_figures_are_reported_with_the_call() {
    let app = app("model: gpt-4o\n");
    let mut messages = vec![json!({"role": "system", "content": "You are terse."})];
    turn(&mut messages, 0);
    // OpenAI's Chat Completions usage object, as the SDK returns it.
    let usage = json!({"prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
                       "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
                       "completion_tokens_details": {"reasoning_tokens": 0}});
    let (s, body) = call(
        &app,
        Method::POST,
        "/v1/preflight",
        Some(json!({"session_id": "cache-1", "messages": messages, "usage": usage})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let cache = &body["report"]["cache"];
    assert_eq!(cache["rule"], "openai", "{body}");
    assert_eq!(
        cache["reported"],
        json!({"input_tokens": 2006, "cache_read": 1920, "cache_write": 0,
               "cache_write_1h": 0, "output_tokens": 300})
    );
    // gpt-4o: 86 plain x $2.50 + 1,920 x $1.25 + 300 x $10 per million.
    let want = (86.0 * 2.5 + 1920.0 * 1.25 + 300.0 * 10.0) / 1e6;
    let got = cache["reported_cost_usd"].as_f64().unwrap_or(f64::NAN);
    assert!((got - want).abs() < 1e-12, "{got} vs {want}");
    assert_eq!(
        body["report"]["basis"], "usage",
        "the figures anchor the estimate"
    );
    // A bad cache figure names its path.
    let usage = json!({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": "all"}});
    let (s, body) = call(
        &app,
        Method::POST,
        "/v1/preflight",
        Some(json!({"session_id": "cache-1", "messages": messages, "usage": usage})),
    )
    .await;
    assert_eq!(
        (s, path(&body)),
        (
            StatusCode::BAD_REQUEST,
            Some("$.usage.prompt_tokens_details.cached_tokens")
        ),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlays_apply_in_the_manager_and_share_the_session() {
    let app =
        app("agents:\n  terse:\n    policy:\n      keep_recent_turns: 2\n      mode: compact\n");
    // The conversation's overlay, patched twice: merged.
    let (s, body) = call(
        &app,
        Method::PATCH,
        "/v1/conversations/c1/memory",
        Some(json!({"policy": {"mode": "summarize"}})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let (s, body) = call(
        &app,
        Method::PATCH,
        "/v1/conversations/c1/memory",
        Some(json!({"compact_keep": 3})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_eq!(
        body["memory"],
        json!({"policy": {"mode": "summarize", "keep_recent_turns": 3}})
    );
    let (s, body) = call(
        &app,
        Method::PATCH,
        "/v1/conversations/c1/memory",
        Some(json!({"policy": {"trigger_pct": 7}})),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        path(&body).is_some_and(|p| p.starts_with("$.policy")),
        "{body}"
    );
    let (s, body) = call(
        &app,
        Method::PATCH,
        "/v1/conversations/c1/memory",
        Some(json!([1])),
    )
    .await;
    assert_eq!(
        (s, path(&body)),
        (StatusCode::BAD_REQUEST, Some("$")),
        "{body}"
    );

    // Calls with and without overlays continue one session.
    let mut fed = vec![json!({"role": "system", "content": "You are a coding agent."})];
    let mut versions = Vec::new();
    for t in 0..10 {
        turn(&mut fed, t);
        let mut body = json!({"session_id": "c1", "messages": fed});
        if t % 2 == 1 {
            body["config"] = json!({"policy": {"target_pct": 0.45}});
            body["agent"] = json!("terse");
        }
        let (s, out) = call(&app, Method::POST, "/v1/preflight", Some(body)).await;
        assert_eq!(s, StatusCode::OK, "turn {t}: {out}");
        let report = &out["report"];
        let level = |key: &str| {
            report["config_sources"]
                .as_array()
                .expect("config_sources")
                .iter()
                .find(|s| s["key"] == key)
                .map(|s| s["level"].clone())
        };
        // The conversation's overlay applies to every call of the session.
        assert_eq!(
            level("policy.mode"),
            Some(json!("conversation")),
            "turn {t}"
        );
        assert_eq!(report["mode"], "summarize");
        if t % 2 == 1 {
            assert_eq!(level("policy.target_pct"), Some(json!("request")));
            assert_eq!(
                level("policy.keep_recent_turns"),
                Some(json!("conversation"))
            );
        } else {
            assert_eq!(level("policy.target_pct"), None);
        }
        if t > 0 {
            assert_ne!(report["continuation"], "fresh", "turn {t}: {report}");
        }
        if let Some(v) = report["summary_version"].as_u64() {
            versions.push(v);
        }
        fed = out["messages"].as_array().expect("messages").clone();
    }
    assert!(versions.len() >= 2, "{versions:?}");
    let expected: Vec<u64> = (1..=versions.len() as u64).collect();
    assert_eq!(versions, expected, "one chain, one step at a time");

    // What the session remembers, and forgetting it.
    let (s, status) = call(&app, Method::GET, "/v1/sessions/c1", None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(status["known"], true);
    assert_eq!(status["conversation"]["policy"]["mode"], "summarize");
    let (s, body) = call(&app, Method::DELETE, "/v1/sessions/c1", None).await;
    assert_eq!(
        (s, &body),
        (
            StatusCode::OK,
            &json!({"session_id": "c1", "deleted": true})
        )
    );
    let (_, status) = call(&app, Method::GET, "/v1/sessions/c1", None).await;
    assert_eq!(status["known"], false);
}

/// Every `.route("PATH", METHOD(...))` a router of this server declares.
fn declared_routes(source: &str) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    let mut rest = source;
    while let Some(i) = rest.find(".route(") {
        rest = &rest[i + ".route(".len()..];
        let Some(open) = rest.find('"') else { break };
        let Some(close) = rest[open + 1..].find('"') else {
            break;
        };
        let path = rest[open + 1..open + 1 + close].to_owned();
        let after = rest[open + 1 + close + 1..].trim_start_matches([',', ' ', '\n']);
        let method: String = after
            .chars()
            .take_while(|c| c.is_ascii_lowercase())
            .collect();
        out.insert((method, path));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_has_every_route() {
    let app = app("");
    let (s, doc) = call(&app, Method::GET, "/openapi.json", None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        doc["openapi"]
            .as_str()
            .is_some_and(|v| v.starts_with("3.1")),
        "{}",
        doc["openapi"]
    );
    let documented: BTreeSet<(String, String)> = doc["paths"]
        .as_object()
        .expect("paths")
        .iter()
        .flat_map(|(path, ops)| {
            ops.as_object()
                .expect("operations")
                .keys()
                .map(move |m| (m.clone(), path.clone()))
        })
        .collect();
    // The routes as the code declares them: this crate's and the trace
    // server's (its UI pages are not part of the API).
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let mut declared = BTreeSet::new();
    for file in ["compact-service/src/routes.rs", "ariadne-server/src/app.rs"] {
        let source = std::fs::read_to_string(format!("{root}/{file}")).expect(file);
        declared.extend(declared_routes(&source));
    }
    assert!(declared.len() >= 18, "{declared:?}");
    let missing: Vec<_> = declared.difference(&documented).collect();
    assert!(
        missing.is_empty(),
        "routes without a document entry: {missing:?}"
    );
    let stale: Vec<_> = documented.difference(&declared).collect();
    assert!(
        stale.is_empty(),
        "documented routes the server does not declare: {stale:?}"
    );
    // Each documented route answers (not 404/405) through the router.
    for (method, path) in &documented {
        let uri = path
            .replace("{id}", "s")
            .replace("{trace_id}", "s")
            .replace("{span_id}", "x");
        let method = Method::from_bytes(method.to_uppercase().as_bytes()).expect("method");
        if uri == "/events" {
            continue; // a stream that never ends by itself
        }
        let req = Request::builder()
            .method(method.clone())
            .uri(&uri)
            .header("content-type", "application/json")
            .body(Body::from("{}"))
            .expect("request");
        let res = app.router.clone().oneshot(req).await.expect("answer");
        assert_ne!(
            res.status(),
            StatusCode::METHOD_NOT_ALLOWED,
            "{method} {uri}"
        );
        if !uri.starts_with("/api/") {
            assert_ne!(res.status(), StatusCode::NOT_FOUND, "{method} {uri}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_the_dispatcher_per_exporter_and_the_session_store_writes() {
    let state = tempfile::tempdir().expect("tempdir");
    let app = app(&format!(
        "state:\n  store: sqlite\n  path: {}\n",
        state.path().join("s.sqlite3").display()
    ));
    let mut messages = vec![json!({"role": "system", "content": "You are an agent."})];
    for t in 0..6 {
        turn(&mut messages, t);
        let (status, body) = call(
            &app,
            Method::POST,
            "/v1/preflight",
            Some(json!({"session_id": "m1", "messages": messages})),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        messages = body["messages"].as_array().expect("messages").clone();
    }
    let req = Request::builder()
        .uri("/metrics")
        .body(Body::empty())
        .expect("request");
    let res = app.router.clone().oneshot(req).await.expect("answer");
    assert_eq!(res.status(), StatusCode::OK);
    let bytes = res.into_body().collect().await.expect("body").to_bytes();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let value = |line: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(line)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {line} in\n{text}"))
    };
    assert!(value("compact_dispatcher_emitted_total ") >= 6);
    assert_eq!(value("compact_dispatcher_dropped_total "), 0);
    // Per exporter: the service's own (into the server's store).
    assert_eq!(
        value("compact_dispatcher_lagged_total{exporter=\"server\"} "),
        0
    );
    value("compact_dispatcher_exported_total{exporter=\"server\"} ");
    assert_eq!(value("compact_state_saves_total{store=\"sqlite\"} "), 6);
    assert!(value("compact_state_written_bytes_total{store=\"sqlite\"} ") > 0);
    // The server's own metrics are still there, and every family has its
    // HELP and TYPE.
    assert!(text.contains("# TYPE ariadne_store_events gauge"));
    assert!(text.contains("# TYPE compact_dispatcher_lagged_total counter"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_answers_by_query_and_by_the_placeholders_id_for_its_session_only() {
    let app = app(
        "recall:\n  enabled: true\npolicy:\n  mode: compact\n  keep_task: false\n  keep_recent_turns: 1\n  keep_tool_io_pairs: 1\n",
    );
    let mut messages = vec![json!({"role": "system", "content": "You are an agent."})];
    for t in 0..6 {
        turn(&mut messages, t);
    }
    for t in 0..6 {
        messages[1 + 4 * t + 2]["content"] = json!(format!(
            "service-{t} listens on port 5543{t}\n{}",
            "log line ".repeat(80)
        ));
    }
    let (s, out) = call(
        &app,
        Method::POST,
        "/v1/preflight",
        Some(json!({"session_id": "r1", "messages": messages})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{out}");
    let (call_id, rid) = out["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find_map(|m| {
            let text = m["content"].as_str()?;
            let rid = text.split("— recall ").nth(1)?.strip_suffix('⟧')?;
            Some((m["tool_call_id"].as_str()?.to_owned(), rid.to_owned()))
        })
        .unwrap_or_else(|| panic!("no recall id in {out}"));
    // recall.advertise is off: the caller's tools stand, none come back.
    assert!(out.get("tools").is_none(), "{out}");
    let t: usize = call_id
        .trim_start_matches("call_")
        .parse()
        .expect("call id");
    let (s, body) = call(
        &app,
        Method::GET,
        &format!("/v1/sessions/r1/recall/{rid}"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_eq!(body["entry"]["text"], messages[1 + 4 * t + 2]["content"]);
    assert_eq!(body["entry"]["origin"]["call_id"], call_id);
    let (s, body) = call(
        &app,
        Method::POST,
        "/v1/sessions/r1/recall",
        Some(json!({"query": format!("which port does service-{t} listen on?"), "limit": 3})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let hits = body["hits"].as_array().expect("hits");
    assert!(
        hits.iter().any(|h| h["id"] == rid.as_str()
            && h["excerpt"]
                .as_str()
                .is_some_and(|e| e.contains(&format!("5543{t}")))),
        "{body}"
    );
    // Another session has neither the id nor the text.
    let (s, body) = call(
        &app,
        Method::GET,
        &format!("/v1/sessions/r2/recall/{rid}"),
        None,
    )
    .await;
    assert_eq!(
        (s, body["error"].as_str()),
        (StatusCode::NOT_FOUND, Some("NotFound"))
    );
    let (s, body) = call(
        &app,
        Method::POST,
        "/v1/sessions/r2/recall",
        Some(json!({"query": "staging database port"})),
    )
    .await;
    assert_eq!(
        (s, body["hits"].as_array().map(Vec::len)),
        (StatusCode::OK, Some(0))
    );
    // Neither query nor id.
    let (s, _) = call(
        &app,
        Method::POST,
        "/v1/sessions/r1/recall",
        Some(json!({})),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    // Recall off: refused, not an empty answer.
    let off = self::app("");
    let (s, body) = call(
        &off,
        Method::POST,
        "/v1/sessions/r1/recall",
        Some(json!({"query": "port"})),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("recall.enabled"),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_advertise_answers_the_tools_to_send_in_the_requests_wire() {
    let app = app(
        "recall:\n  enabled: true\n  advertise: true\npolicy:\n  mode: compact\n  keep_task: false\n  keep_recent_turns: 1\n  keep_tool_io_pairs: 1\n",
    );
    let mut messages = vec![json!({"role": "system", "content": "You are an agent."})];
    for t in 0..2 {
        turn(&mut messages, t);
    }
    let read =
        json!({"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}});
    let (s, out) = call(
        &app,
        Method::POST,
        "/v1/preflight",
        Some(json!({"session_id": "a1", "messages": messages, "tools": [read]})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{out}");
    let tools = out["tools"].as_array().expect("tools");
    assert_eq!(tools.len(), 2, "{out}");
    assert_eq!(tools[0], read);
    assert_eq!(
        tools[1],
        compact_middleware::recall::tool::openai_chat_tool()
    );
    // Responses input without tools of its own: the Responses shape.
    let (s, out) = call(
        &app,
        Method::POST,
        "/v1/preflight",
        Some(json!({"session_id": "a2", "input": [{"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"}, {"type": "function_call_output", "call_id": "c1", "output": "ok"}]})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{out}");
    assert_eq!(
        out["tools"],
        json!([compact_middleware::recall::tool::openai_responses_tool()])
    );
}
