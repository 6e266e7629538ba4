//! What the server reads from an event once, when it is validated (or
//! recovered), so that nothing reads it again: the index's fields
//! ([`EventMeta`]), what the event adds to its trace's counters ([`Marks`],
//! summed in [`Counts`], so the fleet view, `GET /api/sessions`, lists every
//! retained session with its badges), and what a `compact.pruned_messages`
//! span adds to the metrics ([`Pruned`]). The parser builds them; the store
//! and the metrics only read them: types flow one way, schema → store →
//! metrics.

use std::sync::Arc;

use compact_events::names;
use serde::Serialize;
use serde_json::{Map, Value};

const SPAN: u8 = 1;
const PREFLIGHT: u8 = 1 << 1;
const COMPACTION: u8 = 1 << 2;
const ERROR: u8 = 1 << 3;
const INSUFFICIENT: u8 = 1 << 4;
const FALLBACK: u8 = 1 << 5;
const BREAKER_OPEN: u8 = 1 << 6;
const CACHE_BREAK: u8 = 1 << 7;

/// What a `compact.preflight` says of the provider's prompt cache: its
/// predicted figures for the request it returned, the caller's reported
/// figures for the previous one (costs in micro-dollars, so that they sum
/// exactly).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CacheMarks {
    /// `tokens_after`, when the span predicts the cache.
    pub(crate) predicted_prompt: u64,
    /// `cache_read_predicted`.
    pub(crate) predicted_read: u64,
    /// `cost_predicted_usd`, in micro-dollars.
    pub(crate) predicted_cost: u64,
    /// `input_tokens_reported`.
    pub(crate) reported_prompt: u64,
    /// `cache_read_reported`.
    pub(crate) reported_read: u64,
    /// `cost_reported_usd`, in micro-dollars.
    pub(crate) reported_cost: u64,
}

/// What one event says about its session.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Marks {
    bits: u8,
    /// `usage_pct` of a `compact.token_estimate`: how full the context was.
    usage_pct: Option<f64>,
    /// What a `compact.preflight` says of the prompt cache.
    cache: CacheMarks,
}

impl Marks {
    /// Classifies a validated event (its canonical object).
    pub(crate) fn of(object: &Map<String, Value>) -> Marks {
        if object.get("type").and_then(Value::as_str) != Some("span") {
            return Marks::default();
        }
        Marks::of_span(
            object.get("status").and_then(Value::as_str) == Some("error"),
            object.get("name").and_then(Value::as_str),
            object.get("data").and_then(Value::as_object),
        )
    }

    /// Classifies a span from its status, name and `data`.
    pub(crate) fn of_span(
        error: bool,
        name: Option<&str>,
        data: Option<&Map<String, Value>>,
    ) -> Marks {
        let mut m = Marks::span(true, error);
        let field = |k: &str| data.and_then(|d| d.get(k));
        match name {
            Some(names::PREFLIGHT) => {
                m.bits |= PREFLIGHT;
                let failed = field("error").is_some_and(|e| !e.is_null());
                if field("triggered").and_then(Value::as_bool) == Some(true) && !failed {
                    m.bits |= COMPACTION;
                }
                let count = |k: &str| field(k).and_then(Value::as_u64);
                let micros = |k: &str| {
                    field(k)
                        .and_then(Value::as_f64)
                        .filter(|v| v.is_finite() && *v >= 0.0)
                        .map_or(0, |v| (v * 1e6).round() as u64)
                };
                if count("prefix_broken_tokens").is_some_and(|n| n > 0) {
                    m.bits |= CACHE_BREAK;
                }
                if let Some(read) = count("cache_read_predicted") {
                    m.cache.predicted_prompt = count("tokens_after").unwrap_or(0);
                    m.cache.predicted_read = read;
                    m.cache.predicted_cost = micros("cost_predicted_usd");
                }
                if let Some(prompt) = count("input_tokens_reported") {
                    m.cache.reported_prompt = prompt;
                    m.cache.reported_read = count("cache_read_reported").unwrap_or(0);
                    m.cache.reported_cost = micros("cost_reported_usd");
                }
            }
            Some(names::TOKEN_ESTIMATE) => {
                m.usage_pct = field("usage_pct")
                    .and_then(Value::as_f64)
                    .filter(|u| u.is_finite());
            }
            Some(names::ERROR) => {
                match field("error_type").and_then(Value::as_str) {
                    Some("InsufficientBudget") => m.bits |= INSUFFICIENT,
                    Some("CircuitOpen") => m.bits |= BREAKER_OPEN,
                    _ => {}
                }
                if field("fallback")
                    .and_then(Value::as_str)
                    .is_some_and(|f| !f.is_empty() && f != "none")
                {
                    m.bits |= FALLBACK;
                }
            }
            _ => {}
        }
        m
    }

