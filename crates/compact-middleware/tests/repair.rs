//! `policy.repair`: input whose tool pairing is already broken is reported, rejected,
//! or fixed (orphans dropped, unanswered calls answered with a placeholder in the
//! format's own shape), in each wire format.

use std::sync::Arc;

use compact_middleware::config::{Config, Repair};
use compact_middleware::events::{CollectingExporter, Event};
use compact_middleware::model::{
    Format, Message, Problem, Repaired, Request, missing_result_placeholder, repair, validate,
};
use compact_middleware::{CompactError, CompactManager, PreflightRequest};
use serde_json::{Value, json};

fn decode(v: Value, f: Format) -> Vec<Message> {
    Request::from_value(v, f).expect("decodes").messages
}

fn values(ms: &[Message]) -> Vec<Value> {
    ms.iter().map(Message::to_provider_value).collect()
}

#[test]
fn chat_orphans_go_and_unanswered_calls_get_a_result_after_the_others() {
    let ms = decode(
        json!([
            {"role": "user", "content": "hi"},
            {"role": "tool", "tool_call_id": "ghost", "content": "orphan"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "a", "content": "A"},
            {"role": "tool", "tool_call_id": "a", "content": "A again"},
            {"role": "user", "content": "next"}
        ]),
        Format::Chat,
    );
    let (fixed, done) = repair(ms);
    assert!(validate(&fixed).is_empty(), "{:?}", validate(&fixed));
    assert_eq!(
        done,
        vec![
            Repaired::DroppedOrphan {
                index: 1,
                call_id: "ghost".into()
            },
            Repaired::AnsweredCall {
                index: 2,
                call_id: "b".into()
            },
            Repaired::DroppedDuplicate {
                index: 4,
                call_id: "a".into()
            },
        ]
    );
    assert_eq!(
        values(&fixed),
        vec![
            json!({"role": "user", "content": "hi"}),
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}}]}),
            json!({"role": "tool", "tool_call_id": "a", "content": "A"}),
            json!({"role": "tool", "tool_call_id": "b", "content": missing_result_placeholder("g", "b")}),
            json!({"role": "user", "content": "next"}),
        ]
    );
    // Ours: marked in meta, which the provider never sees.
    assert!(fixed[3].meta().is_some_and(|m| m["repaired"] == true));
    // Nothing to repair: nothing changes.
    let clean = fixed.clone();
    assert_eq!(repair(clean.clone()), (clean, vec![]));
}

#[test]
fn responses_calls_are_answered_with_their_own_output_type() {
    let ms = decode(
        json!([
            {"role": "user", "content": "hi"},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "custom_tool_call", "call_id": "c2", "name": "patch", "input": "diff"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            {"type": "function_call_output", "call_id": "nope", "output": "orphan"},
            {"role": "user", "content": "next"}
        ]),
        Format::Responses,
    );
    let (fixed, _) = repair(ms);
    assert!(validate(&fixed).is_empty());
    let v = values(&fixed);
    // After the run of calls and outputs that follows the call, the orphan gone.
    assert_eq!(v.len(), 6);
    assert_eq!(v[3]["call_id"], "c1");
    assert_eq!(
        v[4],
        json!({"type": "custom_tool_call_output", "call_id": "c2", "output": missing_result_placeholder("patch", "c2")})
    );
    assert_eq!(v[5], json!({"role": "user", "content": "next"}));
}

#[test]
fn anthropic_results_are_blocks_in_the_next_user_message() {
    let ms = decode(
        json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "t", "signature": "sig"},
                {"type": "tool_use", "id": "t1", "name": "read", "input": {}},
                {"type": "tool_use", "id": "t2", "name": "grep", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "file"},
                {"type": "tool_result", "tool_use_id": "ghost", "content": "orphan"},
                {"type": "text", "text": "and also this"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t3", "name": "run", "input": {}}]}
        ]),
        Format::Anthropic,
    );
    let (fixed, done) = repair(ms.clone());
    assert!(validate(&fixed).is_empty(), "{:?}", validate(&fixed));
    assert_eq!(done.len(), 3);
    let v = values(&fixed);
    // The signed message is untouched.
    assert_eq!(fixed[1], ms[1]);
    // The orphan block went; the missing result joined the others, before the text.
    assert_eq!(
        v[2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "file"},
            {"type": "tool_result", "tool_use_id": "t2", "content": missing_result_placeholder("grep", "t2")},
            {"type": "text", "text": "and also this"}]})
    );
    // A call at the end gets a user message of its own.
    assert_eq!(
        v[4],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t3", "content": missing_result_placeholder("run", "t3")}]})
    );
    // A user message whose only block was an orphan goes entirely.
    let ms = decode(
        json!([
            {"role": "user", "content": "hi"},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "?"}]},
            {"role": "assistant", "content": "ok"}
        ]),
        Format::Anthropic,
    );
    let (fixed, _) = repair(ms);
    assert_eq!(fixed.len(), 2);
}

