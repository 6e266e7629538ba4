//! Recall (issue 25): what compaction clears is indexed per session,
//! redacted, and comes back by query (BM25) or by the id its placeholder
//! carries; another session's ids and redacted secrets answer nothing.

use std::sync::Arc;

use compact_middleware::events::CollectingExporter;
use compact_middleware::model::{Format, Message, Request};
use compact_middleware::recall::{RecallIndex, RecallQuery, tool};
use compact_middleware::{CompactError, CompactManager};
use serde_json::{Value, json};

mod recall_support;
use recall_support::{
    SECRET, big_output, cap_ids, config, history, history_big, output, placeholder_ids,
    recall_whole, turns,
};

fn manager_with(index: Option<Arc<RecallIndex>>) -> CompactManager {
    let mut b = CompactManager::builder(config()).without_storage();
    if let Some(i) = index {
        b = b.recall_index(i);
    }
    b.build().expect("manager")
}

#[tokio::test]
async fn cleared_outputs_carry_ids_that_give_the_original_back() {
    recall_support::ids_give_the_original_back(&manager_with(None)).await;
}

#[tokio::test]
async fn a_query_in_natural_words_ranks_the_cleared_output_first() {
    recall_support::natural_words_rank_the_cleared_output_first(&manager_with(None)).await;
}

#[tokio::test]
async fn another_sessions_ids_and_words_answer_nothing() {
    recall_support::other_sessions_answer_nothing(&manager_with(None)).await;
}

#[tokio::test]
async fn a_secret_that_redaction_removed_is_not_found() {
    recall_support::redacted_secrets_are_not_found(&manager_with(None)).await;
}

#[tokio::test]
async fn placeholders_are_byte_stable_across_calls_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("recall.sqlite3");
    let first = {
        let index = Arc::new(RecallIndex::open(&path).unwrap());
        let m = manager_with(Some(index));
        let a = m.preflight("s1", history(8)).await.unwrap();
        // The same history again, as a new call of a fresh session record.
        m.end_session("s1");
        let b = m.preflight("s1", history(8)).await.unwrap();
        assert_eq!(a.messages, b.messages);
        a.messages
    };
    // A restarted process opening the same index writes the same ids.
    let index = Arc::new(RecallIndex::open(&path).unwrap());
    let m = manager_with(Some(index.clone()));
    let again = m.preflight("s1", history(8)).await.unwrap();
    assert_eq!(again.messages, first);
    m.flush_recall(None).await;
    let n = index.count("s1").unwrap();
    assert!(n > 0);
    m.end_session("s1");
    m.preflight("s1", history(8)).await.unwrap();
    m.flush_recall(Some("s1")).await;
    assert_eq!(index.count("s1").unwrap(), n, "indexing twice adds nothing");
}

#[tokio::test]
async fn a_capped_outputs_marker_gives_the_whole_original_back() {
    recall_support::capped_outputs_give_the_original_back(&manager_with(None)).await;
}

#[tokio::test]
async fn a_capped_output_cleared_later_keeps_the_caps_id() {
    // The caller sends its whole history again (a proxy's client), or the
    // compacted one it got back, capped output included, with new turns.
    for resend_compacted in [false, true] {
        let m = manager_with(None);
        let first = m.preflight("s1", history_big(3, &[2])).await.unwrap();
        let (_, rid) = cap_ids(&first.messages).remove(0);
        let later = if resend_compacted {
            let mut v = first.messages.clone();
            v.extend(turns(3, 10));
            v
        } else {
            history_big(10, &[2])
        };
        let out = m.preflight("s1", later).await.unwrap();
        let cleared = placeholder_ids(&out.messages);
        assert!(
            cleared.contains(&("call_2".to_owned(), rid.clone())),
            "resend_compacted={resend_compacted}: {cleared:?} (cap {rid})"
        );
        assert_eq!(recall_whole(&m, "s1", &rid).await, Some(big_output(2)));
    }
}

