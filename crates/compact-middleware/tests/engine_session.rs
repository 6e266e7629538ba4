//! A 200-turn synthetic agent session, in both ways agents call the manager:
//! (a) feeding back each preflight's output plus the next turn, and (b)
//! resending the full raw history every turn. Every call is checked against
//! docs/design.md §12 invariants 1-5; at the end, at least 95% of the identifiers,
//! constraints and decisions planted in user and assistant messages must
//! still be in the context, and in mode (b) each new summary must extend the
//! previous one rather than be rebuilt.

mod support;

use compact_middleware::config::{Config, Policy};
use compact_middleware::manager::ContinuationKind;
use compact_middleware::model::{Format, Message, Request};
use compact_middleware::pipeline::Tier;
use compact_middleware::{CompactManager, PreflightOutcome};
use serde_json::json;
use support::invariants::{Tracker, check_call, is_summary_shaped};

const TURNS: usize = 200;
const WINDOW: usize = 48_000;

/// The facts planted in turn `t`: an identifier, a constraint, a decision
/// (with a reason, see [`REASON`]).
fn facts(t: usize) -> [String; 3] {
    [
        format!("OPS-{}", 4000 + t),
        format!(
            "The rollout of svc-{t} must never exceed {} ms at p99",
            50 + t
        ),
        format!("We decided to pin svc-{t} to build b{}", 7000 + t),
    ]
}

/// The reason given with each decision. A summary short of room shows a
/// decision without it (the fact stays, reported as shrunk); the facts
/// checked are the statements themselves.
const REASON: &str = " because the canary passed.";

/// `n` words of fact-free narration (about a token each).
fn chatter(t: usize, n: usize) -> String {
    const W: [&str; 10] = [
        "the", "suite", "looked", "calm", "and", "nothing", "else", "seemed", "odd", "today",
    ];
    (0..n)
        .map(|i| W[(i * 3 + t) % W.len()])
        .collect::<Vec<_>>()
        .join(" ")
}

fn turn(t: usize) -> Vec<Message> {
    let [ticket, constraint, decision] = facts(t);
    let (constraint, decision) = (format!("{constraint}."), format!("{decision}{REASON}"));
    let id = format!("call_{t:03}");
    let mut out = String::new();
    let mut i = 0;
    while out.len() < 300 {
        out.push_str(&format!("row {i} value={} status=ok; ", (i * 7 + t) % 13));
        i += 1;
    }
    let v = json!([
        {"role": "user", "content": format!("Please handle ticket {ticket} next. {constraint}")},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": "run_tests",
             "arguments": format!("{{\"suite\":\"svc-{t}\"}}")}}]},
        {"role": "tool", "tool_call_id": id, "content": out},
        {"role": "assistant", "content": format!("Tests ran for {ticket}. {decision} {}", chatter(t, 600))},
    ]);
    Request::from_value(v, Format::Chat)
        .expect("turn decodes")
        .messages
}

fn manager() -> CompactManager {
    CompactManager::builder(Config {
        max_context_tokens: Some(WINDOW),
        policy: Policy::default(),
        ..Config::default()
    })
    .without_storage()
    .build()
    .expect("manager")
}

async fn preflight(
    m: &CompactManager,
    session: &str,
    tracker: &mut Tracker,
    sent: Vec<Message>,
) -> PreflightOutcome {
    let result = m.preflight(session, sent.clone()).await;
    if let Err(e) = check_call(m, tracker, &sent, &[], &result) {
        panic!("{session}: invariant violated: {e}");
    }
    result.expect("preflight")
}

fn context_text(ms: &[Message]) -> String {
    ms.iter()
        .map(Message::plain_text)
        .collect::<Vec<_>>()
        .join("\n")
}

fn summary_body(ms: &[Message]) -> Option<String> {
    ms.iter()
        .find(|m| is_summary_shaped(m))
        .map(Message::plain_text)
}

fn planted_in(text: &str, upto: usize) -> Vec<String> {
    (0..upto)
        .flat_map(facts)
        .filter(|f| text.contains(f.as_str()))
        .collect()
}

