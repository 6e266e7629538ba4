//! The HTTP contract of docs/design.md §8 against a real server: every status code and
//! error body of `/ingest`, the body limits, malformed input, `/healthz`,
//! `/metrics`, `/api`, the SDK/OTLP routes, tokens, CORS and the bind rule.

mod common;

use std::io::{Read, Write};

use common::{TestServer, batch, span};
use proptest::prelude::*;
use serde_json::{Value, json};

#[tokio::test]
async fn ingest_single_and_batch() {
    let s = TestServer::start().await;
    let (st, body) = s.post("/ingest", &span("t", 1)).await;
    assert_eq!((st, body), (200, json!({"success":true,"count":1})));
    let (st, body) = s.post("/ingest", &batch("t", 2..7)).await;
    assert_eq!((st, body), (200, json!({"success":true,"count":5})));
    let (st, body) = s.post("/ingest", &json!({"batch":[]})).await;
    assert_eq!((st, body), (200, json!({"success":true,"count":0})));
    let trace = json!({"type":"trace","trace_id":"t","name":"agent","metadata":{"agent_name":"a"}});
    assert_eq!(s.post("/ingest", &trace).await.0, 200);
    let (_, health) = s.get("/healthz").await;
    assert_eq!(health["status"], "ok");
    assert_eq!(health["events"]["count"], 7);
    assert_eq!(health["events"]["capacity"], 100_000);
    assert!(health["timestamp"].is_string());
}

#[tokio::test]
async fn validation_errors_name_their_paths() {
    let s = TestServer::start().await;
    let cases = [
        (
            json!({"type":"span","trace_id":"t"}),
            json!(["span_id"]),
            "Required",
        ),
        (
            json!({"batch":[span("t",0), {"type":"span","trace_id":"t","span_id":"x",
                "started_at":"2026-01-01T00:00:01Z","ended_at":"2026-01-01T00:00:00Z"}]}),
            json!(["batch", 1, "ended_at"]),
            "ended_at must be >= started_at",
        ),
        (
            json!({"type":"trace","trace_id":"t","metadata":{"n":1}}),
            json!(["metadata", "n"]),
            "Expected string, received number",
        ),
        (
            json!({"type":"span","trace_id":"t","span_id":"s","started_at":"not a time at all"}),
            json!(["started_at"]),
            "Invalid datetime",
        ),
        (json!({"type":"nope","trace_id":"t"}), json!(["type"]), ""),
        (
            json!([span("t", 0)]),
            json!([]),
            "Expected object, received array",
        ),
        (
            json!({"batch":"x"}),
            json!(["batch"]),
            "Expected array, received string",
        ),
    ];
    for (body, path, message) in cases {
        let (st, reply) = s.post("/ingest", &body).await;
        assert_eq!(st, 400, "{body}");
        assert_eq!(reply["error"], "Validation failed");
        let d = &reply["details"][0];
        assert_eq!(d["path"], path, "{body}");
        if !message.is_empty() {
            assert_eq!(d["message"], message);
        }
    }
    // A rejected batch stores nothing.
    assert_eq!(s.get("/healthz").await.1["events"]["count"], 0);
}