#[tokio::test]
async fn cap_markers_are_byte_stable_across_calls_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("recall.sqlite3");
    // Turn 1's big output is cleared, turn 8's capped.
    let input = || history_big(9, &[1, 8]);
    let first = {
        let index = Arc::new(RecallIndex::open(&path).unwrap());
        let m = manager_with(Some(index));
        let a = m.preflight("s1", input()).await.unwrap();
        m.end_session("s1");
        let b = m.preflight("s1", input()).await.unwrap();
        assert_eq!(a.messages, b.messages);
        m.flush_recall(None).await;
        a.messages
    };
    let caps = cap_ids(&first);
    assert!(caps.iter().any(|(c, _)| c == "call_8"), "{caps:?}");
    let index = Arc::new(RecallIndex::open(&path).unwrap());
    let n = index.count("s1").unwrap();
    let m = manager_with(Some(index.clone()));
    let again = m.preflight("s1", input()).await.unwrap();
    assert_eq!(again.messages, first);
    m.flush_recall(None).await;
    assert_eq!(index.count("s1").unwrap(), n, "indexing twice adds nothing");
    for (_, rid) in caps {
        assert_eq!(recall_whole(&m, "s1", &rid).await, Some(big_output(8)));
    }
}

#[tokio::test]
async fn a_folded_message_is_found_by_its_words_and_its_hits_id() {
    // Turn 0's request states a fact only there; enough turns that it is
    // folded into the summary (gone from the context as a message).
    const FACT: &str = "the staging database listens on port 6543, reserved by Dana";
    let mut v: Vec<Value> = history(14).iter().map(Message::to_value).collect();
    v[1]["content"] = json!(format!(
        "turn 0: please look at the next module; note {FACT}"
    ));
    let input = Request::from_value(Value::Array(v), Format::Auto)
        .unwrap()
        .messages;
    let mut c = config();
    c.max_context_tokens = Some(3_000);
    let m = CompactManager::builder(c)
        .without_storage()
        .build()
        .unwrap();
    let out = m.preflight("s1", input).await.unwrap();
    assert!(out.report.summary_version.is_some(), "{:?}", out.report);
    assert!(
        !out.messages
            .iter()
            .any(|m| m.plain_text().starts_with("turn 0:")),
        "turn 0's request was folded: {:#?}",
        out.messages
            .iter()
            .map(|m| m.plain_text().chars().take(60).collect::<String>())
            .collect::<Vec<_>>()
    );
    let a = m
        .recall(
            "s1",
            RecallQuery::text("which port does the staging database use?"),
        )
        .await
        .unwrap();
    let hit = a.hits.first().expect("a hit");
    assert_eq!(
        (hit.origin.kind.as_str(), hit.origin.role.as_str()),
        ("message", "user"),
        "{:?}",
        a.hits
    );
    assert!(hit.excerpt.contains("6543"), "{}", hit.excerpt);
    let whole = recall_whole(&m, "s1", &hit.id).await.unwrap();
    assert!(whole.ends_with(FACT), "{whole}");
}

#[tokio::test]
async fn recall_off_keeps_the_plain_placeholder_and_refuses_queries() {
    let mut c = config();
    c.recall.enabled = false;
    let m = CompactManager::builder(c)
        .without_storage()
        .build()
        .unwrap();
    let out = m.preflight("s1", history(8)).await.unwrap();
    let plain = "⟦removed: tool output for read_file (call_id=call_0); reason=context_compaction⟧";
    assert!(
        out.messages
            .iter()
            .any(|m| m.tool_output().as_deref() == Some(plain))
    );
    let e = m.recall("s1", RecallQuery::text("port")).await.unwrap_err();
    assert!(matches!(e, CompactError::Config(_)), "{e}");
}

#[tokio::test]
async fn malformed_queries_are_invalid_input() {
    let m = manager_with(None);
    for q in [
        RecallQuery::default(),
        RecallQuery {
            query: Some("x".into()),
            id: Some("rabcdefgh".into()),
            ..RecallQuery::default()
        },
    ] {
        let e = m.recall("s1", q).await.unwrap_err();
        assert!(matches!(e, CompactError::InvalidInput(_)), "{e}");
    }
    // An id of the wrong shape is simply not there.
    let a = m
        .recall("s1", RecallQuery::id("'; DROP TABLE x; --"))
        .await
        .unwrap();
    assert!(a.entry.is_none());
}

