//! Event names, the span kind, and the `data` keys compact uses (seed 004's
//! property names, unchanged). `docs/events.md` documents each event.

/// The `kind` of every span compact emits.
pub const KIND_COMPACTION: &str = "compaction";

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

/// Every event name compact emits.
pub const ALL: [&str; 8] = [
    PREFLIGHT,
    TOKEN_ESTIMATE,
    TRIGGER_DECISION,
    SUMMARY_CREATED,
    PRUNED_MESSAGES,
    ARCHIVAL,
    ERROR,
    REDACTION_DISABLED,
];

/// Keys inside a span's `data` (and a trace's `metadata`), so every module
/// spells them the same way.
pub mod data {
    /// Trace metadata: the agent's name.
    pub const AGENT_NAME: &str = "agent_name";
    /// The model the estimate is for.
    pub const MODEL: &str = "model";
    /// Estimated tokens of the whole request.
    pub const T_EST: &str = "t_est";
    /// The model's context budget in tokens.
    pub const MAX_TOKENS: &str = "max_tokens";
    /// `t_est / max_tokens`.
    pub const USAGE_PCT: &str = "usage_pct";
    /// `{system, developer, tools_schema, messages}` token counts.
    pub const BREAKDOWN: &str = "breakdown";
    /// Whether compaction runs.
    pub const TRIGGERED: &str = "triggered";
    /// Why (or why not).
    pub const REASON: &str = "reason";
    /// The effective policy values the decision used.
    pub const POLICY: &str = "policy";
    /// The configured trigger threshold.
    pub const TRIGGER_PCT: &str = "trigger_pct";
    /// The configured target after compaction.
    pub const TARGET_PCT: &str = "target_pct";
    /// `{pinned, recent_turns, tool_pairs}` kept.
    pub const KEPT: &str = "kept";
    /// How many messages left the context.
    pub const PRUNED_COUNT: &str = "pruned_count";
    /// Ids (or indices) of the messages that left the context.
    pub const PRUNED_IDS: &str = "pruned_ids";
    /// Summary strategy (`task_state`, `brief`, `decision_log`, `code_delta`, `extractive`).
    pub const STRATEGY: &str = "strategy";
    /// Messages folded into the summary.
    pub const INPUT_MESSAGES: &str = "input_messages";
    /// Tokens of the summary.
    pub const SUMMARY_TOKENS: &str = "summary_tokens";
    /// `summary_tokens / tokens replaced`.
    pub const COMPRESSION_RATIO: &str = "compression_ratio";
    /// The summary's `vN`.
    pub const SUMMARY_VERSION: &str = "summary_version";
    /// The summary text (redacted), shown by the Ariadne inspector.
    pub const OUTPUT_TEXT: &str = "output_text";
    /// Tokens before compaction.
    pub const TOKENS_BEFORE: &str = "tokens_before";
    /// Tokens after compaction.
    pub const TOKENS_AFTER: &str = "tokens_after";
    /// Which tiers ran.
    pub const TIERS: &str = "tiers";
    /// The error's type, e.g. `InsufficientBudget`.
    pub const ERROR_TYPE: &str = "error_type";
    /// Human-readable detail.
    pub const MESSAGE: &str = "message";
    /// What was done instead (`brief`, `extractive`, `pruning_only`, `none`).
    pub const FALLBACK: &str = "fallback";
    /// Storage backend (`filesystem`, `s3`).
    pub const STORAGE: &str = "storage";
    /// Archive keys or paths written.
    pub const KEYS: &str = "keys";
    /// Bytes written.
    pub const BYTES: &str = "bytes";
    /// Whether redaction was applied to the exported copy.
    pub const REDACTED: &str = "redacted";
    /// `high` for `compact.redaction_disabled`.
    pub const SEVERITY: &str = "severity";
}
