//! The named corpora (`corpus::corpora()`): each deterministic per seed,
//! its anchors unique, its facts where it says, its sessions big enough to
//! force heavy compaction at 8k-32k, a context keeping everything keeps
//! every fact and one dropping the early turns loses theirs, and the split
//! of seeds is fixed.

use std::collections::BTreeSet;

use compact_bench::corpus::{
    Corpus, FactKind, Language, Location, SEED_SPLIT, Session, Split, Transcript, corpora,
};
use compact_bench::probe::{Haystack, flatten};
use compact_bench::retention::{self, Options, check, config_for};
use compact_middleware::model::{Format, validate};
use compact_middleware::{CompactManager, Message};

/// Every (corpus, wire) the registry lists.
fn kinds() -> Vec<(Corpus, Format)> {
    corpora()
        .iter()
        .flat_map(|c| c.wires.iter().map(move |&w| (c.corpus, w)))
        .collect()
}

fn transcript(s: &Session) -> Transcript {
    s.transcript().expect("a generated session decodes")
}

/// The estimate of a whole session in tokens, as the manager counts.
fn tokens(t: &Transcript) -> usize {
    let m = CompactManager::builder(config_for(usize::MAX / 4))
        .without_config_exporters()
        .without_storage()
        .build()
        .expect("manager");
    m.estimate(&t.messages(), &[]).t_est
}

#[test]
fn the_registry_names_every_corpus_once_and_splits_seeds_once() {
    let names: BTreeSet<&str> = corpora().iter().map(|c| c.name).collect();
    assert_eq!(names.len(), corpora().len());
    assert_eq!(corpora().len(), Corpus::ALL.len());
    for (c, info) in Corpus::ALL.iter().zip(corpora()) {
        assert_eq!(*c, info.corpus);
        assert_eq!(c.info(), info);
        assert_eq!(Corpus::from_name(info.name), Some(*c));
        assert!(!info.wires.is_empty(), "{}", info.name);
        match info.twin {
            Some(twin) => {
                assert_ne!(info.language, Language::En, "{}", info.name);
                assert_eq!(twin.info().language, Language::En);
                assert!(info.name.starts_with(twin.name()), "{}", info.name);
                assert!(info.name.ends_with(info.language.code()), "{}", info.name);
            }
            None => assert_eq!(info.language, Language::En, "{}", info.name),
        }
    }
    for seed in SEED_SPLIT.tune {
        assert_eq!(Split::of_seed(seed), Split::Tune);
    }
    for seed in SEED_SPLIT.held_out.iter().chain(&[0, 5, 99]) {
        assert_eq!(Split::of_seed(*seed), Split::HeldOut);
    }
    assert_eq!(Corpus::from_name("nope"), None);
}

#[test]
fn a_seed_replays_its_session_and_seeds_differ() {
    for (corpus, wire) in kinds() {
        let a = corpus.generate(1, wire);
        assert_eq!(a, corpus.generate(1, wire), "{}", a.name);
        let b = corpus.generate(2, wire);
        assert_ne!(a.turns, b.turns, "{}", a.name);
        assert_ne!(a.facts, b.facts, "{}", a.name);
        assert_eq!(a.wire, wire);
    }
}

#[test]
fn sessions_name_their_corpus_wire_seed_and_split() {
    for (corpus, wire) in kinds() {
        for seed in [1, 3] {
            let s = corpus.generate(seed, wire);
            let t = transcript(&s);
            assert_eq!(t.source, corpus.name());
            assert_eq!(t.split, Split::of_seed(seed));
            let w = if wire == Format::Responses {
                "responses"
            } else {
                "chat"
            };
            assert_eq!(t.name, format!("{}-{w}-{seed}", corpus.name()));
        }
    }
    // A wire the corpus is not written in falls back to its first.
    let s = Corpus::CiLogs.generate(1, Format::Anthropic);
    assert_eq!(s.wire, Corpus::CiLogs.info().wires[0]);
}

