//! The in-memory half of the store: the retained events in sequence order,
//! and a per-trace index for `/api/traces`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

/// One stored event, shared by the store, the SSE streams and the API.
#[derive(Debug)]
pub(crate) struct StoredEvent {
    /// Monotonic sequence number: the SSE `id:`.
    pub seq: u64,
    /// When the server received it (epoch ms); age retention uses it.
    pub received_ms: i64,
    /// A span (`true`) or a trace.
    pub is_span: bool,
    /// The trace it belongs to.
    pub trace_id: Box<str>,
    /// The span's kind.
    pub kind: Option<Box<str>>,
    /// `started_at` in epoch ms.
    pub started_ms: Option<i64>,
    /// The SSE frame `id: {seq}\ndata: {json}\n\n`, built once and sent to
    /// every subscriber as is; the JSON is a slice of it.
    frame: Box<str>,
    json_at: usize,
}

impl StoredEvent {
    /// An event numbered `seq` whose JSON (one line, as serde_json writes it) is `json`.
    pub(crate) fn new(
        seq: u64,
        received_ms: i64,
        is_span: bool,
        trace_id: Box<str>,
        kind: Option<Box<str>>,
        started_ms: Option<i64>,
        json: &str,
    ) -> Self {
        let frame = format!("id: {seq}\ndata: {json}\n\n").into_boxed_str();
        let json_at = frame.len() - 2 - json.len();
        StoredEvent {
            seq,
            received_ms,
            is_span,
            trace_id,
            kind,
            started_ms,
            frame,
            json_at,
        }
    }

    /// The event's JSON, exactly as ingested after validation.
    pub(crate) fn json(&self) -> &str {
        &self.frame[self.json_at..self.frame.len() - 2]
    }

    /// The event as one SSE message.
    pub(crate) fn sse_frame(&self) -> &str {
        &self.frame
    }
}

#[derive(Debug, Default)]
struct TraceEntry {
    /// The latest `trace` event (its name, metadata, times).
    trace: Option<Arc<StoredEvent>>,
    /// Sequence numbers of every retained event of the trace, ascending.
    seqs: VecDeque<u64>,
    last_seq: u64,
}

/// Retained events and the trace index.
#[derive(Debug, Default)]
pub(crate) struct Memory {
    events: VecDeque<Arc<StoredEvent>>,
    traces: HashMap<Box<str>, TraceEntry>,
    /// Traces by their latest event, for newest-first listing.
    by_activity: BTreeMap<u64, Box<str>>,
    json_bytes: usize,
}

/// A trace as `/api/traces` lists it.
#[derive(Debug, Clone)]
pub(crate) struct TraceSummary {
    /// The trace id.
    pub trace_id: String,
    /// The latest `trace` event's JSON, if one is retained.
    pub trace_json: Option<String>,
    /// Retained events of the trace.
    pub event_count: usize,
    /// Sequence number of its latest event (the paging cursor).
    pub last_seq: u64,
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
            entry.trace = Some(ev.clone());
        }
        self.by_activity.insert(ev.seq, ev.trace_id.clone());
        self.json_bytes += ev.frame.len();
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
            self.json_bytes -= ev.frame.len();
            if let Some(entry) = self.traces.get_mut(&ev.trace_id) {
                entry.seqs.pop_front();
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
        let upper = before.unwrap_or(u64::MAX);
        self.by_activity
            .range(..upper)
            .rev()
            .take(limit)
            .filter_map(|(_, id)| {
                let entry = self.traces.get(id)?;
                Some(TraceSummary {
                    trace_id: id.to_string(),
                    trace_json: entry.trace.as_ref().map(|t| t.json().to_owned()),
                    event_count: entry.seqs.len(),
                    last_seq: entry.last_seq,
                })
            })
            .collect()
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
            span,
            trace.into(),
            None,
            None,
            &format!("{{\"seq\":{seq}}}"),
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
