//! `policy.cache` (docs/design.md §5 step 5): `off` keeps the decisions of
//! before the cost model, byte for byte; `auto` compacts when it pays, deep
//! enough for the observed growth per call.

use std::sync::Arc;

use compact_middleware::config::Config;
use compact_middleware::model::{Format, Message, Request};
use compact_middleware::state::{SessionStore, SqliteSessionStore};
use compact_middleware::{CompactManager, PreflightOutcome};
use serde_json::{Value, json};

fn manager(config: Config) -> CompactManager {
    CompactManager::builder(config)
        .without_config_exporters()
        .without_storage()
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn config(window: usize, cache: &str) -> Config {
    let mut config: Config = serde_json::from_value(json!({
        "model": "gpt-4o",
        "max_context_tokens": window,
        "policy": {"cache": cache},
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    config.max_context_tokens = Some(window);
    config
}

fn decode(items: Vec<Value>) -> Vec<Message> {
    Request::from_value(Value::Array(items), Format::Chat)
        .unwrap_or_else(|e| panic!("{e}"))
        .messages
}

/// A deterministic agent run: a task, then rounds of one tool call whose
/// output size varies from a few lines to a few hundred.
struct Agent {
    seed: u64,
}

impl Agent {
    fn next(&mut self) -> u64 {
        self.seed = self
            .seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.seed >> 33
    }

    fn start() -> Vec<Message> {
        decode(vec![
            json!({"role": "system", "content": "You are a coding agent. Use the tools; be brief."}),
            json!({"role": "user", "content": "Fix the failing test in services/billing: the ledger total is off by one cent."}),
        ])
    }

    fn round(&mut self, i: usize) -> Vec<Message> {
        let lines = 5 + (self.next() % 120) as usize;
        let file = format!("services/billing/mod{}.rs", self.next() % 17);
        let output: String = (0..lines)
            .map(|l| {
                format!(
                    "{file}:{l}: let total_{l} = ledger.sum(entries_{i}) + fee_{};\n",
                    self.next() % 97
                )
            })
            .collect();
        decode(vec![
            json!({"role": "assistant", "content": format!("Step {i}: reading {file}."), "tool_calls": [{"id": format!("c{i}"), "type": "function",
                   "function": {"name": "read_file", "arguments": format!("{{\"path\":\"{file}\"}}")}}]}),
            json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": output}),
        ])
    }
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Replays the run through `m`, the agent keeping compact's output; returns
/// every outcome.
fn replay(m: &CompactManager, calls: usize) -> Vec<PreflightOutcome> {
    let rt = current_thread();
    let mut agent = Agent { seed: 7 };
    let mut context = Agent::start();
    let mut outcomes = Vec::new();
    for i in 0..calls {
        context.extend(agent.round(i));
        let outcome = rt
            .block_on(m.preflight("s1", std::mem::take(&mut context)))
            .unwrap_or_else(|e| panic!("call {i}: {e}"));
        context = outcome.compacted_messages();
        outcomes.push(outcome);
    }
    outcomes
}

/// Folds the content hashes of every output, in order.
fn digest(outcomes: &[PreflightOutcome]) -> u128 {
    outcomes
        .iter()
        .flat_map(|o| o.messages.iter())
        .fold(0x9e37_79b9_7f4a_7c15_u128, |acc, m| {
            (acc ^ m.content_hash()).wrapping_mul(0x0000_0000_0100_0000_0000_0000_0000_013b)
        })
}

/// The digests of this run's outputs at 8k, 16k and 32k, computed on the
/// engine of before `policy.cache` (main at 8fdf2e3). A deliberate change to
/// what compaction writes (summary text, placeholders) changes them too:
/// then print the new ones and say why in the commit.
const BEFORE: [(usize, u128); 3] = [
    (8_000, 0x2100_0a6a_4519_f1ca_27aa_7171_a8a9_373f),
    (16_000, 0xf29a_a8e2_eab7_680a_b36f_ea8c_10e4_3546),
    (32_000, 0x639c_3c57_8b6f_adba_4151_0ac7_9080_bbef),
];

#[test]
fn cache_off_reproduces_the_outputs_of_before_the_cost_model() {
    for (window, expected) in BEFORE {
        let outcomes = replay(&manager(config(window, "off")), 70);
        let compactions = outcomes.iter().filter(|o| o.report.triggered).count();
        assert!(compactions > 0, "{window}: the run must compact");
        assert_eq!(
            digest(&outcomes),
            expected,
            "{window}: outputs differ from before the cost model ({compactions} compactions): {:#x}",
            digest(&outcomes)
        );
    }
}

/// The predicted input cost of every call of a replay (gpt-4o's list
/// prices, OpenAI's prefix rule), and how many calls broke the prefix.
fn bill(outcomes: &[PreflightOutcome]) -> (f64, usize) {
    let cost = outcomes
        .iter()
        .map(|o| {
            o.report
                .cache
                .as_ref()
                .and_then(|c| c.predicted_input_cost_usd)
                .unwrap_or_else(|| panic!("gpt-4o has a price"))
        })
        .sum();
    (cost, outcomes.iter().filter(|o| o.report.triggered).count())
}

#[test]
fn auto_compacts_a_large_window_when_it_pays_and_the_bill_drops() {
    let off = replay(&manager(config(128_000, "off")), 45);
    let auto = replay(&manager(config(128_000, "auto")), 45);
    let peak = off
        .iter()
        .map(|o| o.report.tokens_before)
        .max()
        .unwrap_or(0);
    assert!(
        peak > 40_000 && peak < 108_800,
        "the run grows well past the floor and stays under the token trigger: {peak}"
    );
    assert!(
        off.iter().all(|o| !o.report.triggered),
        "off never compacts under the trigger"
    );
    let by_cost: Vec<_> = auto.iter().filter(|o| o.report.triggered).collect();
    assert!(!by_cost.is_empty(), "auto compacts");
    for o in &by_cost {
        assert!(
            o.report.reason.starts_with("cost: t_est >= "),
            "{}",
            o.report.reason
        );
        assert!(
            o.report.tokens_before >= 16_000,
            "never below cache_min_tokens"
        );
        assert!(
            o.report.tokens_after < o.report.tokens_before / 2,
            "deep: {} -> {}",
            o.report.tokens_before,
            o.report.tokens_after
        );
    }
    // Runs between compactions: at least ten calls of the observed growth.
    let at: Vec<usize> = auto
        .iter()
        .enumerate()
        .filter(|(_, o)| o.report.triggered)
        .map(|(i, _)| i)
        .collect();
    assert!(
        at.windows(2).all(|w| w[1] - w[0] >= 5),
        "compactions at calls {at:?}"
    );
    let (off_cost, _) = bill(&off);
    let (auto_cost, breaks) = bill(&auto);
    assert!(
        auto_cost < 0.9 * off_cost,
        "auto ${auto_cost:.4} with {breaks} breaks vs off ${off_cost:.4}"
    );
}

#[test]
fn auto_compacts_deeper_when_the_context_grows_fast_and_breaks_less() {
    let off = replay(&manager(config(32_000, "off")), 90);
    let auto = replay(&manager(config(32_000, "auto")), 90);
    let (off_cost, off_breaks) = bill(&off);
    let (auto_cost, auto_breaks) = bill(&auto);
    assert!(
        auto_breaks < off_breaks,
        "breaks: auto {auto_breaks}, off {off_breaks}"
    );
    assert!(
        auto_cost < off_cost,
        "auto ${auto_cost:.4}, off ${off_cost:.4}"
    );
    let depth = |o: &[PreflightOutcome]| {
        o.iter()
            .filter(|o| o.report.triggered)
            .map(|o| o.report.tokens_after)
            .min()
            .unwrap_or(0)
    };
    assert!(
        depth(&auto) < depth(&off),
        "auto aims deeper: {} vs {}",
        depth(&auto),
        depth(&off)
    );
}

#[test]
fn a_restarted_manager_keeps_the_pace() {
    // The pace lives with the session state: a manager on the same SQLite
    // store after a restart plans like the one before it.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let store: Arc<dyn SessionStore> = Arc::new(
        SqliteSessionStore::open(dir.path().join("state.sqlite3"))
            .unwrap_or_else(|e| panic!("{e}")),
    );
    let stored = |window: usize| {
        CompactManager::builder(config(window, "auto"))
            .without_config_exporters()
            .without_storage()
            .session_store(store.clone())
            .build()
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let straight = replay(&manager(config(128_000, "auto")), 60);
    assert!(
        straight
            .iter()
            .any(|o| o.report.reason.starts_with("cost:")),
        "the run compacts on cost"
    );
    let rt = current_thread();
    let mut agent = Agent { seed: 7 };
    let mut context = Agent::start();
    for (i, before) in straight.iter().enumerate() {
        context.extend(agent.round(i));
        // A new manager every call: only the store carries the session.
        let m = stored(128_000);
        let o = rt
            .block_on(m.preflight("s1", std::mem::take(&mut context)))
            .unwrap_or_else(|e| panic!("call {i}: {e}"));
        assert_eq!(
            (o.report.triggered, &o.report.reason),
            (before.report.triggered, &before.report.reason),
            "call {i}"
        );
        context = o.compacted_messages();
    }
}
