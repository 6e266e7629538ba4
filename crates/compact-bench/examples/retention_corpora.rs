//! Retention of the named corpora (`corpus::corpora()`), one table line per
//! corpus, split and window: facts kept in user+assistant(+reasoning)
//! messages and in tool outputs, both calling modes together, with the
//! insufficient-budget errors. A twin's line is followed by its English
//! twin's figure at the same window.
//! `cargo run --release -p compact-bench --example retention_corpora -- [NAME,NAME…] [--seeds 1,2,3,4] [--windows 8000,16000] [--json]`

use std::collections::BTreeMap;

use compact_bench::args::list;
use compact_bench::corpus::{Corpus, SEED_SPLIT, Split, Transcript, corpora};
use compact_bench::retention::{
    self, CallingMode, RunOutcome, WINDOWS, config_for, measure, on_threads,
};
use compact_middleware::CompactManager;
use serde_json::json;

/// Kept and total facts.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    kept: usize,
    total: usize,
}

impl Tally {
    fn add(&mut self, kept: bool) {
        self.total += 1;
        self.kept += usize::from(kept);
    }

    fn pct(self) -> String {
        if self.total == 0 {
            "-".into()
        } else {
            format!("{:.1}", 100.0 * self.kept as f64 / self.total as f64)
        }
    }
}

#[derive(Debug, Default, Clone)]
struct Cell {
    conversation: Tally,
    tool: Tally,
    by_kind: BTreeMap<&'static str, Tally>,
    insufficient: usize,
    runs: usize,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let names: Option<Vec<String>> = args
        .first()
        .filter(|a| !a.starts_with("--"))
        .map(|a| a.split(',').map(str::to_string).collect());
    let seeds: Vec<u64> = list(&args, "--seeds").unwrap_or_else(|| {
        SEED_SPLIT
            .tune
            .iter()
            .chain(&SEED_SPLIT.held_out)
            .copied()
            .collect()
    });
    let windows: Vec<usize> = list(&args, "--windows").unwrap_or_else(|| WINDOWS.to_vec());
    let mut transcripts: Vec<Transcript> = Vec::new();
    for c in corpora() {
        if names
            .as_ref()
            .is_some_and(|n| !n.iter().any(|n| n == c.name))
        {
            continue;
        }
        for &wire in c.wires {
            for &seed in &seeds {
                if let Ok(t) = c.corpus.generate(seed, wire).transcript() {
                    transcripts.push(t);
                }
            }
        }
    }
    let jobs = retention::jobs(transcripts.len(), &windows);
    let done = run_jobs(&transcripts, &jobs);
    // (corpus, split, window) → cell
    let mut cells: BTreeMap<(String, Split, usize), Cell> = BTreeMap::new();
    for (t, w, _, o) in &done {
        let tr = &transcripts[*t];
        let key = (tr.source.clone(), tr.split, *w);
        let cell = cells.entry(key).or_default();
        cell.runs += 1;
        cell.insufficient += o.insufficient_budget;
        for (f, &kept) in tr.facts.iter().zip(&o.retained) {
            if f.location.is_tool() {
                cell.tool.add(kept);
            } else {
                cell.conversation.add(kept);
            }
            cell.by_kind.entry(f.kind.name()).or_default().add(kept);
        }
    }
    if args.iter().any(|a| a == "--json") {
        let rows: Vec<_> = cells
            .iter()
            .map(|((c, s, w), cell)| {
                json!({"corpus": c, "split": s.name(), "window": w,
                    "user_assistant": [cell.conversation.kept, cell.conversation.total],
                    "tool": [cell.tool.kept, cell.tool.total],
                    "by_kind": cell.by_kind.iter().map(|(k, t)| (k.to_string(), json!([t.kept, t.total]))).collect::<serde_json::Map<_, _>>(),
                    "insufficient_budget": cell.insufficient, "runs": cell.runs})
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&rows).unwrap_or_default()
        );
        return;
    }
    println!(
        "{:<18} {:<8} {:>7} {:>10} {:>10} {:>7} | by kind",
        "corpus", "split", "window", "u+a %", "tool %", "insuff"
    );
    for ((c, split, w), cell) in &cells {
        let kinds: Vec<String> = cell
            .by_kind
            .iter()
            .map(|(k, t)| format!("{k} {}", t.pct()))
            .collect();
        let twin = Corpus::from_name(c)
            .and_then(|c| c.info().twin)
            .and_then(|t| cells.get(&(t.name().to_string(), *split, *w)))
            .map(|t| format!("  (English: {} / {})", t.conversation.pct(), t.tool.pct()))
            .unwrap_or_default();
        println!(
            "{c:<18} {:<8} {w:>7} {:>10} {:>10} {:>7} | {}{twin}",
            split.name(),
            format!("{} ({})", cell.conversation.pct(), cell.conversation.total),
            format!("{} ({})", cell.tool.pct(), cell.tool.total),
            cell.insufficient,
            kinds.join(", ")
        );
    }
}

/// Replays every job (transcript, window, calling mode) on a manager of
/// its own, on all cores: what each kept (its context dropped).
fn run_jobs(
    transcripts: &[Transcript],
    jobs: &[(usize, usize, CallingMode)],
) -> Vec<(usize, usize, CallingMode, RunOutcome)> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    on_threads(jobs, threads, |rt, &(t, w, mode)| {
        let m = CompactManager::builder(config_for(w))
            .without_config_exporters()
            .without_storage()
            .build()
            .ok()?;
        let id = format!("{}-{w}-{}", transcripts[t].name, mode.name());
        let mut o = rt.block_on(measure(&m, &id, &transcripts[t], mode));
        o.context.clear();
        eprintln!(
            "{id}: {}/{}",
            o.retained.iter().filter(|&&k| k).count(),
            o.retained.len()
        );
        Some((t, w, mode, o))
    })
    .into_iter()
    .flatten()
    .collect()
}
