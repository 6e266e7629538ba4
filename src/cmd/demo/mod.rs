//! `compact demo`: starts the trace server (or uses a running one), drives a
//! realistic long, tool-heavy coding-agent session through `CompactManager`
//! with the Ariadne exporter, at the pace of a real agent (a simulated model
//! call after each turn), prints a line per turn and a savings table, ends
//! the session's trace, then keeps serving so the timeline can be explored.
//! Each run is a new session, `demo-<UTC time>`.

mod session;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ariadne_exporter::{AriadneExporter, HttpOptions};
use ariadne_server::ServerConfig;
use compact_middleware::config::{Config, ExporterKind};
use compact_middleware::events::{Event, TraceEvent, now_rfc3339};
use compact_middleware::model::{Format, Request};
use compact_middleware::{CompactManager, Message};
use serde_json::Value;

use super::turns;
use crate::exit::{CliError, CliResult};
use crate::out::outln;

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Number of agent turns to drive.
    #[arg(long, default_value_t = 60)]
    turns: usize,
    /// Context window the demo budgets for (small, so compaction happens often).
    #[arg(long, default_value_t = 64_000)]
    max_context_tokens: u64,
    /// Seed of the scripted session.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Send events to this running server instead of starting one.
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// Address for the server the demo starts.
    #[arg(long, default_value = "127.0.0.1:5175")]
    addr: std::net::SocketAddr,
    /// Also write every event to this JSONL file.
    #[arg(long, value_name = "FILE")]
    events: Option<PathBuf>,
    /// Start no server and exit when the session is done (scripted use).
    #[arg(long)]
    no_serve: bool,
    /// Milliseconds each simulated model call takes, after every turn (0: none).
    #[arg(long, value_name = "MS", default_value_t = 400)]
    pace: u64,
}

/// A session id of its own for each run: `demo-20260101T120000Z`, so a
/// second run never merges into the first.
fn session_id() -> String {
    let now = now_rfc3339();
    let digits: String = now
        .chars()
        .take(19)
        .filter(char::is_ascii_alphanumeric)
        .collect();
    format!("demo-{digits}Z")
}

const AGENT_NAME: &str = "demo-coding-agent";

pub(crate) fn run(args: Args) -> CliResult {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(drive(args))
}

async fn drive(args: Args) -> CliResult {
    // Everything the demo writes (server log, archive) goes to one temporary
    // directory, removed at the end.
    let work = std::env::temp_dir().join(format!("compact-demo-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let server = if args.url.is_none() && !args.no_serve {
        Some(serve(&args, &work).await?)
    } else {
        None
    };
    let base = match (&args.url, &server) {
        (Some(url), _) => Some(url.trim_end_matches('/').to_string()),
        (None, Some(running)) => Some(running.url()),
        (None, None) => None,
    };

    let manager = demo_manager(&args, &work, base.as_deref())?;
    let tools = session::tools();
    let mut rng = compact_fixtures::Rng::new(args.seed);

    // The agent keeps what the middleware returns and appends each new turn.
    let opening = decode(session::opening())?;
    let batches = (1..=args.turns)
        .map(|t| decode(session::turn(t, &mut rng)))
        .collect::<CliResult<Vec<_>>>()?;
    let session = session_id();
    outln!(
        "compact demo: session {session}, {} turns, gpt-4o budgeted at {} tokens{}\n",
        args.turns,
        args.max_context_tokens,
        base.as_deref()
            .map(|u| format!(", events to {u}"))
            .unwrap_or_default()
    )?;
    turns::header()?;
    let totals = turns::drive(
        &manager,
        &session,
        opening,
        batches,
        &tools,
        Duration::from_millis(args.pace),
    )
    .await?;
    // The session is over: say so on its trace.
    manager.dispatcher().emit(session_end(&session, &totals));
    manager
        .dispatcher()
        .flush_async(Duration::from_secs(10))
        .await;
    turns::summary(&totals)?;
    let stats = manager.dispatcher().stats();
    outln!("{:<40} {:>12}", "events exported", stats.exported)?;
    if let Some(p) = &args.events {
        outln!("{:<40} {:>12}", "events written to", p.display())?;
    }
    if let Some(running) = server {
        outln!(
            "\nTimeline: {url}/?trace={session}   API: {url}/api/sessions/{session}   live: compact tail --url {url}\nServing until Ctrl-C.",
            url = running.url()
        )?;
        let _ = tokio::signal::ctrl_c().await;
        let _ = outln!("stopping");
        manager.dispatcher().shutdown(Duration::from_secs(2));
        running
            .shutdown()
            .await
            .map_err(|e| CliError::Other(e.into()))?;
    } else {
        manager.dispatcher().shutdown(Duration::from_secs(5));
    }
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

/// The demo's own trace server, in `work` (on a free port when
/// `args.addr` is taken).
async fn serve(args: &Args, work: &std::path::Path) -> CliResult<ariadne_server::RunningServer> {
    let mut cfg = ServerConfig {
        addr: args.addr,
        data_dir: work.join("server"),
        ..ServerConfig::default()
    };
    match ariadne_server::spawn(cfg.clone()).await {
        Ok(running) => Ok(running),
        Err(e) => {
            // The default port is taken (another server?): any free one will do.
            eprintln!(
                "compact demo: {} unavailable ({e}); using a free port",
                args.addr
            );
            cfg.addr = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
            ariadne_server::spawn(cfg)
                .await
                .map_err(|e| CliError::Other(e.into()))
        }
    }
}

/// The demo's manager: its archive in `work`, events to `--events` and to
/// the server at `base`.
fn demo_manager(
    args: &Args,
    work: &std::path::Path,
    base: Option<&str>,
) -> CliResult<CompactManager> {
    let mut config = Config {
        model: "gpt-4o".into(),
        max_context_tokens: Some(args.max_context_tokens as usize),
        ..Config::default()
    };
    config.storage.path = work.join("archive").display().to_string();
    config.storage.spool_path = work.join("spool").display().to_string();
    config.telemetry.agent_name = AGENT_NAME.into();
    if let Some(path) = &args.events {
        config.telemetry.exporter = ExporterKind::Jsonl;
        config.telemetry.jsonl_path = path.display().to_string();
    }
    config.check()?;
    let mut builder = CompactManager::builder(config);
    if let Some(url) = base {
        let exporter = AriadneExporter::new(&format!("{url}/ingest"), HttpOptions::default())
            .map_err(|e| CliError::BadInput(format!("--url: {e}")))?;
        builder = builder.exporter(Arc::new(exporter));
    }
    Ok(builder.build()?)
}

/// The end of the session, on its trace. The server merges this into the
/// trace the manager opened (name and start kept).
fn session_end(session: &str, totals: &turns::Totals) -> Event {
    Event::Trace(TraceEvent {
        trace_id: session.to_owned(),
        name: Some(AGENT_NAME.to_owned()),
        group_id: None,
        started_at: None,
        ended_at: Some(now_rfc3339()),
        metadata: Some(
            [
                ("agent_name", AGENT_NAME.to_owned()),
                ("turns", totals.turns.to_string()),
                ("compactions", totals.compactions.to_string()),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
        ),
    })
}

fn decode(items: Vec<Value>) -> CliResult<Vec<Message>> {
    Ok(Request::from_value(Value::Array(items), Format::Chat)
        .map_err(|e| CliError::Other(anyhow::anyhow!("demo script produced bad input: {e}")))?
        .messages)
}
