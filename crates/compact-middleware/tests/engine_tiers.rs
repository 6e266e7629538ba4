//! One readable fixture per tier and per mode of the compaction engine, the
//! error paths, the reactive and manual entry points, continuation, and the
//! regression tests of engine bugs found by `engine_props`.
//!
//! Every call is also checked against docs/design.md §12 invariants 1-5
//! (`support::invariants`). Each fixture first asserts its own precondition
//! (that the history really triggers, or really fits), so a change in token
//! counts cannot turn a test into one that passes vacuously.

mod manager_support;
mod support;

use compact_middleware::config::{Mode, Policy, Role as CfgRole};
use compact_middleware::manager::ContinuationKind;
use compact_middleware::model::{Format, Message, Request, Role};
use compact_middleware::pipeline::Tier;
use compact_middleware::pipeline::cap_text;
use compact_middleware::{CompactError, CompactManager, PreflightOutcome, PreflightRequest};
use manager_support::policy_manager;
use proptest::prelude::*;
use serde_json::{Value, json};
use support::invariants::{Tracker, check_call, is_capped_form, is_summary_shaped};

// ---------------------------------------------------------------- helpers

fn msgs(v: Value) -> Vec<Message> {
    Request::from_value(v, Format::Auto)
        .expect("fixture decodes")
        .messages
}

/// `n` words of varied prose tagged with `tag` (about one token per word).
fn prose(tag: &str, n: usize) -> String {
    const W: [&str; 12] = [
        "the", "service", "latency", "graph", "shows", "a", "steady", "climb", "after", "each",
        "deploy", "window",
    ];
    let mut s = format!("[{tag}]");
    for i in 0..n {
        s.push(' ');
        s.push_str(W[(i * 7 + tag.len()) % W.len()]);
    }
    s
}

/// A tool output of `chars` characters, with a recognisable head and tail.
fn log_output(name: &str, chars: usize) -> String {
    let mut s = format!("HEAD of {name} output\n");
    let mut i = 0;
    while s.len() < chars - 20 {
        s.push_str(&format!("line {i}: status=ok latency={}ms\n", i % 97));
        i += 1;
    }
    s.push_str("TAIL: 3 errors total");
    s
}

/// One chat turn: user text, optionally a tool call and its result, a reply.
fn turn(t: usize, tool: Option<(&str, usize)>, words: usize) -> Vec<Value> {
    let mut out =
        vec![json!({"role": "user", "content": format!("turn {t}: {}", prose("ask", words))})];
    if let Some((name, chars)) = tool {
        let id = format!("call_{t}");
        out.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": name, "arguments": format!("{{\"path\":\"src/mod{t}.rs\"}}")}}
        ]}));
        out.push(json!({"role": "tool", "tool_call_id": id, "content": log_output(name, chars)}));
    }
    out.push(json!({"role": "assistant", "content": format!("turn {t} answer: {}", prose("reply", words))}));
    out
}

fn history(system: bool, turns: impl IntoIterator<Item = Vec<Value>>) -> Vec<Message> {
    let mut v = Vec::new();
    if system {
        v.push(json!({"role": "system", "content": "You are a careful coding agent."}));
    }
    for t in turns {
        v.extend(t);
    }
    msgs(Value::Array(v))
}

/// Runs one preflight and checks invariants 1-5 on it.
async fn call(
    m: &CompactManager,
    tracker: &mut Tracker,
    sent: Vec<Message>,
    forced: Option<compact_middleware::trigger::Forced>,
) -> Result<PreflightOutcome, CompactError> {
    let result = m
        .preflight_with(
            "fixture",
            PreflightRequest {
                messages: sent.clone(),
                forced,
                note: forced.map(|_| "fixture".to_string()),
                ..PreflightRequest::default()
            },
        )
        .await;
    if let Err(e) = check_call(m, tracker, &sent, &[], &result) {
        panic!("invariant violated: {e}");
    }
    result
}

async fn ok(m: &CompactManager, tracker: &mut Tracker, sent: Vec<Message>) -> PreflightOutcome {
    call(m, tracker, sent, None).await.expect("preflight")
}

fn text(m: &Message) -> String {
    m.plain_text()
}

fn summaries(out: &[Message]) -> Vec<&Message> {
    out.iter().filter(|m| is_summary_shaped(m)).collect()
}

/// The defaults, without keeping the task: these fixtures pin down each
/// tier on histories where the first user message is just the oldest turn.
/// Keeping the task and reducing an agent's rounds have their own fixtures
/// (`the_task_…`, `an_agent_run_…`).
fn policy() -> Policy {
    Policy {
        keep_task: false,
        ..Policy::default()
    }
}

// ------------------------------------------------------ tier 1: cap_text

/// The parts of a capped output: head, removed, original total, tail. The
/// kept head may itself contain marker-like text, so the marker is the one
/// whose counts add up.
fn parse_capped(capped: &str) -> Option<(&str, usize, usize, &str)> {
    capped.match_indices("\n⟦truncated: ").find_map(|(at, m)| {
        let rest = &capped[at + m.len()..];
        let (removed, rest) = rest.split_once(" of ")?;
        let (total, rest) = rest.split_once(" chars")?;
        let end = rest.find("⟧\n")?;
        let tail = &rest[end + "⟧\n".len()..];
        let (removed, total): (usize, usize) = (removed.parse().ok()?, total.parse().ok()?);
        let head = &capped[..at];
        (removed + head.chars().count() + tail.chars().count() == total)
            .then_some((head, removed, total, tail))
    })
}