    /// The marks of an event that is not one of compact's spans: whether it
    /// is a span, and whether it failed.
    pub(crate) fn span(is_span: bool, error: bool) -> Marks {
        let mut m = Marks::default();
        if is_span {
            m.bits |= SPAN;
            if error {
                m.bits |= ERROR;
            }
        }
        m
    }

    /// The context usage a `compact.token_estimate` reported.
    pub(crate) fn usage_pct(self) -> Option<f64> {
        self.usage_pct
    }

    /// What a `compact.preflight` said of the prompt cache.
    pub(crate) fn cache(self) -> CacheMarks {
        self.cache
    }

    /// A `compact.preflight` whose request no longer starts with the
    /// previous one (`prefix_broken_tokens` > 0).
    pub(crate) fn cache_break(self) -> bool {
        self.bits & CACHE_BREAK != 0
    }
}

/// Counters over a set of retained events (one trace, or all of them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Counts {
    /// Events (traces and spans).
    pub events: u64,
    /// Spans.
    pub spans: u64,
    /// `compact.preflight` spans: one per model call.
    pub preflights: u64,
    /// Preflights that compacted (triggered and did not fail).
    pub compactions: u64,
    /// Spans with status `error`.
    pub errors: u64,
    /// `compact.error` spans of type `InsufficientBudget`.
    pub insufficient: u64,
    /// `compact.error` spans that took a fallback (anything but `none`).
    pub fallbacks: u64,
    /// `compact.error` spans of type `CircuitOpen`: the summarizer's circuit
    /// breaker was open.
    pub breaker_open: u64,
    /// Preflights whose request no longer starts with the previous one: a
    /// compaction broke the prompt-cache prefix.
    pub cache_breaks: u64,
    /// Input tokens of the requests preflights returned (those that
    /// predicted the cache).
    pub prompt_tokens_predicted: u64,
    /// Of those, the tokens the provider's cache could serve.
    pub cache_read_predicted: u64,
    /// Their input priced by the prediction, micro-dollars.
    pub cost_predicted_micro_usd: u64,
    /// Input tokens the provider reported (the callers' usage figures).
    pub input_tokens_reported: u64,
    /// Of those, the tokens it reported served from its cache.
    pub cache_read_reported: u64,
    /// The reported calls priced, micro-dollars.
    pub cost_reported_micro_usd: u64,
}

impl Counts {
    fn each(&mut self, m: Marks, f: fn(&mut u64)) {
        f(&mut self.events);
        let flags = [
            (SPAN, &mut self.spans),
            (PREFLIGHT, &mut self.preflights),
            (COMPACTION, &mut self.compactions),
            (ERROR, &mut self.errors),
            (INSUFFICIENT, &mut self.insufficient),
            (FALLBACK, &mut self.fallbacks),
            (BREAKER_OPEN, &mut self.breaker_open),
            (CACHE_BREAK, &mut self.cache_breaks),
        ];
        for (bit, counter) in flags {
            if m.bits & bit != 0 {
                f(counter);
            }
        }
    }

    fn sum(&mut self, k: CacheMarks, f: fn(&mut u64, u64)) {
        f(&mut self.prompt_tokens_predicted, k.predicted_prompt);
        f(&mut self.cache_read_predicted, k.predicted_read);
        f(&mut self.cost_predicted_micro_usd, k.predicted_cost);
        f(&mut self.input_tokens_reported, k.reported_prompt);
        f(&mut self.cache_read_reported, k.reported_read);
        f(&mut self.cost_reported_micro_usd, k.reported_cost);
    }

    /// Counts one more event.
    pub(crate) fn add(&mut self, m: Marks) {
        self.each(m, |c| *c += 1);
        self.sum(m.cache, |c, v| *c = c.saturating_add(v));
    }

