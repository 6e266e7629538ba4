//! The cost suite alone, without building the `compact` binary (and its
//! AWS SDK): `cargo run --release -p compact-bench --example cost -- --table`.
//!
//! Prints the JSON document of `compact bench cost` (its `cost` member), or
//! with `--table` the table a human reads. `--quick` runs the smoke corpus;
//! `--config FILE` runs compact with that configuration and takes its
//! `models.NAME.price` entries; `--openai-model M` / `--anthropic-model M`
//! choose the prices; `--gap-secs N` spaces the calls; `--windows
//! 16000,32000` and `--no-trajectories` narrow the run;
//! `--no-caller-breakpoints` simulates a client that places no Anthropic
//! breakpoints of its own (compact's alone, unless the configuration sets
//! `policy.cache_breakpoints: off`); `--summary-prompts` also prices
//! compact's own summary requests as a model summarizer would make them,
//! under `summarizer.prompt: fresh` and `agent_prefix`; `--plan-for RULE`
//! (`openai`, `anthropic_5m`, `anthropic_1h`) replays compact once, planned
//! for that rule's prices, instead of once per rule (`each`, the default);
//! `--save FILE` also writes the JSON document to FILE.

fn value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut opts = if args.iter().any(|a| a == "--quick") {
        compact_bench::cost::Options::quick()
    } else {
        compact_bench::cost::Options::full()
    };
    if let Some(path) = value(&args, "--config") {
        match compact_middleware::config::load(Some(std::path::Path::new(path)), &[]) {
            Ok(loaded) => opts.config = loaded.config,
            Err(e) => {
                eprintln!("cost: {e}");
                return std::process::ExitCode::from(2);
            }
        }
    }
    if let Some(m) = value(&args, "--openai-model") {
        opts.openai_model = m.to_string();
    }
    if let Some(m) = value(&args, "--anthropic-model") {
        opts.anthropic_model = m.to_string();
    }
    if let Some(rule) = value(&args, "--plan-for").filter(|r| *r != "each") {
        match compact_bench::cost::Pricing::from_name(rule) {
            Some(p) => opts.plan_for = Some(p),
            None => {
                eprintln!(
                    "cost: --plan-for: {rule:?} is none of each, openai, anthropic_5m, anthropic_1h"
                );
                return std::process::ExitCode::from(2);
            }
        }
    }
    if let Some(g) = value(&args, "--gap-secs").and_then(|g| g.parse().ok()) {
        opts.gap_secs = g;
    }
    if let Some(w) = value(&args, "--windows") {
        opts.windows = w.split(',').filter_map(|s| s.trim().parse().ok()).collect();
    }
    if args.iter().any(|a| a == "--no-caller-breakpoints") {
        opts.caller_breakpoints = false;
    }
    if args.iter().any(|a| a == "--summary-prompts") {
        opts.summary_prompts = true;
    }
    if args.iter().any(|a| a == "--no-trajectories") {
        opts.sessions.trajectories = false;
    }
    let doc = compact_bench::cost::run_with(&opts);
    if let Some(path) = value(&args, "--save") {
        let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        if let Err(e) = std::fs::write(path, text) {
            eprintln!("cost: {path}: {e}");
            return std::process::ExitCode::FAILURE;
        }
    }
    if args.iter().any(|a| a == "--table") {
        print!("{}", compact_bench::cost::report::table(&doc));
    } else {
        println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
    }
    std::process::ExitCode::SUCCESS
}
