//! A request body through the same core as every entry point:
//! `CompactManager::preflight_with` with the session store, then the body
//! as the provider must get it. A body nothing changed (no compaction, no
//! Anthropic breakpoint placed) is sent as it came, byte for byte; a
//! failure sends it unchanged too (docs/design.md §15).

use axum::body::Bytes;
use compact_middleware::cache::breakpoints;
use compact_middleware::manager::{Continuation, Overlays};
use compact_middleware::model::{Item, Message, Request};
use compact_middleware::tokens::builtin_profile;
use compact_middleware::trigger::Forced;
use compact_middleware::{CompactManager, PreflightOutcome};
use serde_json::{Map, Value};

use super::wire::Api;
use crate::service::preflight_request;

/// What compaction did to one request, and the body to send.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// `ModelCall::compaction`: `none`, `applied`, `reactive`, `skipped`,
    /// `failed`, `off`.
    pub(crate) label: &'static str,
    pub(crate) body: Bytes,
    pub(crate) tokens_before: Option<u64>,
    pub(crate) tokens_after: Option<u64>,
    /// Why it was skipped or failed.
    pub(crate) error: Option<String>,
}

impl Plan {
    /// The body as it came, with `label` and why.
    pub(crate) fn unchanged(label: &'static str, body: Bytes, error: Option<String>) -> Self {
        Self {
            label,
            body,
            tokens_before: None,
            tokens_after: None,
            error,
        }
    }
}

/// One call of the core for a request of `api` in `session`.
pub(crate) struct Call<'a> {
    pub(crate) manager: &'a CompactManager,
    pub(crate) api: Api,
    pub(crate) session: &'a str,
    /// The usage object the provider reported for the session's last
    /// response.
    pub(crate) usage: Option<Value>,
    /// Set for the reactive path: the provider's refusal.
    pub(crate) overflow: Option<String>,
}

/// What [`Call::run`] did: the plan, and the history's items as decoded
/// (the provider's, without the instructions of a Responses body; each
/// with its content hash computed), for
/// [`super::history::Histories::keep`].
pub(crate) struct Ran {
    pub(crate) plan: Plan,
    pub(crate) decoded: Option<Vec<Message>>,
}

impl Call<'_> {
    /// The body to send for `doc` (the parsed `original`). `items` are its
    /// history's items when they were read apart from it
    /// ([`super::body::split`]; the history field of `doc` is then an empty
    /// array); `None` takes them from `doc`.
    pub(crate) async fn run(
        &self,
        mut doc: Map<String, Value>,
        items: Option<Vec<Item>>,
        original: &Bytes,
    ) -> Ran {
        let unchanged = |label, why| Ran {
            plan: Plan::unchanged(label, original.clone(), Some(why)),
            decoded: None,
        };
        if let Some(why) = skip_reason(self.api, &doc) {
            return unchanged("skipped", why);
        }
        let items = match items {
            Some(items) => items,
            None => match doc.get_mut(self.api.history_key()) {
                Some(Value::Array(items)) => {
                    std::mem::take(items).into_iter().map(Item::Json).collect()
                }
                // skip_reason lets only an array through.
                _ => Vec::new(),
            },
        };
        let overlays = self.model_overlay(&doc);
        let provider = items.len();
        let (envelope, items, instructions) = envelope(self.api, doc, items);
        let mut req = match Request::from_envelope(envelope, items, self.api.format()) {
            Ok(req) => req,
            Err(e) => {
                let path =
                    e.path
                        .replacen("$.messages", &format!("$.{}", self.api.history_key()), 1);
                let why = format!("the history does not decode: {path}: {}", e.message);
                return unchanged("failed", why);
            }
        };
        // The provider's items (after the instructions or the system the
        // decoding put first), each hashed once here for this call and the
        // next ones (a clone keeps the memoised hash).
        let ours = req.messages.len().saturating_sub(provider);
        let decoded = req.messages.get(ours..).map(|provider| {
            provider
                .iter()
                .map(|m| {
                    m.content_hash();
                    m.clone()
                })
                .collect()
        });
        // A usage object the wiring does not read is dropped, not an error:
        // the provider's shape is not the caller's fault.
        let usage = compact_wiring::usage_figures(self.usage.as_ref()).unwrap_or((None, None));
        let (forced, note) = match &self.overflow {
            Some(message) => (Some(Forced::ContextOverflow), Some(message.clone())),
            None => (None, None),
        };
        let call = preflight_request(&mut req, usage, forced, note, overlays);
        let outcome = self.manager.preflight_with(self.session, call).await;
        let plan = match outcome {
            Ok(outcome) => self.plan(&req, outcome, instructions, original),
            Err(e) => Plan::unchanged(
                "failed",
                original.clone(),
                Some(format!("{}: {e}", e.kind())),
            ),
        };
        Ran { plan, decoded }
    }

    /// The body to send after `outcome`: the original bytes when the core
    /// changed nothing, the compacted request written back otherwise.
    fn plan(
        &self,
        req: &Request,
        outcome: PreflightOutcome,
        instructions: bool,
        original: &Bytes,
    ) -> Plan {
        let mut messages = outcome.messages;
        let r = &outcome.report;
        let mut placed = r.cache_breakpoints.clone();
        // A top-level cache_control the core did not see takes one of the
        // four breakpoints: ours give way.
        breakpoints::fit_request(req, &mut messages, &mut placed);
        let tokens = |n: usize| Some(n as u64);
        let compacted = r.triggered
            || r.continuation == Continuation::RawPrefix
            || !r.injected.is_empty()
            || !r.repaired.is_empty();
        tracing::debug!(
            session = self.session,
            triggered = r.triggered,
            reason = %r.reason,
            continuation = ?r.continuation,
            injected = r.injected.len(),
            repaired = r.repaired.len(),
            cache_breakpoints = placed.len(),
            tokens_before = r.tokens_before,
            "proxy preflight"
        );
        if !compacted && placed.is_empty() {
            return Plan {
                label: "none",
                body: original.clone(),
                tokens_before: tokens(r.tokens_before),
                tokens_after: tokens(r.tokens_after),
                error: None,
            };
        }
        let value = req.to_value(&messages, true);
        let value = restore(self.api, value, instructions);
        match serde_json::to_vec(&value) {
            Ok(body) => Plan {
                // Breakpoints alone are no compaction: the label says
                // what compaction did.
                label: if !compacted {
                    "none"
                } else if self.overflow.is_some() {
                    "reactive"
                } else {
                    "applied"
                },
                body: Bytes::from(body),
                tokens_before: tokens(r.tokens_before),
                tokens_after: tokens(r.tokens_after),
                error: None,
            },
            Err(e) => Plan::unchanged("failed", original.clone(), Some(e.to_string())),
        }
    }

    /// The request's `model` as a strategy overlay when compact knows its
    /// window and it is not the configured model: the budget follows the
    /// model the call is for.
    fn model_overlay(&self, doc: &Map<String, Value>) -> Overlays {
        let config = self.manager.config();
        let known = |m: &str| builtin_profile(m).is_some() || config.models.contains_key(m);
        match doc.get("model").and_then(Value::as_str) {
            Some(m) if m != config.model && known(m) => Overlays {
                agent: None,
                request: Some(serde_json::json!({ "model": m })),
            },
            _ => Overlays::default(),
        }
    }
}

