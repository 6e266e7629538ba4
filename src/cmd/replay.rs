//! `compact replay FILE`: replays a recorded transcript turn by turn through
//! the middleware and prints the savings; optionally writes the final
//! context (`--out`) and every event (`--events`).

use std::path::PathBuf;

use compact_middleware::Message;
use compact_middleware::config::Source;
use compact_middleware::model::Request;
use serde_json::Value;

use super::turns;
use crate::exit::{CliError, CliResult};
use crate::input::MessagesFlags;

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// A JSON array of messages, `{"messages":[...],"tools":[...]}`, or JSONL
    /// (one message per line, e.g. an archived transcript).
    file: PathBuf,
    #[command(flatten)]
    input: MessagesFlags,
    /// Session id used for the replay's events.
    #[arg(long, default_value = "replay")]
    session: String,
    /// Write the context after the last turn here: a JSON array of the
    /// messages in the transcript's wire format.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Append every event to this JSONL file.
    #[arg(long, value_name = "FILE")]
    events: Option<PathBuf>,
}

pub(crate) fn run(args: Args) -> CliResult {
    let text = std::fs::read_to_string(&args.file)
        .map_err(|e| CliError::BadInput(format!("{}: {e}", args.file.display())))?;
    let value =
        parse(&text).map_err(|e| CliError::BadInput(format!("{}: {e}", args.file.display())))?;
    let req = Request::from_value(value, args.input.format)?;
    let (opening, batches) = turns::split_turns(req.messages.clone());
    // Nothing to replay is bad input, not a session that saved everything.
    if req.messages.is_empty() {
        return Err(CliError::BadInput(format!(
            "{}: the transcript has no messages",
            args.file.display()
        )));
    }
    if batches.is_empty() {
        return Err(CliError::BadInput(format!(
            "{}: the transcript has no turns to replay (no user message)",
            args.file.display()
        )));
    }
    let mut loaded = args.input.config.load()?;
    if let Some(path) = &args.events {
        for (key, value) in [
            ("telemetry.exporter", "jsonl".to_string()),
            ("telemetry.jsonl_path", path.display().to_string()),
        ] {
            loaded.set(key, Value::String(value), Source::Flag("--events".into()))?;
        }
    }
    let rt = tokio::runtime::Runtime::new()?;
    let manager = compact_wiring::manager(loaded.config, &rt)?;
    turns::header()?;
    let totals = rt.block_on(turns::drive(
        &manager,
        &args.session,
        opening,
        batches,
        &req.tools,
        std::time::Duration::ZERO,
    ))?;
    rt.block_on(manager.flush_recall(None));
    manager
        .dispatcher()
        .shutdown(std::time::Duration::from_secs(5));
    turns::summary(&totals)?;
    if let Some(path) = &args.out {
        let items: Vec<Value> = totals.context.iter().map(Message::to_value).collect();
        let text = serde_json::to_string_pretty(&Value::Array(items))
            .map_err(|e| CliError::Other(e.into()))?;
        std::fs::write(path, text + "\n").map_err(|e| {
            CliError::Other(anyhow::anyhow!("cannot write {}: {e}", path.display()))
        })?;
    }
    Ok(())
}

/// A JSON document, or JSON lines (each line one item).
fn parse(text: &str) -> Result<Value, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(v) => Ok(v),
        Err(whole) => {
            let mut items = Vec::new();
            for (n, line) in text
                .lines()
                .enumerate()
                .filter(|(_, l)| !l.trim().is_empty())
            {
                items.push(serde_json::from_str(line).map_err(|e| {
                    if n == 0 {
                        format!(
                            "invalid JSON at line {} column {}: {whole}",
                            whole.line(),
                            whole.column()
                        )
                    } else {
                        format!("line {}: invalid JSON: {e}", n + 1)
                    }
                })?);
            }
            Ok(Value::Array(items))
        }
    }
}
