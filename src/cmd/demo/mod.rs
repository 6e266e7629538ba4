//! `compact demo`: drives a realistic long, tool-heavy coding-agent session
//! through `CompactManager`, printing a line per turn and a savings table.

mod session;

use std::path::PathBuf;

use compact_middleware::config::{Config, ExporterKind};
use compact_middleware::model::{Format, Request};
use compact_middleware::{CompactManager, Message};
use serde_json::Value;

use crate::exit::{CliError, CliResult};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Number of agent turns to drive.
    #[arg(long, default_value_t = 60)]
    turns: usize,
    /// Context window the demo budgets for (small, so compaction happens often).
    #[arg(long, default_value_t = 64_000)]
    max_context_tokens: u64,
    /// Seed of the scripted session.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Write every compaction event to this JSONL file.
    #[arg(long, value_name = "FILE")]
    events: Option<PathBuf>,
    /// Do not start or keep a trace server (scripted use).
    #[arg(long)]
    no_serve: bool,
}

pub fn run(args: Args) -> CliResult {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(drive(args))
}

async fn drive(args: Args) -> CliResult {
    let mut config = Config {
        model: "gpt-4o".into(),
        max_context_tokens: Some(args.max_context_tokens as usize),
        ..Config::default()
    };
    if let Some(path) = &args.events {
        config.telemetry.exporter = ExporterKind::Jsonl;
        config.telemetry.jsonl_path = path.display().to_string();
    }
    config.check()?;
    let manager = CompactManager::new(config)?;
    let tools = session::tools();
    let mut rng = session::Rng::new(args.seed);

    // The agent keeps what the middleware returns and appends each new turn.
    let mut context: Vec<Message> = decode(session::opening())?;
    let mut raw_total = 0usize; // tokens an uncompacted agent would send
    let mut raw_history: Vec<Message> = context.clone();
    let (mut sent_total, mut compactions) = (0usize, 0usize);
    println!(
        "compact demo: {} turns, gpt-4o budgeted at {} tokens\n",
        args.turns, args.max_context_tokens
    );
    println!(
        "{:>4}  {:>8} → {:>8}  {:>6}  tiers",
        "turn", "before", "after", "usage"
    );
    for t in 1..=args.turns {
        let new = decode(session::turn(t, &mut rng))?;
        raw_history.extend(new.iter().cloned());
        context.extend(new);
        let outcome = manager
            .preflight_with(
                "demo-session",
                compact_middleware::PreflightRequest {
                    messages: context,
                    tools: tools.clone(),
                    ..Default::default()
                },
            )
            .await?;
        let r = &outcome.report;
        raw_total += manager.estimate(&raw_history, &tools).t_est;
        sent_total += r.tokens_after;
        if r.triggered {
            compactions += 1;
        }
        let tiers: Vec<String> = r.tiers.iter().map(|t| format!("{t:?}")).collect();
        println!(
            "{t:>4}  {:>8} → {:>8}  {:>5.1}%  {}",
            r.tokens_before,
            r.tokens_after,
            r.usage_after * 100.0,
            if tiers.is_empty() {
                "-".to_string()
            } else {
                tiers.join(", ")
            }
        );
        context = outcome.messages;
    }
    manager
        .dispatcher()
        .flush(std::time::Duration::from_secs(5));
    println!();
    println!("{:<40} {:>12}", "turns", args.turns);
    println!("{:<40} {:>12}", "compactions", compactions);
    println!("{:<40} {:>12}", "tokens sent without compaction", raw_total);
    println!("{:<40} {:>12}", "tokens sent with compaction", sent_total);
    println!(
        "{:<40} {:>11.1}%",
        "saved",
        100.0 * (1.0 - sent_total as f64 / raw_total.max(1) as f64)
    );
    println!("{:<40} {:>12}", "final context messages", context.len());
    if let Some(p) = &args.events {
        println!("{:<40} {:>12}", "events written to", p.display());
    }
    if !args.no_serve {
        println!(
            "\nThe live timeline (compact serve) is not part of this build yet; events go to --events FILE."
        );
    }
    Ok(())
}

fn decode(items: Vec<Value>) -> CliResult<Vec<Message>> {
    Ok(Request::from_value(Value::Array(items), Format::Chat)
        .map_err(|e| CliError::Other(anyhow::anyhow!("demo script produced bad input: {e}")))?
        .messages)
}
