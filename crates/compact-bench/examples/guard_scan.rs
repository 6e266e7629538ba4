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
            for (reason, clause) in orders_in(&out) {
                *flagged += 1;
                println!("{name}: {reason}: {clause}");
            }
        }
    }
}

fn main() {
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
}
