//! `compact bench`: in-process benchmarks, JSON out.

use crate::exit::CliResult;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Which suite: tokens, preflight, server, all.
    #[arg(default_value = "all")]
    suite: String,
    /// JSON output (the default; kept for scripts).
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> CliResult {
    if args.suite == "server" {
        let rt = tokio::runtime::Runtime::new()?;
        let report = rt.block_on(ariadne_server::bench::run(
            ariadne_server::bench::BenchOptions::default(),
        ));
        println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    }
    Ok(())
}
