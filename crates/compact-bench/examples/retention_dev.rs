//! The tuning loop: retention on what tuning may look at, and never on the
//! held-out split. Runs the generated sessions (seeds 1-2), the fixtures,
//! the named corpora at the tuning seeds (1-2) and at fresh "dev" seeds
//! (default 5-8: neither tuned on before nor the reported held-out split),
//! and the real trajectories that are not held out. Seeds 3 and 4 (the
//! held-out split) are refused.
//!
//! `cargo run --release -p compact-bench --example retention_dev -- [--seeds 1,2,5,6,7,8]
//! [--windows 8000,16000] [--both] [--lost FILTER] [--traj DIR] [--summary-pct 0.25]…`
//!
//! `--traj DIR` adds another directory of trajectories in the shared format
//! (its `split.json` marks the held-out runs, which are skipped).
//!
//! Prints one line per (corpus, group, window): user+assistant % and tool %
//! (for the trajectories: task+findings / files+tests), then by kind; and
//! one line per window over everything. `--lost FILTER` lists the facts
//! lost by the sessions whose name contains FILTER.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

use compact_bench::args::list;
use compact_bench::corpus::{self, Agent, Location, SEED_SPLIT, SessionShape, Split, Transcript};
use compact_bench::retention::{CallingMode, config_for, measure, on_threads};
use compact_middleware::CompactManager;
use compact_middleware::model::Format;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let seeds: Vec<u64> = list(&args, "--seeds").unwrap_or_else(|| vec![1, 2, 5, 6, 7, 8]);
    if let Some(s) = seeds.iter().find(|s| SEED_SPLIT.held_out.contains(s)) {
        eprintln!("seed {s} is in the held-out split: not for tuning");
        std::process::exit(2);
    }
    let windows: Vec<usize> =
        list(&args, "--windows").unwrap_or_else(|| vec![8_000, 12_000, 16_000, 32_000]);
    let modes: &[CallingMode] = if args.iter().any(|a| a == "--both") {
        &CallingMode::ALL
    } else {
        &[CallingMode::FedBack]
    };
    // `--summary-pct 0.2`: try another `policy.summary_max_pct`.
    let summary_pct: Option<f64> = list(&args, "--summary-pct").and_then(|v| v.first().copied());
    let lost_filter = args
        .iter()
        .position(|a| a == "--lost")
        .and_then(|i| args.get(i + 1))
        .cloned();

    // (transcript, group)
    let ts = transcripts(&args, &seeds);

    let jobs: Vec<(usize, usize, CallingMode)> = (0..ts.len())
        .flat_map(|t| {
            windows
                .iter()
                .flat_map(move |&w| modes.iter().map(move |&m| (t, w, m)))
        })
        .collect();
    let insufficient = AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let results = on_threads(&jobs, threads, |rt, &(t, window, mode)| {
        let mut config = config_for(window);
        if let Some(pct) = summary_pct {
            config.policy.summary_max_pct = pct;
        }
        let m = CompactManager::builder(config)
            .without_config_exporters()
            .without_storage()
            .build()
            .ok()?;
        let id = format!("{}-{window}-{}", ts[t].0.name, mode.name());
        let out = rt.block_on(measure(&m, &id, &ts[t].0, mode));
        insufficient.fetch_add(out.insufficient_budget, Ordering::Relaxed);
        if let Some(f) = &lost_filter
            && ts[t].0.name.contains(f.as_str())
        {
            for (fact, kept) in ts[t].0.facts.iter().zip(&out.retained) {
                if !kept {
                    // A reader that went away (`| head`) ends the output, not the run.
                    let _ = writeln!(
                        std::io::stdout(),
                        "LOST {window} {} {:?} {:?} t{} {:?}",
                        ts[t].0.name,
                        fact.kind,
                        fact.location,
                        fact.turn,
                        fact.probes
                    );
                }
            }
        }
        Some(out.retained)
    });

    // (corpus, group, window) -> cell
    let mut cells: BTreeMap<(String, &str, usize), Cell> = BTreeMap::new();
    let mut total: BTreeMap<usize, Cell> = BTreeMap::new();
    for (&(t, w, _), r) in jobs.iter().zip(&results) {
        let Some(r) = r else { continue };
        let (tr, group) = &ts[t];
        for (fact, &kept) in tr.facts.iter().zip(r) {
            for cell in [
                cells.entry((tr.source.clone(), group, w)).or_default(),
                total.entry(w).or_default(),
            ] {
                if fact.location == Location::Tool {
                    cell.2 += usize::from(kept);
                    cell.3 += 1;
                } else {
                    cell.0 += usize::from(kept);
                    cell.1 += 1;
                }
                let k = cell
                    .4
                    .entry(format!("{:?}", fact.kind).to_lowercase())
                    .or_default();
                k.0 += usize::from(kept);
                k.1 += 1;
            }
        }
    }
    print_table(&cells, &total, insufficient.load(Ordering::Relaxed));
}