/// The shortest marker `cap_text` may write for an output of `total` chars.
fn minimal_marker_chars(total: usize) -> usize {
    format!("\n⟦truncated: {total} of {total} chars⟧\n")
        .chars()
        .count()
}

fn arb_output() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z \n]{0,2000}",
        "(\\PC|\n){0,600}",
        // Text that looks like our marker but is not ours.
        "[a-z]{0,300}\n⟦truncated: [0-9]{1,4} of [0-9]{1,4} chars⟧\n[a-z]{0,300}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn cap_text_never_grows_and_stays_within_its_bound(
        text in arb_output(),
        max_chars in 0usize..1500,
        name in "[a-z_]{1,40}",
        call_id in "[A-Za-z0-9_]{1,40}",
    ) {
        let total = text.chars().count();
        // A look-alike whose counts agree with the text around it is our
        // marker as far as anyone can tell: the text is then a capped output
        // whose original had the marker's size.
        let original_size = match parse_capped(&text) {
            Some((h, removed, original, t))
                if removed + h.chars().count() + t.chars().count() == original => original,
            _ => total,
        };
        match cap_text(&text, max_chars, &name, &call_id) {
            Some(capped) => {
                let n = capped.chars().count();
                prop_assert!(n < total, "{n} >= original {total}");
                prop_assert!(n <= max_chars.max(minimal_marker_chars(original_size)), "{n} chars, max {max_chars}");
                let (head, removed, original, tail) = parse_capped(&capped).expect("a marker");
                prop_assert_eq!(original, original_size);
                prop_assert!(text.starts_with(head) && text.ends_with(tail));
                prop_assert_eq!(removed + head.chars().count() + tail.chars().count(), original_size);
            }
            None => prop_assert!(
                total <= max_chars || minimal_marker_chars(total) >= total,
                "{total} chars left uncapped at {max_chars}"
            ),
        }
    }

    #[test]
    fn cap_text_is_idempotent(
        text in arb_output(),
        max_chars in 0usize..1500,
        name in "[a-z_]{1,40}",
        call_id in "[A-Za-z0-9_]{1,40}",
    ) {
        let once = cap_text(&text, max_chars, &name, &call_id).unwrap_or(text);
        prop_assert_eq!(cap_text(&once, max_chars, &name, &call_id), None);
    }

    #[test]
    fn recapping_keeps_the_original_size_and_ends(
        text in "[a-z \n]{200,3000}",
        first in 100usize..2000,
        second in 0usize..2000,
        name in "[a-z_]{1,40}",
        call_id in "[A-Za-z0-9_]{1,40}",
    ) {
        let total = text.chars().count();
        let Some(once) = cap_text(&text, first, &name, &call_id) else {
            return Ok(());
        };
        let Some(twice) = cap_text(&once, second, &name, &call_id) else {
            return Ok(());
        };
        let n = twice.chars().count();
        prop_assert!(n < once.chars().count());
        prop_assert!(n <= second.max(minimal_marker_chars(total)));
        let (head, removed, original, tail) = parse_capped(&twice).expect("a marker");
        prop_assert_eq!(original, total, "the marker keeps the original size");
        prop_assert!(text.starts_with(head) && text.ends_with(tail));
        prop_assert_eq!(removed + head.chars().count() + tail.chars().count(), total);
        // And a third cap at the same size changes nothing.
        prop_assert_eq!(cap_text(&twice, second, &name, &call_id), None);
    }
}

#[test]
fn a_cap_below_the_marker_never_lengthens_the_output() {
    let text = "x".repeat(25);
    // Even the minimal marker is longer than the text: nothing to gain.
    assert_eq!(cap_text(&text, 10, "read_file", "call_0"), None);
    let text = "y".repeat(400);
    let capped = cap_text(&text, 10, "read_file", "call_0").expect("capped");
    assert_eq!(capped, "\n⟦truncated: 400 of 400 chars⟧\n");
    // A larger cap that still cannot hold the full marker keeps what fits.
    let capped = cap_text(&text, 60, "read_file", "call_0").expect("capped");
    assert_eq!(capped.chars().count(), 60);
    assert!(capped.starts_with('y') && capped.ends_with('y'), "{capped}");
}

#[test]
fn recapping_reports_the_original_size() {
    let text: String = (0..5000).map(|i| format!("line {i}\n")).collect();
    let total = text.chars().count();
    let once = cap_text(&text, 2000, "read_file", "call_0").expect("capped");
    assert!(once.contains(&format!(
        " of {total} chars removed from tool output for read_file (call_id=call_0)"
    )));
    let twice = cap_text(&once, 500, "read_file", "call_0").expect("recapped");
    assert!(twice.chars().count() <= 500);
    let (head, removed, original, tail) = parse_capped(&twice).expect("a marker");
    assert_eq!(original, total);
    assert_eq!(removed, total - head.chars().count() - tail.chars().count());
    assert!(text.starts_with(head) && text.ends_with(tail));
    assert!(twice.contains(&format!("{removed} of {total} chars removed from tool output for read_file (call_id=call_0); reason=tool_result_budget⟧")));
}

// ---------------------------------------------------------------- tier 1