#[tokio::test]
async fn two_hundred_turns_fed_back_and_resent_raw() {
    let m = manager();
    let system = Request::from_value(
        json!([{"role": "system", "content": "You are the release agent for the payments platform."}]),
        Format::Chat,
    )
    .unwrap()
    .messages;

    // Mode (a): our output plus the next turn. Mode (b): the raw history.
    let (mut ta, mut tb) = (Tracker::new(), Tracker::new());
    let mut a_ctx = system.clone();
    let mut raw = system.clone();
    let mut rounds = 0;
    let mut versions = Vec::new();
    let mut prev_summary: Option<(u32, String)> = None;
    let mut extended = 0;

    for t in 0..TURNS {
        let next = turn(t);
        a_ctx.extend(next.iter().cloned());
        raw.extend(next);

        let a = preflight(&m, "session-a", &mut ta, a_ctx.clone()).await;
        let b = preflight(&m, "session-b", &mut tb, raw.clone()).await;

        for (name, o) in [("a", &a), ("b", &b)] {
            assert!(
                o.report.tokens_after <= o.report.budget,
                "{name} turn {t}: {} > {}",
                o.report.tokens_after,
                o.report.budget
            );
        }
        if t > 0 {
            assert_eq!(a.report.continuation, ContinuationKind::OutputPrefix);
            // Until the first compaction our output is the raw history itself.
            let want = if rounds > 0 {
                ContinuationKind::RawPrefix
            } else {
                ContinuationKind::OutputPrefix
            };
            assert_eq!(b.report.continuation, want, "turn {t}");
            assert_eq!(b.report.reused_messages, raw.len() - 4, "turn {t}");
        }
        // The raw resend works on the same effective input as mode (a),
        // so it produces the same context, turn after turn.
        assert_eq!(
            a.messages, b.messages,
            "turn {t}: modes (a) and (b) diverge"
        );
        assert_eq!(a.report.tiers, b.report.tiers);

        if a.report.triggered {
            rounds += 1;
        }
        if let Some(v) = b.report.summary_version {
            assert!(b.report.tiers.contains(&Tier::Summarize));
            versions.push(v);
        }
        let body = summary_body(&b.messages);
        // The summary changes only in a round that writes a new version,
        // and each new version extends the previous one.
        match (&prev_summary, &body, b.report.summary_version) {
            (Some((_, old)), Some(new), None) => {
                assert_eq!(old, new, "turn {t}: summary churned without a new version")
            }
            (Some((v_old, old)), Some(new), Some(v)) => {
                assert_eq!(v, v_old + 1, "turn {t}: versions go up by one");
                assert!(new.starts_with(&format!("COMPACT-SUMMARY v{v}\n")));
                let carried = planted_in(old, t);
                let kept = carried.iter().filter(|f| new.contains(f.as_str())).count();
                assert!(
                    kept * 100 >= carried.len() * 95,
                    "turn {t}: v{v} keeps {kept} of the {} facts of v{v_old}",
                    carried.len()
                );
                assert!(
                    planted_in(new, t).len() > carried.len(),
                    "turn {t}: v{v} adds the newly folded facts"
                );
                extended += 1;
            }
            (None, Some(_), v) => assert_eq!(v, Some(1), "turn {t}: first summary is v1"),
            (Some(_), None, _) => panic!("turn {t}: the summary disappeared"),
            (None, None, _) => {}
        }
        prev_summary = body.map(|body| (versions.last().copied().unwrap_or(0), body));
        a_ctx = a.messages;
    }

    assert!(rounds >= 4, "only {rounds} compaction rounds");
    assert!(
        versions.len() >= 3,
        "summary versions written: {versions:?}"
    );
    assert_eq!(
        versions,
        (1..=versions.len() as u32).collect::<Vec<_>>(),
        "one new version per summarizing round"
    );
    assert_eq!(extended, versions.len() - 1);

    let text = context_text(&a_ctx);
    let all: Vec<String> = (0..TURNS).flat_map(facts).collect();
    let present = all.iter().filter(|f| text.contains(f.as_str())).count();
    let missing: Vec<&String> = all.iter().filter(|f| !text.contains(f.as_str())).collect();
    assert!(
        present * 100 >= all.len() * 95,
        "{present} of {} planted facts survive; missing e.g. {:?}",
        all.len(),
        &missing[..missing.len().min(10)]
    );
}
