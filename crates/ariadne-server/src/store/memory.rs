//! The in-memory half of the store: the retained events in sequence order,
//! and a per-trace index for `/api/traces` and `/api/sessions`: each trace's
//! latest trace fields (merged over its trace events), its counters, the
//! time range its events cover, and its last activity.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::schema::{Counts, EventMeta, Marks};

/// One stored event, shared by the store, the SSE streams and the API.
#[derive(Debug)]
pub(crate) struct StoredEvent {
    /// Monotonic sequence number: the SSE `id:`.
    pub seq: u64,
    /// When the server received it (epoch ms); age retention uses it.
    pub received_ms: i64,
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
    /// The event's JSON, one line. Moved in from validation, not copied:
    /// the writer thread only numbers events, and each SSE stream writes
    /// its own frame around it anyway.
    json: Box<str>,
}

impl StoredEvent {
    /// An event numbered `seq` whose JSON (one line, as serde_json writes it) is `json`.
    pub(crate) fn new(seq: u64, received_ms: i64, meta: EventMeta, json: Box<str>) -> Self {
        StoredEvent {
            seq,
            received_ms,
            is_span: meta.is_span,
            trace_id: meta.trace_id,
            kind: meta.kind,
            started_ms: meta.started_ms,
            ended_ms: meta.ended_ms,
            marks: meta.marks,
            json,
        }
    }

    /// The event's JSON, exactly as ingested after validation.
    pub(crate) fn json(&self) -> &str {
        &self.json
    }

    /// Appends the event as one SSE message: `id: {seq}\ndata: {json}\n\n`.
    pub(crate) fn write_sse(&self, out: &mut String) {
        use std::fmt::Write;
        // Writing to a String cannot fail.
        let _ = write!(out, "id: {}\ndata: ", self.seq);
        out.push_str(&self.json);
        out.push_str("\n\n");
    }
}

/// The trace fields of a trace, merged over its trace events in arrival
/// order: a later event overrides the fields it carries (`metadata` key by
/// key) and keeps the others, so a closing `{"type":"trace","trace_id",
/// "ended_at"}` ends the trace without erasing its name.
#[derive(Debug)]
struct TraceFields {
    /// The latest trace event merged in; evicting it forgets the fields.
    seq: u64,
    json: Box<str>,
    has_started: bool,
    has_ended: bool,
}

fn merge_trace(old: Option<&TraceFields>, ev: &StoredEvent) -> TraceFields {
    // Stored JSON is always an object; should one ever not parse, the newest
    // event alone is still the best answer.
    let Ok(new) = serde_json::from_str::<Map<String, Value>>(ev.json()) else {
        return TraceFields {
            seq: ev.seq,
            json: ev.json().into(),
            has_started: false,
            has_ended: false,
        };
    };
    let mut base = old
        .and_then(|o| serde_json::from_str::<Map<String, Value>>(&o.json).ok())
        .unwrap_or_default();
    for (k, v) in new {
        match (base.get_mut(&k), v) {
            (Some(Value::Object(have)), Value::Object(more)) if k == "metadata" => {
                have.extend(more);
            }
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
    TraceFields {
        seq: ev.seq,
        has_started: base.contains_key("started_at"),
        has_ended: base.contains_key("ended_at"),
        json: Value::Object(base).to_string().into_boxed_str(),
    }
}

#[derive(Debug, Default)]
struct TraceEntry {
    /// Its trace fields, merged over its trace events.
    trace: Option<TraceFields>,
    /// Sequence numbers of every retained event of the trace, ascending.
    seqs: VecDeque<u64>,
    last_seq: u64,
    counts: Counts,
    /// Earliest and latest `started_at`/`ended_at` of any of its events
    /// (kept when those events are evicted: the trace did start then).
    first_ms: Option<i64>,
    last_ms: Option<i64>,
    last_received_ms: i64,
    /// The latest `compact.token_estimate`'s `usage_pct`.
    usage_pct: Option<f64>,
}

/// Retained events and the trace index.
#[derive(Debug, Default)]
pub(crate) struct Memory {
    events: VecDeque<Arc<StoredEvent>>,
    traces: HashMap<Arc<str>, TraceEntry>,
    /// Traces by their latest event, for newest-first listing.
    by_activity: BTreeMap<u64, Arc<str>>,
    json_bytes: usize,
    totals: Counts,
    /// The newest sequence number evicted (for replay-gap warnings).
    evicted_through: u64,
}

/// A trace as `/api/traces` and `/api/sessions` list it.
#[derive(Debug, Clone)]
pub(crate) struct TraceSummary {
    /// The trace id.
    pub trace_id: String,
    /// Its trace fields (merged over its retained trace events), if any.
    pub trace_json: Option<String>,
    /// Retained events of the trace.
    pub event_count: usize,
    /// Sequence number of its latest event (the paging cursor).
    pub last_seq: u64,
    /// Its counters over the retained events.
    pub counts: Counts,
    /// The earliest time any of its events gives (epoch ms).
    pub first_ms: Option<i64>,
    /// The latest time any of its events gives (epoch ms).
    pub last_ms: Option<i64>,
    /// Whether its trace fields carry `started_at`.
    pub has_started: bool,
    /// Whether its trace fields carry `ended_at` (it has ended).
    pub has_ended: bool,
    /// When the server received its latest event (epoch ms).
    pub last_received_ms: i64,
    /// The latest context usage it reported (`compact.token_estimate`).
    pub usage_pct: Option<f64>,
}

impl TraceEntry {
    fn summary(&self, id: &str) -> TraceSummary {
        TraceSummary {
            trace_id: id.to_owned(),
            trace_json: self.trace.as_ref().map(|t| t.json.to_string()),
            event_count: self.seqs.len(),
            last_seq: self.last_seq,
            counts: self.counts,
            first_ms: self.first_ms,
            last_ms: self.last_ms,
            has_started: self.trace.as_ref().is_some_and(|t| t.has_started),
            has_ended: self.trace.as_ref().is_some_and(|t| t.has_ended),
            last_received_ms: self.last_received_ms,
            usage_pct: self.usage_pct,
        }
    }
}

/// Which traces a listing wants, besides its page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TraceFilter {
    /// A substring of the trace id (ASCII case-insensitive).
    pub id_contains: Option<String>,
    /// Only traces with at least one of these counted.
    pub has: Vec<Badge>,
}

/// A counter a listing can filter on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Badge {
    /// At least one compaction.
    Compactions,
    /// At least one span with status `error`.
    Errors,
    /// At least one `InsufficientBudget`.
    Insufficient,
    /// At least one fallback.
    Fallbacks,
    /// At least one `CircuitOpen`.
    BreakerOpen,
}

