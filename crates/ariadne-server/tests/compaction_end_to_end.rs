//! With the server up, compaction's spans appear on the
//! `/events` stream. Open `/events`, wait for `connected`, run preflights
//! through `CompactManager` with an exporter that POSTs to `/ingest`, and
//! check every `compact.*` span arrives, in order, with its data.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{TestServer, WAIT};
use compact_middleware::BoxFuture;
use compact_middleware::config::Config;
use compact_middleware::events::{CollectingExporter, Event, ExportError, Exporter, TraceEvent};
use compact_middleware::model::{Format, Request};
use compact_middleware::{CompactManager, Message};
use serde_json::{Value, json};

/// The smallest honest Ariadne exporter: one `{"batch":[...]}` POST per batch.
#[derive(Debug)]
struct HttpIngest {
    url: String,
    client: reqwest::Client,
}

impl Exporter for HttpIngest {
    fn name(&self) -> &str {
        "test-http"
    }

    fn export<'a>(&'a self, batch: &'a [Event]) -> BoxFuture<'a, Result<(), ExportError>> {
        Box::pin(async move {
            let body = serde_json::to_string(&json!({ "batch": batch }))?;
            let resp = self
                .client
                .post(&self.url)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .map_err(|e| ExportError::Other(e.to_string()))?;
            if resp.status().is_success() {
                Ok(())
            } else {
                Err(ExportError::Rejected(resp.status().to_string()))
            }
        })
    }
}