fn broken() -> Vec<Message> {
    decode(
        json!([
            {"role": "user", "content": "hi"},
            {"role": "tool", "tool_call_id": "ghost", "content": "orphan"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "user", "content": "next"}
        ]),
        Format::Chat,
    )
}

fn manager(
    repair: Repair,
    archive: Option<&std::path::Path>,
) -> (CompactManager, Arc<CollectingExporter>) {
    let mut config = Config::default();
    config.policy.repair = repair;
    let events = Arc::new(CollectingExporter::new());
    let mut b = CompactManager::builder(config).exporter(events.clone());
    b = match archive {
        Some(dir) => b.storage(Arc::new(compact_middleware::archive::FsAdapter::new(dir))),
        None => b.without_storage(),
    };
    (b.build().expect("manager"), events)
}

fn token_estimate(events: &CollectingExporter) -> Value {
    let evs = events.events();
    let span = evs
        .iter()
        .filter_map(Event::as_span)
        .find(|s| s.name.as_deref() == Some("compact.token_estimate"))
        .expect("token estimate");
    Value::Object(span.data.clone())
}

#[tokio::test]
async fn report_mode_passes_the_input_on_and_says_what_is_wrong() {
    let (m, events) = manager(Repair::Report, None);
    let o = m.preflight("r", broken()).await.expect("ok");
    assert_eq!(o.messages, broken());
    assert_eq!(o.report.input_problems.len(), 2);
    assert!(o.report.repaired.is_empty());
    m.dispatcher().shutdown(std::time::Duration::from_secs(5));
    let data = token_estimate(&events);
    assert_eq!(
        data["input_problems"],
        json!([
            {"problem": "orphan_result", "index": 1, "call_id": "ghost"},
            {"problem": "unanswered_call", "index": 2, "call_id": "a"}
        ])
    );
}

#[tokio::test]
async fn strict_mode_rejects_and_the_request_flag_is_an_alias() {
    let (m, _) = manager(Repair::Strict, None);
    let e = m.preflight("s", broken()).await.expect_err("rejected");
    assert!(
        matches!(e, CompactError::InvalidInput(ref msg) if msg.contains("ghost")),
        "{e}"
    );
    let (m, _) = manager(Repair::Report, None);
    let e = m
        .preflight_with(
            "s",
            PreflightRequest {
                messages: broken(),
                strict: true,
                ..PreflightRequest::default()
            },
        )
        .await
        .expect_err("rejected");
    assert_eq!(e.kind(), "InvalidInput");
}

#[tokio::test]
async fn fix_mode_repairs_archives_the_input_and_reports_it() {
    let dir = tempfile::tempdir().unwrap();
    let (m, _) = manager(Repair::Fix, Some(dir.path()));
    let o = m.preflight("f", broken()).await.expect("ok");
    assert!(validate(&o.messages).is_empty());
    assert_eq!(
        o.report.input_problems,
        vec![
            Problem::OrphanResult {
                index: 1,
                call_id: "ghost".into()
            },
            Problem::UnansweredCall {
                index: 2,
                call_id: "a".into()
            },
        ]
    );
    assert_eq!(o.report.repaired.len(), 2);
    assert_eq!(
        values(&o.messages)[2]["content"],
        missing_result_placeholder("f", "a")
    );
    // The input as received is in the archive, orphan included.
    let mut found = false;
    for entry in walk(dir.path()) {
        let text = std::fs::read_to_string(&entry).unwrap_or_default();
        found |= text.contains("orphan") && text.contains("ghost");
    }
    assert!(found, "the original input is archived");
    // The agent resends its raw (broken) history plus a new message: the repaired
    // form is reused, not repaired again.
    let mut again = broken();
    again.push(Message::assistant("done"));
    let o2 = m.preflight("f", again).await.expect("ok");
    assert!(
        o2.report.input_problems.is_empty(),
        "{:?}",
        o2.report.input_problems
    );
    assert!(validate(&o2.messages).is_empty());
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}