impl Badge {
    /// The names the API accepts, in `has=` order.
    pub(crate) const NAMES: [&'static str; 5] = [
        "compactions",
        "errors",
        "insufficient",
        "fallbacks",
        "breaker_open",
    ];

    /// The badge called `name`.
    pub(crate) fn parse(name: &str) -> Option<Badge> {
        Some(match name {
            "compactions" => Badge::Compactions,
            "errors" => Badge::Errors,
            "insufficient" => Badge::Insufficient,
            "fallbacks" => Badge::Fallbacks,
            "breaker_open" => Badge::BreakerOpen,
            _ => return None,
        })
    }

    fn count(self, c: &Counts) -> u64 {
        match self {
            Badge::Compactions => c.compactions,
            Badge::Errors => c.errors,
            Badge::Insufficient => c.insufficient,
            Badge::Fallbacks => c.fallbacks,
            Badge::BreakerOpen => c.breaker_open,
        }
    }
}

impl TraceFilter {
    fn matches(&self, id: &str, e: &TraceEntry) -> bool {
        if let Some(q) = &self.id_contains {
            let id = id.to_ascii_lowercase();
            if !id.contains(&q.to_ascii_lowercase()) {
                return false;
            }
        }
        self.has.is_empty() || self.has.iter().any(|b| b.count(&e.counts) > 0)
    }
}

impl Memory {
    /// Appends an event (sequence numbers must increase).
    pub(crate) fn push(&mut self, ev: Arc<StoredEvent>) {
        let entry = self.traces.entry(ev.trace_id.clone()).or_default();
        if entry.last_seq != 0 {
            self.by_activity.remove(&entry.last_seq);
        }
        entry.last_seq = ev.seq;
        entry.seqs.push_back(ev.seq);
        if !ev.is_span {
            entry.trace = Some(merge_trace(entry.trace.as_ref(), &ev));
        }
        entry.counts.add(ev.marks);
        for t in [ev.started_ms, ev.ended_ms].into_iter().flatten() {
            entry.first_ms = Some(entry.first_ms.map_or(t, |f| f.min(t)));
            entry.last_ms = Some(entry.last_ms.map_or(t, |l| l.max(t)));
        }
        entry.last_received_ms = entry.last_received_ms.max(ev.received_ms);
        if let Some(u) = ev.marks.usage_pct() {
            entry.usage_pct = Some(u);
        }
        self.totals.add(ev.marks);
        self.by_activity.insert(ev.seq, ev.trace_id.clone());
        self.json_bytes += ev.json.len();
        self.events.push_back(ev);
    }

    /// Drops the oldest events while there are more than `max_events` or
    /// they were received before `min_received_ms`.
    pub(crate) fn evict(&mut self, max_events: usize, min_received_ms: i64) {
        while let Some(front) = self.events.front() {
            if self.events.len() <= max_events && front.received_ms >= min_received_ms {
                break;
            }
            let Some(ev) = self.events.pop_front() else {
                break;
            };
            self.evicted_through = self.evicted_through.max(ev.seq);
            self.json_bytes -= ev.json.len();
            self.totals.remove(ev.marks);
            if let Some(entry) = self.traces.get_mut(&ev.trace_id) {
                entry.seqs.pop_front();
                entry.counts.remove(ev.marks);
                if entry.trace.as_ref().is_some_and(|t| t.seq == ev.seq) {
                    entry.trace = None;
                }
                if entry.seqs.is_empty() {
                    self.by_activity.remove(&entry.last_seq);
                    self.traces.remove(&ev.trace_id);
                }
            }
        }
    }

