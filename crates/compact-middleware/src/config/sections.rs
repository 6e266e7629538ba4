//! The `summarizer:` and `memory:` sections: which summarizer the pipeline
//! calls and how it reaches an OpenAI-compatible endpoint (defined in
//! `compact-summarize`, re-exported), and the memory layers (cross-session
//! memory, memory files, the sliding window).

use garde::{Error, Validate};
use serde::{Deserialize, Serialize};

use super::rules;

/// The `summarizer:` section lives beside the summarizers that read it.
pub use compact_summarize::{SummarizerKind, SummarizerSettings, SummaryPrompt};

/// `memory:`: cross-session memory, memory files and the sliding-window
/// summary store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Validate)]
#[serde(default, deny_unknown_fields)]
pub struct MemorySettings {
    /// Inject the persisted cross-session summary into a new session's instructions.
    #[garde(skip)]
    pub injection: bool,
    /// SQLite file of the memory store (`:memory:` for a private in-memory store).
    #[garde(custom(rules::non_empty))]
    pub store_path: String,
    /// Directories searched for `AGENT.md`, `MEMORY.md`, `.agent-context.md`.
    #[garde(inner(custom(rules::non_empty)))]
    pub files_dirs: Vec<String>,
    /// Sliding window: summarize once the last saved sequence number reaches this.
    #[garde(skip)]
    pub summarize_after_seq: usize,
    /// Sliding window: messages covered by one memory (even, user/assistant pairs).
    #[garde(custom(even_window))]
    pub rolling_window_size: usize,
    /// A `processing` row older than this is marked `failed` (stuck-task recovery).
    #[garde(custom(rules::at_least_u64(1)))]
    pub processing_timeout_secs: u64,
}

impl Default for MemorySettings {
    fn default() -> Self {
        Self {
            injection: false,
            store_path: "./.compact/memory.sqlite3".to_owned(),
            files_dirs: Vec::new(),
            summarize_after_seq: 5,
            rolling_window_size: 14,
            processing_timeout_secs: 300,
        }
    }
}

/// `recall:`: the index of what left the context, and the recall ids in
/// placeholders.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, Validate)]
#[serde(default, deny_unknown_fields)]
pub struct RecallSettings {
    /// Index everything archived (redacted; SQLite FTS5, or PostgreSQL
    /// full-text search) and put a recall id in the placeholder of each
    /// cleared tool output. Off by default:
    /// the id means something to the model only when the agent offers it
    /// the `compact_recall` tool.
    #[garde(skip)]
    pub enabled: bool,
    /// The index's SQLite file (`:memory:` for one that lives as long as the
    /// process), or a `postgres://` URL. `null`: the database of
    /// `state.url` with `state.store: postgres` (every replica answers),
    /// `recall.sqlite3` beside `state.path` with `state.store: sqlite`,
    /// else in memory.
    #[garde(skip)]
    pub path: Option<String>,
    /// With `enabled`: every preflight adds the `compact_recall` tool's
    /// schema to the request's tools (in the request's wire) and a line to
    /// the summary saying that earlier details can be recalled by id. The
    /// agent must then run the tool's calls (`recall::tool::handle`).
    #[garde(skip)]
    pub advertise: bool,
}

fn even_window(value: &usize, _: &()) -> garde::Result {
    if *value >= 2 && value.is_multiple_of(2) {
        Ok(())
    } else {
        Err(Error::new(format!(
            "must be an even number of at least 2 (got {value})"
        )))
    }
}
