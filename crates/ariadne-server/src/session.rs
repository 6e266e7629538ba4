//! A session as an SRE reads it: one row per preflight (one model call),
//! built from the `compact.*` spans of one trace (`docs/events.md`): tokens
//! before and after against the window, why it triggered, which tiers ran,
//! the summary it wrote, what it archived, what went wrong. Behind
//! `GET /api/sessions/{id}` and `GET /api/sessions/{id}/preflights/{span}`.
//!
//! Everything is derived from the stored events on each request; nothing is
//! kept besides them. Fields a producer left out are `null`; unknown fields
//! are ignored, so spans from older or newer producers still make rows.

use std::collections::HashMap;
use std::sync::Arc;

use compact_events::{format_rfc3339_millis, names};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::store::StoredEvent;

/// One preflight: the `compact.preflight` span and its children.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct PreflightRow {
    /// 1-based position among the session's retained preflights, by start.
    pub turn: usize,
    /// The `compact.preflight` span.
    pub span_id: String,
    /// Its sequence number on this server.
    pub seq: u64,
    /// When the call started.
    pub started_at: Option<String>,
    /// When it ended; `null` while it is in progress.
    pub ended_at: Option<String>,
    /// No `ended_at` yet.
    pub in_progress: bool,
    /// `ok` or `error`.
    pub status: String,
    /// Wall time of the call in milliseconds.
    pub duration_ms: Option<f64>,
    /// Estimated tokens on entry.
    pub tokens_before: Option<u64>,
    /// Estimated tokens of what the call returned.
    pub tokens_after: Option<u64>,
    /// The context window (`max_tokens` of `compact.token_estimate`).
    pub max_tokens: Option<u64>,
    /// `tokens_before / max_tokens`.
    pub usage_before: Option<f64>,
    /// `tokens_after / max_tokens`.
    pub usage_after: Option<f64>,
    /// Whether compaction ran (or was attempted).
    pub triggered: bool,
    /// The trigger decision's reason.
    pub reason: Option<String>,
    /// `manual` or `context_overflow` when compaction was forced.
    pub forced: Option<String>,
    /// The tiers that ran, in order.
    pub tiers: Vec<String>,
    /// The policy's trigger threshold (share of the window).
    pub trigger_pct: Option<f64>,
    /// The policy's target after compaction (share of the window).
    pub target_pct: Option<f64>,
    /// The summary this call wrote.
    pub summary: Option<SummaryInfo>,
    /// What left the context.
    pub pruned: Option<PrunedInfo>,
    /// What was archived.
    pub archival: Option<ArchivalInfo>,
    /// Failures and fallbacks (`compact.error`), in order.
    pub errors: Vec<ErrorInfo>,
    /// Why the call failed (`compact.preflight`'s `error`).
    pub error: Option<String>,
    /// The prompt cache around the call, when the producer reports it.
    pub cache: Option<CacheInfo>,
}

/// What a `compact.preflight` says of the provider's prompt cache.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct CacheInfo {
    /// Of the returned request, the tokens the cache can serve (predicted).
    pub read_predicted: Option<u64>,
    /// Identical leading tokens with the previous request.
    pub shared_tokens: Option<u64>,
    /// Tokens of the previous request this one no longer starts with: the
    /// break this call's rewrite caused.
    pub broken_tokens: Option<u64>,
    /// The returned request's input priced by the prediction, US dollars.
    pub cost_predicted_usd: Option<f64>,
    /// The provider's reported input tokens of the previous response.
    pub input_reported: Option<u64>,
    /// Its reported cache reads.
    pub read_reported: Option<u64>,
    /// Its reported cache writes.
    pub write_reported: Option<u64>,
    /// The previous call priced by the reported figures, US dollars.
    pub cost_reported_usd: Option<f64>,
}

/// A `compact.summary_created` span, without its text.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct SummaryInfo {
    /// The span.
    pub span_id: String,
    /// The `N` of `COMPACT-SUMMARY vN`.
    pub version: Option<u64>,
    /// The strategy.
    pub strategy: Option<String>,
    /// Which summarizer wrote it.
    pub summarizer: Option<String>,
    /// The model it called.
    pub model: Option<String>,
    /// Messages folded in.
    pub input_messages: Option<u64>,
    /// Tokens of those messages.
    pub input_tokens: Option<u64>,
    /// Tokens of the summary.
    pub summary_tokens: Option<u64>,
    /// How long the summarizer took.
    pub latency_ms: Option<u64>,
    /// Facts carried into the summary, when the summarizer reports them.
    pub facts_kept: Option<Value>,
    /// Facts left out of it, when reported.
    pub facts_dropped: Option<Value>,
    /// The keys of the facts left out, when reported.
    pub dropped_keys: Option<Value>,
}