fn conversation(turns: usize) -> Vec<Message> {
    let mut items = vec![json!({"role":"system","content":"You are a careful coding agent."})];
    for t in 0..turns {
        items.push(json!({"role":"user","content":format!("Turn {t}: please inspect module {t} and report what it does in detail.")}));
        items.push(json!({"role":"assistant","content":null,"tool_calls":[{"id":format!("call_{t}"),"type":"function",
            "function":{"name":"read_file","arguments":format!("{{\"path\":\"src/m{t}.rs\"}}")}}]}));
        items.push(json!({"role":"tool","tool_call_id":format!("call_{t}"),
            "content":format!("fn m{t}() {{ /* {} */ }}", "body line of the module; ".repeat(60))}));
        items.push(json!({"role":"assistant","content":format!("Module {t} parses the configuration and validates it.")}));
    }
    Request::from_value(Value::Array(items), Format::Chat)
        .expect("valid chat messages")
        .messages
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_spans_arrive_on_the_event_stream_in_order() {
    let s = TestServer::start().await;
    let mut sse = s.subscribe("?traceId=session-9-6", None).await;
    assert_eq!(
        sse.next_data(WAIT).await.expect("connected").1["type"],
        "connected"
    );

    let collected = Arc::new(CollectingExporter::new());
    let http = Arc::new(HttpIngest {
        url: format!("{}/ingest", s.url),
        client: reqwest::Client::new(),
    });
    let config = Config {
        model: "gpt-4o".into(),
        max_context_tokens: Some(8000),
        ..Config::default()
    };
    let manager = CompactManager::builder(config)
        .without_config_exporters()
        .exporter(http)
        .exporter(collected.clone())
        .without_storage()
        .build()
        .expect("manager");
    manager.dispatcher().emit(Event::Trace(TraceEvent::session(
        "session-9-6",
        "agent-under-test",
    )));
    let outcome = manager
        .preflight("session-9-6", conversation(30))
        .await
        .expect("preflight");
    assert!(outcome.report.triggered, "the conversation is over budget");
    manager
        .manual_compact("session-9-6", conversation(12), "test")
        .await
        .expect("manual compaction");
    let flushed = {
        let d = manager.dispatcher().clone();
        tokio::task::spawn_blocking(move || d.flush(Duration::from_secs(120)))
            .await
            .unwrap()
    };
    assert!(flushed, "the dispatcher delivered everything");

    let expected: Vec<Value> = collected
        .events()
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    let mut got = Vec::new();
    for _ in 0..expected.len() {
        got.push(sse.next_data(WAIT).await.expect("event on the stream").1);
    }
    // Same events, same order, same data, as the middleware emitted them.
    assert_eq!(got, expected);

    let names: Vec<&str> = got.iter().filter_map(|e| e["name"].as_str()).collect();
    for name in [
        "compact.token_estimate",
        "compact.trigger_decision",
        "compact.pruned_messages",
        "compact.preflight",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    let first_estimate = names
        .iter()
        .position(|n| *n == "compact.token_estimate")
        .unwrap();
    let first_decision = names
        .iter()
        .position(|n| *n == "compact.trigger_decision")
        .unwrap();
    assert!(
        first_estimate < first_decision,
        "estimate before decision: {names:?}"
    );
    let decision = got
        .iter()
        .find(|e| e["name"] == "compact.trigger_decision")
        .unwrap();
    assert_eq!(decision["data"]["triggered"], true);
    let pruned = got
        .iter()
        .find(|e| e["name"] == "compact.pruned_messages")
        .unwrap();
    let (before, after) = (
        pruned["data"]["tokens_before"].as_u64().unwrap(),
        pruned["data"]["tokens_after"].as_u64().unwrap(),
    );
    assert!(after < before);
    assert!(
        got.iter()
            .filter(|e| e["type"] == "span")
            .all(|e| e["kind"] == "compaction")
    );

    // And the compaction metrics saw them.
    let (_, m) = s.get("/metrics").await;
    assert!(
        m.as_str()
            .unwrap()
            .lines()
            .any(|l| l == "memory_tokens_before_after_count{stage=\"before\"} 2"),
        "{m}"
    );
}

/// A session's prompt-cache figures, predicted by the manager and reported
/// by the caller, reach the session API (counters and rows, with the break
/// each compaction caused) and `/metrics`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_cache_figures_reach_the_session_view_and_metrics() {
    use compact_middleware::PreflightRequest;
    use compact_middleware::cache::ReportedUsage;

    let s = TestServer::start().await;
    let http = Arc::new(HttpIngest {
        url: format!("{}/ingest", s.url),
        client: reqwest::Client::new(),
    });
    let config = Config {
        model: "gpt-4o".into(),
        max_context_tokens: Some(4000),
        ..Config::default()
    };
    let manager = CompactManager::builder(config)
        .without_config_exporters()
        .exporter(http)
        .without_storage()
        .build()
        .expect("manager");
    let id = "session-cache";
    let all = conversation(16);
    // The agent keeps compact's output and appends one turn (4 messages) a call;
    // from the second call on it passes the provider's usage of the last one.
    let mut context: Vec<Message> = all[..5].to_vec();
    let mut reported = Vec::new();
    let mut outcomes = Vec::new();
    for k in 0..16 {
        if k > 0 {
            context.extend(all[1 + 4 * k..5 + 4 * k].iter().cloned());
        }
        let usage = (k > 0).then(|| ReportedUsage {
            input_tokens: 3_000 + k,
            cache_read: 2_048,
            cache_write: 0,
            cache_write_1h: 0,
            output_tokens: Some(100),
        });
        reported.extend(usage);
        let o = manager
            .preflight_with(
                id,
                PreflightRequest {
                    messages: std::mem::take(&mut context),
                    usage_details: usage,
                    ..PreflightRequest::default()
                },
            )
            .await
            .expect("preflight");
        context = o.messages.clone();
        outcomes.push(o);
    }
    let flushed = {
        let d = manager.dispatcher().clone();
        tokio::task::spawn_blocking(move || d.flush(Duration::from_secs(120)))
            .await
            .unwrap()
    };
    assert!(flushed);
    let breaks = outcomes
        .iter()
        .filter(|o| o.report.cache.and_then(|c| c.broken_tokens).unwrap_or(0) > 0)
        .count() as u64;
    assert!(breaks > 0, "the session compacted and broke its prefix");
    let predicted: u64 = outcomes
        .iter()
        .map(|o| o.report.cache.map_or(0, |c| c.predicted_read) as u64)
        .sum();
    let prompt: u64 = outcomes.iter().map(|o| o.report.tokens_after as u64).sum();

    let (status, list) = s.get("/api/sessions").await;
    assert_eq!(status, 200);
    let entry = list["sessions"]
        .as_array()
        .and_then(|a| a.iter().find(|e| e["trace_id"] == id))
        .unwrap_or_else(|| panic!("{id} listed: {list}"));
    let c = &entry["counts"];
    assert_eq!(c["cache_breaks"], breaks, "{c}");
    assert_eq!(c["prompt_tokens_predicted"], prompt);
    assert_eq!(c["cache_read_predicted"], predicted);
    assert_eq!(
        c["input_tokens_reported"],
        reported.iter().map(|r| r.input_tokens as u64).sum::<u64>()
    );
    assert_eq!(c["cache_read_reported"], 2_048 * 15);
    assert!(c["cost_reported_micro_usd"].as_u64().unwrap_or(0) > 0);

    let (status, view) = s.get(&format!("/api/sessions/{id}")).await;
    assert_eq!(status, 200);
    let rows = view["preflights"].as_array().expect("rows");
    assert_eq!(rows.len(), outcomes.len());
    for (row, o) in rows.iter().zip(&outcomes) {
        let cache = o.report.cache.expect("cache");
        assert_eq!(row["cache"]["read_predicted"], cache.predicted_read as u64);
        assert_eq!(
            row["cache"]["broken_tokens"],
            cache.broken_tokens.map_or(Value::Null, |n| json!(n))
        );
        if cache.broken_tokens.unwrap_or(0) > 0 {
            assert_eq!(
                row["triggered"], true,
                "only a compaction breaks the prefix"
            );
        }
    }

    let (_, m) = s.get("/metrics").await;
    let text = m.as_str().unwrap_or_default();
    let line = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} missing:\n{text}"))
            .to_string()
    };
    assert_eq!(
        line("compact_cache_breaks_total "),
        format!("compact_cache_breaks_total {breaks}")
    );
    assert_eq!(
        line("compact_cache_read_tokens_total{source=\"predicted\"}"),
        format!("compact_cache_read_tokens_total{{source=\"predicted\"}} {predicted}")
    );
    let hit: f64 = line("compact_cache_hit_ratio{source=\"reported\"}")
        .rsplit(' ')
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN);
    let want = 2_048.0 * 15.0 / reported.iter().map(|r| r.input_tokens as f64).sum::<f64>();
    assert!((hit - want).abs() < 1e-9, "{hit} vs {want}");
    assert!(line("compact_cost_per_session_usd{source=\"reported\"}").len() > 40);
}