#[test]
fn every_anchor_occurs_once_on_a_line_with_its_probes_in_its_turn() {
    for (corpus, wire) in kinds() {
        for seed in 1..=5 {
            let s = corpus.generate(seed, wire);
            assert_eq!(s.dropped, 0, "{}: facts dropped as not unique", s.name);
            let t = transcript(&s);
            let messages = t.messages();
            assert!(
                validate(&messages).is_empty(),
                "{}: {:?}",
                s.name,
                validate(&messages)
            );
            let hay = Haystack::new(&flatten(&messages));
            let ids: BTreeSet<&str> = t.facts.iter().map(|f| f.id.as_str()).collect();
            assert_eq!(ids.len(), t.facts.len(), "{}", s.name);
            for f in &t.facts {
                assert_eq!(hay.occurrences(&f.probes[0]), 1, "{}: {f:?}", s.name);
                assert!(hay.has_on_one_line(&f.probes), "{}: {f:?}", s.name);
                let turn = &t.turns[f.turn - 1];
                assert!(
                    Haystack::new(&flatten(turn)).has_on_one_line(&f.probes),
                    "{}: {f:?} not in turn {}",
                    s.name,
                    f.turn
                );
                assert!(f.probes.len() <= 2, "{}: {f:?}", s.name);
                assert!(!f.text.is_empty(), "{}: {f:?}", s.name);
            }
        }
    }
}

#[test]
fn a_context_that_keeps_everything_retains_every_fact() {
    for (corpus, wire) in kinds() {
        let t = transcript(&corpus.generate(3, wire));
        let (kept, stale) = check(&t.messages(), &t);
        assert!(kept.iter().all(|&k| k), "{}", t.name);
        assert!(stale.iter().all(|&s| !s), "{}", t.name);
    }
}

#[test]
fn a_context_that_drops_the_early_turns_loses_the_facts_planted_there() {
    for (corpus, wire) in kinds() {
        let t = transcript(&corpus.generate(4, wire));
        let cut = t.turns.len() / 2;
        let context: Vec<Message> = t
            .opening
            .iter()
            .chain(t.turns[cut..].iter().flatten())
            .cloned()
            .collect();
        let (kept, _) = check(&context, &t);
        let early = t.facts.iter().filter(|f| f.turn <= cut).count();
        assert!(early > 0, "{}: no fact in the first half", t.name);
        for (f, k) in t.facts.iter().zip(kept) {
            assert_eq!(k, f.turn > cut, "{}: {f:?}", t.name);
        }
    }
}

#[test]
fn sessions_are_big_enough_to_force_heavy_compaction() {
    for (corpus, wire) in kinds() {
        for seed in [1, 4] {
            let t = transcript(&corpus.generate(seed, wire));
            let n = tokens(&t);
            assert!((18_000..=90_000).contains(&n), "{}: {n} tokens", t.name);
            assert!(t.facts.len() >= 12, "{}: {} facts", t.name, t.facts.len());
        }
    }
}

#[test]
fn ci_logs_is_one_task_then_rounds_of_one_call_and_its_output() {
    for wire in [Format::Chat, Format::Responses] {
        let (mut nudges, mut kinds, mut locations) = (0, BTreeSet::new(), BTreeSet::new());
        for seed in 1..=6 {
            let t = transcript(&Corpus::CiLogs.generate(seed, wire));
            assert!(
                (30..=120).contains(&t.turns.len()),
                "{}: {} rounds",
                t.name,
                t.turns.len()
            );
            let users: Vec<String> = t
                .messages()
                .iter()
                .filter(|m| m.starts_turn())
                .map(Message::plain_text)
                .collect();
            // The task, then only the framework's messages, each repeated
            // verbatim.
            assert!(users[0].contains("#"), "{}", t.name);
            let distinct: BTreeSet<&String> = users[1..].iter().collect();
            assert!(distinct.len() <= 2, "{}: {distinct:?}", t.name);
            nudges += users.len() - 1;
            for (i, turn) in t.turns.iter().enumerate() {
                let calls: usize = turn.iter().map(|m| m.kind().calls.len()).sum();
                let outputs = turn.iter().filter(|m| m.tool_output().is_some()).count();
                assert!(calls <= 1 && calls == outputs, "{}: turn {}", t.name, i + 1);
            }
            for f in &t.facts {
                kinds.insert(f.kind);
                locations.insert(f.location);
                if f.turn == 1 {
                    assert_eq!(f.location, Location::User, "{f:?}");
                }
            }
        }
        assert!(nudges > 0, "no framework nudge in six sessions");
        for k in FactKind::TRAIL {
            assert!(kinds.contains(&k), "{wire:?}: no {k:?} fact");
        }
        assert!(kinds.contains(&FactKind::Identifier));
        assert!(locations.contains(&Location::Tool) && locations.contains(&Location::User));
        assert_eq!(
            locations.contains(&Location::Reasoning),
            wire == Format::Responses
        );
    }
}

