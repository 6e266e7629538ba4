//! The retention harness measures, and can fail: the corpus is
//! deterministic and its probes unique, a context that keeps everything
//! retains everything, one that drops turns is caught doing so, and the
//! bars are met only when the figures reach them.

use std::collections::BTreeSet;

use compact_bench::corpus::{self, Agent, FactKind, Location, SessionShape, Transcript, fixtures};
use compact_bench::probe::{Haystack, flatten};
use compact_bench::retention::{
    self, CallingMode, Options, RunOutcome, check, config_for, measure,
};
use compact_middleware::config::{Config, Mode};
use compact_middleware::model::{Format, validate};
use compact_middleware::{CompactManager, Message};

/// Short sessions with small outputs: a debug build drives them in well
/// under a second.
const SMALL: SessionShape = SessionShape {
    turns: (14, 18),
    output_chars: (200, 4_000),
};

const KINDS: [(Agent, Format); 6] = [
    (Agent::Coding, Format::Chat),
    (Agent::Coding, Format::Responses),
    (Agent::Support, Format::Chat),
    (Agent::Support, Format::Responses),
    (Agent::Research, Format::Chat),
    (Agent::Research, Format::Responses),
];

fn transcript(seed: u64, agent: Agent, wire: Format) -> Transcript {
    corpus::generate(seed, agent, wire, &SMALL)
        .transcript()
        .expect("a generated session decodes")
}

fn drive(config: Config, t: &Transcript, mode: CallingMode) -> RunOutcome {
    let manager = CompactManager::builder(config)
        .without_config_exporters()
        .without_storage()
        .build()
        .expect("manager");
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(measure(&manager, "retention-test", t, mode))
}

fn retained_share(o: &RunOutcome) -> f64 {
    o.retained.iter().filter(|&&k| k).count() as f64 / o.retained.len().max(1) as f64
}

#[test]
fn a_seed_replays_its_session_and_seeds_differ() {
    for (agent, wire) in KINDS {
        let a = corpus::generate(3, agent, wire, &SMALL);
        assert_eq!(a, corpus::generate(3, agent, wire, &SMALL), "{}", a.name);
        let b = corpus::generate(4, agent, wire, &SMALL);
        assert_ne!(a.turns, b.turns, "{}", a.name);
        assert_ne!(a.facts, b.facts, "{}", a.name);
    }
}

#[test]
fn every_anchor_occurs_once_in_its_session_on_a_line_with_its_probes() {
    for seed in 0..3 {
        for (agent, wire) in KINDS {
            let s = corpus::generate(seed, agent, wire, &SMALL);
            assert_eq!(s.dropped, 0, "{}: facts dropped as not unique", s.name);
            let t = s.transcript().expect("decodes");
            let hay = Haystack::new(&flatten(&t.messages()));
            for f in &t.facts {
                assert_eq!(hay.occurrences(&f.probes[0]), 1, "{}: {f:?}", s.name);
                assert!(hay.has_on_one_line(&f.probes), "{}: {f:?}", s.name);
                // Planted where it says: in a message of its turn.
                let turn = &t.turns[f.turn - 1];
                assert!(
                    Haystack::new(&flatten(turn)).has_on_one_line(&f.probes),
                    "{}: {f:?} not in turn {}",
                    s.name,
                    f.turn
                );
            }
        }
    }
}

#[test]
fn sessions_are_valid_varied_and_about_one_fact_a_turn() {
    let mut kinds = BTreeSet::new();
    let mut locations = BTreeSet::new();
    let (mut facts, mut turns, mut parallel, mut supersessions_recorded) = (0, 0, 0, 0);
    let (mut smallest, mut largest) = (usize::MAX, 0);
    for seed in 0..2 {
        for (agent, wire) in KINDS {
            let s = corpus::generate(seed, agent, wire, &SMALL);
            let t = s.transcript().expect("decodes");
            let messages = t.messages();
            assert!(
                validate(&messages).is_empty(),
                "{}: {:?}",
                s.name,
                validate(&messages)
            );
            assert!((SMALL.turns.0..=SMALL.turns.1).contains(&t.turns.len()));
            for turn in &t.turns {
                assert!(
                    turn[0].starts_turn(),
                    "{}: a turn starts with the user",
                    s.name
                );
            }
            for m in &messages {
                if let Some(out) = m.tool_output() {
                    smallest = smallest.min(out.len());
                    largest = largest.max(out.len());
                }
                parallel += usize::from(m.kind().calls.len() > 1);
            }
            let reasoning_items = s
                .turns
                .iter()
                .flatten()
                .filter(|v| v["type"] == "reasoning")
                .count();
            assert_eq!(reasoning_items > 0, wire == Format::Responses, "{}", s.name);
            for f in &t.facts {
                kinds.insert(f.kind);
                locations.insert(f.location);
                assert!(wire == Format::Responses || f.location != Location::Reasoning);
                if f.kind == FactKind::Supersession {
                    assert!(f.superseded.is_some(), "{f:?}");
                    supersessions_recorded += 1;
                }
            }
            facts += t.facts.len();
            turns += t.turns.len();
        }
    }
    assert_eq!(kinds, BTreeSet::from(FactKind::STATED), "{kinds:?}");
    assert_eq!(locations.len(), Location::ALL.len(), "{locations:?}");
    assert!(supersessions_recorded > 0);
    let density = facts as f64 / turns as f64;
    assert!((0.6..=1.5).contains(&density), "{density} facts a turn");
    assert!(parallel > 0, "no parallel tool calls");
    assert!(smallest < 1_000 && largest > 2_000, "{smallest}..{largest}");
}

