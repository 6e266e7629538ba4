//! `compact bench`: in-process benchmarks, one JSON document out.

use compact_middleware::bench;
use serde_json::json;

use crate::exit::{CliError, CliResult};
use crate::input::print_json;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Which suite: tokens, preflight, server, all.
    #[arg(default_value = "all", value_parser = ["tokens", "preflight", "server", "all"])]
    suite: String,
    /// JSON output (the only format; accepted for scripts).
    #[arg(long)]
    json: bool,
    /// Fewer runs: a smoke test, not a measurement.
    #[arg(long)]
    quick: bool,
}

pub fn run(args: Args) -> CliResult {
    if cfg!(debug_assertions) {
        eprintln!("compact: warning: benchmarks of a debug build are meaningless; use --release");
    }
    let mut doc = serde_json::Map::new();
    doc.insert(
        "machine".into(),
        json!({
            "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            "os": std::env::consts::OS,
            "arch": std::env::consts::ARCH,
        }),
    );
    if matches!(args.suite.as_str(), "tokens" | "all") {
        doc.insert("tokens".into(), bench::tokens_suite(args.quick));
    }
    if matches!(args.suite.as_str(), "preflight" | "all") {
        doc.insert("preflight".into(), bench::preflight_suite(args.quick));
    }
    if matches!(args.suite.as_str(), "server" | "all") {
        let rt = tokio::runtime::Runtime::new()?;
        let report = rt.block_on(ariadne_server::bench::run(
            ariadne_server::bench::BenchOptions::default(),
        ));
        doc.insert("server".into(), report);
    }
    if doc.len() == 1 {
        return Err(CliError::BadInput(format!(
            "unknown suite {:?}",
            args.suite
        )));
    }
    print_json(&serde_json::Value::Object(doc))
}