#[test]
fn the_retention_suite_runs_the_named_corpora_and_names_their_split() {
    let opts = Options {
        seeds: Vec::new(),
        kinds: Vec::new(),
        corpora: vec![(Corpus::CiLogs, Format::Chat)],
        corpus_seeds: vec![SEED_SPLIT.tune[0], SEED_SPLIT.held_out[0]],
        fixtures: false,
        trajectories: false,
        windows: vec![1_000_000],
        threads: 2,
        ..Options::quick()
    };
    let v = retention::run_with(&opts);
    let sessions = v["sessions"].as_array().expect("sessions");
    assert_eq!(sessions.len(), 2, "{v}");
    for s in sessions {
        assert_eq!(s["source"], "ci-logs");
    }
    assert_eq!(v["corpus"]["corpus_seeds"][0]["split"], "tune");
    assert_eq!(v["corpus"]["corpus_seeds"][1]["split"], "held_out");
    assert_eq!(v["corpus"]["problems"].as_array().map(Vec::len), Some(0));
    // In a window this large compact only compacts when it pays
    // (`policy.cache: auto`), deep but never below `cache_min_tokens`: every
    // fact is kept.
    let cell = &v["by_window"]["1000000"]["fed_back"];
    assert_eq!(cell["insufficient_budget"], 0, "{cell}");
    assert_eq!(cell["facts"]["pct"], 100.0, "{cell}");
    // Every registered corpus is in the full measurement, at both splits.
    let full = Options::full();
    assert_eq!(
        full.corpora
            .iter()
            .map(|c| c.0)
            .collect::<BTreeSet<_>>()
            .len(),
        Corpus::ALL.len()
    );
    let splits: BTreeSet<Split> = full
        .corpus_seeds
        .iter()
        .map(|&s| Split::of_seed(s))
        .collect();
    assert_eq!(splits.len(), 2);
}

#[test]
fn data_json_tools_answer_in_json_tables_and_facts_sit_in_prose_fields_and_named_rows() {
    let (mut kinds, mut locations, mut tables, mut named) =
        (BTreeSet::new(), BTreeSet::new(), 0, 0);
    for seed in 1..=6 {
        let t = transcript(&Corpus::DataJson.generate(seed, Format::Chat));
        assert!((22..=40).contains(&t.turns.len()), "{}", t.name);
        for turn in &t.turns {
            assert!(
                turn[0].starts_turn(),
                "{}: a turn starts with the user",
                t.name
            );
            for m in turn {
                let Some(out) = m.tool_output() else { continue };
                let v: serde_json::Value = serde_json::from_str(&out).expect("a tool answers JSON");
                // A result set: every row has the same fields.
                if let Some(rows) = v["rows"].as_array().filter(|r| r.len() >= 10) {
                    let keys = |r: &serde_json::Value| {
                        r.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>())
                    };
                    assert!(rows.iter().all(|r| keys(r) == keys(&rows[0])));
                    tables += 1;
                }
            }
        }
        for f in &t.facts {
            kinds.insert(f.kind);
            locations.insert(f.location);
            // A row the user asks about, by its key, in the same turn.
            if f.location == Location::Tool && f.text.contains(" = ") {
                let key = f.text.split(':').next().expect("key: column = value");
                let user = t.turns[f.turn - 1][0].plain_text();
                assert!(user.contains(key), "{}: {f:?} not named in {user}", t.name);
                named += 1;
            }
        }
    }
    assert_eq!(kinds, BTreeSet::from(FactKind::STATED), "{kinds:?}");
    assert_eq!(
        locations,
        BTreeSet::from([Location::User, Location::Assistant, Location::Tool])
    );
    assert!(tables >= 20, "{tables} result sets of 10 rows or more");
    assert!(named >= 3, "{named} named rows");
}

fn is_cjk(c: char) -> bool {
    ('\u{3000}'..='\u{9fff}').contains(&c) || ('\u{ff00}'..='\u{ffef}').contains(&c)
}

/// The user's and the agent's prose of a transcript (no tool output, no
/// calls).
fn prose(t: &Transcript) -> Vec<String> {
    t.turns
        .iter()
        .flatten()
        .filter(|m| m.tool_output().is_none() && m.kind().calls.is_empty())
        .map(Message::plain_text)
        .collect()
}