#[test]
fn nothing_compacts_in_a_huge_window_so_every_fact_is_retained() {
    let t = transcript(5, Agent::Support, Format::Responses);
    // The token triggers alone: `policy.cache: auto` would compact a long
    // session when it pays, even in this window.
    let mut config = config_for(2_000_000);
    config.policy.cache = compact_middleware::config::CachePolicy::Off;
    for mode in CallingMode::ALL {
        let o = drive(config.clone(), &t, mode);
        assert_eq!(o.compactions, 0);
        assert_eq!(o.preflights, t.turns.len());
        assert_eq!(o.retained.len(), t.facts.len());
        assert!(o.retained.iter().all(|&k| k), "{:?}", mode);
        assert_eq!(o.context.len(), t.messages().len());
    }
}

#[test]
fn trim_in_a_small_window_is_caught_losing_most_facts() {
    let t = transcript(6, Agent::Coding, Format::Chat);
    let mut config = config_for(6_000);
    config.policy.mode = Mode::Trim;
    config.policy.keep_recent_turns = 2;
    config.policy.hard_cap_buffer = 500;
    let o = drive(config, &t, CallingMode::FedBack);
    assert!(o.compactions > 0);
    let share = retained_share(&o);
    assert!(share < 0.5, "trim kept {share}");
    // What it kept is what it did not drop: the last turns.
    let last = t.turns.len();
    for (f, &k) in t.facts.iter().zip(&o.retained) {
        if f.turn == last {
            assert!(k, "{f:?} is in the last turn");
        }
    }
}

#[test]
fn a_fact_dropped_from_the_context_is_reported_missing() {
    let t = transcript(7, Agent::Research, Format::Responses);
    let all = t.messages();
    let (kept, _) = check(&all, &t);
    assert!(kept.iter().all(|&k| k));
    // Remove the message that states one fact: that fact, and only the
    // facts stated in the same message, go missing.
    let target = &t.facts[t.facts.len() / 2];
    let holds =
        |m: &Message, probes: &[String]| Haystack::new(&m.plain_text()).has_on_one_line(probes);
    let context: Vec<Message> = all
        .iter()
        .filter(|m| !holds(m, &target.probes))
        .cloned()
        .collect();
    assert_eq!(context.len(), all.len() - 1);
    let (kept, _) = check(&context, &t);
    for (f, k) in t.facts.iter().zip(kept) {
        let same_message = all
            .iter()
            .any(|m| holds(m, &target.probes) && holds(m, &f.probes));
        assert_eq!(k, !same_message, "{f:?}");
    }
    // Probes split over two lines do not count; on one line they do.
    let two = t
        .facts
        .iter()
        .find(|f| f.probes.len() == 2)
        .expect("a fact with a cue");
    let split = vec![Message::user(format!(
        "{}\n{}",
        two.probes[0], two.probes[1]
    ))];
    let joined = vec![Message::user(format!(
        "{} {}",
        two.probes[0], two.probes[1]
    ))];
    let single = Transcript {
        facts: vec![two.clone()],
        ..t.clone()
    };
    assert_eq!(check(&split, &single).0, [false]);
    assert_eq!(check(&joined, &single).0, [true]);
}

#[test]
fn a_supersession_left_with_only_its_old_value_is_stale() {
    let s = (0..20)
        .map(|seed| corpus::generate(seed, Agent::Coding, Format::Chat, &SMALL))
        .find(|s| s.facts.iter().any(|f| f.kind == FactKind::Supersession))
        .expect("a session with a supersession");
    let t = s.transcript().expect("decodes");
    let f = t
        .facts
        .iter()
        .find(|f| f.kind == FactKind::Supersession)
        .expect("found above");
    let old = f.superseded.clone().expect("recorded");
    let single = Transcript {
        facts: vec![f.clone()],
        ..t.clone()
    };
    let (kept, stale) = check(&[Message::user(old.join(" "))], &single);
    assert_eq!((kept[0], stale[0]), (false, true));
}

