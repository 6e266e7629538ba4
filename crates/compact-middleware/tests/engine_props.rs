//! Property tests of the compaction engine: random histories (chat and
//! Responses, parallel tool calls, reasoning items, protected and developer
//! messages, summary look-alikes), random policies and windows from tight to
//! generous, and random follow-up calls in both ways agents call
//! (appending to our output, resending the full raw history), forced and
//! reactive compaction. After every call: docs/design.md §12 invariants 1-5
//! (`support::invariants`), plus per-mode expectations.

mod support;

use compact_middleware::config::{Config, Mode, Policy, Role as CfgRole};
use compact_middleware::model::Message;
use compact_middleware::pipeline::Tier;
use compact_middleware::summarize::Strategy as SumStrategy;
use compact_middleware::trigger::Forced;
use compact_middleware::{CompactError, CompactManager, PreflightRequest};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::{Value, json};
use support::invariants::{Tracker, check_call, is_summary_shaped};
use support::{Wire, arb_rich_history, cache, decode, rt, turn_boundary};

const TOOLS: [&str; 5] = [
    "get_weather",
    "fetch_report",
    "run_tests",
    "read_file",
    "search",
];

fn arb_tools_subset() -> impl Strategy<Value = Vec<String>> {
    prop::sample::subsequence(TOOLS.to_vec(), 0..3)
        .prop_map(|v| v.into_iter().map(str::to_string).collect())
}

fn arb_mode() -> impl Strategy<Value = Mode> {
    prop_oneof![
        4 => Just(Mode::Auto),
        2 => Just(Mode::Compact),
        2 => Just(Mode::Summarize),
        2 => Just(Mode::Trim),
        1 => Just(Mode::None),
    ]
}

fn arb_role() -> impl Strategy<Value = CfgRole> {
    prop_oneof![
        4 => Just(CfgRole::User),
        1 => Just(CfgRole::Assistant),
        1 => Just(CfgRole::System),
        1 => Just(CfgRole::Developer),
    ]
}

fn arb_never_prune() -> impl Strategy<Value = Vec<CfgRole>> {
    prop_oneof![
        6 => Just(vec![CfgRole::System, CfgRole::Developer]),
        1 => Just(vec![CfgRole::System]),
        1 => Just(vec![]),
        1 => Just(vec![CfgRole::System, CfgRole::Developer, CfgRole::Assistant]),
    ]
}

/// A valid configuration (the garde rules hold: target < trigger,
/// reactive <= target, caps >= 200) with a window from tight to generous.
fn arb_config() -> impl Strategy<Value = Config> {
    let shape = (
        arb_mode(),
        1usize..7,
        0usize..5,
        0.3f64..0.95,
        0.2f64..0.95,
        0.3f64..1.0,
        prop_oneof![Just(0usize), 0usize..400, 0usize..2000],
        prop_oneof![200usize..1500, 1500usize..6000, 6000usize..30000],
    );
    let knobs = (
        any::<bool>(),
        arb_tools_subset(),
        arb_tools_subset(),
        arb_role(),
        200usize..4000,
        prop::option::weighted(0.25, 1usize..8),
        prop::bool::weighted(0.85),
        arb_never_prune(),
        prop::sample::select(SumStrategy::ALL.to_vec()),
        0.03f64..0.5,
    );
    // An agent's run (one task, many rounds) against a few rounds kept.
    let agent = (any::<bool>(), 1usize..12);
    (shape, knobs, agent).prop_map(
        |(
            (mode, keep, pairs, trigger, target_f, reactive_f, buffer, room),
            (
                clear_inputs,
                include,
                exclude,
                summary_role,
                max_chars,
                turn_trigger,
                std_flag,
                never,
                strategy,
                summary_pct,
            ),
            (keep_task, keep_rounds),
        )| {
            let target = (trigger * target_f).max(0.05);
            let policy = Policy {
                mode,
                trigger_pct: trigger,
                target_pct: target,
                reactive_target_pct: target * reactive_f,
                hard_cap_buffer: buffer,
                keep_recent_turns: keep,
                keep_tool_io_pairs: pairs,
                roles_never_prune: never,
                protected_flag: if std_flag { "protected" } else { "pin" }.into(),
                strategy,
                compact_trigger_turns: turn_trigger,
                clear_tool_inputs: clear_inputs,
                include_tools: include,
                exclude_tools: exclude,
                tool_result_max_chars: max_chars,
                summary_role,
                summary_max_pct: summary_pct,
                keep_task,
                keep_recent_rounds: keep_rounds,
                ..Policy::default()
            };
            Config {
                max_context_tokens: Some(buffer + room),
                policy,
                ..Config::default()
            }
        },
    )
}

/// How the agent makes its next call.
#[derive(Debug, Clone, Copy)]
enum Next {
    /// Keeps our output (as returned) and appends the next turns.
    Append,
    /// Keeps the provider-facing copy of our output and appends.
    AppendProvider,
    /// Sends its full raw history again, plus the next turns.
    Raw,
    /// `manual_compact` on our output plus the next turns.
    Manual,
    /// `on_context_overflow` on our output plus the next turns.
    Overflow,
}

fn arb_next() -> impl Strategy<Value = (Next, usize)> {
    (
        prop_oneof![
            3 => Just(Next::Append),
            1 => Just(Next::AppendProvider),
            3 => Just(Next::Raw),
            1 => Just(Next::Manual),
            1 => Just(Next::Overflow),
        ],
        0usize..4,
    )
}

fn arb_tools_schema() -> impl Strategy<Value = Vec<Value>> {
    prop_oneof![
        Just(vec![]),
        Just(vec![json!({"type": "function", "function": {
            "name": "read_file", "description": "Read a file from the workspace",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}})]),
    ]
}

