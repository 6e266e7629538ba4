//! Event names and the span kind compact uses, and the trace metadata key.
//! The `data` of each span is a struct of [`payload`](crate::payload).
//! `docs/events.md` documents each event.

/// The `kind` of every span compact emits about compaction.
pub const KIND_COMPACTION: &str = "compaction";
/// The `kind` of the spans of model calls `compact proxy` forwarded.
pub const KIND_LLM: &str = "llm";

/// The parent span of one `preflight` call; every decision span below is its child.
pub const PREFLIGHT: &str = "compact.preflight";
/// The token estimate before any decision (always emitted).
pub const TOKEN_ESTIMATE: &str = "compact.token_estimate";
/// Whether compaction was triggered, and why (always emitted).
pub const TRIGGER_DECISION: &str = "compact.trigger_decision";
/// A rolling summary was created and committed.
pub const SUMMARY_CREATED: &str = "compact.summary_created";
/// Messages left the context (pruned, cleared or summarized away).
pub const PRUNED_MESSAGES: &str = "compact.pruned_messages";
/// What was archived before anything was dropped.
pub const ARCHIVAL: &str = "compact.archival";
/// A failure or a fallback; the span's status is `error`.
pub const ERROR: &str = "compact.error";
/// Redaction is switched off (high severity).
pub const REDACTION_DISABLED: &str = "compact.redaction_disabled";

/// Tool text that read as orders to the agent was kept out of the summary.
pub const SECURITY: &str = "compact.security";

/// A recall (issue 25): what was asked of the index of what left the
/// context, what it answered, how long it took.
pub const RECALL: &str = "compact.recall";

/// One model call `compact proxy` forwarded: the provider's answer, its
/// latency and usage, and what compaction did to the request.
pub const MODEL_CALL: &str = "compact.model_call";

/// Every event name compact emits.
pub const ALL: [&str; 11] = [
    PREFLIGHT,
    TOKEN_ESTIMATE,
    TRIGGER_DECISION,
    SUMMARY_CREATED,
    PRUNED_MESSAGES,
    ARCHIVAL,
    ERROR,
    REDACTION_DISABLED,
    SECURITY,
    RECALL,
    MODEL_CALL,
];

/// The trace `metadata` key carrying the agent's name. The keys of each
/// span's `data` are the fields of its [`payload`](crate::payload) struct.
pub const AGENT_NAME: &str = "agent_name";
