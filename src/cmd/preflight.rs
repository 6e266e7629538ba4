//! `compact preflight`: stdin JSON in, compacted JSON of the same shape out.

use std::path::PathBuf;

use compact_middleware::PreflightRequest;
use compact_middleware::config::Source;
use compact_middleware::manager::Overlays;
use compact_middleware::trigger::Forced;
use serde_json::Value;

use crate::exit::{CliError, CliResult};
use crate::input::{MessagesFlags, read_request};
use crate::out::outln;

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    #[command(flatten)]
    input: MessagesFlags,
    /// Session id (the trace id of the events).
    #[arg(long, default_value = "cli")]
    session: String,
    /// Compact even if nothing triggers.
    #[arg(long)]
    force: bool,
    /// Input whose tool pairing is already broken (orphaned results, unanswered calls):
    /// report it (a warning here, `input_problems` in the report), reject it (strict,
    /// exit 2), or fix it (drop orphans, answer calls with a placeholder). Sets
    /// `policy.repair`.
    #[arg(long, value_name = "report|strict|fix")]
    repair: Option<String>,
    /// Same as `--repair strict`.
    #[arg(long)]
    strict: bool,
    /// The provider's reported `usage.input_tokens` of the response that produced the
    /// last assistant reply in the input: the estimate becomes N plus the estimate of
    /// that reply and what follows it (the report says `basis: usage` and the observed
    /// error of the pure estimate). Or the provider's whole usage object as JSON
    /// (`'{"prompt_tokens": N, "prompt_tokens_details": {"cached_tokens": C}}'`,
    /// Anthropic's with `cache_read_input_tokens` and `cache_creation_input_tokens`):
    /// its cache figures are reported too (`report.cache`, the `compact.preflight` event).
    #[arg(long, value_name = "N|JSON", value_parser = crate::input::usage_arg)]
    usage: Option<crate::input::UsageArg>,
    /// Archive transcripts, summaries and events to the filesystem adapter at DIR.
    #[arg(long, value_name = "DIR")]
    archive: Option<PathBuf>,
    /// Append the compaction events to this JSONL file.
    #[arg(long, value_name = "FILE")]
    events: Option<PathBuf>,
    /// Keep our `meta`/`compacted` fields in the output (the shape before
    /// 0.2; by default the output is what the provider may receive).
    #[arg(long, conflicts_with = "provider")]
    keep_meta: bool,
    /// Strip our `meta`/`compacted` fields: the default now, kept so that
    /// existing scripts still run.
    #[arg(long, hide = true)]
    provider: bool,
    /// Keep session state in this SQLite file, so that separate runs of one
    /// session continue its summary chain (sets `state.store: sqlite` and
    /// `state.path`).
    #[arg(long, value_name = "FILE")]
    state: Option<PathBuf>,
    /// Print the report on stderr as JSON.
    #[arg(long)]
    report: bool,
    /// Apply the strategy overlay of this agent of the configuration's
    /// `agents:` (over the defaults, under the session's conversation
    /// overlay).
    #[arg(long, value_name = "NAME")]
    agent: Option<String>,
}