    /// Retained events.
    pub(crate) fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether nothing is retained.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// The newest sequence number evicted (or known to be gone), 0 if none.
    pub(crate) fn evicted_through(&self) -> u64 {
        self.evicted_through
    }

    /// Records that every event up to `seq` is gone (a store that loaded
    /// only its newest events).
    pub(crate) fn forget_through(&mut self, seq: u64) {
        self.evicted_through = self.evicted_through.max(seq);
    }

    /// The oldest retained sequence number.
    pub(crate) fn first_seq(&self) -> Option<u64> {
        self.events.front().map(|e| e.seq)
    }

    /// The newest retained sequence number.
    pub(crate) fn last_seq(&self) -> Option<u64> {
        self.events.back().map(|e| e.seq)
    }

    /// Bytes of retained events (their SSE frames).
    pub(crate) fn json_bytes(&self) -> usize {
        self.json_bytes
    }

    /// Counters over every retained event.
    pub(crate) fn totals(&self) -> Counts {
        self.totals
    }

    /// Traces with at least one retained event.
    pub(crate) fn trace_count(&self) -> usize {
        self.traces.len()
    }

    // A binary search rather than an index: recovery may have skipped a
    // damaged record, so sequence numbers are ascending but not contiguous.
    fn get(&self, seq: u64) -> Option<&Arc<StoredEvent>> {
        let idx = self.events.binary_search_by_key(&seq, |e| e.seq).ok()?;
        self.events.get(idx)
    }

    /// Events with a sequence number above `after`, oldest first.
    pub(crate) fn after(&self, after: u64) -> Vec<Arc<StoredEvent>> {
        let skip = self.events.partition_point(|e| e.seq <= after);
        self.events.iter().skip(skip).cloned().collect()
    }

    /// Up to `limit` traces whose latest event is before `before`, newest first.
    pub(crate) fn traces(&self, limit: usize, before: Option<u64>) -> Vec<TraceSummary> {
        self.traces_where(limit, before, &TraceFilter::default())
    }

    /// Like [`Memory::traces`], only the traces `filter` accepts.
    pub(crate) fn traces_where(
        &self,
        limit: usize,
        before: Option<u64>,
        filter: &TraceFilter,
    ) -> Vec<TraceSummary> {
        let upper = before.unwrap_or(u64::MAX);
        self.by_activity
            .range(..upper)
            .rev()
            .filter_map(|(_, id)| {
                let entry = self.traces.get(id)?;
                filter.matches(id, entry).then(|| entry.summary(id))
            })
            .take(limit)
            .collect()
    }

    /// One trace's summary.
    pub(crate) fn trace(&self, trace_id: &str) -> Option<TraceSummary> {
        self.traces.get(trace_id).map(|e| e.summary(trace_id))
    }

    /// Every retained event of one trace, in sequence order.
    pub(crate) fn trace_events(&self, trace_id: &str) -> Option<Vec<Arc<StoredEvent>>> {
        let entry = self.traces.get(trace_id)?;
        Some(
            entry
                .seqs
                .iter()
                .filter_map(|s| self.get(*s).cloned())
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(seq: u64, trace: &str, span: bool) -> Arc<StoredEvent> {
        Arc::new(StoredEvent::new(
            seq,
            seq as i64,
            EventMeta {
                is_span: span,
                trace_id: trace.into(),
                ..EventMeta::default()
            },
            format!("{{\"seq\":{seq}}}").into(),
        ))
    }

    #[test]
    fn index_follows_eviction() {
        let mut m = Memory::default();
        m.push(ev(1, "a", false));
        m.push(ev(2, "b", true));
        m.push(ev(3, "a", true));
        assert_eq!(m.traces(10, None)[0].trace_id, "a");
        assert_eq!(m.trace_events("a").unwrap().len(), 2);
        m.evict(2, i64::MIN);
        assert_eq!(m.trace_events("a").unwrap().len(), 1);
        assert!(m.traces(10, None)[0].trace_json.is_none());
        m.evict(10, 4);
        assert!(m.is_empty() && m.traces(10, None).is_empty());
        assert_eq!(m.json_bytes(), 0);
    }

    #[test]
    fn after_and_paging() {
        let mut m = Memory::default();
        for s in 1..=5 {
            m.push(ev(s, &format!("t{s}"), true));
        }
        assert_eq!(
            m.after(3).iter().map(|e| e.seq).collect::<Vec<_>>(),
            vec![4, 5]
        );
        assert_eq!(m.after(0).len(), 5);
        let page = m.traces(2, Some(4));
        assert_eq!(
            page.iter().map(|t| t.last_seq).collect::<Vec<_>>(),
            vec![3, 2]
        );
    }
}
