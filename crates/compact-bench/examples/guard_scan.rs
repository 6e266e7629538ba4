//! False positives of the injection guard: every tool output of the real
//! trajectories (`../shared/real-trajectories`, when present) and of the
//! named corpora (seeds 1-8), screened; each flagged clause is printed.
//! None of these outputs carries an injection, so every flag is a false
//! positive.
//!
//! `cargo run --release -p compact-bench --example guard_scan`

use compact_bench::corpus::{Corpus, Transcript, corpora, trajectories};
use compact_middleware::model::Format;
use compact_middleware::summarize::orders_in;

fn scan(name: &str, t: &Transcript, outputs: &mut usize, flagged: &mut usize) {
    for m in t.messages() {
        for (_, out) in m.tool_outputs() {
            *outputs += 1;
            BYTES.fetch_add(out.len(), std::sync::atomic::Ordering::Relaxed);
            for (reason, clause) in orders_in(&out) {
                *flagged += 1;
                println!("{name}: {reason}: {clause}");
            }
        }
    }
}

static BYTES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn main() {
    let started = std::time::Instant::now();
    let (mut outputs, mut flagged) = (0usize, 0usize);
    if let Some(dir) = trajectories::dir()
        && let Ok(ts) = trajectories::load_dir(&dir)
    {
        for t in &ts {
            scan(&t.name, t, &mut outputs, &mut flagged);
        }
        println!("real trajectories: {} sessions", ts.len());
    }
    for info in corpora() {
        let corpus: Corpus = info.corpus;
        for seed in 1..=8 {
            if let Ok(t) = corpus.generate(seed, Format::Chat).transcript() {
                scan(&t.name, &t, &mut outputs, &mut flagged);
            }
        }
    }
    println!("{flagged} clauses flagged in {outputs} tool outputs");
    // The screen's own speed: every output again, timed alone.
    let mut texts: Vec<String> = Vec::new();
    if let Some(dir) = trajectories::dir()
        && let Ok(ts) = trajectories::load_dir(&dir)
    {
        for t in &ts {
            for m in t.messages() {
                texts.extend(m.tool_outputs().into_iter().map(|(_, o)| o.into_owned()));
            }
        }
    }
    let bytes: usize = texts.iter().map(String::len).sum();
    let mut best = std::time::Duration::MAX;
    for _ in 0..5 {
        let t0 = std::time::Instant::now();
        let n: usize = texts.iter().map(|t| orders_in(t).len()).sum();
        best = best.min(t0.elapsed());
        std::hint::black_box(n);
    }
    println!(
        "screen: {:.1} MB of real tool output in {:.1} ms (best of 5): {:.0} MB/s; whole scan {:.1} s",
        bytes as f64 / 1e6,
        best.as_secs_f64() * 1e3,
        bytes as f64 / 1e6 / best.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}