/// (ua kept, ua all, tool kept, tool all, by kind)
type Cell = (usize, usize, usize, usize, BTreeMap<String, (usize, usize)>);

/// The sessions to replay, each with its group: the generated agents and
/// the fixtures, the named corpora at `seeds`, and the tuning part of the
/// real trajectories (and of each `--traj DIR`).
fn transcripts(args: &[String], seeds: &[u64]) -> Vec<(Transcript, &'static str)> {
    let mut ts: Vec<(Transcript, &'static str)> = Vec::new();
    for seed in [1, 2] {
        for agent in Agent::ALL {
            for wire in [Format::Chat, Format::Responses] {
                if let Ok(t) = corpus::generate(seed, agent, wire, &SessionShape::FULL).transcript()
                {
                    ts.push((t, "tune"));
                }
            }
        }
    }
    if let Ok(f) = corpus::fixtures::all() {
        ts.extend(f.into_iter().map(|t| (t, "tune")));
    }
    for c in corpus::corpora() {
        for &wire in c.wires {
            for &seed in seeds {
                let group = if SEED_SPLIT.tune.contains(&seed) {
                    "tune"
                } else {
                    "dev"
                };
                if let Ok(t) = c.corpus.generate(seed, wire).transcript() {
                    ts.push((t, group));
                }
            }
        }
    }
    // The shared trajectories, and any other directory of them (`--traj
    // DIR`, repeatable: its runs count under the directory's name).
    let mut dirs: Vec<(std::path::PathBuf, String)> = Vec::new();
    match corpus::trajectories::dir() {
        Some(d) => dirs.push((d, "real-trajectories".into())),
        None => eprintln!("skipped: ../shared/real-trajectories not found"),
    }
    for (i, a) in args.iter().enumerate() {
        if a == "--traj"
            && let Some(d) = args.get(i + 1)
        {
            let d = std::path::PathBuf::from(d);
            let name = d
                .file_name()
                .map_or("trajectories".into(), |n| n.to_string_lossy().into_owned());
            dirs.push((d, name));
        }
    }
    for (d, name) in dirs {
        match corpus::trajectories::load_dir(&d) {
            Ok(all) => ts.extend(all.into_iter().filter(|t| t.split == Split::Tune).map(
                |mut t| {
                    t.source = name.clone();
                    (t, "tune")
                },
            )),
            Err(e) => eprintln!("{e}"),
        }
    }
    ts.retain(|(t, _)| {
        t.split == Split::Tune || !corpus::trajectories::HELD_OUT.contains(&t.name.as_str())
    });
    ts
}

/// The table: per corpus, group and window, then all at each window.
fn print_table(
    cells: &BTreeMap<(String, &str, usize), Cell>,
    total: &BTreeMap<usize, Cell>,
    insufficient: usize,
) {
    let mut out = std::io::stdout().lock();
    let pct = |k: usize, n: usize| {
        if n == 0 {
            "-".to_string()
        } else {
            format!("{:.1}", 100.0 * k as f64 / n as f64)
        }
    };
    let _ = writeln!(
        out,
        "{:<20} {:<5} {:>7} {:>6} {:>6} | by kind",
        "corpus", "group", "window", "u+a", "tool"
    );
    for ((c, g, w), cell) in cells {
        let kinds: Vec<String> = cell
            .4
            .iter()
            .map(|(k, &(a, n))| format!("{k} {}", pct(a, n)))
            .collect();
        let _ = writeln!(
            out,
            "{c:<20} {g:<5} {w:>7} {:>6} {:>6} | {}",
            pct(cell.0, cell.1),
            pct(cell.2, cell.3),
            kinds.join(", ")
        );
    }
    for (w, cell) in total {
        let _ = writeln!(
            out,
            "ALL                  -     {w:>7} {:>6} {:>6} | all {}",
            pct(cell.0, cell.1),
            pct(cell.2, cell.3),
            pct(cell.0 + cell.2, cell.1 + cell.3)
        );
    }
    let _ = writeln!(out, "insufficient budget: {}", insufficient);
}
