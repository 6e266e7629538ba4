//! The memory store: the `memory` table (one row per sliding-window
//! memory, with its status and version chain) and the cross-session
//! summaries (one per user/agent key).
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Status of a sliding-window memory row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryStatus {
    /// A background summarization owns the row.
    Processing,
    /// `memory_text` is a usable summary.
    Completed,
    /// The summarization failed, or was recovered after a crash.
    Failed,
}

impl MemoryStatus {
    /// The stored text: `processing`, `completed`, `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Processing => "processing",
            Self::Completed => "completed",
            Self::Failed => "failed",
        }
    }

    /// Parses the stored text.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "processing" => Some(Self::Processing),
            "completed" => Some(Self::Completed),
            "failed" => Some(Self::Failed),
            _ => None,
        }
    }
}

impl fmt::Display for MemoryStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One row of the `memory` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryRecord {
    /// Primary key, increasing.
    pub memory_id: i64,
    /// The conversation the memory belongs to.
    pub conversation_id: String,
    /// The summary (empty while `processing` and when `failed`).
    pub memory_text: String,
    /// First message sequence number in the window.
    pub start_sequence: i64,
    /// Last message sequence number in the window.
    pub end_sequence: i64,
    /// The memory this one was folded from (the version chain).
    pub base_memory_id: Option<i64>,
    /// `processing`, `completed` or `failed`.
    pub status: MemoryStatus,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_at_ms: i64,
    /// Duration of the summarizer call, once completed.
    pub generation_time_ms: Option<i64>,
}

/// A cross-session summary: the last summary of a session,
/// persisted under a user/agent key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionMemory {
    /// The user/agent key.
    pub memory_key: String,
    /// The summary text.
    pub summary_text: String,
    /// The session that wrote it.
    pub session_id: String,
    /// Milliseconds since the Unix epoch.
    pub updated_at_ms: i64,
}

/// A memory store operation failed.
#[derive(thiserror::Error, Debug)]
pub enum MemoryError {
    /// The database reported an error.
    #[error("memory store: {0}")]
    Store(String),
    /// A stored value is not what the schema allows.
    #[error("memory store holds an invalid value: {0}")]
    Corrupt(String),
    /// A window refers to messages the caller did not supply.
    #[error("messages {start}..={end} requested but only {available} supplied")]
    MissingMessages {
        /// First sequence number.
        start: usize,
        /// Last sequence number.
        end: usize,
        /// Messages supplied.
        available: usize,
    },
}

/// Storage for memory (docs/memory.md). Implementations must make [`begin`]
/// atomic: at most one `processing` row per conversation, even across
/// processes sharing the store.
///
/// [`begin`]: MemoryStore::begin
pub trait MemoryStore: Send + Sync + fmt::Debug {
    /// Inserts a `processing` row for `start..=end` based on `base`, or
    /// returns `None` when the conversation already has a `processing` row.
    fn begin(
        &self,
        conversation_id: &str,
        start_sequence: i64,
        end_sequence: i64,
        base_memory_id: Option<i64>,
    ) -> Result<Option<i64>, MemoryError>;

    /// Marks a `processing` row `completed` with its text. Returns false
    /// when the row was no longer `processing` (recovered as failed meanwhile).
    fn complete(
        &self,
        memory_id: i64,
        memory_text: &str,
        generation_time_ms: i64,
    ) -> Result<bool, MemoryError>;

    /// Marks a `processing` row `failed`.
    fn fail(&self, memory_id: i64) -> Result<bool, MemoryError>;

    /// One row.
    fn get(&self, memory_id: i64) -> Result<Option<MemoryRecord>, MemoryError>;

    /// The `completed` row with the highest `end_sequence` (newest first on ties).
    fn latest_completed(&self, conversation_id: &str) -> Result<Option<MemoryRecord>, MemoryError>;

    /// The conversation's `processing` row, if any.
    fn processing(&self, conversation_id: &str) -> Result<Option<MemoryRecord>, MemoryError>;

    /// Every row of the conversation, oldest first.
    fn history(&self, conversation_id: &str) -> Result<Vec<MemoryRecord>, MemoryError>;

    /// Marks every `processing` row at least `older_than` old `failed`
    /// (stuck-task recovery); returns their ids.
    fn recover_stuck(&self, older_than: Duration) -> Result<Vec<i64>, MemoryError>;

    /// Persists the cross-session summary of `memory_key`, replacing the previous one.
    fn save_session_memory(
        &self,
        memory_key: &str,
        summary_text: &str,
        session_id: &str,
    ) -> Result<(), MemoryError>;

    /// The cross-session summary of `memory_key`.
    fn session_memory(&self, memory_key: &str) -> Result<Option<SessionMemory>, MemoryError>;
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
