//! Memory layers around the compaction pipeline (issue 7):
//!
//! - [`store`]: the [`MemoryStore`] trait — seed 002's `memory` table and
//!   seed 000's persisted cross-session summaries — and [`SqliteStore`], the
//!   embedded default (SQLite, compiled in).
//! - [`window`]: seed 002's sliding-window summary service: the trigger, the
//!   window, background summarization that never blocks the next round, at
//!   most one `processing` row per conversation, the version chain, stuck-task
//!   recovery, [`SlidingWindow::get_context_for_workflow`].
//! - [`inject`]: seed 000 cross-session memory and seed 003 memory files
//!   (`AGENT.md`, `MEMORY.md`, `.agent-context.md`) added to the instructions
//!   (the first system or developer message) on the way out, never to the
//!   stored history.
pub mod inject;
pub mod sqlite;
pub mod store;
pub mod window;

pub use inject::{InstructionBlocks, MEMORY_FILE_NAMES, inject_instructions, load_memory_files};
pub use sqlite::SqliteStore;
pub use store::{MemoryError, MemoryRecord, MemoryStatus, MemoryStore, SessionMemory};
pub use window::{Scheduled, SlidingWindow, WindowSettings, WorkflowContext, summary_range};
