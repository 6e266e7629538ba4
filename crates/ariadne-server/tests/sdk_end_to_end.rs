//! The real OpenAI Agents SDK export (captured from openai-agents 0.24.0)
//! POSTed to a running server's `/v1/traces/ingest`, as the SDK's own
//! `BackendSpanExporter` sends it, then read back through `/api/traces` and
//! `/events`: the mapping, validation, store and API together.

mod common;

use common::TestServer;
use serde_json::Value;

fn sample(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/openai-agents-0.24.0/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[tokio::test]
async fn sdk_export_is_stored_and_served() {
    let s = TestServer::start().await;
    let mut sse = s.subscribe("", None).await;
    for name in ["basic", "tool_error"] {
        let body = sample(name);
        let sent: Value = serde_json::from_str(&body).expect("sample is JSON");
        let spans_sent = sent["data"]
            .as_array()
            .map(|d| d.iter().filter(|o| o["object"] == "trace.span").count())
            .unwrap_or(0);
        let (status, reply) = s.post_raw("/v1/traces/ingest", body).await;
        assert_eq!(status, 200, "{name}: {reply}");

        // The trace the SDK sent, with every span, readable through the API.
        let trace_id = sent["data"]
            .as_array()
            .and_then(|d| d.iter().find(|o| o["object"] == "trace"))
            .and_then(|t| t["id"].as_str())
            .expect("a trace object")
            .to_string();
        let (status, got) = s.get(&format!("/api/traces/{trace_id}")).await;
        assert_eq!(status, 200, "{name}: {got}");
        let spans = got["spans"].as_array().expect("spans");
        assert_eq!(spans.len(), spans_sent, "{name}: {got}");
        // The trace's times were derived from its spans (the SDK sends none).
        let trace = &got["trace"];
        assert!(
            trace["started_at"]
                .as_str()
                .is_some_and(|t| t.ends_with('Z')),
            "{trace}"
        );
        assert!(
            trace["ended_at"].as_str() >= trace["started_at"].as_str(),
            "{trace}"
        );
        if name == "tool_error" {
            let failed: Vec<&Value> = spans.iter().filter(|sp| sp["status"] == "error").collect();
            assert_eq!(failed.len(), 1, "{spans:?}");
            assert_eq!(failed[0]["name"], "flaky_lookup");
        }
    }
    // And it streamed live.
    let mut names = Vec::new();
    while let Some((_, v)) = sse.next_data(common::WAIT).await {
        if let Some(n) = v["name"].as_str() {
            names.push(n.to_string());
        }
        if names.iter().any(|n| n == "flaky_lookup") {
            break;
        }
    }
    assert!(names.iter().any(|n| n == "flaky_lookup"), "{names:?}");
}
