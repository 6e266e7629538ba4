//! What the recall tests share (SQLite in `recall.rs`, PostgreSQL in
//! `postgres_recall.rs`): a history whose tool outputs each hold one fact
//! (one of them a secret that redaction removes), the configuration that
//! clears them, and the placeholders' recall ids.
#![allow(dead_code)]

use compact_middleware::CompactManager;
use compact_middleware::config::{Config, Policy};
use compact_middleware::model::{Format, Message, Request};
use compact_middleware::recall::{RecallQuery, is_recall_id};
use serde_json::{Value, json};

pub(crate) const SECRET: &str = "sk-proj-Zq8vT2mKx9LpR4wN7yB3cH6d";

/// A distinct fact per turn, in a long tool output.
pub(crate) fn fact(t: usize) -> String {
    match t {
        0 => "the payments service reserved port 48213 for the ledger replica".into(),
        1 => format!("deploy credentials: api key {SECRET} rotated yesterday"),
        2 => "test billing::refund_rounding failed at step 12 with assertion left=3 right=4".into(),
        _ => format!("module {t} compiles cleanly with zero warnings"),
    }
}

pub(crate) fn output(t: usize) -> String {
    let mut s = format!("HEAD of turn {t}\n{}\n", fact(t));
    let mut i = 0;
    while s.len() < 5_000 {
        s.push_str(&format!("line {i}: status=ok latency={}ms\n", i % 97));
        i += 1;
    }
    s
}

pub(crate) fn history(turns: usize) -> Vec<Message> {
    history_big(turns, &[])
}

/// What the middle of a [`big_output`] says: what a cap cuts out.
pub(crate) const MIDDLE_FACT: &str =
    "the canary build pinned glibc 2.39 on runner mx-7731 after the linker crash";

/// A tool output of turn `t` far over `policy.tool_result_max_chars`
/// (10,000): a head, [`MIDDLE_FACT`] in its middle, a tail.
pub(crate) fn big_output(t: usize) -> String {
    let filler = |s: &mut String, from: usize, until: usize| {
        let mut i = from;
        while s.len() < until {
            s.push_str(&format!(
                "row {i}: checksum={:08x} ok\n",
                i * 2_654_435_761 % 0xffff_ffff
            ));
            i += 1;
        }
        i
    };
    let mut s = format!("HEAD of big turn {t}\n");
    let i = filler(&mut s, 0, 20_000);
    s.push_str(MIDDLE_FACT);
    s.push('\n');
    filler(&mut s, i, 40_000);
    s.push_str(&format!("TAIL of big turn {t}: 0 errors\n"));
    s
}

/// The messages of turn `t` (user, call, output, reply); its output is
/// `out`.
pub(crate) fn turn(t: usize, out: &str) -> Vec<Value> {
    let id = format!("call_{t}");
    let name = if t.is_multiple_of(2) {
        "read_file"
    } else {
        "run_tests"
    };
    vec![
        json!({"role": "user", "content": format!("turn {t}: please look at the next module")}),
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": name, "arguments": format!("{{\"path\":\"src/mod{t}.rs\"}}")}}
        ]}),
        json!({"role": "tool", "tool_call_id": id, "content": out}),
        json!({"role": "assistant", "content": format!("turn {t} done")}),
    ]
}

/// Turns `from..to` as messages (appended to a history a caller kept).
pub(crate) fn turns(from: usize, to: usize) -> Vec<Message> {
    let v: Vec<Value> = (from..to).flat_map(|t| turn(t, &output(t))).collect();
    Request::from_value(Value::Array(v), Format::Auto)
        .expect("fixture decodes")
        .messages
}

/// [`history`] whose turns in `big` have a [`big_output`].
pub(crate) fn history_big(turns: usize, big: &[usize]) -> Vec<Message> {
    let mut v = vec![json!({"role": "system", "content": "You are a careful coding agent."})];
    for t in 0..turns {
        let out = if big.contains(&t) {
            big_output(t)
        } else {
            output(t)
        };
        v.extend(turn(t, &out));
    }
    Request::from_value(Value::Array(v), Format::Auto)
        .expect("fixture decodes")
        .messages
}

/// `(call id, recall id)` of every capped output whose marker carries one.
pub(crate) fn cap_ids(messages: &[Message]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for m in messages {
        for (call, text) in m.tool_outputs() {
            if let Some(at) = text.find("\n⟦truncated: ") {
                let marker = &text[at..];
                let rid = marker
                    .split_once("— recall ")
                    .and_then(|(_, r)| r.split_once('⟧'))
                    .map(|(rid, _)| rid)
                    .unwrap_or_else(|| panic!("no recall id in the marker of {call}"));
                out.push((call.to_owned(), rid.to_owned()));
            }
        }
    }
    out
}