    /// Forgets one event counted before.
    pub(crate) fn remove(&mut self, m: Marks) {
        self.each(m, |c| *c = c.saturating_sub(1));
        self.sum(m.cache, |c, v| *c = c.saturating_sub(v));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn marks(v: Value) -> Marks {
        match v {
            Value::Object(o) => Marks::of(&o),
            _ => Marks::default(),
        }
    }

    #[test]
    fn sums_the_prompt_cache_of_preflights() {
        let mut c = Counts::default();
        let first = marks(json!({"type":"span","name":"compact.preflight",
            "data":{"triggered":false,"tokens_after":5000,"cache_read_predicted":0,
                    "prefix_shared_tokens":0,"cost_predicted_usd":0.00625}}));
        let second = marks(json!({"type":"span","name":"compact.preflight",
            "data":{"triggered":true,"tokens_after":3000,"cache_read_predicted":1024,
                    "prefix_shared_tokens":1100,"prefix_broken_tokens":3900,
                    "cost_predicted_usd":0.0025,"input_tokens_reported":5000,
                    "cache_read_reported":0,"cost_reported_usd":0.00725}}));
        // An older producer's span: no cache figures, nothing summed.
        let old = marks(json!({"type":"span","name":"compact.preflight",
            "data":{"triggered":false,"tokens_after":7000}}));
        for m in [first, second, old] {
            c.add(m);
        }
        assert_eq!(c.preflights, 3);
        assert_eq!(c.cache_breaks, 1);
        assert_eq!(
            (
                c.prompt_tokens_predicted,
                c.cache_read_predicted,
                c.cost_predicted_micro_usd
            ),
            (8000, 1024, 8750)
        );
        assert_eq!(
            (
                c.input_tokens_reported,
                c.cache_read_reported,
                c.cost_reported_micro_usd
            ),
            (5000, 0, 7250)
        );
        assert!(second.cache_break() && !first.cache_break());
        c.remove(second);
        assert_eq!(
            (
                c.cache_breaks,
                c.prompt_tokens_predicted,
                c.cost_reported_micro_usd
            ),
            (0, 5000, 0)
        );
    }

    #[test]
    fn classifies_compact_spans() {
        let mut c = Counts::default();
        for v in [
            json!({"type":"trace","trace_id":"t"}),
            json!({"type":"span","name":"compact.preflight","data":{"triggered":true}}),
            json!({"type":"span","name":"compact.preflight","status":"error",
                   "data":{"triggered":true,"error":"InsufficientBudget"}}),
            json!({"type":"span","name":"compact.error","status":"error",
                   "data":{"error_type":"InsufficientBudget","fallback":"none"}}),
            json!({"type":"span","name":"compact.error","status":"error",
                   "data":{"error_type":"CircuitOpen","fallback":"extractive"}}),
            json!({"type":"span","name":"compact.token_estimate","data":{"usage_pct":"high"}}),
        ] {
            c.add(marks(v));
        }
        let expected = Counts {
            events: 6,
            spans: 5,
            preflights: 2,
            compactions: 1,
            errors: 3,
            insufficient: 1,
            fallbacks: 1,
            breaker_open: 1,
            ..Counts::default()
        };
        assert_eq!(c, expected);
        let usage = marks(json!({"type":"span","name":"compact.token_estimate",
            "data":{"usage_pct":0.5}}));
        assert_eq!(usage.usage_pct(), Some(0.5));
        c.remove(usage);
        c.remove(usage);
        assert_eq!(c.events, 4);
        assert_eq!(c.spans, 3);
    }
}

/// What the index keeps of an event besides its JSON.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct EventMeta {
    /// A span (`true`) or a trace.
    pub is_span: bool,
    /// The trace it belongs to (shared with the index's keys).
    pub trace_id: Arc<str>,
    /// The span's kind.
    pub kind: Option<Box<str>>,
    /// `started_at` in epoch ms.
    pub started_ms: Option<i64>,
    /// `ended_at` in epoch ms.
    pub ended_ms: Option<i64>,
    /// What it adds to its trace's counters.
    pub marks: Marks,
}

/// What a `compact.pruned_messages` span adds to the compaction metrics,
/// read once when it is validated.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Pruned {
    /// cleared + summarized + dropped.
    pub items: f64,
    /// `tokens_before`.
    pub before: Option<f64>,
    /// `tokens_after`.
    pub after: Option<f64>,
}

impl Pruned {
    /// Reads the span's `data`.
    pub(crate) fn of(data: &Map<String, Value>) -> Pruned {
        let num = |k: &str| data.get(k).and_then(Value::as_f64);
        Pruned {
            items: ["cleared", "summarized", "dropped"]
                .iter()
                .filter_map(|k| num(k))
                .filter(|v| *v >= 0.0 && v.is_finite())
                .sum(),
            before: num("tokens_before").filter(|v| v.is_finite()),
            after: num("tokens_after").filter(|v| v.is_finite()),
        }
    }
}
