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
    /// Which suite: tokens, preflight, server, retention, sidecar, proxy, soak,
    /// cost, recall, all (all but soak and cost).
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
    /// cost: a table a human reads instead of the JSON.
    #[arg(long)]
    table: bool,
    /// cost: a configuration file (compact runs with it; its
    /// `models.NAME.price` entries replace the built-in prices).
    #[arg(long, value_name = "FILE")]
    config: Option<std::path::PathBuf>,
    /// cost: the model whose prices the OpenAI rows use.
    #[arg(long, value_name = "MODEL", default_value = compact_bench::cost::OPENAI_MODEL)]
    openai_model: String,
    /// cost: the model whose prices the Anthropic rows use.
    #[arg(long, value_name = "MODEL", default_value = compact_bench::cost::ANTHROPIC_MODEL)]
    anthropic_model: String,
    /// cost: seconds between two calls of a session (above 300 the
    /// 5-minute cache entries expire between calls).
    #[arg(long, value_name = "SECS", default_value_t = compact_bench::cost::CALL_GAP_SECS)]
    gap_secs: u64,
    /// cost: the simulated agent places no Anthropic breakpoints of its own
    /// (a client that leaves caching to compact, `policy.cache_breakpoints`).
    #[arg(long)]
    no_caller_breakpoints: bool,
    /// cost: what compact's cost model plans for: `each` rule's prices, one
    /// replay per rule, or one rule's, whose replay every rule then prices.
    #[arg(long, value_name = "RULE", default_value = "each",
          value_parser = ["each", "openai", "anthropic_5m", "anthropic_1h"])]
    plan_for: String,
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
    let mut cost = if args.quick {
        compact_bench::cost::Options::quick()
    } else {
        compact_bench::cost::Options::full()
    };
    if let Some(path) = &args.config {
        // The file alone: a benchmark does not read COMPACT_* variables.
        cost.config = compact_middleware::config::load(Some(path), &[])
            .map_err(|e| std::io::Error::other(e.to_string()))?
            .config;
    }
    cost.openai_model.clone_from(&args.openai_model);
    cost.anthropic_model.clone_from(&args.anthropic_model);
    cost.gap_secs = args.gap_secs;
    cost.caller_breakpoints = !args.no_caller_breakpoints;
    cost.plan_for = compact_bench::cost::Pricing::from_name(&args.plan_for);
    let doc = compact_bench::run_all_with(suite, args.quick, &soak, &cost)?;
    let text = if args.table && suite == Suite::Cost {
        compact_bench::cost::report::table(&doc["cost"])
    } else {
        serde_json::to_string_pretty(&doc).map_err(std::io::Error::other)?
    };
    // A reader that went away (`| head`) ends the run quietly: see `main`.
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")?;
    out.flush()?;
    Ok(doc.get("soak").is_none_or(|s| s["passed"] == true))
}