#[tokio::test]
async fn tier1_caps_an_oversized_tool_output_keeping_head_and_tail() {
    let m = policy_manager(policy(), 20_000);
    let mut tracker = Tracker::new();
    let input = history(true, [turn(0, Some(("read_file", 60_000)), 20)]);
    let original = input[3].tool_output().unwrap().into_owned();
    let out = ok(&m, &mut tracker, input.clone()).await;
    let r = &out.report;
    assert!(r.triggered && r.tokens_before > r.budget, "{r:?}");
    assert_eq!(r.tiers, vec![Tier::ToolResultBudget]);
    assert_eq!((r.capped, r.cleared, r.summarized, r.dropped), (1, 0, 0, 0));
    assert!(r.target_reached && r.tokens_after <= r.target);
    assert_eq!(out.messages.len(), input.len());
    let capped = out.messages[3].tool_output().unwrap().into_owned();
    assert!(capped.chars().count() <= 10_000);
    assert!(capped.starts_with("HEAD of read_file output\n"));
    assert!(capped.ends_with("TAIL: 3 errors total"));
    assert!(capped.contains(
        "chars removed from tool output for read_file (call_id=call_0); reason=tool_result_budget⟧"
    ));
    assert!(is_capped_form(&original, &capped, 10_000));
    assert!(out.messages[3].is_compacted());
    for i in [0, 1, 2, 4] {
        assert_eq!(out.messages[i].to_value(), input[i].to_value());
    }
    // Capping twice is a no-op: the capped output fits, nothing to do.
    let again = ok(&m, &mut tracker, out.messages.clone()).await;
    assert!(!again.report.triggered);
    assert_eq!(again.messages, out.messages);
}

// ---------------------------------------------------------------- tier 2

/// `n` turns with one tool call each, alternating two tools.
fn tool_turns(n: usize, chars: usize) -> Vec<Message> {
    history(
        true,
        (0..n).map(|t| {
            let name = if t % 2 == 0 { "read_file" } else { "run_tests" };
            turn(t, Some((name, chars)), 10)
        }),
    )
}

#[tokio::test]
async fn tier2_clears_old_tool_io_with_the_seed_placeholder() {
    let p = Policy {
        keep_recent_turns: 2,
        keep_tool_io_pairs: 3,
        ..policy()
    };
    let m = policy_manager(p, 12_000);
    let input = tool_turns(8, 5_000);
    let out = ok(&m, &mut Tracker::new(), input.clone()).await;
    let r = &out.report;
    assert!(r.tokens_before >= (0.85 * 12_000.0) as usize, "{r:?}");
    assert_eq!(r.tiers, vec![Tier::ClearToolIo], "{r:?}");
    assert_eq!((r.cleared, r.summarized, r.dropped), (5, 0, 0));
    assert!(r.tokens_after <= r.target);
    assert_eq!(out.messages.len(), input.len());
    for t in 0..5 {
        let name = if t % 2 == 0 { "read_file" } else { "run_tests" };
        let result = &out.messages[1 + t * 4 + 2];
        assert_eq!(
            result.tool_output().unwrap(),
            format!(
                "⟦removed: tool output for {name} (call_id=call_{t}); reason=context_compaction⟧"
            )
        );
        // Arguments stay without clear_tool_inputs.
        assert_eq!(out.messages[1 + t * 4 + 1], input[1 + t * 4 + 1]);
    }
    // Turn 5 is a kept tool pair, turns 6-7 are recent: all unchanged.
    assert_eq!(out.messages[21..], input[21..]);
}

#[tokio::test]
async fn tier2_clears_tool_inputs_when_configured() {
    let p = Policy {
        keep_recent_turns: 2,
        keep_tool_io_pairs: 3,
        clear_tool_inputs: true,
        ..policy()
    };
    let m = policy_manager(p, 12_000);
    let out = ok(&m, &mut Tracker::new(), tool_turns(8, 5_000)).await;
    assert_eq!(out.report.tiers, vec![Tier::ClearToolIo]);
    let call = out.messages[2].to_value();
    let args = call["tool_calls"][0]["function"]["arguments"]
        .as_str()
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(args).unwrap(),
        json!("⟦removed: tool input for read_file (call_id=call_0); reason=context_compaction⟧")
    );
    assert_eq!(call["tool_calls"][0]["id"], "call_0");
    // Outputs and inputs of five groups.
    assert_eq!(out.report.cleared, 10);
}

// ---------------------------------------------------------------- tier 3

/// Chatty turns without tools, each planting an identifier, a constraint
/// and a decision.
fn fact_turn(t: usize) -> Vec<Value> {
    vec![
        json!({"role": "user", "content": format!(
            "Ticket TKT-{}: the importer in zone {t} must never exceed {} MB of memory.",
            1000 + t, 100 + t)}),
        json!({"role": "assistant", "content": format!(
            "We decided to use shard layout L{t} because the hot keys move daily. {}",
            prose("why", 200))}),
    ]
}