#[test]
fn the_fixtures_load_with_unique_probes_and_cover_every_kind_and_location() {
    let all = fixtures::all().expect("fixtures load");
    assert_eq!(all.len(), 4);
    let mut kinds = BTreeSet::new();
    let mut locations = BTreeSet::new();
    for t in &all {
        assert!(t.turns.len() >= 10, "{}", t.name);
        assert!(t.facts.len() >= 10, "{}", t.name);
        assert!(validate(&t.messages()).is_empty(), "{}", t.name);
        let (kept, _) = check(&t.messages(), t);
        assert!(kept.iter().all(|&k| k), "{}", t.name);
        kinds.extend(t.facts.iter().map(|f| f.kind));
        locations.extend(t.facts.iter().map(|f| f.location));
    }
    assert_eq!(kinds, BTreeSet::from(FactKind::STATED));
    assert_eq!(locations.len(), Location::ALL.len());
    // A broken sidecar is refused, naming the fact.
    let (name, jsonl, _) = fixtures::FIXTURES[0];
    let bad = r#"{"format": "chat", "facts": [{"id": "x", "kind": "identifier", "location": "user", "line": 2, "probes": ["the"]}]}"#;
    let e = fixtures::load(name, jsonl, bad).expect_err("a common word is not unique");
    assert!(e.to_string().contains("fact x"), "{e}");
}

#[test]
fn the_report_meets_its_targets_only_when_the_figures_do() {
    let t = transcript(8, Agent::Support, Format::Chat);
    let n = t.facts.len();
    let outcome = |kept: bool| RunOutcome {
        retained: vec![kept; n],
        stale: vec![false; n],
        ..RunOutcome::default()
    };
    let runs = |kept: bool| -> Vec<retention::Run> {
        [8_000, 16_000]
            .into_iter()
            .flat_map(|window| {
                CallingMode::ALL.map(|mode| retention::Run {
                    transcript: 0,
                    window,
                    mode,
                    outcome: outcome(kept),
                })
            })
            .collect()
    };
    let transcripts = std::slice::from_ref(&t);
    let all = retention::report::build(transcripts, &[8_000, 16_000], 6, &runs(true));
    assert_eq!(all["meets_targets"]["8k_12k"], true);
    assert_eq!(all["meets_targets"]["16k_plus"], true);
    assert_eq!(all["by_window"]["8000"]["fed_back"]["facts"]["pct"], 100.0);
    let none = retention::report::build(transcripts, &[8_000, 16_000], 6, &runs(false));
    assert_eq!(none["meets_targets"]["8k_12k"], false);
    assert_eq!(none["meets_targets"]["16k_plus"], false);
    assert_eq!(
        none["by_window"]["16000"]["raw_resent"]["tool"]["retained"],
        0
    );
    // A nested summary header fails the class even at 100% retained.
    let mut nested = runs(true);
    nested[3].outcome.nested_summaries = 1;
    let v = retention::report::build(transcripts, &[8_000, 16_000], 6, &nested);
    assert_eq!(v["meets_targets"]["8k_12k"], true);
    assert_eq!(v["meets_targets"]["16k_plus"], false);
}

#[test]
fn the_suite_reports_every_window_and_mode() {
    let opts = Options {
        seeds: vec![9],
        kinds: vec![(Agent::Coding, Format::Responses)],
        corpora: Vec::new(),
        corpus_seeds: Vec::new(),
        shape: SMALL,
        fixtures: false,
        trajectories: false,
        windows: vec![8_000, 32_000],
        threads: 2,
    };
    let v = retention::run_with(&opts);
    assert_eq!(v["runs"].as_array().map(Vec::len), Some(4), "{v}");
    for w in ["8000", "32000"] {
        for mode in ["fed_back", "raw_resent"] {
            let cell = &v["by_window"][w][mode];
            assert!(
                cell["facts"]["total"].as_u64() > Some(0),
                "{w} {mode}: {cell}"
            );
            assert!(cell["meets_targets"].is_boolean());
            assert_eq!(cell["nested_summary_headers"], 0);
        }
    }
    assert!(v["by_window"]["8000"]["fed_back"]["compactions"].as_u64() > Some(0));
    assert!(v["targets"]["16k_plus"]["user_assistant_pct"].is_number());
    assert_eq!(v["corpus"]["problems"].as_array().map(Vec::len), Some(0));
}