/// Why a body is sent without going through the core.
fn skip_reason(api: Api, doc: &Map<String, Value>) -> Option<String> {
    let set = |k: &str| doc.get(k).is_some_and(|v| !v.is_null());
    if api == Api::Responses {
        if set("previous_response_id") {
            return Some("previous_response_id: the provider holds the history".into());
        }
        if set("conversation") {
            return Some("conversation: the provider holds the history".into());
        }
    }
    match doc.get(api.history_key()) {
        Some(Value::Array(_)) => None,
        Some(Value::String(_)) => Some(format!("{} is a string", api.history_key())),
        _ => Some(format!("no {} array", api.history_key())),
    }
}

/// The body as the codec's envelope: Responses' `input` under `messages`,
/// its `instructions` (a string) as a leading developer message so they
/// are counted and pinned. Returns whether that message was added.
fn envelope(
    api: Api,
    doc: Map<String, Value>,
    mut items: Vec<Item>,
) -> (Map<String, Value>, Vec<Item>, bool) {
    if api != Api::Responses {
        return (doc, items, false);
    }
    let instructions = doc
        .get("instructions")
        .and_then(Value::as_str)
        .map(str::to_owned);
    if let Some(text) = instructions.as_deref() {
        items.insert(
            0,
            Item::Json(serde_json::json!({"role": "developer", "content": text})),
        );
    }
    let mut out = Map::with_capacity(doc.len());
    for (k, v) in doc {
        if k == "input" {
            // Where the items go back (`Request::to_value`).
            out.insert("messages".into(), Value::Null);
        } else {
            out.insert(k, v);
        }
    }
    (out, items, instructions.is_some())
}

/// [`envelope`] undone on the compacted body.
fn restore(api: Api, value: Value, instructions: bool) -> Value {
    let Value::Object(doc) = value else {
        return value;
    };
    if api != Api::Responses {
        return Value::Object(doc);
    }
    let mut out = Map::with_capacity(doc.len());
    let mut text = None;
    for (k, v) in doc {
        if k == "messages" {
            let mut items = match v {
                Value::Array(items) => items,
                other => vec![other],
            };
            if instructions && !items.is_empty() {
                // Pinned, so still first; memory blocks may have joined it.
                text = items.remove(0).get("content").cloned();
            }
            out.insert("input".into(), Value::Array(items));
        } else {
            out.insert(k, v);
        }
    }
    if let (Some(text), Some(slot)) = (text, out.get_mut("instructions")) {
        *slot = text;
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn responses_envelope_round_trips_in_key_order() {
        let doc = json!({"model": "m", "instructions": "be brief",
            "input": [{"role": "user", "content": "hi"}], "stream": true});
        let Value::Object(mut map) = doc.clone() else {
            unreachable!()
        };
        let items = vec![Item::Json(map["input"][0].take())];
        let (env, items, added) = envelope(Api::Responses, map, items);
        assert!(added);
        let req = Request::from_envelope(env, items, Api::Responses.format()).unwrap();
        assert_eq!(
            req.messages[0].raw().get("content"),
            Some(&json!("be brief"))
        );
        let back = restore(Api::Responses, req.to_value(&req.messages, true), added);
        assert_eq!(
            serde_json::to_string(&back).unwrap(),
            serde_json::to_string(&doc).unwrap()
        );
    }

    #[test]
    fn provider_held_histories_are_skipped() {
        let Value::Object(doc) = json!({"previous_response_id": "resp_1", "input": []}) else {
            unreachable!()
        };
        assert!(skip_reason(Api::Responses, &doc).is_some());
        let Value::Object(doc) = json!({"input": "hello"}) else {
            unreachable!()
        };
        assert!(skip_reason(Api::Responses, &doc).is_some());
        let Value::Object(doc) = json!({"messages": []}) else {
            unreachable!()
        };
        assert!(skip_reason(Api::Chat, &doc).is_none());
    }
}
