//! Debugging aid for the retention suite: drives every session of the
//! corpus (or those whose name contains FILTER) at one window, fed back,
//! and prints the facts each lost, by kind and location; `--summary` also
//! prints each final summary. `SEEDS=3,4` draws other sessions;
//! `--corpora` adds the named corpora (`corpus::corpora()`) at those seeds
//! (only the tuning ones, 1-2, while tuning); `TRAJ=DIR` adds the real
//! trajectories of DIR (`corpus::trajectories`).
//! `cargo run --release -p compact-bench --example retention_dump -- WINDOW [FILTER] [--summary] [--corpora]`

use compact_bench::corpus::{self, Agent, SessionShape, Transcript};
use compact_bench::retention::{CallingMode, SUMMARY_MARK, config_for, measure};
use compact_middleware::CompactManager;
use compact_middleware::model::Format;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let window: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(8000);
    let filter = args
        .get(1)
        .filter(|a| !a.starts_with("--"))
        .cloned()
        .unwrap_or_default();
    let show_summary = args.iter().any(|a| a == "--summary");
    let mut transcripts: Vec<Transcript> = Vec::new();
    let seeds: Vec<u64> = std::env::var("SEEDS")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 2]);
    for &seed in &seeds {
        for agent in Agent::ALL {
            for wire in [Format::Chat, Format::Responses] {
                let s = corpus::generate(seed, agent, wire, &SessionShape::FULL);
                if let Ok(t) = s.transcript() {
                    transcripts.push(t);
                }
            }
        }
    }
    if let Ok(dir) = std::env::var("TRAJ") {
        match corpus::trajectories::load_dir(std::path::Path::new(&dir)) {
            Ok(ts) => transcripts.extend(ts),
            Err(e) => eprintln!("TRAJ={dir}: {e}"),
        }
    }
    if let Ok(f) = corpus::fixtures::all() {
        transcripts.extend(f);
    }
    if args.iter().any(|a| a == "--corpora") {
        for c in corpus::corpora() {
            for &wire in c.wires {
                for &seed in &seeds {
                    if let Ok(t) = c.corpus.generate(seed, wire).transcript() {
                        transcripts.push(t);
                    }
                }
            }
        }
    }
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    let (mut kept, mut total) = (0, 0);
    for t in transcripts.iter().filter(|t| t.name.contains(&filter)) {
        let Ok(m) = CompactManager::builder(config_for(window))
            .without_config_exporters()
            .without_storage()
            .build()
        else {
            return;
        };
        let out = rt.block_on(measure(&m, &t.name, t, CallingMode::FedBack));
        let k = out.retained.iter().filter(|&&r| r).count();
        kept += k;
        total += t.facts.len();
        println!(
            "## {} ({k}/{} kept, summary {:?} tokens, final {} tokens)",
            t.name,
            t.facts.len(),
            out.final_summary_tokens,
            out.final_tokens
        );
        if show_summary {
            for msg in &out.context {
                let text = msg.plain_text();
                if text.starts_with(SUMMARY_MARK) {
                    println!("{text}\n--");
                }
            }
        }
        for (f, kept) in t.facts.iter().zip(&out.retained) {
            if !kept {
                println!(
                    "LOST {:?} {:?} t{} {:?} | {}",
                    f.kind, f.location, f.turn, f.probes, f.text
                );
            }
        }
    }
    println!("# total {kept}/{total}");
}
