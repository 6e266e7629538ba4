//! `compact-bench`: every benchmark suite, one JSON document on stdout
//! (docs/performance.md). A binary of its own so that the product does not
//! link the benchmarks; `compact bench …` runs this binary.
//!
//! ```sh
//! cargo run --release -p compact-bench -- tokens --quick
//! ```

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use compact_bench::Suite;

/// In-process benchmarks, JSON out.
#[derive(Parser, Debug)]
#[command(name = "compact-bench", version)]
struct Args {
    /// Which suite: tokens, preflight, server, retention, sidecar, proxy, soak, all
    /// (all but soak).
    #[arg(default_value = "all", value_parser = Suite::NAMES)]
    suite: String,
    /// JSON output (the only format; accepted for scripts).
    #[arg(long)]
    json: bool,
    /// Fewer runs: a smoke test, not a measurement.
    #[arg(long)]
    quick: bool,
    /// soak: how many runs (default 1,000, as CI; 10,000 before a release).
    #[arg(long)]
    runs: Option<usize>,
    /// soak: the seed of the first run (default 7, as CI).
    #[arg(long)]
    seed: Option<u64>,
}

fn main() -> ExitCode {
    // Usage errors exit 2, as `compact`'s bad input does.
    let args = Args::parse();
    if cfg!(debug_assertions) {
        eprintln!(
            "compact bench: warning: benchmarks of a debug build are meaningless; use --release"
        );
    }
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        // A soak with violations (or errors) fails, as `compact-soak` does.
        Ok(false) => ExitCode::FAILURE,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("compact bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> std::io::Result<bool> {
    let suite: Suite = args
        .suite
        .parse()
        .map_err(|e: compact_bench::UnknownSuite| std::io::Error::other(e.to_string()))?;
    let soak = compact_bench::SoakOptions {
        runs: args.runs,
        seed: args.seed,
    };
    let doc = compact_bench::run_with(suite, args.quick, &soak)?;
    let text = serde_json::to_string_pretty(&doc).map_err(std::io::Error::other)?;
    // A reader that went away (`| head`) ends the run quietly: see `main`.
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")?;
    out.flush()?;
    Ok(doc.get("soak").is_none_or(|s| s["passed"] == true))
}