#[tokio::test]
async fn the_tool_handler_answers_a_models_call() {
    let m = manager_with(None);
    let out = m.preflight("s1", history(8)).await.unwrap();
    let (_, rid) = placeholder_ids(&out.messages).remove(0);
    let text = tool::handle(&m, "s1", &json!(format!("{{\"id\":\"{rid}\"}}")))
        .await
        .unwrap();
    assert!(
        text.starts_with(&format!("recall {rid} (read_file src/mod0.rs)")),
        "{text}"
    );
    assert!(text.contains("48213"));
    let text = tool::handle(&m, "s1", &json!({"query": "reserved port", "limit": 2}))
        .await
        .unwrap();
    assert!(text.contains(&format!("[{rid}]")), "{text}");
    let text = tool::handle(&m, "s1", &json!({"bogus": 1})).await.unwrap();
    assert!(text.starts_with("compact_recall: bad arguments"), "{text}");
    let def = tool::openai_chat_tool();
    assert_eq!(def["function"]["name"], tool::TOOL_NAME);
    assert_eq!(tool::anthropic_tool()["input_schema"], tool::parameters());
}

/// The `data` and status of every `compact.recall` span `rec` received.
async fn recall_spans(m: &CompactManager, rec: &CollectingExporter) -> Vec<(Value, String)> {
    assert!(
        m.dispatcher()
            .flush_async(std::time::Duration::from_secs(30))
            .await
    );
    rec.events()
        .iter()
        .filter_map(|e| e.as_span())
        .filter(|s| s.name.as_deref() == Some("compact.recall"))
        .map(|s| {
            assert_eq!(s.kind.as_deref(), Some("compaction"));
            assert_eq!(s.parent_id, None, "a root span of the session's trace");
            (
                Value::Object(s.data.clone()),
                serde_json::to_value(s.status)
                    .unwrap()
                    .as_str()
                    .unwrap()
                    .to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn every_recall_is_an_event_with_its_ids_and_no_secret() {
    let rec = Arc::new(CollectingExporter::new());
    let m = CompactManager::builder(config())
        .without_storage()
        .exporter(rec.clone())
        .build()
        .expect("manager");
    let out = m.preflight("s1", history(8)).await.unwrap();
    let (_, rid) = placeholder_ids(&out.messages).remove(0);

    let q = RecallQuery {
        limit: Some(3),
        ..RecallQuery::text(format!("which port was reserved, key {SECRET}"))
    };
    let a = m.recall("s1", q).await.unwrap();
    assert!(!a.hits.is_empty());
    m.recall("s1", RecallQuery::id(&rid)).await.unwrap();
    m.recall("s1", RecallQuery::id("rzzzzzzzz")).await.unwrap();
    let text = tool::handle(&m, "s1", &json!({"query": "refund rounding"}))
        .await
        .unwrap();
    assert!(text.contains("refund_rounding"), "{text}");
    assert!(m.recall("s1", RecallQuery::default()).await.is_err());

    let spans = recall_spans(&m, &rec).await;
    assert_eq!(spans.len(), 5, "{spans:?}");
    let (d, status) = &spans[0];
    assert_eq!(status, "ok");
    assert_eq!(d["mode"], "query");
    assert_eq!(d["limit"], 3);
    assert_eq!(d["id"], Value::Null);
    assert_eq!(d["hits"], a.hits.len());
    let ids: Vec<&str> = a.hits.iter().map(|h| h.id.as_str()).collect();
    assert_eq!(d["ids"], json!(ids));
    assert!(d["latency_us"].as_u64().is_some());
    let q = d["query"].as_str().unwrap();
    assert!(q.starts_with("which port was reserved"), "{q}");
    assert!(!q.contains(SECRET), "the query is redacted: {q}");
    for (d, _) in &spans {
        assert!(!d.to_string().contains("48213"), "no recalled text: {d}");
    }

    let (d, status) = &spans[1];
    assert_eq!(status, "ok");
    assert_eq!(
        (&d["mode"], &d["id"], &d["hits"], &d["ids"], &d["query"]),
        (
            &json!("id"),
            &json!(rid),
            &json!(1),
            &json!([rid]),
            &Value::Null
        )
    );
    let (d, _) = &spans[2];
    assert_eq!((&d["hits"], &d["ids"]), (&json!(0), &json!([])));
    let (d, _) = &spans[3];
    assert_eq!(d["query"], "refund rounding");
    assert!(d["hits"].as_u64().unwrap() >= 1);
    let (d, status) = &spans[4];
    assert_eq!(status, "error");
    assert!(d["error"].as_str().is_some_and(|e| !e.is_empty()), "{d}");
}

/// A history of `turns` tool calls in `wire` (`chat`, `responses`,
/// `anthropic`) and its `read_file` tool, in that wire's shapes.
fn wire_request(wire: &str, turns: usize) -> (Vec<Message>, Vec<Value>) {
    let mut items = Vec::new();
    for t in 0..turns {
        let id = format!("call_{t}");
        let ask = format!("turn {t}: please look at the next module");
        let args = json!({"path": format!("src/mod{t}.rs")});
        match wire {
            "chat" => {
                items.push(json!({"role": "user", "content": ask}));
                items.push(json!({"role": "assistant", "content": null, "tool_calls": [
                    {"id": id, "type": "function", "function": {"name": "read_file", "arguments": args.to_string()}}
                ]}));
                items.push(json!({"role": "tool", "tool_call_id": id, "content": output(t)}));
                items.push(json!({"role": "assistant", "content": format!("turn {t} done")}));
            }
            "responses" => {
                items.push(json!({"role": "user", "content": ask}));
                items.push(json!({"type": "function_call", "call_id": id, "name": "read_file", "arguments": args.to_string()}));
                items.push(
                    json!({"type": "function_call_output", "call_id": id, "output": output(t)}),
                );
                items.push(json!({"role": "assistant", "content": format!("turn {t} done")}));
            }
            _ => {
                items.push(json!({"role": "user", "content": ask}));
                items.push(json!({"role": "assistant", "content": [
                    {"type": "tool_use", "id": id, "name": "read_file", "input": args}
                ]}));
                items.push(json!({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": id, "content": output(t)}
                ]}));
                items.push(json!({"role": "assistant", "content": format!("turn {t} done")}));
            }
        }
    }
    items.push(json!({"role": "user", "content": "now fix the failing refund test"}));
    let params = json!({"type": "object", "properties": {"path": {"type": "string"}}});
    let tool = match wire {
        "chat" => {
            json!({"type": "function", "function": {"name": "read_file", "description": "Read a file", "parameters": params}})
        }
        "responses" => {
            json!({"type": "function", "name": "read_file", "description": "Read a file", "parameters": params})
        }
        _ => json!({"name": "read_file", "description": "Read a file", "input_schema": params}),
    };
    let format = match wire {
        "chat" => Format::Chat,
        "responses" => Format::Responses,
        _ => Format::Anthropic,
    };
    let messages = Request::from_value(Value::Array(items), format)
        .expect("fixture decodes")
        .messages;
    (messages, vec![tool])
}

fn advertising(on: bool) -> CompactManager {
    let mut c = config();
    c.recall.advertise = on;
    CompactManager::builder(c)
        .without_storage()
        .build()
        .expect("manager")
}

/// A forced compaction of `wire`'s request (so a summary is written).
async fn compact_wire(
    m: &CompactManager,
    session: &str,
    wire: &str,
    tools: Option<Vec<Value>>,
) -> (compact_middleware::PreflightOutcome, Vec<Value>) {
    let (messages, own) = wire_request(wire, 8);
    let tools = tools.unwrap_or(own);
    let out = m
        .preflight_with(
            session,
            compact_middleware::PreflightRequest {
                messages,
                tools: tools.clone(),
                forced: Some(compact_middleware::trigger::Forced::Manual),
                ..Default::default()
            },
        )
        .await
        .expect("preflight");
    (out, tools)
}

fn summary_text(out: &compact_middleware::PreflightOutcome) -> String {
    out.messages
        .iter()
        .map(Message::plain_text)
        .find(|t| t.starts_with("COMPACT-SUMMARY"))
        .unwrap_or_else(|| panic!("no summary in {:?}", out.report))
}

#[tokio::test]
async fn advertise_adds_the_tool_in_the_requests_wire_and_a_summary_line() {
    let m = advertising(true);
    for (wire, expected) in [
        ("chat", tool::openai_chat_tool()),
        ("responses", tool::openai_responses_tool()),
        ("anthropic", tool::anthropic_tool()),
    ] {
        let (out, tools) = compact_wire(&m, &format!("adv-{wire}"), wire, None).await;
        assert_eq!(out.tools.len(), 2, "{wire}");
        assert_eq!(
            out.tools[0], tools[0],
            "{wire}: the caller's tools first, unchanged"
        );
        assert_eq!(out.tools[1], expected, "{wire}");
        assert!(tool::is_recall_tool(&out.tools[1]));
        let summary = summary_text(&out);
        assert!(summary.ends_with(tool::SUMMARY_LINE), "{wire}: {summary}");
        assert_eq!(summary.matches("compact_recall").count(), 1, "{wire}");
        // What the line promises is there: the compacted text answers.
        let a = m
            .recall(&format!("adv-{wire}"), RecallQuery::text("reserved port"))
            .await
            .unwrap();
        assert!(
            a.hits.first().is_some_and(|h| h.excerpt.contains("48213")),
            "{wire}: {a:?}"
        );
    }
    // With no tools of its own, the messages' wire decides.
    let (out, _) = compact_wire(&m, "adv-bare", "anthropic", Some(Vec::new())).await;
    assert_eq!(out.tools, vec![tool::anthropic_tool()]);
    let (out, _) = compact_wire(&m, "adv-bare-r", "responses", Some(Vec::new())).await;
    assert_eq!(out.tools, vec![tool::openai_responses_tool()]);
    // A request that has the tool already gets it once.
    let (_, own) = wire_request("chat", 1);
    let with = vec![own[0].clone(), tool::openai_chat_tool()];
    let (out, _) = compact_wire(&m, "adv-twice", "chat", Some(with.clone())).await;
    assert_eq!(out.tools, with);
    // The next call's summary (v2) keeps one line: it is not in the body
    // the summarizer rolls forward.
    let mut next = out.messages.clone();
    next.extend(wire_request("chat", 12).0.into_iter().skip(32));
    let again = m
        .preflight_with(
            "adv-twice",
            compact_middleware::PreflightRequest {
                messages: next,
                tools: with.clone(),
                forced: Some(compact_middleware::trigger::Forced::Manual),
                ..Default::default()
            },
        )
        .await
        .expect("second preflight");
    let summary = summary_text(&again);
    assert!(summary.starts_with("COMPACT-SUMMARY v2"), "{summary}");
    assert_eq!(summary.matches(tool::SUMMARY_LINE).count(), 1, "{summary}");
}

#[tokio::test]
async fn advertise_off_changes_neither_tools_nor_summaries() {
    let off = advertising(false);
    let on = advertising(true);
    for wire in ["chat", "responses", "anthropic"] {
        let (a, tools) = compact_wire(&off, "same", wire, None).await;
        let (b, _) = compact_wire(&on, "same", wire, None).await;
        assert_eq!(a.tools, tools, "{wire}: off leaves the tools alone");
        let (sa, sb) = (summary_text(&a), summary_text(&b));
        assert!(!sa.contains("compact_recall"), "{wire}: {sa}");
        assert_eq!(
            sb.strip_suffix(tool::SUMMARY_LINE)
                .map(|s| s.trim_end_matches('\n')),
            Some(sa.as_str()),
            "{wire}: on adds exactly the line"
        );
    }
    // recall.enabled off: advertise alone does nothing.
    let mut c = config();
    c.recall.enabled = false;
    c.recall.advertise = true;
    let m = CompactManager::builder(c)
        .without_storage()
        .build()
        .expect("manager");
    let (out, tools) = compact_wire(&m, "s", "chat", None).await;
    assert_eq!(out.tools, tools);
    assert!(!summary_text(&out).contains("compact_recall"));
}

mod props {
    use compact_middleware::recall::{RecallIndex, RecallQuery};
    use proptest::prelude::*;

    use crate::recall_support::tool_history;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// Whatever one session indexed, its ids give its own text back,
        /// and neither its ids nor its words answer in another session.
        #[test]
        fn ids_round_trip_and_stay_in_their_session(
            outputs in proptest::collection::vec("[a-z]{3,8}( [a-z]{3,8}){0,12}", 1..8),
        ) {
            let index = RecallIndex::open(":memory:").unwrap();
            let messages = tool_history(&outputs);
            index.add_messages("alpha", 1, &messages, &|s: &str| s.to_owned()).unwrap();
            let key = index.key("alpha");
            for (i, o) in outputs.iter().enumerate() {
                let rid = key.output_id(&format!("call_{i}"), o);
                let mine = index.recall("alpha", &RecallQuery::id(&rid)).unwrap();
                prop_assert_eq!(mine.entry.map(|e| e.text), Some(o.clone()));
                let theirs = index.recall("beta", &RecallQuery::id(&rid)).unwrap();
                prop_assert!(theirs.entry.is_none());
                let words = index.recall("beta", &RecallQuery::text(o.clone())).unwrap();
                prop_assert!(words.hits.is_empty());
                let found = index.recall("alpha", &RecallQuery { limit: Some(20), ..RecallQuery::text(o.clone()) }).unwrap();
                prop_assert!(found.hits.iter().any(|h| h.id == rid), "{:?}", found.hits);
            }
            // Indexing the same history again adds nothing.
            let n = index.count("alpha").unwrap();
            prop_assert_eq!(index.add_messages("alpha", 2, &messages, &|s: &str| s.to_owned()).unwrap(), 0);
            prop_assert_eq!(index.count("alpha").unwrap(), n);
        }
    }
}

/// `path` made as the first release wrote it: the same tables, no
/// recorded version.
fn unversion(path: &std::path::Path) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch("DROP TABLE recall_version").unwrap();
}

#[tokio::test]
async fn an_index_written_before_versions_is_migrated_and_keeps_its_ids() {
    use compact_middleware::recall::SQLITE_SCHEMA_VERSION;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("recall.sqlite3");
    let (rid, n) = {
        let index = Arc::new(RecallIndex::open(&path).unwrap());
        assert_eq!(index.schema_version().unwrap(), SQLITE_SCHEMA_VERSION);
        let m = manager_with(Some(index.clone()));
        let out = m.preflight("s1", history(8)).await.unwrap();
        m.flush_recall(None).await;
        (
            placeholder_ids(&out.messages).remove(0).1,
            index.count("s1").unwrap(),
        )
    };
    unversion(&path);
    let index = Arc::new(RecallIndex::open(&path).unwrap());
    assert_eq!(index.schema_version().unwrap(), SQLITE_SCHEMA_VERSION);
    assert_eq!(index.count("s1").unwrap(), n);
    let m = manager_with(Some(index));
    let e = m.recall("s1", RecallQuery::id(&rid)).await.unwrap().entry;
    assert!(e.is_some(), "the migrated index answers the ids it had");
    let out = m.preflight("s1", history(8)).await.unwrap();
    assert_eq!(placeholder_ids(&out.messages).remove(0).1, rid);
}

#[test]
fn a_newer_index_file_is_refused_naming_it_and_both_versions() {
    use compact_middleware::recall::SQLITE_SCHEMA_VERSION;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("recall.sqlite3");
    drop(RecallIndex::open(&path).unwrap());
    let newer = SQLITE_SCHEMA_VERSION + 1;
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute("UPDATE recall_version SET version = ?1", [newer])
        .unwrap();
    let e = RecallIndex::open(&path).unwrap_err().to_string();
    assert!(e.contains(&path.display().to_string()), "{e}");
    assert!(e.contains(&format!("version {newer}")), "{e}");
    assert!(e.contains(&format!("({SQLITE_SCHEMA_VERSION})")), "{e}");
    // Through the configuration, the key is named too; the file is untouched.
    let mut c = config();
    c.recall.path = Some(path.display().to_string());
    let e = CompactManager::builder(c)
        .without_storage()
        .build()
        .unwrap_err()
        .to_string();
    assert!(e.contains("recall.path") && e.contains("newer"), "{e}");
    let v: i64 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("SELECT version FROM recall_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, newer);
}

/// Two writers on one index file (two processes, or a restarted manager
/// while the last one's writes finish) both get their entries in: a
/// writer waits for the other's transaction instead of failing at once.
#[test]
fn two_writers_on_one_file_both_get_their_entries_in() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("recall.sqlite3");
    let a = Arc::new(RecallIndex::open(&path).unwrap());
    let b = Arc::new(RecallIndex::open(&path).unwrap());
    let messages = history(8);
    let writers: Vec<_> = [a.clone(), b]
        .into_iter()
        .enumerate()
        .map(|(w, index)| {
            let messages = messages.clone();
            std::thread::spawn(move || {
                for round in 0..20 {
                    let session = format!("w{w}-{round}");
                    let pending = index.prepare(&session, &messages);
                    assert!(!pending.is_empty());
                    index
                        .write(pending, 1, &|s: &str| s.to_owned())
                        .unwrap_or_else(|e| panic!("writer {w}, round {round}: {e}"));
                }
            })
        })
        .collect();
    for w in writers {
        w.join().expect("a writer failed");
    }
    let n = a.count("w0-0").unwrap();
    assert!(n > 0);
    for w in 0..2 {
        for round in 0..20 {
            assert_eq!(a.count(&format!("w{w}-{round}")).unwrap(), n);
        }
    }
}
