//! `compact bench`: in-process benchmarks, one JSON document out. The
//! benchmarks live in the `compact-bench` crate.

use compact_bench::Suite;

use crate::exit::{CliError, CliResult};
use crate::input::print_json;

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Which suite: tokens, preflight, server, retention, sidecar, all.
    #[arg(default_value = "all", value_parser = Suite::NAMES)]
    suite: String,
    /// JSON output (the only format; accepted for scripts).
    #[arg(long)]
    json: bool,
    /// Fewer runs: a smoke test, not a measurement.
    #[arg(long)]
    quick: bool,
}

pub(crate) fn run(args: Args) -> CliResult {
    if cfg!(debug_assertions) {
        eprintln!("compact: warning: benchmarks of a debug build are meaningless; use --release");
    }
    let suite: Suite = args
        .suite
        .parse()
        .map_err(|e: compact_bench::UnknownSuite| CliError::BadInput(e.to_string()))?;
    print_json(&compact_bench::run(suite, args.quick)?)
}
