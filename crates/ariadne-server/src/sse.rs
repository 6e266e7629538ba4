//! `GET /events`: the live stream, in Ariadne's SSE dialect.
//!
//! Unnamed `data:` messages; first `{"type":"connected","timestamp":...}`;
//! a `:heartbeat` comment every heartbeat period; filters `traceId`,
//! `kinds` (comma list, spans only) and `since` (spans starting before it
//! are left out). Ours adds `id: <seq>` on every event and replay of what
//! came after `Last-Event-ID` (or `?after=`), still retained.
//!
//! Each subscriber reads the store's broadcast ring, a bounded queue of
//! `limits.sse_queue` events per subscriber: publishing never waits for a
//! subscriber, and one that falls further behind skips ahead and receives
//! `:warning stream backpressure; events skipped`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use compact_events::{now_rfc3339, parse_rfc3339_millis};
use serde_json::json;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::sync::{OwnedSemaphorePermit, broadcast, watch};
use tokio::time::{Instant, Interval, MissedTickBehavior};

use crate::app::AppState;
use crate::metrics::{Metrics, SseClientGuard};
use crate::store::StoredEvent;

/// The comment a subscriber gets when it skipped events.
pub(crate) const BACKPRESSURE_WARNING: &str = ":warning stream backpressure; events skipped\n\n";
/// The comment a reconnecting subscriber gets when some of what it missed
/// is older than the retention window and cannot be replayed.
pub(crate) const REPLAY_GAP_WARNING: &str = ":warning replay incomplete; older events expired\n\n";
/// The heartbeat comment.
pub(crate) const HEARTBEAT: &str = ":heartbeat\n\n";

/// Which events a subscriber wants.
#[derive(Debug, Default, Clone)]
pub(crate) struct Filter {
    trace_id: Option<String>,
    kinds: Option<HashSet<String>>,
    since_ms: Option<i64>,
}

impl Filter {
    fn matches(&self, ev: &StoredEvent) -> bool {
        if self.trace_id.as_deref().is_some_and(|t| t != &*ev.trace_id) {
            return false;
        }
        if ev.is_span {
            if let Some(kinds) = &self.kinds
                && !ev.kind.as_deref().is_some_and(|k| kinds.contains(k))
            {
                return false;
            }
            if let (Some(since), Some(started)) = (self.since_ms, ev.started_ms)
                && started < since
            {
                return false;
            }
        }
        true
    }
}

fn bad_request(msg: &str) -> Response {
    (StatusCode::BAD_REQUEST, axum::Json(json!({ "error": msg }))).into_response()
}

/// The handler.
#[utoipa::path(get, path = "/events", tag = "trace server",
    params(("Last-Event-ID" = Option<u64>, Header, description = "Replay what came after this event id")),
    responses((status = 200, description = "Server-sent events, one per stored event", content_type = "text/event-stream"), (status = 401, description = "No or a wrong read token"), (status = 503, description = "Too many subscribers")))]
pub(crate) async fn events(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let mut filter = Filter::default();
    if let Some(t) = q.get("traceId").filter(|t| !t.is_empty()) {
        filter.trace_id = Some(t.clone());
    }
    if let Some(k) = q.get("kinds").filter(|k| !k.is_empty()) {
        filter.kinds = Some(k.split(',').map(|s| s.trim().to_owned()).collect());
    }
    if let Some(s) = q.get("since").filter(|s| !s.is_empty()) {
        // RFC 3339, or epoch milliseconds.
        match parse_rfc3339_millis(s).or_else(|| s.parse::<i64>().ok()) {
            Some(ms) => filter.since_ms = Some(ms),
            None => return bad_request("Invalid since parameter"),
        }
    }
    let after = match headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .or(q.get("after").map(String::as_str))
        .filter(|s| !s.trim().is_empty())
    {
        Some(s) => match s.trim().parse::<u64>() {
            Ok(n) => Some(n),
            Err(_) => return bad_request("Invalid Last-Event-ID"),
        },
        None => None,
    };
    let Ok(permit) = state.sse_permits().try_acquire_owned() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(json!({"error":"Too many subscribers","message":"the server's /events client limit is reached"})),
        )
            .into_response();
    };
    // Subscribe before taking the replay snapshot, so nothing published in
    // between is missed; duplicates are dropped by sequence number.
    let live = state.store().subscribe();
    let (replay, replay_gap) = match after {
        Some(after) => {
            let gap = state.store().replay_gap(after);
            let memory = state.store().memory();
            let events: VecDeque<Arc<StoredEvent>> = memory
                .after(after)
                .into_iter()
                .filter(|e| filter.matches(e))
                .collect();
            (events, gap)
        }
        None => (VecDeque::new(), false),
    };
    let period = state.config().limits.heartbeat();
    let mut heartbeat = tokio::time::interval_at(Instant::now() + period, period);
    heartbeat.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let sub = Subscriber {
        connected: false,
        replay_gap,
        replay,
        last_sent: after.unwrap_or(0),
        live,
        filter,
        heartbeat,
        shutdown: state.shutdown_signal(),
        metrics: state.metrics().clone(),
        _guard: state.metrics().sse_connected(),
        _permit: permit,
    };
    let stream = futures_util::stream::unfold(sub, |mut sub| async move {
        let chunk = sub.next_chunk().await?;
        Some((Ok::<_, std::convert::Infallible>(chunk), sub))
    });
    let mut resp = Body::from_stream(stream).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Reverse proxies (nginx) must not buffer the stream.
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

