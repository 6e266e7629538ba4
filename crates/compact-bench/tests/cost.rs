//! The cost suite end to end on a small corpus: a generated coding session
//! that compacts at 16k, and a held-out ci-logs session that fits 128k,
//! under every policy. What it must show is a property of the cache rules
//! and of the policies, not a figure.

use compact_bench::corpus::{self, Agent, Corpus, SessionShape, Transcript};
use compact_bench::cost::cache::openai_cached;
use compact_bench::cost::peers::Peer;
use compact_bench::cost::{self, Options, Policy, Run};
use compact_bench::retention::CallingMode;
use compact_middleware::model::Format;
use compact_middleware::tokens::REPLY_PRIMING;

const OPENAI: usize = 0;
const ANTHROPIC_5M: usize = 1;

/// A coding agent's session (seed 1) of `turns` rounds whose outputs are
/// `output_chars` long.
fn coding(turns: (usize, usize), output_chars: (usize, usize)) -> Transcript {
    corpus::generate(
        1,
        Agent::Coding,
        Format::Chat,
        &SessionShape {
            turns,
            output_chars,
        },
    )
    .transcript()
    .expect("decodes")
}

fn transcripts() -> Vec<Transcript> {
    let ci = Corpus::CiLogs.generate(3, Format::Chat);
    vec![
        coding((30, 34), (300, 6_000)),
        ci.transcript().expect("decodes"),
    ]
}

/// A coding session that grows slowly (short outputs, many rounds): its
/// planned run is the economic order quantity, not the ten-call minimum, so
/// the price it is planned for shows in when it compacts.
fn slow_session() -> Vec<Transcript> {
    vec![coding((60, 64), (300, 1_500))]
}

/// The runs this file checks the counter on, with compact's token
/// triggers alone (`policy.cache: off`): at 128k a session that fits is
/// then never touched, which the checks below lean on. `cache_policy.rs`
/// (compact-middleware) covers what `auto` changes.
fn runs(ts: &[Transcript]) -> (Vec<Run>, Options) {
    let mut config = compact_middleware::config::Config::default();
    config.policy.cache = compact_middleware::config::CachePolicy::Off;
    let opts = Options {
        windows: vec![16_000, 128_000],
        threads: 2,
        config,
        // One replay of compact's, priced under every rule.
        plan_for: Some(cost::Pricing::OpenAi),
        ..Options::quick()
    };
    (cost::run_all(ts, &opts).expect("every run finishes"), opts)
}

fn find(runs: &[Run], t: usize, window: usize, policy: Policy) -> &Run {
    runs.iter()
        .find(|r| r.transcript == t && r.window == window && r.policy == policy)
        .expect("run")
}

