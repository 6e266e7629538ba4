//! `compact recall SESSION "query"` / `--id RID`: what compaction took out
//! of a session's context, from the recall index (docs/design.md §11), as
//! JSON. Reads the index only (a file, or the PostgreSQL database of
//! `state.store: postgres`): no session is loaded or changed; the recall is
//! a `compact.recall` event for the configured exporter.

use std::path::PathBuf;
use std::sync::Arc;

use compact_middleware::CompactError;
use compact_middleware::archive::SessionId;
use compact_middleware::config::{Mode, SummarizerKind};
use compact_middleware::recall::{Location, RecallIndex, RecallQuery};

use crate::cmd::preflight::finish_events;
use crate::exit::{CliError, CliResult};
use crate::input::{ConfigFlags, print_json};

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    #[command(flatten)]
    config: ConfigFlags,
    /// The session id.
    session: String,
    /// Words to search for (BM25-ranked excerpts).
    #[arg(required_unless_present = "id", conflicts_with = "id")]
    query: Option<String>,
    /// A recall id (from a placeholder or a hit): that entry's whole text, paged.
    #[arg(long, value_name = "RID")]
    id: Option<String>,
    /// Most hits (default 5, at most 20).
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// With --id: the character to read from.
    #[arg(long, value_name = "N")]
    offset: Option<usize>,
    /// The SQLite file of `compact preflight --state FILE`: the index is
    /// `recall.sqlite3` beside it (unless `recall.path` is set).
    #[arg(long, value_name = "FILE")]
    state: Option<PathBuf>,
    /// The index itself: a file, or a `postgres://` URL (instead of
    /// `recall.path`, --state or `state.url`).
    #[arg(long, value_name = "FILE|URL")]
    index: Option<String>,
}

pub(crate) fn run(args: Args) -> CliResult {
    let mut loaded = args.config.load()?;
    if let Some(file) = &args.state {
        compact_wiring::set_state_file(&mut loaded, file, "--state")?;
    }
    let at = match &args.index {
        Some(p) => Location::parse(p),
        None => compact_middleware::manager::recall_location(&loaded.config),
    };
    if let Location::File(path) = &at {
        if path == ":memory:" {
            return Err(CliError::BadInput(
                "the recall index lives in the compacting process's memory (recall.path null, state.store memory): give --state FILE, --index FILE|URL or set recall.path".into(),
            ));
        }
        if !std::path::Path::new(path).exists() {
            return Err(CliError::BadInput(format!(
                "no recall index at {path} (is recall.enabled on where the session was compacted?)"
            )));
        }
    }
    let session = SessionId::parse(&args.session)
        .map_err(|e| CliError::BadInput(format!("invalid session id: {e}")))?;
    let index = RecallIndex::open_at(&at).map_err(|e| CliError::Other(e.into()))?;
    let q = RecallQuery {
        query: args.query,
        id: args.id.clone(),
        limit: args.limit,
        offset: args.offset,
    };
    // Through a manager with only the configured exporters, so that the
    // recall is a `compact.recall` event like any other.
    let mut config = loaded.config;
    // A recall reads the index only: nothing compaction would build (an LLM
    // summarizer and its key, the memory store, memory files) is needed,
    // so a configuration made for compacting never fails or opens files here.
    config.summarizer.kind = SummarizerKind::Extractive;
    config.memory.injection = false;
    config.memory.files_dirs.clear();
    if config.policy.mode == Mode::SlidingWindow {
        config.policy.mode = Mode::Auto;
    }
    let rt = tokio::runtime::Runtime::new()?;
    let manager = compact_wiring::exporting_builder(config)?
        .recall_index(Arc::new(index))
        .build()?;
    let answer = rt.block_on(manager.recall(session.as_str(), q));
    finish_events(manager.dispatcher());
    let answer = answer.map_err(|e| match e {
        CompactError::InvalidInput(m) => CliError::BadInput(m),
        e => e.into(),
    })?;
    if let Some(id) = &args.id
        && answer.entry.is_none()
    {
        return Err(CliError::NotFound(format!(
            "session {} has no recall id {id}",
            session.as_str()
        )));
    }
    let mut out = serde_json::to_value(&answer).map_err(|e| CliError::Other(e.into()))?;
    out["session_id"] = serde_json::Value::String(session.as_str().to_owned());
    print_json(&out)
}
