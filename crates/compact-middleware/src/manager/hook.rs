//! The `before_model_call` hook (docs/design.md §1): an agent loop hands over its
//! context, the hook replaces the messages in place.

use serde_json::Value;

use super::{CompactError, CompactManager, PreflightRequest, Report};
use crate::model::Message;

/// What an agent loop has in hand right before calling the model.
#[derive(Debug, Clone, Default)]
pub struct ModelCallContext {
    /// The session the call belongs to.
    pub session_id: String,
    /// The history about to be sent; replaced by the compacted one.
    pub messages: Vec<Message>,
    /// Tool schemas sent with the call (counted, never changed).
    pub tools: Vec<Value>,
}

impl ModelCallContext {
    /// A context for `session_id` with `messages` and no tools.
    pub fn new(session_id: impl Into<String>, messages: Vec<Message>) -> Self {
        Self {
            session_id: session_id.into(),
            messages,
            tools: Vec::new(),
        }
    }

    /// The messages as the provider must receive them.
    pub fn provider_messages(&self) -> Vec<Value> {
        self.messages
            .iter()
            .map(Message::to_provider_value)
            .collect()
    }
}

/// The hook: `hook.call(&mut ctx).await?` before every model call.
///
/// On error the context is left exactly as it was.
#[derive(Debug, Clone)]
pub struct BeforeModelCall {
    manager: CompactManager,
}

impl BeforeModelCall {
    /// A hook that preflights through `manager`.
    pub fn new(manager: CompactManager) -> Self {
        Self { manager }
    }

    /// Compacts `ctx.messages` in place if needed; returns the report.
    pub async fn call(&self, ctx: &mut ModelCallContext) -> Result<Report, CompactError> {
        let out = self
            .manager
            .preflight_with(
                &ctx.session_id,
                PreflightRequest {
                    // Cloned, not taken: on error the agent keeps its context.
                    messages: ctx.messages.clone(),
                    tools: ctx.tools.clone(),
                    ..PreflightRequest::default()
                },
            )
            .await;
        let o = out?;
        ctx.messages = o.messages;
        Ok(o.report)
    }
}