/// The whole text of entry `rid`, read page by page.
pub(crate) async fn recall_whole(m: &CompactManager, session: &str, rid: &str) -> Option<String> {
    let e = m.recall(session, RecallQuery::id(rid)).await.ok()?.entry?;
    let mut text = e.text;
    let mut next = e.next_offset;
    while let Some(off) = next {
        let q = RecallQuery {
            offset: Some(off),
            ..RecallQuery::id(rid)
        };
        let page = m.recall(session, q).await.ok()?.entry?;
        text.push_str(&page.text);
        next = page.next_offset;
    }
    Some(text)
}

/// One user message, then a `run` call and its output per item of
/// `outputs` (call ids `call_0`, `call_1`, …): what an index is given.
pub(crate) fn tool_history(outputs: &[String]) -> Vec<Message> {
    let mut v = vec![json!({"role": "user", "content": "go"})];
    for (i, o) in outputs.iter().enumerate() {
        let id = format!("call_{i}");
        v.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": "run", "arguments": "{}"}}
        ]}));
        v.push(json!({"role": "tool", "tool_call_id": id, "content": o}));
    }
    Request::from_value(Value::Array(v), Format::Auto)
        .expect("fixture decodes")
        .messages
}

pub(crate) fn config() -> Config {
    let mut c = Config {
        max_context_tokens: Some(12_000),
        policy: Policy {
            keep_task: false,
            keep_recent_turns: 2,
            keep_tool_io_pairs: 3,
            ..Policy::default()
        },
        ..Config::default()
    };
    c.recall.enabled = true;
    c.recall.path = Some(":memory:".into());
    c
}

/// `(call id, recall id)` of every cleared output that carries one.
pub(crate) fn placeholder_ids(messages: &[Message]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for m in messages {
        for (call, text) in m.tool_outputs() {
            if let Some(rest) = text.strip_prefix("⟦removed: tool output for ") {
                let rid = rest
                    .split("— recall ")
                    .nth(1)
                    .and_then(|r| r.strip_suffix('⟧'))
                    .unwrap_or_else(|| panic!("no recall id in {text}"));
                out.push((call.to_owned(), rid.to_owned()));
            }
        }
    }
    out
}

// The behaviour both backends must have, each on a manager with recall on.

/// Cleared outputs' placeholders carry ids that give the original back,
/// whole over its pages, with where it came from (the secret redacted).
pub(crate) async fn ids_give_the_original_back(m: &CompactManager) {
    let input = history(8);
    let out = m.preflight("s1", input.clone()).await.expect("preflight");
    assert!(out.report.cleared >= 3, "{:?}", out.report);
    let ids = placeholder_ids(&out.messages);
    assert!(ids.len() >= 3, "{ids:?}");
    for (call, rid) in &ids {
        assert!(is_recall_id(rid), "{rid}");
        let t: usize = call.trim_start_matches("call_").parse().unwrap();
        let a = m.recall("s1", RecallQuery::id(rid)).await.unwrap();
        let e = a.entry.expect("the placeholder's id is in the index");
        assert_eq!(e.origin.call_id.as_deref(), Some(call.as_str()));
        assert_eq!(e.origin.file, Some(format!("src/mod{t}.rs")));
        assert_eq!(e.origin.turn as usize, t + 1);
        assert_eq!(e.total_chars, output(t).chars().count().min(e.total_chars));
        let mut text = e.text.clone();
        let mut next = e.next_offset;
        while let Some(off) = next {
            let q = RecallQuery {
                offset: Some(off),
                ..RecallQuery::id(rid)
            };
            let page = m.recall("s1", q).await.unwrap().entry.unwrap();
            assert_eq!(page.offset, off);
            text.push_str(&page.text);
            next = page.next_offset;
        }
        if t == 1 {
            assert!(!text.contains(SECRET));
            assert!(text.contains("REDACTED"), "{}", &text[..200]);
        } else {
            assert_eq!(text, output(t));
        }
    }
}