/// A `compact.pruned_messages` span.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct PrunedInfo {
    /// Messages that left the context.
    pub pruned_count: Option<u64>,
    /// Tool results capped.
    pub capped: Option<u64>,
    /// Tool calls and results cleared.
    pub cleared: Option<u64>,
    /// Messages folded into the summary.
    pub summarized: Option<u64>,
    /// Messages dropped without a summary.
    pub dropped: Option<u64>,
    /// `{pinned, recent_turns, tool_pairs}` kept.
    pub kept: Option<Value>,
    /// The session's compaction step.
    pub step: Option<u64>,
}

/// A `compact.archival` span.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct ArchivalInfo {
    /// The first key written.
    pub path: Option<String>,
    /// Every key written.
    pub keys: Vec<String>,
    /// Bytes written.
    pub bytes: Option<u64>,
    /// The backend.
    pub storage_adapter: Option<String>,
    /// Spool files holding writes the backend refused.
    pub spooled: Vec<String>,
    /// Status `error` (something was spooled).
    pub failed: bool,
}

/// A `compact.error` span.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct ErrorInfo {
    /// `InsufficientBudget`, `CircuitOpen`, a summarizer failure...
    pub error_type: Option<String>,
    /// What was done instead.
    pub fallback: Option<String>,
    /// The detail.
    pub message: Option<String>,
}

/// The session view of one trace.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct SessionView {
    /// The context window of the latest preflight that reported one.
    pub window: Option<u64>,
    /// The latest trigger threshold.
    pub trigger_pct: Option<f64>,
    /// The latest target.
    pub target_pct: Option<f64>,
    /// One row per retained preflight, oldest first.
    pub preflights: Vec<PreflightRow>,
}

/// One preflight in full: its row, its spans, and the summary text next to
/// the previous one (for a side-by-side diff).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct PreflightDetail {
    /// The row.
    pub row: PreflightRow,
    /// The summary this call wrote (`output_text`).
    pub summary_text: Option<String>,
    /// The summary before it, when retained.
    pub previous_summary: Option<PreviousSummary>,
    /// The preflight span and its children, as stored.
    pub spans: Vec<Value>,
}

/// The summary an earlier preflight wrote.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct PreviousSummary {
    /// The preflight that wrote it.
    pub preflight_span_id: String,
    /// Its version.
    pub version: Option<u64>,
    /// Its text.
    pub output_text: Option<String>,
}

/// A span read back from the store.
struct Span {
    seq: u64,
    span_id: String,
    parent_id: Option<String>,
    name: String,
    object: Map<String, Value>,
    started_ms: Option<i64>,
    ended_ms: Option<i64>,
}

impl Span {
    fn data(&self, key: &str) -> Option<&Value> {
        self.object.get("data")?.as_object()?.get(key)
    }

    fn u64(&self, key: &str) -> Option<u64> {
        let v = self.data(key)?;
        v.as_u64()
            .or_else(|| v.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
    }

    fn f64(&self, key: &str) -> Option<f64> {
        self.data(key)?.as_f64().filter(|f| f.is_finite())
    }

    fn str(&self, key: &str) -> Option<String> {
        self.data(key)?.as_str().map(str::to_owned)
    }

    fn strings(&self, key: &str) -> Vec<String> {
        self.data(key)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    fn field(&self, key: &str) -> Option<String> {
        self.object.get(key)?.as_str().map(str::to_owned)
    }
}

/// The compact spans of a trace and how they nest.
struct Parsed {
    /// Each span once (a later event with the same id replaces the earlier).
    spans: Vec<Span>,
    /// Preflights, in row order.
    preflights: Vec<usize>,
    /// Children of each preflight, by span id, in arrival order.
    children: HashMap<String, Vec<usize>>,
}

fn parse(events: &[Arc<StoredEvent>]) -> Parsed {
    let mut spans: Vec<Span> = Vec::new();
    let mut by_id: HashMap<String, usize> = HashMap::new();
    for ev in events.iter().filter(|e| e.is_span) {
        let Ok(object) = serde_json::from_str::<Map<String, Value>>(ev.json()) else {
            continue;
        };
        let name = object.get("name").and_then(Value::as_str).unwrap_or("");
        if !name.starts_with("compact.") {
            continue;
        }
        let Some(span_id) = object.get("span_id").and_then(Value::as_str) else {
            continue;
        };
        let span = Span {
            seq: ev.seq,
            span_id: span_id.to_owned(),
            parent_id: object
                .get("parent_id")
                .and_then(Value::as_str)
                .map(str::to_owned),
            name: name.to_owned(),
            started_ms: ev.started_ms,
            ended_ms: ev.ended_ms,
            object,
        };
        match by_id.get(&span.span_id) {
            Some(&i) => spans[i] = span,
            None => {
                by_id.insert(span.span_id.clone(), spans.len());
                spans.push(span);
            }
        }
    }
    let mut preflights: Vec<usize> = Vec::new();
    let mut children: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, s) in spans.iter().enumerate() {
        if s.name == names::PREFLIGHT {
            preflights.push(i);
        } else if let Some(p) = &s.parent_id {
            children.entry(p.clone()).or_default().push(i);
        }
    }
    preflights.sort_by_key(|&i| (spans[i].started_ms.unwrap_or(i64::MAX), spans[i].seq));
    Parsed {
        spans,
        preflights,
        children,
    }
}

impl Parsed {
    fn kids(&self, preflight: usize) -> impl Iterator<Item = &Span> {
        self.children
            .get(&self.spans[preflight].span_id)
            .into_iter()
            .flatten()
            .map(|&i| &self.spans[i])
    }