pub(crate) fn run(args: Args) -> CliResult {
    let mut loaded = args.input.config.load()?;
    if let Some(path) = &args.events {
        loaded.set(
            "telemetry.exporter",
            Value::String("jsonl".into()),
            Source::Flag("--events".into()),
        )?;
        loaded.set(
            "telemetry.jsonl_path",
            Value::String(path.display().to_string()),
            Source::Flag("--events".into()),
        )?;
    }
    if let Some(dir) = &args.archive {
        for (key, value) in [
            ("storage.adapter", "fs".to_string()),
            ("storage.path", dir.display().to_string()),
        ] {
            loaded.set(key, Value::String(value), Source::Flag("--archive".into()))?;
        }
    }
    if let Some(mode) = &args.repair {
        loaded.set(
            "policy.repair",
            Value::String(mode.clone()),
            Source::Flag("--repair".into()),
        )?;
    }
    if let Some(file) = &args.state {
        compact_wiring::set_state_file(&mut loaded, file, "--state")?;
    }
    let rt = tokio::runtime::Runtime::new()?;
    let req = read_request(args.input.format)?;
    let manager = compact_wiring::manager(loaded.config, &rt)?;
    let outcome = rt.block_on(manager.preflight_with(
        &args.session,
        PreflightRequest {
            messages: req.messages.clone(),
            tools: req.tools.clone(),
            forced: args.force.then_some(Forced::Manual),
            note: args.force.then(|| "compact preflight --force".to_string()),
            strict: args.strict,
            usage: args.usage.as_ref().map(|u| u.tokens),
            usage_details: args.usage.as_ref().and_then(|u| u.details),
            overlays: Overlays {
                agent: args.agent.clone(),
                request: None,
            },
        },
    ));
    // The recall index is written off the preflight's path: this process
    // is about to exit, so wait for it.
    rt.block_on(manager.flush_recall(None));
    finish_events(manager.dispatcher());
    let outcome = outcome?;
    warn_about_input(&outcome.report);
    if args.usage.is_some() && outcome.report.anchor.is_none() {
        eprintln!(
            "compact: warning: --usage ignored: the input has no assistant reply whose request it could be the usage of"
        );
    }
    if args.report {
        eprintln!(
            "{}",
            serde_json::to_string(&outcome.report).map_err(|e| CliError::Other(e.into()))?
        );
    }
    let tools = outcome.tools;
    let (mut messages, mut placed) = (outcome.messages, outcome.report.cache_breakpoints);
    compact_middleware::cache::breakpoints::fit_request(&req, &mut messages, &mut placed);
    let mut out = req.to_value(&messages, !args.keep_meta);
    // `recall.advertise` added the compact_recall tool: an object request
    // carries it in its `tools` (a bare array has nowhere to put it).
    if tools != req.tools
        && let Some(o) = out.as_object_mut()
    {
        o.insert("tools".into(), serde_json::Value::Array(tools));
    }
    let s = serde_json::to_string_pretty(&out).map_err(|e| CliError::Other(e.into()))?;
    outln!("{s}")?;
    Ok(())
}

/// How long a one-shot command waits for its exporters at exit: a dead
/// collector costs at most this, once.
const FLUSH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Gives the exporters at most [`FLUSH_TIMEOUT`] to take
/// the events of a one-shot command, never longer (a dead collector costs
/// that, once), then says on stderr what each one did not take.
pub(crate) fn finish_events(dispatcher: &compact_middleware::events::Dispatcher) {
    let timeout = FLUSH_TIMEOUT;
    dispatcher.shutdown(timeout);
    let stats = dispatcher.stats();
    let accepted = stats.emitted.saturating_sub(stats.dropped);
    for e in &stats.exporters {
        let pending = accepted.saturating_sub(e.exported + e.failed_events + e.lagged);
        if pending > 0 {
            eprintln!(
                "compact: warning: exporter {} did not take {pending} event(s) within the {}s flush timeout; they are dropped",
                e.name,
                timeout.as_secs()
            );
        }
    }
}

/// Pairing problems the input already had go to stderr: kept as they are
/// (`policy.repair: report`), or what was repaired (`fix`).
fn warn_about_input(report: &compact_middleware::Report) {
    if report.input_problems.is_empty() {
        return;
    }
    let problems: Vec<String> = report
        .input_problems
        .iter()
        .map(ToString::to_string)
        .collect();
    if report.repaired.is_empty() {
        eprintln!(
            "compact: warning: the input already has {} tool pairing problem(s), passed on as they are (--repair fix repairs them, --repair strict rejects them): {}",
            problems.len(),
            problems.join("; ")
        );
    } else {
        eprintln!(
            "compact: repaired {} tool pairing problem(s) (the input as received is archived): {}",
            problems.len(),
            problems.join("; ")
        );
    }
}
