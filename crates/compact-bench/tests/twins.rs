//! A non-English corpus keeps its facts about as well as its English twin
//! (issue 22, "Done when"): the `support-prose` translations (same seed,
//! same turns, facts and identifiers) are driven through a real manager
//! on the held-out seeds, and each one's user+assistant and tool-output
//! retention must be within 5 points of English at 16k and 32k.
//!
//! Measured when this was written (release, both calling modes): at 16k
//! English 99.2%, Chinese 99.2%, Spanish 99.2%, German 98.4% of the user and
//! assistant facts, every tool fact in all four; at 32k all 100%. At 8k the
//! bar was first out of reach (English 86.9%, German 76.2%: the same facts
//! cost 2-7% more tokens in translation); since a later request's goal is
//! its ask without the opener every message repeats, and the summary may
//! take a quarter of the window, the 8k figures are English 100%, Spanish
//! 99.2%, German and Chinese 98.4%, and the 5-point bar holds at every window.

use std::sync::Mutex;

use compact_bench::corpus::{Corpus, SEED_SPLIT, Transcript, corpora};
use compact_bench::retention::{CallingMode, config_for, measure};
use compact_middleware::CompactManager;
use compact_middleware::model::Format;

/// The windows measured, and the points a twin may be behind English there.
const WINDOWS: [(usize, f64); 3] = [(8_000, 5.0), (16_000, 5.0), (32_000, 5.0)];

/// Kept and total facts of a corpus at a window: user+assistant, tool.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    conversation: (usize, usize),
    tool: (usize, usize),
}

fn pct((kept, total): (usize, usize)) -> f64 {
    100.0 * kept as f64 / total.max(1) as f64
}

fn transcripts(corpus: Corpus) -> Vec<Transcript> {
    SEED_SPLIT
        .held_out
        .iter()
        .map(|&seed| {
            corpus
                .generate(seed, Format::Chat)
                .transcript()
                .expect("a generated session decodes")
        })
        .collect()
}

/// Retention of `corpus` at `window` over the held-out seeds, fed back
/// (both calling modes measure the same: `docs/summarizers.md`).
fn tally(corpus: Corpus, window: usize) -> Tally {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut t = Tally::default();
    for tr in transcripts(corpus) {
        let manager = CompactManager::builder(config_for(window))
            .without_config_exporters()
            .without_storage()
            .build()
            .expect("manager");
        let o = rt.block_on(measure(&manager, &tr.name, &tr, CallingMode::FedBack));
        assert_eq!(o.insufficient_budget, 0, "{} at {window}", tr.name);
        for (f, &kept) in tr.facts.iter().zip(&o.retained) {
            let cell = if f.location.is_tool() {
                &mut t.tool
            } else {
                &mut t.conversation
            };
            cell.0 += usize::from(kept);
            cell.1 += 1;
        }
    }
    t
}

#[test]
fn translations_keep_their_facts_within_five_points_of_english_at_16k_and_32k_held_out() {
    let twins: Vec<(Corpus, Corpus)> = corpora()
        .iter()
        .filter_map(|c| c.twin.map(|en| (c.corpus, en)))
        .collect();
    assert!(twins.len() >= 3, "{twins:?}");
    let mut corpora_run: Vec<Corpus> = twins.iter().map(|t| t.0).collect();
    for &(_, en) in &twins {
        if !corpora_run.contains(&en) {
            corpora_run.push(en);
        }
    }
    // Every (corpus, window) on its own thread pair: a debug build drives
    // a session in seconds.
    let jobs: Vec<(Corpus, usize)> = corpora_run
        .iter()
        .flat_map(|&c| WINDOWS.map(|(w, _)| (c, w)))
        .collect();
    let results: Mutex<Vec<(Corpus, usize, Tally)>> = Mutex::new(Vec::new());
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                while let Some(&(c, w)) =
                    jobs.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
                {
                    let t = tally(c, w);
                    results.lock().expect("results").push((c, w, t));
                }
            });
        }
    });
    let results = results.into_inner().expect("results");
    let get = |c: Corpus, w: usize| {
        results
            .iter()
            .find(|r| r.0 == c && r.1 == w)
            .map(|r| r.2)
            .expect("measured")
    };
    let mut report = Vec::new();
    let mut behind = Vec::new();
    for &(twin, en) in &twins {
        for (w, margin) in WINDOWS {
            let (t, e) = (get(twin, w), get(en, w));
            for (what, a, b) in [
                ("user+assistant", t.conversation, e.conversation),
                ("tool", t.tool, e.tool),
            ] {
                assert!(a.1 > 0 && a.1 == b.1, "{twin:?} {what}: {a:?} vs {b:?}");
                let line = format!(
                    "{} {w} {what}: {:.1}% (English {:.1}%)",
                    twin.name(),
                    pct(a),
                    pct(b)
                );
                if pct(a) + margin < pct(b) {
                    behind.push(line.clone());
                }
                report.push(line);
            }
        }
    }
    assert!(
        behind.is_empty(),
        "further behind English than allowed: {behind:#?}\nall: {report:#?}"
    );
}
