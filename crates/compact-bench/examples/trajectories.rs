//! Debugging aid: replays the real agent trajectories of
//! `../shared/real-trajectories` (or `$COMPACT_TRAJECTORIES`) turn by turn at
//! each window and prints, per run, the probes kept by kind, the
//! insufficient-budget errors and (with `--summary`) the final summary;
//! `--lost` lists the probes lost. Held-out runs are skipped unless
//! `--held-out` (then only they run) or `--all`.
//! `cargo run --release -p compact-bench --example trajectories -- [--windows 8000,16000] [FILTER] [--summary] [--lost] [--raw] [--summary-pct 0.25] [--config FILE]`

use std::collections::BTreeMap;

use compact_bench::args::list;
use compact_bench::corpus::{Split, trajectories};
use compact_bench::retention::{CallingMode, SUMMARY_MARK, config_for, measure};
use compact_middleware::CompactManager;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |f: &str| args.iter().any(|a| a == f);
    let windows: Vec<usize> =
        list(&args, "--windows").unwrap_or_else(|| vec![8_000, 16_000, 32_000]);
    // `--summary-pct 0.2`: try another `policy.summary_max_pct`.
    let summary_pct: Option<f64> = args
        .iter()
        .position(|a| a == "--summary-pct")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok());
    let filter = filter_arg(&args);
    let Some(dir) = trajectories::dir() else {
        eprintln!("skipped: ../shared/real-trajectories not found");
        return;
    };
    let all = match trajectories::load_dir(&dir) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let wanted = |s: Split| {
        flag("--all")
            || if flag("--held-out") {
                s == Split::HeldOut
            } else {
                s == Split::Tune
            }
    };
    let mode = if flag("--raw") {
        CallingMode::RawResent
    } else {
        CallingMode::FedBack
    };
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    for &w in &windows {
        let mut by_kind: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        let mut insufficient = 0;
        let mut runs_failing = 0;
        for t in all
            .iter()
            .filter(|t| t.name.contains(&filter) && wanted(t.split))
        {
            let mut config = config_at(&args, w);
            if let Some(pct) = summary_pct {
                config.policy.summary_max_pct = pct;
            }
            let Ok(m) = CompactManager::builder(config)
                .without_config_exporters()
                .without_storage()
                .build()
            else {
                return;
            };
            let out = rt.block_on(measure(&m, &t.name, t, mode));
            insufficient += out.insufficient_budget;
            runs_failing += usize::from(out.insufficient_budget > 0);
            let kept = out.retained.iter().filter(|&&k| k).count();
            println!(
                "## {w} {} {kept}/{} insufficient {} compactions {} summary {:?} final {}",
                t.name,
                t.facts.len(),
                out.insufficient_budget,
                out.compactions,
                out.final_summary_tokens,
                out.final_tokens
            );
            for (f, k) in t.facts.iter().zip(&out.retained) {
                let kind = match f.kind {
                    compact_bench::corpus::FactKind::Identifier => "problem",
                    k => k.name(),
                };
                let e = by_kind.entry(kind.to_string()).or_default();
                e.0 += usize::from(*k);
                e.1 += 1;
                if !k && flag("--lost") {
                    println!("   LOST {kind:<8} t{:<3} {}", f.turn, f.probes[0]);
                }
            }
            if flag("--summary") {
                for msg in &out.context {
                    let text = msg.plain_text();
                    if text.starts_with(SUMMARY_MARK) {
                        println!("{text}\n--");
                    }
                }
            }
        }
        let (k, n) = by_kind
            .values()
            .fold((0, 0), |(a, b), (x, y)| (a + x, b + y));
        print!(
            "# window {w}: {k}/{n} = {:.1}%",
            100.0 * k as f64 / n.max(1) as f64
        );
        for (kind, (k, n)) in &by_kind {
            print!("  {kind} {k}/{n}");
        }
        println!("  insufficient {insufficient} (runs {runs_failing})");
    }
}

/// `--config FILE`: that configuration at window `w`; else the suite's
/// default configuration at `w`. Exits with 2 on a bad file.
fn config_at(args: &[String], w: usize) -> compact_middleware::config::Config {
    let Some(path) = args
        .iter()
        .position(|a| a == "--config")
        .and_then(|i| args.get(i + 1))
    else {
        return config_for(w);
    };
    match compact_middleware::config::load(Some(std::path::Path::new(path)), &[]) {
        Ok(loaded) => compact_middleware::config::Config {
            max_context_tokens: Some(w),
            ..loaded.config
        },
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    }
}

/// The first argument that is neither a flag nor a flag's value: the run
/// name filter ("" for all).
fn filter_arg(args: &[String]) -> String {
    args.iter()
        .enumerate()
        .find(|(i, a)| {
            !a.starts_with("--")
                && (*i == 0
                    || !matches!(
                        args[i - 1].as_str(),
                        "--windows" | "--summary-pct" | "--config"
                    ))
        })
        .map(|(_, a)| a.clone())
        .unwrap_or_default()
}