#[tokio::test]
async fn tier3_folds_the_remainder_into_one_rolling_summary() {
    let p = Policy {
        keep_recent_turns: 3,
        summary_max_pct: 0.3,
        ..policy()
    };
    let m = policy_manager(p, 5_000);
    let mut tracker = Tracker::new();
    let input = history(true, (0..18).map(fact_turn));
    let out = ok(&m, &mut tracker, input.clone()).await;
    let r = &out.report;
    assert!(r.triggered, "{r:?}");
    assert_eq!(r.tiers, vec![Tier::Summarize]);
    assert_eq!(r.summary_version, Some(1));
    assert_eq!(r.summarized, 30);
    assert!(r.tokens_after <= r.target);
    // Layout: pinned system prompt, the summary, the last 3 turns verbatim.
    assert_eq!(out.messages.len(), 1 + 1 + 6);
    assert_eq!(out.messages[0], input[0]);
    let s = &out.messages[1];
    assert_eq!(s.role(), Role::User);
    assert!(text(s).starts_with("COMPACT-SUMMARY v1\n"));
    assert_eq!(s.meta().unwrap()["compact_summary_version"], 1);
    assert_eq!(out.messages[2..], input[input.len() - 6..]);
    for t in 0..15 {
        assert!(
            text(s).contains(&format!("TKT-{}", 1000 + t)),
            "lost TKT-{}",
            1000 + t
        );
    }
    assert!(text(s).contains("must never exceed 100 MB of memory"));
    for t in 0..15 {
        let decision =
            format!("We decided to use shard layout L{t} because the hot keys move daily.");
        assert!(text(s).contains(&decision), "lost {decision:?}");
    }

    // Second round, mode (a): our output plus six new turns.
    let mut next = out.messages.clone();
    next.extend(history(false, (18..30).map(fact_turn)));
    let out2 = ok(&m, &mut tracker, next).await;
    assert_eq!(out2.report.summary_version, Some(2));
    assert_eq!(out2.report.continuation, ContinuationKind::OutputPrefix);
    let all = summaries(&out2.messages);
    assert_eq!(all.len(), 1, "exactly one summary");
    let s2 = text(all[0]);
    assert!(s2.starts_with("COMPACT-SUMMARY v2\n"));
    assert!(!out2.messages.contains(s), "the v1 message was replaced");
    for t in 0..27 {
        assert!(
            s2.contains(&format!("TKT-{}", 1000 + t)),
            "v2 lost TKT-{}",
            1000 + t
        );
    }
}

#[tokio::test]
async fn tier3_summary_role_is_configurable() {
    for (role, want) in [
        (CfgRole::Assistant, Role::Assistant),
        (CfgRole::System, Role::System),
    ] {
        let p = Policy {
            keep_recent_turns: 3,
            summary_role: role,
            summary_max_pct: 0.3,
            ..policy()
        };
        let m = policy_manager(p, 5_000);
        let mut tracker = Tracker::new();
        let out = ok(&m, &mut tracker, history(true, (0..18).map(fact_turn))).await;
        let s = summaries(&out.messages);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].role(), want);
        // A system-role summary is ours, not pinned: the next round replaces it.
        let mut next = out.messages.clone();
        next.extend(history(false, (18..30).map(fact_turn)));
        let out2 = ok(&m, &mut tracker, next).await;
        assert_eq!(out2.report.summary_version, Some(2));
        assert_eq!(summaries(&out2.messages).len(), 1);
    }
}

// ---------------------------------------------------------------- tier 4

#[tokio::test]
async fn tier4_reduces_keep_counts_when_recent_turns_do_not_fit() {
    // Six recent turns of ~300 tokens each cannot fit a 1_500-token budget.
    let m = policy_manager(policy(), 3_000);
    let input = history(true, (0..10).map(fact_turn));
    let out = ok(&m, &mut Tracker::new(), input.clone()).await;
    let r = &out.report;
    assert!(r.tiers.contains(&Tier::ReduceKeep), "{r:?}");
    assert!(r.tiers.contains(&Tier::Summarize));
    assert!(r.kept.recent_turns < 6 && r.kept.recent_turns >= 1, "{r:?}");
    assert!(r.tokens_after <= r.budget);
    // The turns still kept are the newest ones, verbatim.
    let k = r.kept.recent_turns * 2;
    assert_eq!(
        out.messages[out.messages.len() - k..],
        input[input.len() - k..]
    );
}

#[tokio::test]
async fn last_resort_keeps_pinned_the_latest_user_message_and_the_last_group() {
    let p = Policy {
        hard_cap_buffer: 0,
        ..policy()
    };
    // One big last turn: a user message, three tool groups, a reply.
    let mut last = vec![json!({"role": "user", "content": "turn 9: check the three services"})];
    for i in 0..3 {
        let id = format!("call_s{i}");
        last.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": "probe", "arguments": "{}"}}]}));
        last.push(json!({"role": "tool", "tool_call_id": id, "content": prose(&format!("probe{i}"), 700)}));
    }
    last.push(json!({"role": "assistant", "content": "All three probes answered."}));
    let input = history(true, (0..3).map(fact_turn).chain([last]));
    let m = policy_manager(p, 1_200);
    let out = ok(&m, &mut Tracker::new(), input.clone()).await;
    let r = &out.report;
    assert!(r.tiers.contains(&Tier::ReduceKeep), "{r:?}");
    let values: Vec<Value> = out.messages.iter().map(Message::to_value).collect();
    let n = input.len();
    assert!(values.contains(&input[0].to_value()), "system prompt kept");
    assert!(
        values.contains(&input[n - 8].to_value()),
        "latest user message kept"
    );
    assert_eq!(out.messages.last(), input.last(), "last group kept");
    assert!(
        !values.contains(&input[n - 6].to_value()),
        "older groups of the turn go"
    );
}

// ---------------------------------------------------------------- errors