#[tokio::test]
async fn malformed_json_is_400_with_a_message() {
    let s = TestServer::start().await;
    for body in ["{", "", "nul", "{\"batch\":[}", "\u{feff}{}", "[1,2"] {
        let (st, reply) = s.post_raw("/ingest", body.to_owned()).await;
        assert_eq!(st, 400, "{body:?}");
        assert_eq!(reply["error"], "Invalid JSON");
        assert!(reply["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
}

#[tokio::test]
async fn oversize_with_content_length_is_413() {
    let s = TestServer::start().await;
    let body = format!("{{\"pad\":\"{}\"}}", "x".repeat(262_144));
    let (st, reply) = s.post_raw("/ingest", body).await;
    assert_eq!(st, 413);
    assert_eq!(reply["error"], "Payload too large");
    assert!(reply["message"].as_str().unwrap_or("").contains("262144"));
    // Exactly at the limit is read (and here invalid, so 400 not 413).
    let at_limit = format!("{{\"p\":\"{}\"}}", "x".repeat(262_144 - 8));
    assert_eq!(at_limit.len(), 262_144);
    assert_eq!(s.post_raw("/ingest", at_limit).await.0, 400);
}

/// A chunked body has no Content-Length: the limit is counted on the bytes read.
#[tokio::test]
async fn oversize_chunked_is_413() {
    let s = TestServer::start().await;
    let addr = s.server.as_ref().map(|r| r.addr).unwrap();
    let reply = tokio::task::spawn_blocking(move || {
        let mut tcp = std::net::TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
        write!(
            tcp,
            "POST /ingest HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        .unwrap();
        let chunk = vec![b' '; 64 * 1024];
        // 5 × 64 KiB > 256 KiB; the server may answer and close before we finish.
        for _ in 0..5 {
            if write!(tcp, "{:x}\r\n", chunk.len()).is_err()
                || tcp.write_all(&chunk).is_err()
                || tcp.write_all(b"\r\n").is_err()
            {
                break;
            }
        }
        let _ = tcp.write_all(b"0\r\n\r\n");
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = tcp.read(&mut buf) {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
            if out.windows(4).any(|w| w == b"\r\n\r\n") && out.ends_with(b"}") {
                break;
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    })
    .await
    .unwrap();
    assert!(reply.starts_with("HTTP/1.1 413"), "{reply}");
    assert!(reply.contains("\"error\":\"Payload too large\""), "{reply}");
    assert_eq!(s.get("/healthz").await.0, 200);
}

#[tokio::test]
async fn truncates_long_names_and_data_strings() {
    let s = TestServer::start().await;
    let mut ev = span("t", 1);
    ev["name"] = json!("n".repeat(1500));
    ev["data"] = json!({"big": "é".repeat(110 * 1024), "nested": {"x": "y"}});
    // 110 K two-byte characters is over the body limit; raise it for this test.
    let s2 = TestServer::start_with(|c| c.limits.ingest_body_bytes = 1 << 20).await;
    drop(s);
    assert_eq!(s2.post("/ingest", &ev).await.0, 200);
    let (_, t) = s2.get("/api/traces/t").await;
    let stored = &t["spans"][0];
    let name = stored["name"].as_str().unwrap();
    assert_eq!(name.chars().count(), 1024 + "... [truncated]".len());
    let big = stored["data"]["big"].as_str().unwrap();
    assert!(big.ends_with("... [truncated]"));
    assert_eq!(big.chars().count(), 100 * 1024 + "... [truncated]".len());
    assert_eq!(stored["data"]["nested"]["x"], "y");
}

#[tokio::test]
async fn seed_004_shape_is_mapped() {
    let s = TestServer::start().await;
    let ev = json!({"type":"span","trace_id":"session-abc-123","span_id":"p1",
        "parent_id":"before_model_call-xyz","name":"compact.trigger_decision",
        "timestamp":"2025-10-19T12:34:56Z","duration_ms":42,"status":"ok",
        "properties":{"triggered":true,"pruned_count":47,"policy":{"keep_recent_turns":6}},
        "payload":"{\"summary\":\"Goals\"}"});
    assert_eq!(s.post("/ingest", &ev).await.0, 200);
    let (_, t) = s.get("/api/traces/session-abc-123").await;
    let sp = &t["spans"][0];
    assert_eq!(sp["started_at"], "2025-10-19T12:34:56Z");
    assert_eq!(sp["ended_at"], "2025-10-19T12:34:56.042Z");
    assert_eq!(sp["data"]["pruned_count"], 47);
    assert_eq!(sp["data"]["policy"]["keep_recent_turns"], 6);
    assert_eq!(sp["data"]["payload"], "{\"summary\":\"Goals\"}");
    assert!(sp.get("properties").is_none() && sp.get("timestamp").is_none());
}

#[tokio::test]
async fn api_lists_traces_newest_first_with_paging() {
    let s = TestServer::start().await;
    for t in ["a", "b", "c"] {
        let trace = json!({"type":"trace","trace_id":t,"name":format!("agent {t}")});
        assert_eq!(s.post("/ingest", &trace).await.0, 200);
        assert_eq!(s.post("/ingest", &batch(t, 0..2)).await.0, 200);
    }
    let (st, page) = s.get("/api/traces?limit=2").await;
    assert_eq!(st, 200);
    let ids: Vec<&str> = page["traces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["trace_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["c", "b"]);
    assert_eq!(page["traces"][0]["name"], "agent c");
    assert_eq!(page["traces"][0]["event_count"], 3);
    let before = page["next_before"].as_u64().unwrap();
    let (_, rest) = s.get(&format!("/api/traces?limit=2&before={before}")).await;
    assert_eq!(rest["traces"][0]["trace_id"], "a");
    assert_eq!(rest["next_before"], Value::Null);
    let (_, one) = s.get("/api/traces/b").await;
    assert_eq!(one["trace"]["name"], "agent b");
    assert_eq!(one["spans"].as_array().unwrap().len(), 2);
    assert_eq!(s.get("/api/traces/missing").await.0, 404);
    assert_eq!(s.get("/api/traces?limit=x").await.0, 400);
}

#[tokio::test]
async fn metrics_cover_ingest_sse_store_and_compaction() {
    let s = TestServer::start().await;
    let pruned = json!({"type":"span","trace_id":"t","span_id":"p","name":"compact.pruned_messages",
        "data":{"cleared":4,"summarized":3,"dropped":1,"tokens_before":90000,"tokens_after":20000}});
    assert_eq!(s.post("/ingest", &pruned).await.0, 200);
    assert_eq!(s.post_raw("/ingest", "{".to_owned()).await.0, 400);
    let (st, text) = s.get("/metrics").await;
    assert_eq!(st, 200);
    let text = text.as_str().unwrap().to_owned();
    for line in [
        "ariadne_ingest_requests_total{endpoint=\"/ingest\",status=\"200\"} 1",
        "ariadne_ingest_requests_total{endpoint=\"/ingest\",status=\"400\"} 1",
        "ariadne_ingest_events_total{endpoint=\"/ingest\",status=\"200\"} 1",
        "ariadne_sse_clients 0",
        "ariadne_sse_events_skipped_total 0",
        "ariadne_store_events 1",
        "memory_compaction_items_total 8",
        "memory_tokens_before_after_count{stage=\"before\"} 1",
        "memory_tokens_before_after_sum{stage=\"after\"} 20000",
        "memory_tokens_before_after_bucket{stage=\"after\",le=\"32000\"} 1",
        "memory_tokens_before_after_bucket{stage=\"after\",le=\"16000\"} 0",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line}\n{text}");
    }
}

#[tokio::test]
async fn sdk_and_otlp_routes_take_large_bodies() {
    let s = TestServer::start().await;
    // Over /ingest's 256 KiB but under the 16 MiB default of the SDK routes.
    let big = json!({"data":[{"object":"trace","id":"trace_1","pad":"x".repeat(1 << 20)}]});
    let (st, reply) = s.post("/v1/traces/ingest", &big).await;
    assert_eq!(st, 200, "{reply}");
    assert_eq!(reply["success"], true);
    let (st, reply) = s.post("/v1/traces", &json!({"resourceSpans":[]})).await;
    assert_eq!((st, reply), (200, json!({})));
    assert_eq!(s.post_raw("/v1/traces", "{".to_owned()).await.0, 400);
    let resp = s
        .client
        .post(format!("{}/v1/traces", s.url))
        .header("content-type", "application/x-protobuf")
        .body(vec![0u8; 4])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 415);

    let small = TestServer::start_with(|c| c.limits.otel_body_bytes = 1024).await;
    let (st, reply) = small.post("/v1/traces/ingest", &big).await;
    assert_eq!(st, 413);
    assert_eq!(reply["error"], "Payload too large");
}

#[tokio::test]
async fn tokens_guard_ingest_and_reads() {
    let s = TestServer::start_with(|c| {
        c.ingest_token = Some("in-secret".into());
        c.read_token = Some("read-secret".into());
    })
    .await;
    let url = |p: &str| format!("{}{p}", s.url);
    let body = span("t", 1).to_string();
    for auth in [
        None,
        Some("Bearer wrong"),
        Some("Bearer read-secret"),
        Some("in-secret"),
    ] {
        let mut req = s.client.post(url("/ingest")).body(body.clone());
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 401, "{auth:?}");
        assert_eq!(resp.headers()["www-authenticate"], "Bearer");
        let reply: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
        assert_eq!(reply["error"], "Unauthorized");
    }
    let ok = s
        .client
        .post(url("/ingest"))
        .bearer_auth("in-secret")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status().as_u16(), 200);

    for path in ["/api/traces", "/metrics", "/api/traces/t"] {
        // `path` read with `token`, or with none.
        let read = |token: Option<&'static str>| {
            let req = s.client.get(url(path));
            match token {
                Some(t) => req.bearer_auth(t),
                None => req,
            }
            .send()
        };
        assert_eq!(read(None).await.unwrap().status().as_u16(), 401);
        let wrong = read(Some("in-secret")).await.unwrap();
        assert_eq!(wrong.status().as_u16(), 401);
        let right = read(Some("read-secret")).await.unwrap();
        assert_eq!(right.status().as_u16(), 200, "{path}");
    }
    // EventSource cannot send headers: the read token also works as a query parameter.
    assert_eq!(
        s.client
            .get(url("/events"))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        401
    );
    let sse = s
        .client
        .get(url("/events?access_token=read-secret"))
        .send()
        .await
        .unwrap();
    assert_eq!(sse.status().as_u16(), 200);
    drop(sse);
    // The ingest token is not accepted from the query string.
    let q = s
        .client
        .post(url("/ingest?access_token=in-secret"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(q.status().as_u16(), 401);
    // Health stays open.
    assert_eq!(s.get("/healthz").await.0, 200);
}

#[tokio::test]
async fn cors_only_for_configured_origins() {
    let s =
        TestServer::start_with(|c| c.cors_origins = vec!["http://ui.example:5173".into()]).await;
    let get = |origin: &'static str| {
        s.client
            .get(format!("{}/events", s.url))
            .header("origin", origin)
            .send()
    };
    let allowed = get("http://ui.example:5173").await.unwrap();
    assert_eq!(
        allowed.headers()["access-control-allow-origin"],
        "http://ui.example:5173"
    );
    drop(allowed);
    let other = get("http://evil.example").await.unwrap();
    assert!(other.headers().get("access-control-allow-origin").is_none());
    drop(other);
    let no_origin = s
        .client
        .get(format!("{}/healthz", s.url))
        .send()
        .await
        .unwrap();
    assert!(
        no_origin
            .headers()
            .get("access-control-allow-origin")
            .is_none()
    );

    let preflight = |origin: &'static str| {
        s.client
            .request(reqwest::Method::OPTIONS, format!("{}/ingest", s.url))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .send()
    };
    let ok = preflight("http://ui.example:5173").await.unwrap();
    assert_eq!(ok.status().as_u16(), 204);
    assert_eq!(
        ok.headers()["access-control-allow-origin"],
        "http://ui.example:5173"
    );
    assert!(
        ok.headers()["access-control-allow-methods"]
            .to_str()
            .unwrap()
            .contains("POST")
    );
    let refused = preflight("http://evil.example").await.unwrap();
    assert_eq!(refused.status().as_u16(), 403);
    assert!(
        refused
            .headers()
            .get("access-control-allow-origin")
            .is_none()
    );
}

#[tokio::test]
async fn non_loopback_bind_needs_tokens_or_insecure() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = common::config(dir.path());
    cfg.addr = ([0, 0, 0, 0], 0).into();
    let err = ariadne_server::spawn(cfg.clone()).await.unwrap_err();
    assert!(
        matches!(
            err,
            ariadne_server::ServerError::Settings(
                compact_events::settings::SettingsError::InsecureBind(_)
            )
        ),
        "{err}"
    );
    cfg.ingest_token = Some("a".into());
    assert!(
        ariadne_server::spawn(cfg.clone()).await.is_err(),
        "one token is not enough"
    );
    cfg.read_token = Some("b".into());
    let s = ariadne_server::spawn(cfg.clone())
        .await
        .expect("both tokens");
    s.shutdown().await.unwrap();
    let dir2 = tempfile::tempdir().unwrap();
    let mut insecure = common::config(dir2.path());
    insecure.addr = ([0, 0, 0, 0], 0).into();
    insecure.insecure = true;
    ariadne_server::spawn(insecure)
        .await
        .expect("forced")
        .shutdown()
        .await
        .unwrap();
}

