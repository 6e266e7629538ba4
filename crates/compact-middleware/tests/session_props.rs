//! Property tests of durable session state (docs/design.md §13): any
//! interleaving of feed-back (the agent appends to our output, with or
//! without our `meta`), raw resends (the agent's full raw history), forced
//! compactions, restarts (a new `CompactManager` on the same SQLite file) and
//! two managers alternating on one file answers exactly as one manager
//! that never restarts, and every answer keeps docs/design.md §12's
//! invariants (checked with `compact_middleware::invariants`): no nested
//! summary header, and the summary version moves forward by exactly 1 per
//! summary written.

mod support;

use std::path::Path;
use std::sync::Arc;

use compact_middleware::config::{Config, Mode};
use compact_middleware::invariants::{check_error, check_output};
use compact_middleware::model::Message;
use compact_middleware::state::{SessionStore, SqliteSessionStore};
use compact_middleware::trigger::Forced;
use compact_middleware::{CompactError, CompactManager, PreflightOutcome, PreflightRequest};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::Value;
use support::invariants::Tracker;
use support::{Wire, arb_history, cache, decode, decorate, rt, turn_boundary};

/// The summary header; a message holding it twice nests a summary.
const HEADER: &str = "COMPACT-SUMMARY v";

/// What the agent (or its host) does next.
#[derive(Debug, Clone, Copy)]
enum Op {
    /// Appends `n` turns to our last output and calls.
    FeedBack(usize),
    /// The same with our output provider-clean (`meta` stripped), as an
    /// agent that sends it to the provider and keeps what it sent.
    FeedBackClean(usize),
    /// Resends its full raw history plus `n` turns.
    Raw(usize),
    /// Forced compaction of our last output.
    Manual,
    /// The process restarts: the durable side's current manager is
    /// replaced by a new one on the same file, before the next call.
    Restart,
    /// The next calls go to the other manager on the same file.
    Switch,
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0usize..3).prop_map(Op::FeedBack),
        2 => (0usize..3).prop_map(Op::FeedBackClean),
        3 => (0usize..3).prop_map(Op::Raw),
        1 => Just(Op::Manual),
        3 => Just(Op::Restart),
        3 => Just(Op::Switch),
    ]
}

fn arb_config() -> impl Strategy<Value = Config> {
    (
        prop_oneof![
            3 => Just(Mode::Auto),
            1 => Just(Mode::Summarize),
            1 => Just(Mode::Compact),
        ],
        prop::sample::select(vec![1_800usize, 2_500, 4_000, 8_000]),
        1usize..4,
        0usize..4,
    )
        .prop_map(|(mode, window, keep_turns, keep_pairs)| {
            let mut c = Config {
                max_context_tokens: Some(window),
                ..Config::default()
            };
            c.policy.mode = mode;
            c.policy.hard_cap_buffer = 200;
            c.policy.keep_recent_turns = keep_turns;
            c.policy.keep_tool_io_pairs = keep_pairs;
            c.telemetry.exporter = compact_middleware::config::ExporterKind::None;
            c
        })
}

/// A history without summary look-alikes (the engine's property tests
/// cover those): here, any header twice in a message is a nesting.
fn arb_session(wire: Wire) -> impl Strategy<Value = Vec<Value>> {
    (
        arb_history(wire, 2..14),
        prop::collection::vec(
            any::<u8>().prop_map(|m| if m % 16 == 3 { 4 } else { m }),
            1..24,
        ),
    )
        .prop_map(move |(items, marks)| decorate(items, &marks, wire))
}

fn manager(config: &Config, store: Option<Arc<dyn SessionStore>>) -> CompactManager {
    let mut b = CompactManager::builder(config.clone())
        .count_cache(cache())
        .without_storage();
    if let Some(store) = store {
        b = b.session_store(store);
    }
    b.build().expect("manager")
}

/// A manager on the SQLite file at `path`, through its own connection: a
/// separate process in all but name.
fn durable(config: &Config, path: &Path) -> CompactManager {
    let store = SqliteSessionStore::open(path).expect("store");
    manager(config, Some(Arc::new(store)))
}

fn values(messages: &[Message]) -> Vec<Value> {
    messages.iter().map(Message::to_value).collect()
}