#[tokio::test]
async fn insufficient_budget_when_pinned_messages_alone_exceed_it() {
    let m = policy_manager(policy(), 3_000);
    let mut v = vec![json!({"role": "system", "content": prose("policy", 2_000)})];
    v.extend(fact_turn(0));
    let input = msgs(Value::Array(v));
    let system_tokens = m.estimator().count_message(&input[0]);
    let err = call(&m, &mut Tracker::new(), input, None)
        .await
        .expect_err("pinned system prompt is over budget");
    match err {
        CompactError::InsufficientBudget {
            pinned_tokens,
            tail_tokens,
            fixed_tokens,
            budget,
            max_tokens,
            guidance,
        } => {
            assert_eq!(pinned_tokens, system_tokens);
            assert_eq!(tail_tokens, 0);
            assert_eq!(fixed_tokens, 3);
            assert_eq!((budget, max_tokens), (1_500, 3_000));
            assert!(guidance.contains("protected"), "{guidance}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn insufficient_budget_when_the_latest_user_message_alone_is_too_big() {
    let m = policy_manager(policy(), 3_000);
    let mut v = vec![json!({"role": "system", "content": "Be brief."})];
    v.extend(fact_turn(0));
    v.push(json!({"role": "user", "content": prose("huge", 2_000)}));
    let err = call(&m, &mut Tracker::new(), msgs(Value::Array(v)), None)
        .await
        .expect_err("latest user message is over budget");
    let CompactError::InsufficientBudget {
        tail_tokens,
        pinned_tokens,
        ..
    } = err
    else {
        panic!("{err:?}")
    };
    assert!(tail_tokens > 1_500, "{tail_tokens}");
    assert!(pinned_tokens < 20);
}

// ------------------------------------------------------- an agent's run

/// One round of a shell agent: its thought and a `bash` call, and the
/// output (about `chars` characters) with mini-swe-agent's return code.
fn agent_round(r: usize, command: &str, output: &str, chars: usize) -> Vec<Value> {
    let id = format!("call_r{r}");
    let mut out = String::from(output);
    let mut i = 0;
    while out.len() < chars {
        out.push_str(&format!("\n{r:03}-{i:04} DEBUG worker heartbeat ok"));
        i += 1;
    }
    vec![
        json!({"role": "assistant", "content": format!("Round {r}: next I look at the parser."), "tool_calls": [
            {"id": id, "type": "function", "function": {"name": "bash", "arguments": json!({"command": command}).to_string()}}
        ]}),
        json!({"role": "tool", "tool_call_id": id, "content": format!("<returncode>0</returncode>\n<output>\n{out}\n</output>")}),
    ]
}

/// The task and `n` rounds: round 3 edits `src/parser.py`, round 5 runs a
/// failing test, the rest read files.
fn agent_run(n: usize, chars: usize) -> (Vec<Value>, Vec<Vec<Value>>) {
    let opening = vec![
        json!({"role": "system", "content": "You are a software engineer working in a shell."}),
        json!({"role": "user", "content": "Fix issue #4711: parse_window() returns None for plural units like '2 weeks'. Do not change the public API."}),
    ];
    let rounds = (0..n)
        .map(|r| match r {
            3 => agent_round(r, "sed -i 's/unit ==/unit.rstrip(\"s\") ==/' src/parser.py", "", chars),
            5 => agent_round(
                r,
                "python -m pytest tests/test_parser.py -q",
                "FAILED tests/test_parser.py::test_plural_weeks - AssertionError\n1 failed, 41 passed in 0.52s",
                chars,
            ),
            _ => agent_round(r, &format!("sed -n '1,80p' src/module_{r}.py"), "def helper():\n    return 1", chars),
        })
        .collect();
    (opening, rounds)
}

#[tokio::test]
async fn an_agent_run_never_refuses_and_keeps_the_task_and_the_last_round() {
    let p = Policy {
        keep_recent_rounds: 4,
        ..Policy::default()
    };
    let m = policy_manager(p, 8_000);
    let (opening, rounds) = agent_run(60, 3_000);
    let mut tracker = Tracker::new();
    let mut sent = msgs(Value::Array(opening.clone()));
    let task = sent[1].clone();
    let mut compacted = 0;
    for (r, round) in rounds.iter().enumerate() {
        sent.extend(msgs(Value::Array(round.clone())));
        // Every call is answered: one task, sixty rounds, no InsufficientBudget.
        let out = call(&m, &mut tracker, sent.clone(), None)
            .await
            .unwrap_or_else(|e| panic!("round {r}: {e}"));
        assert_eq!(
            out.messages[1], task,
            "round {r}: the task is kept as it was"
        );
        let last = msgs(Value::Array(round.clone()));
        assert!(
            out.messages.ends_with(&last),
            "round {r}: the last round is kept whole"
        );
        if out.report.tiers.contains(&Tier::Summarize) {
            compacted += 1;
            // Only rounds of the one turn could go: reported as tier 4.
            assert!(
                out.report.tiers.contains(&Tier::ReduceKeep),
                "{:?}",
                out.report
            );
            assert!(out.report.kept.recent_rounds.is_some(), "{:?}", out.report);
        }
        sent = out.messages;
    }
    assert!(compacted >= 3, "the run compacts: {compacted}");
    // The trail of what the agent did survives every compaction.
    let summary = summaries(&sent)
        .first()
        .map(|m| text(m))
        .expect("a summary");
    assert!(summary.contains("Files worked on:"), "{summary}");
    assert!(summary.contains("src/parser.py (edited"), "{summary}");
    assert!(summary.contains("Commands run:"), "{summary}");
    assert!(
        summary
            .contains("`python -m pytest tests/test_parser.py -q` → exit 0; 1 failed, 41 passed"),
        "{summary}"
    );
    // The task is in the context, not repeated in the summary.
    assert!(
        !summary.contains("Do not change the public API"),
        "{summary}"
    );
}

#[tokio::test]
async fn a_test_run_again_updates_the_summary_and_a_frameworks_nudge_is_not_a_request() {
    let p = Policy {
        keep_recent_rounds: 4,
        ..Policy::default()
    };
    let m = policy_manager(p, 8_000);
    let (opening, mut rounds) = agent_run(60, 3_000);
    let test = "python -m pytest tests/test_parser.py -q";
    rounds[5] = agent_round(
        5,
        test,
        "FAILED tests/test_parser.py::test_plural_weeks - KeyError: 'weeks'\n1 failed, 41 passed in 0.52s",
        3_000,
    );
    rounds[40] = agent_round(40, test, "42 passed in 0.49s", 3_000);
    // The framework complains twice, mid-run, as mini-swe-agent does.
    rounds[20].push(json!({"role": "user", "content": "Your last reply did not contain a tool call. Reply with exactly one tool call. If you have finished the task, run `echo TASK_DONE` as your command."}));
    rounds[30].push(json!({"role": "user", "content": "Tool call error: the arguments of your last tool call are not valid JSON (expected ',' at column 61). Send exactly one tool call whose arguments are a JSON object with a \"command\" string."}));
    let mut tracker = Tracker::new();
    let mut sent = msgs(Value::Array(opening));
    let mut checked = 0;
    for (r, round) in rounds.iter().enumerate() {
        sent.extend(msgs(Value::Array(round.clone())));
        let out = call(&m, &mut tracker, sent.clone(), None)
            .await
            .unwrap_or_else(|e| panic!("round {r}: {e}"));
        sent = out.messages;
        // Once the re-run's output has left the context, the summary says
        // how it went, whatever tier let it go.
        let in_context = sent.iter().any(|m| text(m).contains("42 passed in 0.49s"));
        if r >= 40 && !in_context {
            checked += 1;
            let summary = summaries(&sent)
                .first()
                .map(|m| text(m))
                .unwrap_or_default();
            assert!(
                summary.contains(&format!(
                    "`{test}` → exit 0; 42 passed; failed before: tests/test_parser.py::test_plural_weeks, KeyError: 'weeks'"
                )),
                "round {r}: {summary}"
            );
        }
    }
    assert!(checked > 5, "the re-run left the context: {checked}");
    let summary = summaries(&sent)
        .first()
        .map(|m| text(m))
        .expect("a summary");
    // The first nudge was folded: it is the framework's, not the user's:
    // no goal, no fact (the second one is the latest user message, kept).
    assert!(
        !summary.contains("did not contain a tool call"),
        "{summary}"
    );
    assert!(!summary.contains("TASK_DONE"), "{summary}");
}

#[tokio::test]
async fn insufficient_budget_names_the_task_when_it_alone_does_not_fit() {
    let m = policy_manager(Policy::default(), 3_000);
    let mut v = vec![json!({"role": "system", "content": "Be brief."})];
    v.push(json!({"role": "user", "content": prose("task", 2_000)}));
    for r in 0..3 {
        v.extend(agent_round(r, "ls", "a.py", 200));
    }
    let err = call(&m, &mut Tracker::new(), msgs(Value::Array(v)), None)
        .await
        .expect_err("the task alone is over the budget");
    let CompactError::InsufficientBudget {
        tail_tokens,
        guidance,
        ..
    } = err
    else {
        panic!("{err:?}")
    };
    assert!(tail_tokens > 1_500, "{tail_tokens}");
    assert!(guidance.contains("the task"), "{guidance}");
}

#[tokio::test]
async fn without_keep_task_the_first_request_is_folded_like_any_turn() {
    let p = Policy {
        keep_recent_rounds: 4,
        keep_task: false,
        ..Policy::default()
    };
    let m = policy_manager(p, 8_000);
    let (opening, rounds) = agent_run(40, 3_000);
    let mut sent = msgs(Value::Array(opening));
    let task = sent[1].clone();
    for (r, round) in rounds.iter().enumerate() {
        if r == 20 {
            // A follow-up: from here the latest turn is this one.
            sent.push(Message::user("Also handle '3 days' while you are at it."));
        }
        sent.extend(msgs(Value::Array(round.clone())));
    }
    let out = ok(&m, &mut Tracker::new(), sent.clone()).await;
    assert!(!out.messages.contains(&task));
    assert!(!out.report.kept.task);
    // With the default, the same run keeps it.
    let keeping = policy_manager(
        Policy {
            keep_recent_rounds: 4,
            ..Policy::default()
        },
        8_000,
    );
    let kept = ok(&keeping, &mut Tracker::new(), sent).await;
    assert_eq!(kept.messages[1], task);
    assert!(kept.report.kept.task);
    let summary = summaries(&out.messages)
        .first()
        .map(|m| text(m))
        .expect("a summary");
    assert!(
        summary.contains("Fix issue #4711"),
        "the task is a goal now: {summary}"
    );
}

// ---------------------------------------------------------------- modes

#[tokio::test]
async fn mode_none_never_changes_anything() {
    let p = Policy {
        mode: Mode::None,
        ..policy()
    };
    let m = policy_manager(p, 3_000);
    let input = history(true, (0..10).map(fact_turn));
    let out = ok(&m, &mut Tracker::new(), input.clone()).await;
    assert!(!out.report.triggered);
    assert!(out.report.tiers.is_empty());
    assert!(out.report.tokens_after > out.report.budget);
    assert_eq!(out.messages, input);
    // Forcing does not change that either.
    let forced = m
        .manual_compact("none-2", input.clone(), "please")
        .await
        .unwrap();
    assert_eq!(forced.messages, input);
}

#[tokio::test]
async fn mode_trim_drops_the_oldest_turns_without_a_summary() {
    let p = Policy {
        mode: Mode::Trim,
        keep_recent_turns: 4,
        ..policy()
    };
    let m = policy_manager(p, 3_600);
    let input = history(true, (0..10).map(fact_turn));
    let out = ok(&m, &mut Tracker::new(), input.clone()).await;
    let r = &out.report;
    assert!(r.triggered);
    assert_eq!(r.tiers, vec![Tier::Trim]);
    assert_eq!(r.dropped, 12);
    assert_eq!(r.summary_version, None);
    assert!(summaries(&out.messages).is_empty());
    let mut want = vec![input[0].clone()];
    want.extend_from_slice(&input[input.len() - 8..]);
    assert_eq!(out.messages, want);
}

#[tokio::test]
async fn mode_compact_uses_placeholders_only_and_honours_tool_filters() {
    // include_tools wins over exclude_tools: only run_tests is cleared.
    let p = Policy {
        mode: Mode::Compact,
        keep_recent_turns: 2,
        keep_tool_io_pairs: 2,
        include_tools: vec!["run_tests".into()],
        exclude_tools: vec!["run_tests".into()],
        ..policy()
    };
    let m = policy_manager(p, 12_000);
    let input = tool_turns(8, 5_000);
    let out = ok(&m, &mut Tracker::new(), input.clone()).await;
    let r = &out.report;
    assert!(r.triggered);
    assert_eq!(r.tiers, vec![Tier::ClearToolIo], "{r:?}");
    assert_eq!(r.summary_version, None);
    assert!(
        !r.target_reached,
        "placeholders only, even short of the target"
    );
    assert_eq!(out.messages.len(), input.len());
    // Turns 0-5 are old; only the run_tests outputs (odd turns) are cleared.
    for t in 0..6 {
        let i = 1 + t * 4 + 2;
        let cleared = out.messages[i]
            .tool_output()
            .unwrap()
            .starts_with("⟦removed:");
        assert_eq!(cleared, t % 2 == 1, "turn {t}");
    }

    // exclude_tools alone: read_file is never cleared.
    let p = Policy {
        mode: Mode::Compact,
        keep_recent_turns: 2,
        keep_tool_io_pairs: 2,
        exclude_tools: vec!["read_file".into()],
        ..policy()
    };
    let m = policy_manager(p, 12_000);
    let out = ok(&m, &mut Tracker::new(), input.clone()).await;
    assert_eq!(out.report.tiers, vec![Tier::ClearToolIo]);
    for t in 0..6 {
        let i = 1 + t * 4 + 2;
        let cleared = out.messages[i]
            .tool_output()
            .unwrap()
            .starts_with("⟦removed:");
        assert_eq!(cleared, t % 2 == 1, "turn {t}");
    }
}

#[tokio::test]
async fn mode_compact_escalates_to_the_tiers_when_still_over_the_hard_budget() {
    let p = Policy {
        mode: Mode::Compact,
        keep_recent_turns: 2,
        ..policy()
    };
    // No tool I/O to clear: placeholders cannot help.
    let m = policy_manager(p, 6_000);
    let input = history(true, (0..20).map(fact_turn));
    let out = ok(&m, &mut Tracker::new(), input).await;
    let r = &out.report;
    assert!(r.tokens_before > r.budget);
    assert!(r.tiers.contains(&Tier::Summarize), "{r:?}");
    assert!(r.tokens_after <= r.budget);
}

#[tokio::test]
async fn mode_summarize_is_turn_triggered() {
    let p = Policy {
        mode: Mode::Summarize,
        keep_recent_turns: 2,
        compact_trigger_turns: Some(4),
        ..policy()
    };
    // A generous window: only the turn count triggers.
    let m = policy_manager(p, 100_000);
    let mut tracker = Tracker::new();
    let four = history(true, (0..4).map(fact_turn));
    let out = ok(&m, &mut tracker, four.clone()).await;
    assert!(!out.report.triggered, "4 turns do not trigger");
    assert_eq!(out.messages, four);
    let five = history(true, (0..5).map(fact_turn));
    let out = ok(&m, &mut tracker, five.clone()).await;
    let r = &out.report;
    assert!(
        r.reason.contains("user_turns > compact_trigger_turns"),
        "{}",
        r.reason
    );
    assert_eq!(r.tiers, vec![Tier::Summarize]);
    assert_eq!(r.summary_version, Some(1));
    assert_eq!(out.messages.len(), 1 + 1 + 4);
    assert_eq!(out.messages[2..], five[five.len() - 4..]);
    assert!(text(&out.messages[1]).contains("TKT-1000"));
}

#[tokio::test]
async fn mode_auto_stops_at_the_first_tier_that_reaches_the_target() {
    // Old outputs are big (capped first) and clearing them then suffices.
    let p = Policy {
        keep_recent_turns: 2,
        keep_tool_io_pairs: 2,
        tool_result_max_chars: 3_000,
        ..policy()
    };
    let m = policy_manager(p, 12_000);
    let input = tool_turns(8, 14_000);
    let out = ok(&m, &mut Tracker::new(), input).await;
    let r = &out.report;
    assert_eq!(
        r.tiers,
        vec![Tier::ToolResultBudget, Tier::ClearToolIo],
        "{r:?}"
    );
    assert_eq!(r.capped, 8);
    assert_eq!(r.cleared, 6);
    assert!(r.target_reached);
    assert_eq!(r.summary_version, None);
}

#[tokio::test]
async fn below_the_trigger_nothing_changes() {
    let m = policy_manager(policy(), 128_000);
    let input = tool_turns(6, 2_000);
    let out = ok(&m, &mut Tracker::new(), input.clone()).await;
    assert!(!out.report.triggered);
    assert_eq!(out.report.reason, "usage_pct < trigger_pct");
    assert_eq!(out.messages, input);
    assert_eq!(out.report.tokens_after, out.report.tokens_before);
}

// ---------------------------------------------------------------- entry points

#[tokio::test]
async fn manual_compact_summarizes_even_under_the_target() {
    let m = policy_manager(policy(), 128_000);
    let input = history(true, (0..10).map(fact_turn));
    let out = call(
        &m,
        &mut Tracker::new(),
        input,
        Some(compact_middleware::trigger::Forced::Manual),
    )
    .await
    .unwrap();
    let r = &out.report;
    assert!(r.triggered && r.reason.contains("forced: manual"));
    assert_eq!(r.note.as_deref(), Some("fixture"));
    assert_eq!(r.summary_version, Some(1));
    assert_eq!(r.kept.recent_turns, 6);
}

#[tokio::test]
async fn context_overflow_aims_at_the_reactive_target() {
    let m = policy_manager(policy(), 10_000);
    let input = history(true, (0..30).map(fact_turn));
    let out = call(
        &m,
        &mut Tracker::new(),
        input,
        Some(compact_middleware::trigger::Forced::ContextOverflow),
    )
    .await
    .unwrap();
    let r = &out.report;
    assert!(
        r.tokens_before > 4_000 && !r.reason.contains("usage_pct"),
        "{r:?}"
    );
    assert_eq!(r.target, 4_000, "reactive_target_pct 0.4 of the window");
    assert!(r.tokens_after <= 4_000, "{r:?}");
}

#[tokio::test]
async fn raw_resend_reuses_the_previous_output() {
    let p = Policy {
        keep_recent_turns: 3,
        ..policy()
    };
    let m = policy_manager(p, 5_000);
    let mut tracker = Tracker::new();
    let raw: Vec<Value> = (0..18).flat_map(fact_turn).collect();
    let first = ok(&m, &mut tracker, msgs(Value::Array(raw.clone()))).await;
    assert_eq!(first.report.summary_version, Some(1));
    // The agent sends its full raw history plus one short turn.
    let mut raw2 = raw.clone();
    raw2.push(json!({"role": "user", "content": "and the TKT-1003 status?"}));
    let second = ok(&m, &mut tracker, msgs(Value::Array(raw2))).await;
    let r = &second.report;
    assert_eq!(r.continuation, ContinuationKind::RawPrefix);
    assert_eq!(r.reused_messages, raw.len());
    assert!(
        !r.triggered,
        "our previous output plus one message fits: {r:?}"
    );
    assert_eq!(second.messages[..first.messages.len()], first.messages[..]);
    assert_eq!(summaries(&second.messages).len(), 1);
}

#[tokio::test]
async fn user_text_that_looks_like_a_summary_is_ordinary_content() {
    let p = Policy {
        keep_recent_turns: 2,
        ..policy()
    };
    let m = policy_manager(p, 3_000);
    let mut v: Vec<Value> = (0..10).flat_map(fact_turn).collect();
    let fake =
        json!({"role": "user", "content": "COMPACT-SUMMARY v7\nGoal: pretend this is the summary"});
    v.push(fake.clone());
    v.push(json!({"role": "assistant", "content": "That looks like pasted text."}));
    let out = ok(&m, &mut Tracker::new(), msgs(Value::Array(v))).await;
    assert_eq!(
        out.report.summary_version,
        Some(1),
        "not a continuation of v7"
    );
    assert_eq!(summaries(&out.messages).len(), 1);
    let values: Vec<Value> = out.messages.iter().map(Message::to_value).collect();
    assert!(
        values.contains(&fake),
        "the pasted text is a recent user turn, kept"
    );
}

// ---------------------------------------------------------------- regressions

/// Bug: with the latest turn pinned, no recent group followed the folded
/// span and the summary was appended after the latest user message.
#[tokio::test]
async fn regression_summary_precedes_a_protected_latest_user_message() {
    let p = Policy {
        keep_recent_turns: 1,
        ..policy()
    };
    let m = policy_manager(p, 128_000);
    let mut v: Vec<Value> = (0..5).flat_map(fact_turn).collect();
    let pinned = json!({"role": "user", "content": "Ship it, but only after TKT-2000 is closed.",
        "meta": {"protected": true}});
    v.push(pinned.clone());
    let out = call(
        &m,
        &mut Tracker::new(),
        msgs(Value::Array(v)),
        Some(compact_middleware::trigger::Forced::Manual),
    )
    .await
    .unwrap();
    assert_eq!(out.messages.len(), 2);
    assert!(is_summary_shaped(&out.messages[0]));
    assert_eq!(out.messages[1].to_value(), pinned);
}

/// Bug: the last-resort plan was checked against the budget without the
/// summary message, which was then added anyway and overshot the budget.
#[tokio::test]
async fn regression_no_summary_when_only_the_minimal_tail_fits() {
    let build = |window: usize| {
        policy_manager(
            Policy {
                hard_cap_buffer: 0,
                keep_tool_io_pairs: 1,
                ..policy()
            },
            window,
        )
    };
    let mut v = vec![json!({"role": "system", "content": "Be brief."})];
    v.extend((0..4).flat_map(fact_turn));
    v.push(json!({"role": "user", "content": format!("Last: {}", prose("last", 300))}));
    let input = msgs(Value::Array(v));
    let n = input.len();
    // Exactly the system prompt plus the latest user message, and 2 tokens.
    let probe = build(1_000_000);
    let minimal = probe
        .estimate(&[input[0].clone(), input[n - 1].clone()], &[])
        .t_est;
    let m = build(minimal + 2);
    let out = ok(&m, &mut Tracker::new(), input.clone()).await;
    let r = &out.report;
    assert!(r.tokens_after <= r.budget, "{r:?}");
    assert_eq!(r.summary_version, None);
    assert_eq!(out.messages, vec![input[0].clone(), input[n - 1].clone()]);
    assert_eq!(r.dropped, n - 2);
    assert!(
        r.fallbacks.iter().any(|f| f.fallback == "pruning_only"),
        "{:?}",
        r.fallbacks
    );
}
