//! `compact demo`: drives a realistic long, tool-heavy coding-agent session
//! through `CompactManager`, printing a line per turn and a savings table.

mod session;

use super::turns;

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
    let opening = decode(session::opening())?;
    let batches = (1..=args.turns)
        .map(|t| decode(session::turn(t, &mut rng)))
        .collect::<CliResult<Vec<_>>>()?;
    println!(
        "compact demo: {} turns, gpt-4o budgeted at {} tokens\n",
        args.turns, args.max_context_tokens
    );
    turns::header();
    let totals = turns::drive(&manager, "demo-session", opening, batches, &tools).await?;
    manager
        .dispatcher()
        .flush(std::time::Duration::from_secs(5));
    turns::summary(&totals);
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
