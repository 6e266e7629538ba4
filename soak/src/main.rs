//! `compact-soak`: thousands of randomized long agent sessions through the
//! middleware, with injected faults, checking every invariant of docs/design.md §12
//! after every preflight. Each run has its own seed; a failing one replays
//! with `--seed S --runs 1`.

mod faults;
mod report;
mod run;
mod workload;

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};

#[derive(Parser, Debug)]
#[command(
    name = "compact-soak",
    about = "Randomized long-session soak test of the compact middleware"
)]
struct Args {
    /// Number of runs.
    #[arg(long, default_value_t = 1000)]
    runs: usize,
    /// Seed of the first run; run i uses seed + i.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Runs in flight at once.
    #[arg(long, default_value_t = 2)]
    concurrency: usize,
    /// Turns per session, MIN..MAX.
    #[arg(long, default_value = "20..80", value_parser = parse_range)]
    turns: (usize, usize),
    /// Write the JSON report here.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Fail when the success rate (in %) is below this.
    #[arg(long, default_value_t = 100.0)]
    min_success: f64,
    /// No progress bar (CI logs).
    #[arg(long)]
    quiet: bool,
    /// Print the drawn plan and the first violations of each failing run.
    #[arg(long)]
    verbose: bool,
}

fn parse_range(s: &str) -> Result<(usize, usize), String> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| format!("expected MIN..MAX, got {s:?}"))?;
    let a: usize = a.trim().parse().map_err(|e| format!("{a:?}: {e}"))?;
    let b: usize = b.trim().parse().map_err(|e| format!("{b:?}: {e}"))?;
    if a == 0 || a > b {
        return Err(format!("expected 1 <= MIN <= MAX, got {s:?}"));
    }
    Ok((a, b))
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let started = Instant::now();
    let bar = if args.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(args.runs as u64)
    };
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} runs {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let results = rt.block_on(async {
        let server = std::sync::Arc::new(faults::FaultServer::start()?);
        let sem = std::sync::Arc::new(tokio::sync::Semaphore::new(args.concurrency.max(1)));
        let mut handles = Vec::with_capacity(args.runs);
        for i in 0..args.runs {
            let seed = args.seed.wrapping_add(i as u64);
            let permit = sem.clone().acquire_owned().await;
            let bar = bar.clone();
            let turns = args.turns;
            let server = server.clone();
            let verbose = args.verbose;
            handles.push(tokio::spawn(async move {
                let r = run::run(seed, turns, server).await;
                if !r.violations.is_empty() {
                    bar.suspend(|| {
                        eprintln!(
                            "run seed {seed}: {} violation(s), first: {:?}",
                            r.violations.len(),
                            r.violations[0]
                        )
                    });
                    if verbose {
                        bar.suspend(|| eprintln!("  plan: {}", r.plan));
                        for v in r.violations.iter().take(5) {
                            bar.suspend(|| eprintln!("  {v:?}"));
                        }
                    }
                }
                bar.inc(1);
                drop(permit);
                r
            }));
        }
        let mut out = Vec::with_capacity(handles.len());
        for h in handles {
            out.push(h.await?);
        }
        let posts = server.received.load(std::sync::atomic::Ordering::Relaxed);
        anyhow::Ok((out, posts))
    })?;
    let (results, telemetry_posts) = results;
    bar.finish_and_clear();
    let mut report = report::Report::build(&results, started.elapsed());
    report.telemetry_posts_received = telemetry_posts;
    print!("{}", report.table());
    if let Some(path) = &args.report {
        let text = serde_json::to_string_pretty(&report.json())?;
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    if !report.violations.is_empty() {
        bail!("{} invariant violation kind(s)", report.violations.len());
    }
    if report.success_rate * 100.0 < args.min_success {
        bail!(
            "success rate {:.2}% below --min-success {}",
            report.success_rate * 100.0,
            args.min_success
        );
    }
    Ok(())
}