#[test]
fn support_prose_is_long_paragraphs_with_facts_inside_them_and_few_tools() {
    let (mut kinds, mut superseded, mut lookups, mut turns) = (BTreeSet::new(), 0, 0, 0);
    for seed in 1..=4 {
        let t = transcript(&Corpus::SupportProse.generate(seed, Format::Chat));
        let (mut paragraphs, mut words) = (0, 0);
        for (i, turn) in t.turns.iter().enumerate() {
            turns += 1;
            lookups += usize::from(turn.iter().any(|m| !m.kind().calls.is_empty()));
            assert!(turn[0].starts_turn());
            let user = turn[0].plain_text();
            // The customer's own words, not a quoted reply.
            let own = user.split("\n\nOn ").next().unwrap_or(&user);
            paragraphs += own.split("\n\n").count();
            words += own.split_whitespace().count();
            if i == 0 {
                assert!(own.split("\n\n").count() >= 4, "{}: {own}", t.name);
            }
        }
        let n = t.turns.len();
        assert!(
            paragraphs >= 2 * n && words >= 90 * n,
            "{}: {paragraphs} paragraphs, {words} words in {n} messages",
            t.name
        );
        for f in &t.facts {
            kinds.insert(f.kind);
            superseded += usize::from(f.superseded.is_some());
            if f.location != Location::Tool {
                // Inside a paragraph: never its first sentence.
                let text = t.turns[f.turn - 1]
                    .iter()
                    .map(Message::plain_text)
                    .find(|m| m.contains(&f.text))
                    .expect("the fact's message");
                let para = text
                    .split("\n\n")
                    .find(|p| p.contains(&f.text))
                    .expect("paragraph");
                assert!(!para.starts_with(&f.text), "{}: {f:?}", t.name);
            }
        }
    }
    assert_eq!(kinds, BTreeSet::from(FactKind::STATED), "{kinds:?}");
    assert!(superseded > 0);
    assert!(
        lookups > 0 && lookups * 3 < turns,
        "{lookups} lookups in {turns} turns"
    );
}

#[test]
fn twins_share_structure_and_identifiers_with_their_english_session() {
    for info in corpora().iter().filter(|c| c.twin.is_some()) {
        let twin = info.twin.expect("filtered");
        for seed in 1..=4 {
            let en = transcript(&twin.generate(seed, Format::Chat));
            let t = transcript(&info.corpus.generate(seed, Format::Chat));
            assert_eq!(t.turns.len(), en.turns.len(), "{}", t.name);
            for (a, b) in t.turns.iter().zip(&en.turns) {
                assert_eq!(a.len(), b.len(), "{}", t.name);
                let tools: Vec<_> = b.iter().map(|m| m.tool_output().is_some()).collect();
                assert_eq!(
                    a.iter()
                        .map(|m| m.tool_output().is_some())
                        .collect::<Vec<_>>(),
                    tools
                );
            }
            assert_eq!(t.facts.len(), en.facts.len(), "{}", t.name);
            for (f, e) in t.facts.iter().zip(&en.facts) {
                assert_eq!(
                    (f.kind, f.location, f.turn, &f.probes[0]),
                    (e.kind, e.location, e.turn, &e.probes[0]),
                    "{}",
                    t.name
                );
                assert_eq!(f.probes.len(), e.probes.len(), "{}: {f:?}", t.name);
                if f.probes.len() == 2 {
                    // The cue is the language's own word.
                    assert_ne!(f.probes[1], e.probes[1], "{}: {f:?}", t.name);
                }
                assert_eq!(
                    f.superseded.as_ref().map(|s| &s[0]),
                    e.superseded.as_ref().map(|s| &s[0])
                );
            }
            // Not the English words.
            let english = prose(&en).join(" ");
            let translated = prose(&t).join(" ");
            assert!(english.contains("the device") && !translated.contains("the device"));
        }
    }
}

#[test]
fn the_chinese_prose_has_no_ascii_sentence_punctuation_and_no_spaces_between_words() {
    for seed in 1..=4 {
        let t = transcript(&Corpus::SupportProseZh.generate(seed, Format::Chat));
        let mut full_stops = 0;
        for text in prose(&t) {
            let chars: Vec<char> = text.chars().collect();
            full_stops += chars.iter().filter(|&&c| c == '。').count();
            for (i, &c) in chars.iter().enumerate() {
                assert!(!",;!?".contains(c), "{}: {c:?} in {text}", t.name);
                let next = chars.get(i + 1).copied();
                if c == '.' || c == ':' {
                    // Only inside identifiers: versions, addresses, URLs, emails, times.
                    assert!(
                        next.is_some_and(|n| n.is_ascii_alphanumeric() || n == '/'),
                        "{}: {text}",
                        t.name
                    );
                }
                if c == ' ' {
                    let prev = i.checked_sub(1).map(|p| chars[p]);
                    assert!(
                        !prev.is_some_and(is_cjk) && !next.is_some_and(is_cjk),
                        "{}: a space beside a CJK character in {text}",
                        t.name
                    );
                }
            }
        }
        assert!(full_stops > 500, "{}: {full_stops} 。", t.name);
        for f in t.facts.iter().filter(|f| f.probes.len() == 2) {
            assert!(f.probes[1].chars().all(is_cjk), "{}: {f:?}", t.name);
        }
    }
}