/// The same answer: the same messages (our `meta` included) and the same
/// account of what was done.
fn same(
    a: &Result<PreflightOutcome, CompactError>,
    b: &Result<PreflightOutcome, CompactError>,
) -> Result<(), String> {
    match (a, b) {
        (Ok(a), Ok(b)) => {
            if values(&a.messages) != values(&b.messages) {
                return Err("the messages differ".into());
            }
            let (ra, rb) = (&a.report, &b.report);
            let key = |r: &compact_middleware::Report| {
                (
                    r.triggered,
                    r.tiers.clone(),
                    r.summary_version,
                    r.continuation,
                    r.reused_messages,
                    r.tokens_before,
                    r.tokens_after,
                )
            };
            if key(ra) != key(rb) {
                return Err(format!(
                    "the reports differ: {:?} != {:?}",
                    key(ra),
                    key(rb)
                ));
            }
            Ok(())
        }
        (Err(a), Err(b)) if a.to_string() == b.to_string() => Ok(()),
        (a, b) => Err(format!(
            "{:?} != {:?}",
            a.as_ref().map(|_| "ok"),
            b.as_ref().map(|_| "ok")
        )),
    }
}

fn run_case(
    wire: Wire,
    items: Vec<Value>,
    config: Config,
    first_turns: usize,
    ops: Vec<Op>,
) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.sqlite3");
    let reference = manager(&config, None);
    let mut managers = [durable(&config, &path), durable(&config, &path)];
    let mut current = 0usize;
    let all = decode(&items, wire);
    let policy = &config.policy;

    let mut tracker = Tracker::new();
    let mut turns = first_turns;
    let mut raw_end = turn_boundary(&items, turns);
    let mut sent: Vec<Message> = all[..raw_end].to_vec();
    let mut forced = None;
    let mut version = 0u32;
    let mut pending = ops.into_iter();
    for step in 0.. {
        let req = PreflightRequest {
            messages: sent.clone(),
            forced,
            note: forced.map(|_| "from the property test".into()),
            ..PreflightRequest::default()
        };
        let expected = rt().block_on(reference.preflight_with("s", req.clone()));
        let got = rt().block_on(managers[current].preflight_with("s", req));
        let fail = |what: String| TestCaseError::fail(format!("step {step}: {what}"));
        same(&expected, &got).map_err(|e| fail(format!("durable != in-process: {e}")))?;

        let (input, continuation) = tracker.effective(&sent);
        let estimator = managers[current].estimator();
        let violations = match &got {
            Ok(o) => check_output(policy, estimator, &input, &[], &o.messages, &o.report),
            Err(e) => check_error(policy, estimator, &input, e),
        };
        prop_assert!(violations.is_empty(), "step {}: {:?}", step, violations);
        if let Ok(o) = &got {
            prop_assert_eq!(o.report.continuation, continuation, "step {}", step);
            for m in &o.messages {
                prop_assert!(
                    m.plain_text().matches(HEADER).count() <= 1,
                    "step {}: a nested summary: {}",
                    step,
                    m.plain_text()
                );
            }
            prop_assert!(
                o.messages
                    .iter()
                    .filter(|m| m.plain_text().contains(HEADER))
                    .count()
                    <= 1,
                "step {}: several summaries",
                step
            );
            if let Some(v) = o.report.summary_version {
                prop_assert_eq!(v, version + 1, "step {}: the version must move by 1", step);
                version = v;
            }
            tracker.record(&sent, o);
        }

        // The next call.
        let mut op = pending.next();
        while let Some(Op::Restart | Op::Switch) = op {
            match op {
                Some(Op::Restart) => managers[current] = durable(&config, &path),
                _ => current = 1 - current,
            }
            op = pending.next();
        }
        let Some(op) = op else { break };
        let last = match &got {
            Ok(o) => o.messages.clone(),
            // After an error the agent keeps what it sent.
            Err(_) => sent.clone(),
        };
        let (base, more) = match op {
            Op::FeedBack(n) => (last, n),
            Op::FeedBackClean(n) => (last.iter().map(Message::provider_copy).collect(), n),
            Op::Raw(n) => (all[..raw_end].to_vec(), n),
            Op::Manual => (last, 0),
            Op::Restart | Op::Switch => unreachable!("consumed above"),
        };
        turns += more;
        let end = turn_boundary(&items, turns);
        sent = base;
        sent.extend(all[raw_end..end].iter().cloned());
        raw_end = end;
        forced = matches!(op, Op::Manual).then_some(Forced::Manual);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(160))]

    /// Chat Completions sessions.
    #[test]
    fn durable_sessions_answer_as_one_process_chat(
        items in arb_session(Wire::Chat),
        config in arb_config(),
        first in 1usize..6,
        ops in prop::collection::vec(arb_op(), 1..12),
    ) {
        run_case(Wire::Chat, items, config, first, ops)?;
    }

    /// Responses items (reasoning items bound to their groups).
    #[test]
    fn durable_sessions_answer_as_one_process_responses(
        items in arb_session(Wire::Responses),
        config in arb_config(),
        first in 1usize..6,
        ops in prop::collection::vec(arb_op(), 1..12),
    ) {
        run_case(Wire::Responses, items, config, first, ops)?;
    }
}