fn run_case(
    wire: Wire,
    items: Vec<Value>,
    config: Config,
    tools: Vec<Value>,
    first_turns: usize,
    steps: Vec<(Next, usize)>,
) -> Result<(), TestCaseError> {
    let mode = config.policy.mode;
    let manager = CompactManager::builder(config)
        .count_cache(cache())
        .without_storage()
        .build()
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let all = decode(&items, wire);
    let mut tracker = Tracker::new();
    let mut turns = first_turns;
    let mut raw_end = turn_boundary(&items, turns);
    let mut sent: Vec<Message> = all[..raw_end].to_vec();
    let mut forced = None;
    for step in 0..=steps.len() {
        let req = PreflightRequest {
            messages: sent.clone(),
            tools: tools.clone(),
            forced,
            note: forced.map(|_| "from the property test".into()),
            strict: false,
            usage: None,
            usage_details: None,
            overlays: Default::default(),
        };
        let result = rt().block_on(manager.preflight_with("s", req));
        if let Err(e) = &result
            && !matches!(e, CompactError::InsufficientBudget { .. })
        {
            return Err(TestCaseError::fail(format!("step {step}: {e}")));
        }
        check_call(&manager, &mut tracker, &sent, &tools, &result)
            .map_err(|e| TestCaseError::fail(format!("step {step}: {e}")))?;
        if let Ok(o) = &result {
            let r = &o.report;
            match mode {
                Mode::None => prop_assert!(r.tiers.is_empty() && !r.triggered),
                Mode::Trim => {
                    prop_assert!(r.summary_version.is_none());
                    prop_assert!(
                        !o.messages.iter().any(is_summary_shaped),
                        "trim left a summary"
                    );
                    prop_assert!(
                        r.tiers
                            .iter()
                            .all(|t| matches!(t, Tier::Trim | Tier::ReduceKeep)),
                        "trim ran {:?}",
                        r.tiers
                    );
                }
                _ => {}
            }
            if r.summary_version.is_some() {
                prop_assert!(r.tiers.contains(&Tier::Summarize));
            }
        }
        let Some(&(next, more)) = steps.get(step) else {
            break;
        };
        // The agent's next call. After an error it keeps what it had.
        let base: Vec<Message> = match (&result, next) {
            (Ok(_), Next::Raw) | (Err(_), _) => sent.clone(),
            (Ok(o), Next::AppendProvider) => {
                o.messages.iter().map(Message::provider_copy).collect()
            }
            (Ok(o), _) => o.messages.clone(),
        };
        let base = if matches!(next, Next::Raw) {
            all[..raw_end].to_vec()
        } else {
            base
        };
        turns += more;
        let new_end = turn_boundary(&items, turns);
        sent = base;
        sent.extend(all[raw_end..new_end].iter().cloned());
        raw_end = new_end;
        forced = match next {
            Next::Manual => Some(Forced::Manual),
            Next::Overflow => Some(Forced::ContextOverflow),
            _ => None,
        };
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// Invariants 1-5 after every call of a random session, chat format.
    #[test]
    fn invariants_hold_chat(
        items in arb_rich_history(Wire::Chat, 1..14),
        config in arb_config(),
        tools in arb_tools_schema(),
        first in 1usize..10,
        steps in prop::collection::vec(arb_next(), 0..4),
    ) {
        run_case(Wire::Chat, items, config, tools, first, steps)?;
    }

    /// Invariants 1-5 after every call of a random session, Responses items
    /// (reasoning items bound to their groups).
    #[test]
    fn invariants_hold_responses(
        items in arb_rich_history(Wire::Responses, 1..14),
        config in arb_config(),
        tools in arb_tools_schema(),
        first in 1usize..10,
        steps in prop::collection::vec(arb_next(), 0..4),
    ) {
        run_case(Wire::Responses, items, config, tools, first, steps)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Invariants 1-5 after every call of a random session, Anthropic Messages
    /// (parallel tool_use blocks answered in one user message, signed thinking
    /// blocks, cache_control).
    #[test]
    fn invariants_hold_anthropic(
        items in arb_rich_history(Wire::Anthropic, 1..14),
        config in arb_config(),
        tools in arb_tools_schema(),
        first in 1usize..10,
        steps in prop::collection::vec(arb_next(), 0..4),
    ) {
        run_case(Wire::Anthropic, items, config, tools, first, steps)?;
    }
}

/// An agent's run: one task, then many rounds of tool calls and replies,
/// sent whole (every round is the latest turn's).
fn arb_agent_run(wire: Wire) -> impl Strategy<Value = Vec<Value>> {
    (
        any::<bool>(),
        support::arb_text(),
        prop::collection::vec(support::arb_step(), 5..30),
    )
        .prop_map(move |(system, user, steps)| {
            support::render(
                wire,
                system,
                &[support::TurnPlan {
                    user,
                    protected: false,
                    steps,
                    extra: None,
                }],
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Invariants 1-5 on an agent's run, where only rounds can be reduced:
    /// the task and the last round stay, and InsufficientBudget only when
    /// they alone do not fit (`check_error`).
    #[test]
    fn invariants_hold_agent_runs(
        items in arb_agent_run(Wire::Chat),
        config in arb_config(),
        tools in arb_tools_schema(),
        steps in prop::collection::vec(arb_next(), 0..4),
    ) {
        run_case(Wire::Chat, items, config, tools, 1, steps)?;
    }

    /// The same in Responses items (reasoning bound to its calls).
    #[test]
    fn invariants_hold_agent_runs_responses(
        items in arb_agent_run(Wire::Responses),
        config in arb_config(),
        tools in arb_tools_schema(),
        steps in prop::collection::vec(arb_next(), 0..4),
    ) {
        run_case(Wire::Responses, items, config, tools, 1, steps)?;
    }
}