#[tokio::test]
async fn sse_client_limit_is_503() {
    let s = TestServer::start_with(|c| c.limits.max_sse_clients = 1).await;
    let first = s.subscribe("", None).await;
    let second = s
        .client
        .get(format!("{}/events", s.url))
        .send()
        .await
        .unwrap();
    assert_eq!(second.status().as_u16(), 503);
    drop(first);
}

fn arb_body() -> impl Strategy<Value = Vec<u8>> {
    let field = prop::sample::select(vec![
        "type",
        "trace_id",
        "span_id",
        "parent_id",
        "kind",
        "name",
        "started_at",
        "ended_at",
        "data",
        "status",
        "metadata",
        "batch",
        "timestamp",
        "duration_ms",
        "properties",
    ]);
    let scalar = prop_oneof![
        Just(json!(null)),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-z]{0,6}".prop_map(Value::from),
        Just(json!("span")),
        Just(json!("2026-01-01T00:00:00Z")),
        Just(json!([1, "x"])),
        Just(json!({"k": 1})),
    ];
    let object = prop::collection::btree_map(field, scalar, 0..6).prop_map(|m| {
        let mut m: serde_json::Map<String, Value> =
            m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        // Most become invalid events: a valid one needs every piece right.
        m.entry("type".to_owned()).or_insert(json!("span"));
        Value::Object(m).to_string().into_bytes()
    });
    prop_oneof![
        // Random bytes.
        prop::collection::vec(any::<u8>(), 0..200),
        // Random JSON-ish text.
        "[\\[\\]{}\",:0-9a-z ]{0,80}".prop_map(String::into_bytes),
        // Structurally plausible events with wrong pieces.
        object,
    ]
}

#[test]
fn a_thousand_malformed_bodies_get_4xx_and_the_server_survives() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let s = rt.block_on(TestServer::start());
    let mut runner = proptest::test_runner::TestRunner::new(proptest::test_runner::Config {
        cases: 1000,
        failure_persistence: None,
        ..Default::default()
    });
    let ok_count = std::cell::Cell::new(0u64);
    runner
        .run(&arb_body(), |body| {
            let (st, reply) = rt.block_on(s.post_raw("/ingest", body.clone()));
            // A random body is occasionally a valid event; everything else is a 4xx with a JSON error.
            if st == 200 {
                ok_count.set(ok_count.get() + reply["count"].as_u64().unwrap_or(0));
            } else {
                prop_assert!(
                    (400..500).contains(&st),
                    "status {st} for {:?}",
                    String::from_utf8_lossy(&body)
                );
                prop_assert!(reply["error"].is_string());
            }
            Ok(())
        })
        .unwrap();
    let (st, health) = rt.block_on(s.get("/healthz"));
    assert_eq!(st, 200);
    assert_eq!(health["events"]["count"], ok_count.get());
}