/// A question in natural words ranks the output that answers it first,
/// its excerpt holding the fact; scores are best first.
pub(crate) async fn natural_words_rank_the_cleared_output_first(m: &CompactManager) {
    let out = m.preflight("s1", history(8)).await.expect("preflight");
    let ids = placeholder_ids(&out.messages);
    let id_of = |call: &str| ids.iter().find(|(c, _)| c == call).map(|(_, r)| r.clone());
    let a = m
        .recall(
            "s1",
            RecallQuery::text("which port was reserved for the ledger?"),
        )
        .await
        .unwrap();
    assert!(!a.hits.is_empty());
    assert_eq!(Some(a.hits[0].id.clone()), id_of("call_0"), "{:?}", a.hits);
    assert!(a.hits[0].excerpt.contains("48213"), "{}", a.hits[0].excerpt);
    assert_eq!(a.hits[0].origin.tool.as_deref(), Some("read_file"));
    let a = m
        .recall("s1", RecallQuery::text("refund rounding test failure"))
        .await
        .unwrap();
    assert_eq!(Some(a.hits[0].id.clone()), id_of("call_2"), "{:?}", a.hits);
    assert!(a.hits.windows(2).all(|w| w[0].score >= w[1].score));
}

/// Another session's ids and words answer nothing.
pub(crate) async fn other_sessions_answer_nothing(m: &CompactManager) {
    let out = m.preflight("alice", history(8)).await.expect("preflight");
    m.preflight("bob", history(1)).await.expect("preflight");
    let (_, rid) = placeholder_ids(&out.messages).remove(0);
    assert!(
        m.recall("alice", RecallQuery::id(&rid))
            .await
            .unwrap()
            .entry
            .is_some()
    );
    let a = m.recall("bob", RecallQuery::id(&rid)).await.unwrap();
    assert!(a.entry.is_none() && a.hits.is_empty());
    let a = m
        .recall("bob", RecallQuery::text("reserved port ledger"))
        .await
        .unwrap();
    assert!(a.hits.is_empty(), "{:?}", a.hits);
    let a = m
        .recall("carol", RecallQuery::text("reserved port ledger"))
        .await
        .unwrap();
    assert!(a.hits.is_empty());
}

/// A secret that redaction removed is not found, whichever way it is
/// asked for; the words around it are.
pub(crate) async fn redacted_secrets_are_not_found(m: &CompactManager) {
    m.preflight("s1", history(8)).await.expect("preflight");
    for q in [
        SECRET,
        "Zq8vT2mKx9LpR4wN7yB3cH6d",
        "sk proj Zq8vT2mKx9LpR4wN7yB3cH6d",
    ] {
        let a = m.recall("s1", RecallQuery::text(q)).await.unwrap();
        assert!(
            a.hits
                .iter()
                .all(|h| !h.excerpt.contains("Zq8vT2mKx9LpR4wN7yB3cH6d")),
            "{q}: {:?}",
            a.hits
        );
        assert!(a.hits.is_empty(), "{q}: {:?}", a.hits);
    }
    // The words around it are there; the secret is not.
    let a = m
        .recall("s1", RecallQuery::text("deploy credentials rotated"))
        .await
        .unwrap();
    assert!(!a.hits.is_empty());
    let e = m
        .recall("s1", RecallQuery::id(&a.hits[0].id))
        .await
        .unwrap()
        .entry
        .unwrap();
    assert!(e.text.contains("deploy credentials") && !e.text.contains(SECRET));
}

/// A capped output's marker carries a recall id that gives the whole
/// original back, the middle the cap cut included; its words find it.
pub(crate) async fn capped_outputs_give_the_original_back(m: &CompactManager) {
    let out = m.preflight("s1", history_big(3, &[2])).await.unwrap();
    assert!(out.report.capped >= 1, "{:?}", out.report);
    let caps = cap_ids(&out.messages);
    assert_eq!(caps.len(), 1, "{caps:?}");
    let (call, rid) = &caps[0];
    assert_eq!(call, "call_2");
    let capped = out
        .messages
        .iter()
        .find_map(|m| {
            m.tool_outputs()
                .into_iter()
                .find(|(c, _)| c == call)
                .map(|(_, t)| t.into_owned())
        })
        .unwrap();
    assert!(!capped.contains(MIDDLE_FACT), "the cap cut the middle");
    // By id: the whole original, the middle the cap cut included.
    assert_eq!(recall_whole(m, "s1", rid).await, Some(big_output(2)));
    // By words: the middle ranks that entry first.
    let a = m
        .recall(
            "s1",
            RecallQuery::text("which glibc did the canary build pin?"),
        )
        .await
        .unwrap();
    assert_eq!(
        a.hits.first().map(|h| h.id.as_str()),
        Some(rid.as_str()),
        "{:?}",
        a.hits
    );
    assert!(
        a.hits[0].excerpt.contains("glibc 2.39"),
        "{}",
        a.hits[0].excerpt
    );
}
