//! `compact bench`: in-process benchmarks, JSON out.

use crate::exit::CliResult;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Which suite: tokens, preflight, all.
    #[arg(default_value = "all")]
    suite: String,
    /// JSON output (the default; kept for scripts).
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> CliResult {
    let _ = args;
    Ok(())
}
