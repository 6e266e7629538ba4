//! "What do I remember now": [`CompactManager::status`] and the layers of a
//! session's last output, computed when a preflight ends (from counts the
//! estimate already cached) so that a status read needs no history.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::archive::SessionId;
use crate::config::Policy;
use crate::estimate::Estimator;
use crate::model::{Message, turns};

use super::report::Report;
use super::session::Session;
use super::{CompactError, CompactManager};

/// Messages and tokens of one layer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layer {
    /// Messages in the layer.
    pub messages: usize,
    /// Their tokens (per-message overhead included).
    pub tokens: usize,
}

/// The layers of the history a preflight returned, front to back: pinned
/// messages, the summary, older messages still in full, the recent turns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Layers {
    /// Protected messages and `roles_never_prune` roles.
    pub pinned: Layer,
    /// Our `COMPACT-SUMMARY` message (0 or 1).
    pub summary: Layer,
    /// Messages before the recent turns that were not folded (yet).
    pub older: Layer,
    /// The last `keep_recent_turns` turns.
    pub recent: Layer,
    /// How many turns `recent` holds.
    pub recent_turns: usize,
    /// Tokens of the tool schemas sent with the call.
    pub tools_schema_tokens: usize,
    /// The whole request's estimate (the report's `tokens_after`).
    pub total_tokens: usize,
}

/// What the last preflight of a session did (its report and the layers of
/// its output): the last outcome, not the last call that
/// `session::LastCall` recognises the next call by.
#[derive(Debug, Clone)]
pub(super) struct LastOutcome {
    pub(super) report: LastReport,
    pub(super) layers: Layers,
}

/// The report as the preflight made it, or as a store returned it.
#[derive(Debug, Clone)]
pub(super) enum LastReport {
    Typed(Box<Report>),
    Stored(Value),
}

impl LastReport {
    pub(super) fn to_value(&self) -> Value {
        match self {
            LastReport::Typed(r) => serde_json::to_value(r).unwrap_or(Value::Null),
            LastReport::Stored(v) => v.clone(),
        }
    }

    /// The tokens of the request that call returned.
    pub(super) fn tokens_after(&self) -> Option<usize> {
        match self {
            LastReport::Typed(r) => Some(r.tokens_after),
            LastReport::Stored(v) => v
                .get("tokens_after")
                .and_then(Value::as_u64)
                .and_then(|n| usize::try_from(n).ok()),
        }
    }
}

/// The session's summary now.
#[derive(Debug, Clone, Serialize)]
pub struct SummaryStatus {
    /// `COMPACT-SUMMARY vN`'s N.
    pub version: u32,
    /// The summary body, redacted.
    pub text: String,
    /// Its tokens.
    pub tokens: usize,
}

/// The circuit breaker of the configured summarizer.
#[derive(Debug, Clone, Serialize)]
pub struct BreakerStatus {
    /// Consecutive failures.
    pub consecutive_failures: u32,
    /// Skipped until then (milliseconds since the Unix epoch), when open.
    pub open_until_ms: Option<u64>,
}

/// What the manager remembers about a session now (`GET /v1/sessions/{id}`).
/// Everything in it is redacted like an exported event.
#[derive(Debug, Clone, Serialize)]
pub struct SessionStatus {
    /// The session.
    pub session_id: String,
    /// False when nothing is remembered (never seen, or deleted).
    pub known: bool,
    /// Where session state lives: `memory`, `sqlite`, `postgres`.
    pub store: String,
    /// The rolling summary in the context, if any.
    pub summary: Option<SummaryStatus>,
    /// The session's fact ledger: every fact still standing, in
    /// first-mention order (redacted like the summary).
    pub ledger: Vec<String>,
    /// The layers of the last output.
    pub layers: Option<Layers>,
    /// The last preflight's report.
    pub last_report: Option<Value>,
    /// The circuit breaker.
    pub breaker: BreakerStatus,
    /// The conversation's strategy layer, if one was set.
    pub conversation: Option<Value>,
    /// The cross-session memory key, when bound.
    pub memory_key: Option<String>,
    /// Compactions archived so far, when known.
    pub archive_step: Option<u32>,
}

/// The layers of `output`, from cached counts.
pub(super) fn layers_of(
    output: &[Message],
    summary_hashes: Option<[u128; 2]>,
    policy: &Policy,
    estimator: &Estimator,
    tools_schema_tokens: usize,
    total_tokens: usize,
) -> Layers {
    let all = turns(output);
    let keep = policy.keep_recent_turns.min(all.len());
    let recent_start = all
        .len()
        .checked_sub(keep)
        .and_then(|i| all.get(i))
        .map_or(output.len(), |t| t.start);
    let mut l = Layers {
        recent_turns: keep,
        tools_schema_tokens,
        total_tokens,
        ..Layers::default()
    };
    for (i, m) in output.iter().enumerate() {
        let layer = if summary_hashes.is_some_and(|h| h.contains(&m.content_hash())) {
            &mut l.summary
        } else if policy.pins(m) {
            &mut l.pinned
        } else if i >= recent_start {
            &mut l.recent
        } else {
            &mut l.older
        };
        layer.messages += 1;
        layer.tokens += estimator.count_message(m);
    }
    l
}

impl CompactManager {
    /// What the manager remembers about `session_id` now: the summary, the
    /// layers and the report of the last call, the breaker, the
    /// conversation layer. Redacted like every export. Reads the session
    /// store when there is one.
    pub async fn status(&self, session_id: &str) -> Result<SessionStatus, CompactError> {
        let id = SessionId::parse(session_id)
            .map_err(|e| CompactError::InvalidSession(e.to_string()))?;
        let handle = self.session_handle(id.clone());
        let mut session = handle.lock().await;
        if let Some(guard) = self.load_session(&id, &mut session).await? {
            guard.release().await.map_err(CompactError::from)?;
        }
        let status = self.status_of(&session);
        drop(session);
        self.forget_if_unknown(&id, &handle);
        Ok(status)
    }

    fn status_of(&self, s: &Session) -> SessionStatus {
        let redactor = self.redactor();
        let scrub = s.secrets.scrub();
        let clean = |text: &str| {
            let mut v = Value::String(redactor.redact_str(text).into_owned());
            scrub.scrub_value(&mut v);
            v.as_str().unwrap_or_default().to_owned()
        };
        let clean_value = |v: &Value| {
            let mut v = redactor.redact_value(v);
            scrub.scrub_value(&mut v);
            v
        };
        SessionStatus {
            session_id: s.id().to_string(),
            known: s.is_known(),
            store: self.state_store_kind().to_owned(),
            summary: s.summary.as_ref().map(|sum| SummaryStatus {
                version: sum.version,
                tokens: self.estimator().count_text(&sum.body),
                text: clean(&sum.body),
            }),
            ledger: s.ledger.texts().map(clean).collect(),
            layers: s.last_report.as_ref().map(|l| l.layers),
            last_report: s
                .last_report
                .as_ref()
                .map(|l| clean_value(&l.report.to_value())),
            breaker: BreakerStatus {
                consecutive_failures: s.breaker.consecutive_failures,
                open_until_ms: s.breaker.open_until.map(super::persist::system_ms),
            },
            conversation: s.conversation.as_ref().map(clean_value),
            memory_key: s.memory_key.clone(),
            archive_step: s.step,
        }
    }
}
