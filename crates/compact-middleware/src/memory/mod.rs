//! Memory around the compaction pipeline (docs/design.md §5 step 2,
//! `docs/memory.md`):
//!
//! - [`MemoryStore`]: the store of the sliding-window summaries and the
//!   persisted cross-session summaries; [`SqliteStore`], the embedded
//!   default (SQLite, compiled in), and [`PostgresMemoryStore`], the one
//!   replicas share (chosen with the session store: `state.store:
//!   postgres`). Modules `store`, `sqlite`, `postgres`.
//! - [`SlidingWindow`]: the sliding-window summary service: the trigger, the
//!   window, background summarization that never blocks the next round, at
//!   most one `processing` row per conversation, the version chain, stuck-task
//!   recovery, [`SlidingWindow::get_context_for_workflow`]. Module `window`.
//! - [`inject_instructions`]: cross-session memory and memory files
//!   (`AGENT.md`, `MEMORY.md`, `.agent-context.md`) added to the instructions
//!   (the first system or developer message) on the way out, never to the
//!   stored history. Module `inject`.
mod inject;
mod postgres;
mod sqlite;
mod store;
mod window;

pub use inject::{InstructionBlocks, MEMORY_FILE_NAMES, inject_instructions, load_memory_files};
pub use postgres::PostgresMemoryStore;
pub use sqlite::SqliteStore;
pub use store::{MemoryError, MemoryRecord, MemoryStatus, MemoryStore, SessionMemory};
pub use window::{Scheduled, SlidingWindow, WindowSettings, WorkflowContext, summary_range};