struct Subscriber {
    connected: bool,
    replay_gap: bool,
    replay: VecDeque<Arc<StoredEvent>>,
    last_sent: u64,
    live: broadcast::Receiver<Arc<StoredEvent>>,
    filter: Filter,
    heartbeat: Interval,
    shutdown: watch::Receiver<bool>,
    metrics: Arc<Metrics>,
    _guard: SseClientGuard,
    _permit: OwnedSemaphorePermit,
}

/// Events already waiting are sent together, up to this many bytes, so a
/// busy stream costs one write (and one HTTP chunk) per burst, not per event.
const COALESCE_BYTES: usize = 64 * 1024;

impl Subscriber {
    /// Appends `ev` to `out` unless filtered out or already sent (replay overlap).
    fn take(&mut self, ev: &StoredEvent, out: &mut String) {
        if ev.seq > self.last_sent && self.filter.matches(ev) {
            self.last_sent = ev.seq;
            ev.write_sse(out);
        }
    }

    /// The next bytes to send, or `None` to end the stream.
    async fn next_chunk(&mut self) -> Option<Bytes> {
        if !self.connected {
            self.connected = true;
            let hello = json!({"type":"connected","timestamp": now_rfc3339()});
            return Some(Bytes::from(format!("data: {hello}\n\n")));
        }
        if self.replay_gap {
            self.replay_gap = false;
            return Some(Bytes::from_static(REPLAY_GAP_WARNING.as_bytes()));
        }
        if !self.replay.is_empty() {
            let mut out = String::new();
            while out.len() < COALESCE_BYTES
                && let Some(ev) = self.replay.pop_front()
            {
                self.last_sent = ev.seq;
                ev.write_sse(&mut out);
            }
            return Some(Bytes::from(out));
        }
        loop {
            if *self.shutdown.borrow() {
                return None;
            }
            tokio::select! {
                _ = self.shutdown.changed() => return None,
                r = self.live.recv() => match r {
                    Ok(ev) => {
                        let mut out = String::new();
                        self.take(&ev, &mut out);
                        // Whatever else is already queued goes in the same write.
                        while out.len() < COALESCE_BYTES {
                            match self.live.try_recv() {
                                Ok(more) => self.take(&more, &mut out),
                                Err(TryRecvError::Lagged(n)) => {
                                    self.metrics.sse_skipped(n);
                                    out.push_str(BACKPRESSURE_WARNING);
                                    break;
                                }
                                Err(_) => break,
                            }
                        }
                        if out.is_empty() {
                            continue;
                        }
                        return Some(Bytes::from(out));
                    }
                    Err(RecvError::Lagged(n)) => {
                        self.metrics.sse_skipped(n);
                        return Some(Bytes::from_static(BACKPRESSURE_WARNING.as_bytes()));
                    }
                    Err(RecvError::Closed) => return None,
                },
                _ = self.heartbeat.tick() => {
                    return Some(Bytes::from_static(HEARTBEAT.as_bytes()));
                }
            }
        }
    }
}