    fn kid(&self, preflight: usize, name: &str) -> Option<&Span> {
        self.kids(preflight).filter(|s| s.name == name).last()
    }

    fn row(&self, turn: usize, preflight: usize) -> PreflightRow {
        let p = &self.spans[preflight];
        let estimate = self.kid(preflight, names::TOKEN_ESTIMATE);
        let decision = self.kid(preflight, names::TRIGGER_DECISION);
        let pruned = self.kid(preflight, names::PRUNED_MESSAGES);
        let max_tokens = estimate
            .and_then(|e| e.u64("max_tokens"))
            .or_else(|| decision.and_then(|d| d.u64("max_tokens")));
        let tokens_before = p
            .u64("tokens_before")
            .or_else(|| estimate.and_then(|e| e.u64("t_est")));
        let tokens_after = p
            .u64("tokens_after")
            .or_else(|| pruned.and_then(|s| s.u64("tokens_after")));
        let share = |t: Option<u64>| match (t, max_tokens) {
            (Some(t), Some(m)) if m > 0 => Some(t as f64 / m as f64),
            _ => None,
        };
        let policy =
            |k: &str| decision.and_then(|d| d.data("policy")?.as_object()?.get(k)?.as_f64());
        let duration_ms = p
            .u64("duration_us")
            .map(|us| us as f64 / 1000.0)
            .or_else(|| match (p.started_ms, p.ended_ms) {
                (Some(s), Some(e)) => Some((e - s) as f64),
                _ => None,
            });
        let mut tiers = p.strings("tiers");
        if tiers.is_empty()
            && let Some(s) = pruned
        {
            tiers = s.strings("tiers");
        }
        PreflightRow {
            turn,
            span_id: p.span_id.clone(),
            seq: p.seq,
            started_at: p.started_ms.map(format_rfc3339_millis),
            ended_at: p.ended_ms.map(format_rfc3339_millis),
            in_progress: p.ended_ms.is_none(),
            status: p.field("status").unwrap_or_else(|| "ok".to_owned()),
            duration_ms,
            tokens_before,
            tokens_after,
            max_tokens,
            usage_before: share(tokens_before),
            usage_after: share(tokens_after),
            triggered: p
                .data("triggered")
                .and_then(Value::as_bool)
                .or_else(|| decision.and_then(|d| d.data("triggered")?.as_bool()))
                .unwrap_or(false),
            reason: p
                .str("reason")
                .or_else(|| decision.and_then(|d| d.str("reason"))),
            forced: decision.and_then(|d| d.str("forced")),
            tiers,
            trigger_pct: policy("trigger_pct")
                .or_else(|| decision.and_then(|d| d.f64("trigger_pct"))),
            target_pct: policy("target_pct"),
            summary: self
                .kid(preflight, names::SUMMARY_CREATED)
                .map(summary_info),
            pruned: pruned.map(|s| PrunedInfo {
                pruned_count: s.u64("pruned_count"),
                capped: s.u64("capped"),
                cleared: s.u64("cleared"),
                summarized: s.u64("summarized"),
                dropped: s.u64("dropped"),
                kept: s.data("kept").cloned(),
                step: s.u64("step"),
            }),
            archival: self.kid(preflight, names::ARCHIVAL).map(|s| ArchivalInfo {
                path: s.str("path"),
                keys: s.strings("keys"),
                bytes: s.u64("bytes"),
                storage_adapter: s.str("storage_adapter"),
                spooled: s.strings("spooled"),
                failed: s.field("status").as_deref() == Some("error"),
            }),
            errors: self
                .kids(preflight)
                .filter(|s| s.name == names::ERROR)
                .map(|s| ErrorInfo {
                    error_type: s.str("error_type"),
                    fallback: s.str("fallback"),
                    message: s.str("message"),
                })
                .collect(),
            error: p.str("error"),
            cache: cache_info(p),
        }
    }
}

/// The cache keys of a `compact.preflight` span, if it has any.
fn cache_info(p: &Span) -> Option<CacheInfo> {
    let c = CacheInfo {
        read_predicted: p.u64("cache_read_predicted"),
        shared_tokens: p.u64("prefix_shared_tokens"),
        broken_tokens: p.u64("prefix_broken_tokens"),
        cost_predicted_usd: p.f64("cost_predicted_usd"),
        input_reported: p.u64("input_tokens_reported"),
        read_reported: p.u64("cache_read_reported"),
        write_reported: p.u64("cache_write_reported"),
        cost_reported_usd: p.f64("cost_reported_usd"),
    };
    (c != CacheInfo::default()).then_some(c)
}

fn summary_info(s: &Span) -> SummaryInfo {
    SummaryInfo {
        span_id: s.span_id.clone(),
        version: s.u64("version"),
        strategy: s.str("strategy"),
        summarizer: s.str("summarizer"),
        model: s.str("model"),
        input_messages: s.u64("input_messages"),
        input_tokens: s.u64("input_tokens"),
        summary_tokens: s.u64("summary_tokens"),
        latency_ms: s.u64("latency_ms"),
        facts_kept: s.data("facts_kept").cloned(),
        facts_dropped: s.data("facts_dropped").cloned(),
        dropped_keys: s.data("dropped_keys").cloned(),
    }
}

/// The session view of a trace's events (in sequence order).
pub(crate) fn view(events: &[Arc<StoredEvent>]) -> SessionView {
    let parsed = parse(events);
    let preflights: Vec<PreflightRow> = parsed
        .preflights
        .iter()
        .enumerate()
        .map(|(i, &p)| parsed.row(i + 1, p))
        .collect();
    let latest = |f: fn(&PreflightRow) -> Option<f64>| preflights.iter().rev().find_map(f);
    SessionView {
        window: preflights.iter().rev().find_map(|r| r.max_tokens),
        trigger_pct: latest(|r| r.trigger_pct),
        target_pct: latest(|r| r.target_pct),
        preflights,
    }
}

/// One preflight of a trace in full, or `None` when no retained
/// `compact.preflight` span has that id.
pub(crate) fn detail(events: &[Arc<StoredEvent>], span_id: &str) -> Option<PreflightDetail> {
    let parsed = parse(events);
    let pos = parsed
        .preflights
        .iter()
        .position(|&i| parsed.spans[i].span_id == span_id)?;
    let p = parsed.preflights[pos];
    let text = |preflight: usize| {
        parsed
            .kid(preflight, names::SUMMARY_CREATED)
            .map(|s| s.str(compact_events::payload::SummaryCreated::OUTPUT_TEXT))
    };
    let previous_summary = parsed.preflights[..pos].iter().rev().find_map(|&q| {
        let s = parsed.kid(q, names::SUMMARY_CREATED)?;
        Some(PreviousSummary {
            preflight_span_id: parsed.spans[q].span_id.clone(),
            version: s.u64("version"),
            output_text: s.str(compact_events::payload::SummaryCreated::OUTPUT_TEXT),
        })
    });
    let mut spans = vec![Value::Object(parsed.spans[p].object.clone())];
    spans.extend(parsed.kids(p).map(|s| Value::Object(s.object.clone())));
    Some(PreflightDetail {
        row: parsed.row(pos + 1, p),
        summary_text: text(p).flatten(),
        previous_summary,
        spans,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::parse_event;
    use serde_json::json;

    fn stored(events: Vec<Value>) -> Vec<Arc<StoredEvent>> {
        events
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                let e = parse_event(v, &[]).expect("valid");
                Arc::new(StoredEvent::new(i as u64 + 1, 0, e.meta, e.json))
            })
            .collect()
    }

    fn span(id: &str, parent: Option<&str>, name: &str, at: &str, data: Value) -> Value {
        let mut v = json!({"type":"span","trace_id":"s","span_id":id,"kind":"compaction",
            "name":name,"started_at":format!("2026-01-01T00:00:{at}Z"),
            "ended_at":format!("2026-01-01T00:00:{at}Z"),"data":data,"status":"ok"});
        if let Some(p) = parent {
            v["parent_id"] = json!(p);
        }
        v
    }

    fn preflight(n: u32, before: u64, after: u64, summary: Option<(u64, &str)>) -> Vec<Value> {
        let id = format!("p{n}");
        let at = format!("{n:02}.000");
        let mut out = vec![
            span(
                &format!("e{n}"),
                Some(&id),
                "compact.token_estimate",
                &at,
                json!({"t_est":before,"max_tokens":1000,"usage_pct":before as f64/1000.0}),
            ),
            span(
                &format!("d{n}"),
                Some(&id),
                "compact.trigger_decision",
                &at,
                json!({"triggered":summary.is_some(),"reason":"usage_pct >= trigger_pct",
                       "policy":{"trigger_pct":0.8,"target_pct":0.5}}),
            ),
        ];
        if let Some((version, text)) = summary {
            out.push(span(
                &format!("s{n}"),
                Some(&id),
                "compact.summary_created",
                &at,
                json!({"version":version,"summary_tokens":40,"output_text":text,
                       "facts_kept":7,"facts_dropped":2,"dropped_keys":["a","b"]}),
            ));
            out.push(span(
                &format!("a{n}"),
                Some(&id),
                "compact.archival",
                &at,
                json!({"path":"s/transcript-pre-compact-001.jsonl",
                       "keys":["s/transcript-pre-compact-001.jsonl","s/summary-001.json"]}),
            ));
        }
        out.push(span(
            &id,
            None,
            "compact.preflight",
            &at,
            json!({"session_id":"s","triggered":summary.is_some(),"tokens_before":before,
                   "tokens_after":after,"tiers":if summary.is_some() {json!(["summarize"])} else {json!([])}}),
        ));
        out
    }

    #[test]
    fn one_row_per_preflight_with_the_window_and_policy() {
        let mut evs = vec![json!({"type":"trace","trace_id":"s"})];
        evs.extend(preflight(1, 500, 500, None));
        evs.extend(preflight(2, 900, 400, Some((1, "v1 text"))));
        evs.extend(preflight(3, 950, 450, Some((2, "v2 text"))));
        // Someone else's span in the same trace is ignored.
        evs.push(json!({"type":"span","trace_id":"s","span_id":"x","name":"generation"}));
        let v = view(&stored(evs));
        assert_eq!(v.window, Some(1000));
        assert_eq!(v.trigger_pct, Some(0.8));
        assert_eq!(v.target_pct, Some(0.5));
        assert_eq!(v.preflights.len(), 3);
        let r = &v.preflights[1];
        assert_eq!(r.turn, 2);
        assert_eq!((r.tokens_before, r.tokens_after), (Some(900), Some(400)));
        assert_eq!(r.usage_before, Some(0.9));
        assert!(r.triggered && !r.in_progress);
        assert_eq!(r.tiers, vec!["summarize"]);
        let s = r.summary.as_ref().expect("summary");
        assert_eq!(s.version, Some(1));
        assert_eq!(s.facts_kept, Some(json!(7)));
        assert_eq!(s.dropped_keys, Some(json!(["a", "b"])));
        assert_eq!(r.archival.as_ref().map(|a| a.keys.len()), Some(2));
        assert!(v.preflights[0].summary.is_none());
    }

    #[test]
    fn detail_pairs_a_summary_with_the_previous_one() {
        let mut evs = Vec::new();
        evs.extend(preflight(1, 900, 400, Some((1, "v1 text"))));
        evs.extend(preflight(2, 500, 500, None));
        evs.extend(preflight(3, 950, 450, Some((2, "v2 text"))));
        let evs = stored(evs);
        let d = detail(&evs, "p3").expect("found");
        assert_eq!(d.summary_text.as_deref(), Some("v2 text"));
        let prev = d.previous_summary.expect("previous");
        assert_eq!(prev.version, Some(1));
        assert_eq!(prev.output_text.as_deref(), Some("v1 text"));
        assert_eq!(d.spans.len(), 5);
        assert!(
            detail(&evs, "p1")
                .expect("first")
                .previous_summary
                .is_none()
        );
        assert!(detail(&evs, "nope").is_none());
    }

    #[test]
    fn a_preflight_without_ended_at_is_in_progress() {
        let mut p = span("p1", None, "compact.preflight", "01.000", json!({}));
        p.as_object_mut().map(|o| o.remove("ended_at"));
        let v = view(&stored(vec![p]));
        assert!(v.preflights[0].in_progress);
        assert_eq!(v.preflights[0].ended_at, None);
        assert_eq!(v.preflights[0].duration_ms, None);
    }
}