#[test]
fn the_cache_serves_what_a_policy_leaves_in_place() {
    let ts = transcripts();
    let (runs, opts) = runs(&ts);
    assert_eq!(runs.len(), ts.len() * 2 * Policy::ALL.len());
    for r in &runs {
        assert_eq!(r.calls.len(), ts[r.transcript].turns.len());
        for (k, c) in r.calls.iter().enumerate() {
            // Only a compaction breaks the prefix: a policy that keeps what
            // it sent and appends never does.
            assert!(
                !c.broke || c.compacted,
                "{:?} at {}: call {k} broke without compacting",
                r.policy,
                r.window
            );
            if k == 0 {
                assert_eq!(c.tokens[OPENAI].cache_read, 0);
                continue;
            }
            // Every call that did not break reads the whole previous
            // request from OpenAI's cache, by its 1,024/128 rule.
            let prev = r.calls[k - 1].prompt - REPLY_PRIMING;
            if !c.broke {
                assert_eq!(
                    c.tokens[OPENAI].cache_read,
                    openai_cached(prev),
                    "{:?} at {}: call {k}",
                    r.policy,
                    r.window
                );
            } else {
                assert!(c.tokens[OPENAI].cache_read <= openai_cached(prev));
            }
            for p in [OPENAI, ANTHROPIC_5M] {
                assert_eq!(c.tokens[p].prompt(), c.prompt, "the split adds up");
            }
        }
    }
    // No compaction where the session fits: no break, nearly every input
    // token served from the cache.
    let ci = find(&runs, 1, 128_000, Policy::Peer(Peer::NoCompaction));
    assert!(ci.calls.iter().all(|c| !c.over_window && !c.broke));
    let read: usize = ci.calls.iter().map(|c| c.tokens[OPENAI].cache_read).sum();
    let prompt: usize = ci.calls.iter().map(|c| c.prompt).sum();
    assert!(read * 10 > prompt * 8, "{read} of {prompt}");
    // compact at 128k on a session that fits does not touch it: the same
    // requests, so the same cache figures and everything retained.
    for mode in CallingMode::ALL {
        let ours = find(&runs, 1, 128_000, Policy::Compact(mode));
        assert!(ours.calls.iter().all(|c| !c.compacted));
        let same: Vec<_> = ours.calls.iter().map(|c| c.tokens).collect();
        let theirs: Vec<_> = ci.calls.iter().map(|c| c.tokens).collect();
        assert_eq!(same, theirs, "{mode:?}");
        assert!(ours.retained.iter().all(|&k| k));
    }
    // At 16k compact compacts, and each compaction that rewrote what the
    // previous call sent is a break, in both calling modes (in raw-resent
    // mode too: the resent history is replaced by the same output).
    for mode in CallingMode::ALL {
        let ours = find(&runs, 0, 16_000, Policy::Compact(mode));
        let compactions = ours.calls.iter().filter(|c| c.compacted).count();
        let breaks = ours.calls.iter().filter(|c| c.broke).count();
        assert!(compactions > 0, "{mode:?}");
        assert!(
            breaks > 0 && breaks <= compactions,
            "{mode:?}: {breaks} of {compactions}"
        );
        assert!(ours.calls.iter().all(|c| !c.over_window));
        // A break costs the cache: the call after it reads less than the
        // request before it held.
        for (k, c) in ours
            .calls
            .iter()
            .enumerate()
            .skip(1)
            .filter(|(_, c)| c.broke)
        {
            let prev = ours.calls[k - 1].prompt - REPLY_PRIMING;
            assert!(c.tokens[OPENAI].cache_read < openai_cached(prev).max(1));
        }
    }
    // The peers' compactions make summary requests; compact's make none.
    let lc = find(&runs, 0, 16_000, Policy::Peer(Peer::LangChainLike));
    assert_eq!(
        lc.summaries.len(),
        lc.calls.iter().filter(|c| c.compacted).count()
    );
    assert!(
        find(&runs, 0, 16_000, Policy::Compact(CallingMode::FedBack))
            .summaries
            .is_empty()
    );

    // The report: held out first, every policy at every window, priced.
    let prices = [
        opts.config.price_of(&opts.openai_model).expect("price"),
        opts.config.price_of(&opts.anthropic_model).expect("price"),
        opts.config.price_of(&opts.anthropic_model).expect("price"),
    ];
    let doc = cost::report::build(&ts, &runs, &opts, &prices);
    let splits: Vec<&str> = doc["by_split"]
        .as_array()
        .expect("splits")
        .iter()
        .map(|s| s["split"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(splits, ["held_out", "tune"]);
    let cell = &doc["all"]["128000"]["no_compaction"];
    assert_eq!(cell["prefix_breaks"], 0);
    let c = &doc["all"]["16000"]["compact_fed_back"];
    assert!(
        c["pricing"]["openai"]["cost_per_call"]
            .as_f64()
            .expect("cost")
            > 0.0
    );
    assert!(c["vs_cheapest_peer"].is_object());
    let text = cost::report::table(&doc);
    assert!(text.contains("compact_raw_resent") && text.contains("codex_like"));
}

#[test]
fn compacts_breakpoints_are_what_a_client_without_its_own_reads_from_anthropics_cache() {
    use compact_middleware::config::CacheBreakpoints;
    let ts = vec![transcripts().remove(0)];
    let at = |caller: bool, setting: CacheBreakpoints| {
        let mut opts = Options {
            windows: vec![16_000],
            threads: 2,
            caller_breakpoints: caller,
            policies: vec![
                Policy::Compact(CallingMode::FedBack),
                Policy::Peer(Peer::LangChainLike),
            ],
            ..Options::quick()
        };
        opts.config.policy.cache_breakpoints = setting;
        cost::run_all(&ts, &opts).expect("every run finishes")
    };
    let read = |runs: &[Run], policy: Policy| -> usize {
        find(runs, 0, 16_000, policy)
            .calls
            .iter()
            .map(|c| c.tokens[ANTHROPIC_5M].cache_read)
            .sum()
    };
    let ours = Policy::Compact(CallingMode::FedBack);
    let peer = Policy::Peer(Peer::LangChainLike);
    // A client that places none: Anthropic caches nothing, unless compact
    // places them; then it reads what it does for an agent that places
    // its own (compact keeps theirs and adds within the four).
    let bare = at(false, CacheBreakpoints::Off);
    assert_eq!(read(&bare, ours), 0);
    let placed = at(false, CacheBreakpoints::Auto);
    assert_eq!(read(&placed, peer), 0, "the peer's requests get none");
    let with_agents = at(true, CacheBreakpoints::Auto);
    assert!(read(&placed, ours) > 0);
    assert_eq!(read(&placed, ours), read(&with_agents, ours));
    // The OpenAI rule does not look at breakpoints.
    let openai = |runs: &[Run]| -> Vec<usize> {
        find(runs, 0, 16_000, ours)
            .calls
            .iter()
            .map(|c| c.tokens[OPENAI].cache_read)
            .collect()
    };
    assert_eq!(openai(&bare), openai(&placed));
}

#[test]
fn compacts_own_summary_requests_are_priced_under_both_prompts_apart_from_its_calls() {
    let ts = vec![transcripts().remove(0)];
    let ours = Policy::Compact(CallingMode::FedBack);
    let at = |summary_prompts: bool| {
        let opts = Options {
            windows: vec![16_000],
            threads: 2,
            policies: vec![ours, Policy::Compact(CallingMode::RawResent)],
            summary_prompts,
            ..Options::quick()
        };
        (cost::run_all(&ts, &opts).expect("every run finishes"), opts)
    };
    let (plain, _) = at(false);
    let (priced, opts) = at(true);
    // Off by default, and pricing them changes none of the agent's calls.
    assert!(find(&plain, 0, 16_000, ours).own_summaries.is_empty());
    let tokens = |runs: &[Run]| -> Vec<_> {
        find(runs, 0, 16_000, ours)
            .calls
            .iter()
            .map(|c| c.tokens)
            .collect()
    };
    assert_eq!(tokens(&plain), tokens(&priced));
    let run = find(&priced, 0, 16_000, ours);
    assert!(!run.own_summaries.is_empty());
    assert!(run.own_summaries.len() <= run.calls.iter().filter(|c| c.compacted).count());
    // Raw-resent histories are not what the provider received: not priced.
    assert!(
        find(&priced, 0, 16_000, Policy::Compact(CallingMode::RawResent))
            .own_summaries
            .is_empty()
    );
    for (fresh, prefixed) in &run.own_summaries {
        // A fresh prompt is all plain input; so is the agent prefix on the
        // Anthropic rules (the summarizer speaks chat completions only).
        assert_eq!(fresh.tokens[OPENAI].cache_read, 0);
        assert_eq!(prefixed.tokens[ANTHROPIC_5M], fresh.tokens[ANTHROPIC_5M]);
        // On the OpenAI rule the agent prefix is the previous request's
        // head: read from the cache by its 1,024/128 rule.
        let p = prefixed.tokens[OPENAI];
        assert_eq!(p.prompt(), prefixed.prompt);
        assert!(p.cache_read > 0 && p.cache_read == openai_cached(p.cache_read));
        assert_eq!(p.output, fresh.tokens[OPENAI].output);
    }
    let prices = [
        opts.config.price_of(&opts.openai_model).expect("price"),
        opts.config.price_of(&opts.anthropic_model).expect("price"),
        opts.config.price_of(&opts.anthropic_model).expect("price"),
    ];
    let doc = cost::report::build(&ts, &priced, &opts, &prices);
    let own = &doc["all"]["16000"]["compact_fed_back"]["own_summary"];
    assert_eq!(own["calls"], run.own_summaries.len());
    assert!(own["pricing"]["openai"]["agent_prefix_cache_hit_pct"].as_f64() > Some(0.0));
    assert_eq!(own["pricing"]["anthropic_5m"]["saving_pct"], 0.0);
    // The completion is the same under both prompts: what differs is input.
    let openai = &own["pricing"]["openai"];
    let delta = |total: &str, input: &str| {
        openai[total].as_f64().unwrap_or(f64::NAN) - openai[input].as_f64().unwrap_or(f64::NAN)
    };
    let (a, b) = (
        delta("fresh_cost_per_session", "fresh_input_cost_per_session"),
        delta(
            "agent_prefix_cost_per_session",
            "agent_prefix_input_cost_per_session",
        ),
    );
    assert!((a - b).abs() < 1e-5 && a > 0.0, "{a} vs {b}");
    assert!(doc["all"]["16000"]["compact_raw_resent"]["own_summary"].is_null());
    assert!(cost::report::table(&doc).contains("fresh vs agent_prefix"));
}

/// The quick corpus at a 128k window, compact (fed back) beside `peer`,
/// planned for `plan_for`. `cache_min_tokens` is set below its default so
/// that the price, not that floor, says when a compaction pays: the
/// sessions are short, and from the default floor's depth every rule's
/// run would end below the floor itself.
fn beside_compact_at_128k(peer: Peer, plan_for: Option<cost::Pricing>) -> Options {
    let mut config = compact_middleware::config::Config::default();
    config.policy.cache_min_tokens = 6_000;
    Options {
        windows: vec![128_000],
        policies: vec![Policy::Compact(CallingMode::FedBack), Policy::Peer(peer)],
        threads: 2,
        plan_for,
        config,
        ..Options::quick()
    }
}

/// The built-in prices of the models `opts` bills, one per rule.
fn builtin_prices(opts: &Options) -> [compact_middleware::price::Price; 3] {
    let price = |model: &str| compact_middleware::price::builtin_price(model).expect("priced");
    [
        price(&opts.openai_model),
        price(&opts.anthropic_model),
        price(&opts.anthropic_model),
    ]
}

/// compact's cost model weighs the price of the rows it plans for
/// (`Options::plan_for`), not the base configuration's model (gpt-4o,
/// whose cached input is half price): re-sending a context costs 2x, 10x
/// (gpt-5.1) and 20x (a 1-hour Anthropic write) a cached one, so the
/// dearer the re-send, the later a compaction pays. The counter stays the
/// base model's, the same as the peers'.
#[test]
fn compact_plans_for_the_prices_its_rows_bill() {
    let ts = slow_session();
    let coding = &ts[..];
    let with = |plan_for: cost::Pricing, openai_model: &str| {
        let opts = Options {
            openai_model: openai_model.to_string(),
            ..beside_compact_at_128k(Peer::NoCompaction, Some(plan_for))
        };
        let runs = cost::run_all(coding, &opts).expect("every run finishes");
        let doc = cost::report::build(coding, &runs, &opts, &builtin_prices(&opts));
        let compact = find(&runs, 0, 128_000, Policy::Compact(CallingMode::FedBack));
        let plain = find(&runs, 0, 128_000, Policy::Peer(Peer::NoCompaction));
        // Same counter: the first request (nothing to compact yet) has the
        // same tokens under both.
        assert_eq!(compact.calls[0].prompt, plain.calls[0].prompt);
        let compacted: Vec<usize> = (0..compact.calls.len())
            .filter(|&i| compact.calls[i].compacted)
            .collect();
        (compacted, doc["compact_plans_for"].clone())
    };
    let (at_2x, doc_2x) = with(cost::Pricing::OpenAi, "gpt-4o");
    let (at_10x, doc_10x) = with(cost::Pricing::OpenAi, "gpt-5.1");
    let (at_20x, doc_20x) = with(cost::Pricing::Anthropic1h, "gpt-5.1");
    assert_eq!(doc_2x["rules"]["openai"]["write_over_cached"], 2.0);
    assert_eq!(doc_10x["rules"]["openai"]["model"], "gpt-5.1");
    assert_eq!(doc_10x["rules"]["openai"]["write_over_cached"], 10.0);
    assert_eq!(doc_20x["rule"], "anthropic_1h");
    assert_eq!(doc_20x["rules"]["anthropic_1h"]["write_over_cached"], 20.0);
    // The dearer the re-send, the later each compaction comes (a run is
    // √(2(r − 1)·depth·growth) long), and never more of them.
    let no_earlier = |cheap: &[usize], dear: &[usize]| {
        cheap.len() >= dear.len() && cheap.iter().zip(dear).all(|(c, d)| c <= d)
    };
    assert!(
        !at_2x.is_empty()
            && no_earlier(&at_2x, &at_10x)
            && no_earlier(&at_10x, &at_20x)
            && at_2x != at_20x,
        "calls compacted at 2x / 10x / 20x: {at_2x:?} / {at_10x:?} / {at_20x:?}"
    );
}

/// By default each rule's rows come from a replay of compact's planned for
/// that rule: the same figures as a run planned for that rule alone, for
/// compact and the peers alike; what depends on no price is the OpenAI
/// replay's.
#[test]
fn each_rules_rows_come_from_a_replay_planned_for_that_rule() {
    let ts = slow_session();
    let coding = &ts[..];
    let report = |plan_for: Option<cost::Pricing>| {
        let opts = beside_compact_at_128k(Peer::CodexLike, plan_for);
        let runs = cost::run_all(coding, &opts).expect("every run finishes");
        let compact_runs = runs.iter().filter(|r| r.policy.is_compact()).count();
        (
            cost::report::build(coding, &runs, &opts, &builtin_prices(&opts)),
            compact_runs,
        )
    };
    let (each, replays) = report(None);
    assert_eq!(replays, 3, "one replay of compact's per rule");
    assert_eq!(each["compact_plans_for"]["rule"], "each");
    let cell = |doc: &serde_json::Value, policy: &str| doc["all"]["128000"][policy].clone();
    let mut planned_1h_cost = None;
    for rule in cost::Pricing::ALL {
        let (alone, _) = report(Some(rule));
        for policy in ["compact_fed_back", "codex_like"] {
            assert_eq!(
                cell(&each, policy)["pricing"][rule.name()],
                cell(&alone, policy)["pricing"][rule.name()],
                "{policy} under {}",
                rule.name()
            );
        }
        if rule == cost::Pricing::OpenAi {
            for key in [
                "prefix_breaks",
                "compactions",
                "prompt_tokens_per_call",
                "retention",
            ] {
                assert_eq!(
                    cell(&each, "compact_fed_back")[key],
                    cell(&alone, "compact_fed_back")[key]
                );
            }
        }
        if rule == cost::Pricing::Anthropic1h {
            planned_1h_cost = Some(
                cell(&alone, "compact_fed_back")["pricing"]["openai"]["cost_per_call"].clone(),
            );
        }
    }
    // The 1-hour replay is another replay: priced under OpenAI's rule, it
    // costs something else than the OpenAI replay does.
    assert_ne!(
        planned_1h_cost,
        Some(cell(&each, "compact_fed_back")["pricing"]["openai"]["cost_per_call"].clone())
    );
}
