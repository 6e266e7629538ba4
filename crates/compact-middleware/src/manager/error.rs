use crate::pipeline::Insufficient;

/// Why a preflight could not produce a compacted history.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompactError {
    /// The messages that may never be dropped do not fit the budget.
    #[error(
        "insufficient budget: pinned messages need {pinned_tokens} tokens and the task, the latest user message and the last round {tail_tokens} (plus {fixed_tokens} for tool schemas and reply priming), but the budget is {budget} of a {max_tokens}-token window. {guidance}"
    )]
    InsufficientBudget {
        /// Tokens of the pinned messages (protected, never-prune roles).
        pinned_tokens: usize,
        /// Tokens of the minimal tail (latest user message and last group)
        /// beyond the pinned ones; 0 when the pinned messages alone overflow.
        tail_tokens: usize,
        /// Tokens of the tool schemas plus the reply priming.
        fixed_tokens: usize,
        /// The hard budget: `max_tokens - hard_cap_buffer`.
        budget: usize,
        /// The model's context window in tokens.
        max_tokens: usize,
        /// What the user can change to make the request fit.
        guidance: String,
    },
    /// The configuration cannot be used (unknown model without a window, …).
    #[error("configuration: {0}")]
    Config(String),
    /// Input rejected in strict mode (pairing problems, with their indices).
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The session id cannot be used.
    #[error("invalid session id: {0}")]
    InvalidSession(String),
    /// A bug: the output would have broken an invariant.
    #[error("internal error: {0}")]
    Internal(String),
    /// The session store failed (connection, I/O, an unreadable record).
    #[error("session state: {0}")]
    State(String),
    /// A call's strategy overlay cannot be applied: an agent the
    /// configuration does not name, or a configuration the overlays make
    /// invalid.
    #[error("{field}: {message}")]
    Overlay {
        /// Where, in the call's terms: `agent`, or `config.` and the
        /// dotted key (`config.policy.trigger_pct`).
        field: String,
        /// What is wrong with it.
        message: String,
    },
}

impl CompactError {
    /// The variant's name: the `error_type` of its `compact.error` event.
    pub fn kind(&self) -> &'static str {
        match self {
            CompactError::InsufficientBudget { .. } => "InsufficientBudget",
            CompactError::Config(_) => "Config",
            CompactError::InvalidInput(_) => "InvalidInput",
            CompactError::InvalidSession(_) => "InvalidSession",
            CompactError::Internal(_) => "Internal",
            CompactError::State(_) => "State",
            CompactError::Overlay { .. } => "Overlay",
        }
    }

    pub(crate) fn insufficient(i: &Insufficient, max_tokens: usize) -> Self {
        let guidance = if i.tail_tokens == 0 {
            "Reduce protected memory (meta.protected, roles_never_prune), shorten the system/developer prompts or tool schemas, or use a model with a larger context window (max_context_tokens)."
        } else {
            "What is never dropped does not fit: the task (the first user message, policy.keep_task), the latest user message and the last round of tool calls, with its outputs capped to the minimum. Shorten the task or the latest message, lower policy.tool_result_max_chars, reduce protected memory, or use a model with a larger context window."
        };
        CompactError::InsufficientBudget {
            pinned_tokens: i.pinned_tokens,
            tail_tokens: i.tail_tokens,
            fixed_tokens: i.fixed_tokens,
            budget: i.budget,
            max_tokens,
            guidance: guidance.to_string(),
        }
    }
}
