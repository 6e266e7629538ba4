//! Summarizers.
use serde::{Deserialize, Serialize};

/// The summary styles of seed 004 §3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// Goals, entities, constraints, decisions, blockers (default, coding).
    #[default]
    TaskState,
    /// Short bullets and key citations (research).
    Brief,
    /// Chronological decision ledger (troubleshooting).
    DecisionLog,
    /// File-level change summary (code).
    CodeDelta,
}
