//! The client side of `GET /events`, for `compact tail`: an SSE parser, a
//! follower that reconnects with `Last-Event-ID` (so nothing retained is
//! missed across a reconnect), and the one-line rendering of an event.

use std::time::Duration;

use reqwest::header::{ACCEPT, AUTHORIZATION};
use serde_json::Value;

use crate::http::parse_url;

/// One SSE message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SseMessage {
    /// The `id:` field, if any.
    pub id: Option<String>,
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
}

/// What the parser found: a message, or a comment line (`:heartbeat`,
/// `:warning ...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseItem {
    /// A dispatched message.
    Message(SseMessage),
    /// A comment, without its leading `:`.
    Comment(String),
}

/// An incremental `text/event-stream` parser: feed it bytes as they come.
#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
    cur: SseMessage,
    has_data: bool,
    // A `\r` ended the last line; a `\n` right after belongs to it.
    after_cr: bool,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes; returns the items they completed.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<SseItem> {
        let mut out = Vec::new();
        for &b in bytes {
            if self.after_cr {
                self.after_cr = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\n' | b'\r' => {
                    self.after_cr = b == b'\r';
                    let line = std::mem::take(&mut self.buf);
                    self.line(&line, &mut out);
                }
                _ => self.buf.push(b),
            }
        }
        out
    }

    fn line(&mut self, line: &[u8], out: &mut Vec<SseItem>) {
        if line.is_empty() {
            if self.has_data {
                let mut msg = std::mem::take(&mut self.cur);
                if msg.data.ends_with('\n') {
                    msg.data.pop();
                }
                out.push(SseItem::Message(msg));
            } else {
                // An event with no data is not dispatched, but its id counts.
                self.cur.data.clear();
                self.cur.event = None;
            }
            self.has_data = false;
            return;
        }
        let text = String::from_utf8_lossy(line);
        if let Some(comment) = text.strip_prefix(':') {
            out.push(SseItem::Comment(comment.trim_start().to_owned()));
            return;
        }
        let (field, value) = match text.find(':') {
            Some(i) => {
                let v = &text[i + 1..];
                (&text[..i], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (&text[..], ""),
        };
        match field {
            "data" => {
                self.cur.data.push_str(value);
                self.cur.data.push('\n');
                self.has_data = true;
            }
            "id" if !value.contains('\0') => self.cur.id = Some(value.to_owned()),
            "event" => self.cur.event = Some(value.to_owned()),
            _ => {}
        }
    }
}

/// What to follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailOptions {
    /// The server's base URL, e.g. `http://127.0.0.1:5175`.
    pub url: String,
    /// Only this trace (`?traceId=`).
    pub trace: Option<String>,
    /// Only these kinds (`?kinds=a,b`).
    pub kinds: Vec<String>,
    /// The read token, sent as `Authorization: Bearer`.
    pub token: Option<String>,
    /// First wait before reconnecting; doubles up to 5 s.
    pub reconnect_delay: Duration,
}

/// Why following stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TailError {
    /// The URL is unusable.
    #[error(transparent)]
    Url(#[from] crate::BuildError),
    /// The server refused the token (401/403): retrying cannot help.
    #[error("the server refused the request: HTTP {0} (check --token)")]
    Unauthorized(u16),
    /// The HTTP client could not be created.
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
}

/// What the follower reports besides events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TailNotice {
    /// The stream is open (the server's `connected` message).
    Connected,
    /// The stream broke or could not be opened; retrying after the delay.
    Reconnecting(String),
    /// A `:warning ...` comment from the server (e.g. skipped events).
    Warning(String),
}

/// The `/events` URL for `opts`.
pub fn events_url(opts: &TailOptions) -> Result<reqwest::Url, TailError> {
    let base = opts.url.trim_end_matches('/');
    let base = base.strip_suffix("/events").unwrap_or(base);
    let mut url = parse_url(&format!("{base}/events"))?;
    {
        let mut q = url.query_pairs_mut();
        if let Some(t) = opts.trace.as_deref().filter(|t| !t.is_empty()) {
            q.append_pair("traceId", t);
        }
        if !opts.kinds.is_empty() {
            q.append_pair("kinds", &opts.kinds.join(","));
        }
    }
    if url.query() == Some("") {
        url.set_query(None);
    }
    Ok(url)
}

/// Follows `/events` until the future is dropped (or the server refuses
/// the token): `on_event` gets every event (not the `connected` hello),
/// `on_notice` the connection changes. Reconnects with `Last-Event-ID`.
pub async fn follow(
    opts: &TailOptions,
    mut on_event: impl FnMut(&Value),
    mut on_notice: impl FnMut(TailNotice),
) -> Result<(), TailError> {
    let url = events_url(opts)?;
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(2))
        .build()
        .map_err(|e| TailError::Client(e.to_string()))?;
    let mut last_id: Option<String> = None;
    let max_delay = Duration::from_secs(5);
    let mut delay = opts.reconnect_delay;
    loop {
        let mut req = client.get(url.clone()).header(ACCEPT, "text/event-stream");
        if let Some(t) = opts.token.as_deref().filter(|t| !t.is_empty()) {
            req = req.header(AUTHORIZATION, format!("Bearer {t}"));
        }
        if let Some(id) = &last_id {
            req = req.header("Last-Event-ID", id.as_str());
        }
        let why = match req.send().await {
            Err(e) => e.to_string(),
            Ok(resp) if matches!(resp.status().as_u16(), 401 | 403) => {
                return Err(TailError::Unauthorized(resp.status().as_u16()));
            }
            Ok(resp) if !resp.status().is_success() => format!("HTTP {}", resp.status()),
            Ok(mut resp) => {
                let mut parser = SseParser::new();
                loop {
                    match resp.chunk().await {
                        Ok(Some(bytes)) => {
                            for item in parser.feed(&bytes) {
                                match item {
                                    SseItem::Comment(c) => {
                                        if let Some(w) = c.strip_prefix("warning") {
                                            on_notice(TailNotice::Warning(w.trim().to_owned()));
                                        }
                                    }
                                    SseItem::Message(m) => {
                                        if let Some(id) = m.id {
                                            last_id = Some(id);
                                        }
                                        let Ok(v) = serde_json::from_str::<Value>(&m.data) else {
                                            continue;
                                        };
                                        if v.get("type").and_then(Value::as_str)
                                            == Some("connected")
                                        {
                                            delay = opts.reconnect_delay;
                                            on_notice(TailNotice::Connected);
                                        } else {
                                            on_event(&v);
                                        }
                                    }
                                }
                            }
                        }
                        Ok(None) => break "the server closed the stream".to_owned(),
                        Err(e) => break e.to_string(),
                    }
                }
            }
        };
        on_notice(TailNotice::Reconnecting(why));
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(max_delay);
    }
}

/// Data keys worth a glance, in the order shown.
const KEY_FIELDS: &[&str] = &[
    "model",
    "t_est",
    "max_tokens",
    "usage_pct",
    "triggered",
    "reason",
    "pruned_count",
    "summary_tokens",
    "tokens_before",
    "tokens_after",
    "output",
];

fn short(v: &Value) -> String {
    let s = match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let one_line = s.replace(['\n', '\r'], " ");
    if one_line.chars().count() > 60 {
        let cut: String = one_line.chars().take(57).collect();
        format!("{cut}...")
    } else {
        one_line
    }
}

fn clock(ts: Option<&str>) -> String {
    // `2026-01-01T10:15:04.270Z` -> `10:15:04.270`
    ts.and_then(|t| t.get(11..23))
        .unwrap_or("--:--:--.---")
        .to_owned()
}

fn duration_ms(start: Option<&str>, end: Option<&str>) -> Option<i64> {
    let s = compact_events::parse_rfc3339_millis(start?)?;
    let e = compact_events::parse_rfc3339_millis(end?)?;
    Some(e - s)
}

/// One line for an event: time, trace, name, status, kind, duration and a
/// few key `data` fields; `None` for something that is not an event.
pub fn format_line(ev: &Value) -> Option<String> {
    let obj = ev.as_object()?;
    let s = |k: &str| obj.get(k).and_then(Value::as_str);
    let trace = s("trace_id")?;
    match s("type") {
        Some("trace") => {
            let mut line = format!(
                "{}  {trace}  trace  {}",
                clock(s("ended_at").or(s("started_at"))),
                s("name").unwrap_or("-")
            );
            if let Some(Value::Object(md)) = obj.get("metadata") {
                for (k, v) in md.iter().take(4) {
                    line.push_str(&format!("  {k}={}", short(v)));
                }
            }
            Some(line)
        }
        Some("span") | None if s("span_id").is_some() => {
            let status = s("status").unwrap_or("ok");
            let mut line = format!(
                "{}  {trace}  {}  {}  {}",
                clock(s("ended_at").or(s("started_at"))),
                s("name").unwrap_or("-"),
                if status == "error" { "ERROR" } else { "ok" },
                s("kind").unwrap_or("-"),
            );
            if let Some(d) = duration_ms(s("started_at"), s("ended_at")) {
                line.push_str(&format!("  {d}ms"));
            }
            if let Some(Value::Object(data)) = obj.get("data") {
                let mut shown = 0;
                if let Some(msg) = data.get("error").map(|e| e.get("message").unwrap_or(e)) {
                    line.push_str(&format!("  error={}", short(msg)));
                    shown += 1;
                }
                for k in KEY_FIELDS {
                    if shown >= 5 {
                        break;
                    }
                    if let Some(v) = data.get(*k).filter(|v| !v.is_object() && !v.is_array()) {
                        line.push_str(&format!("  {k}={}", short(v)));
                        shown += 1;
                    }
                }
                if let Some(Value::String(text)) = data.get("output_text") {
                    line.push_str(&format!(
                        "  summary=\"{}\"",
                        short(&Value::String(text.clone()))
                    ));
                }
            }
            Some(line)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_split_chunks_and_all_line_endings() {
        let mut p = SseParser::new();
        let mut items = p.feed(b":heartbeat\n\nid: 7\nda");
        items.extend(p.feed(b"ta: {\"a\":\r\ndata: 1}\r\n\r\n"));
        items.extend(p.feed(b"id:8\rdata:x\r\r:warning stream backpressure; events skipped\n"));
        assert_eq!(
            items,
            vec![
                SseItem::Comment("heartbeat".into()),
                SseItem::Message(SseMessage {
                    id: Some("7".into()),
                    event: None,
                    data: "{\"a\":\n1}".into()
                }),
                SseItem::Message(SseMessage {
                    id: Some("8".into()),
                    event: None,
                    data: "x".into()
                }),
                SseItem::Comment("warning stream backpressure; events skipped".into()),
            ]
        );
    }

    #[test]
    fn formats_spans_and_traces() {
        let line = format_line(&json!({"type":"span","trace_id":"sess-1","span_id":"a",
            "name":"compact.trigger_decision","kind":"compaction","status":"ok",
            "started_at":"2026-01-01T10:15:04.260Z","ended_at":"2026-01-01T10:15:04.270Z",
            "data":{"triggered":true,"reason":"usage_pct >= trigger_pct","policy":{"x":1}}}))
        .unwrap();
        assert_eq!(
            line,
            "10:15:04.270  sess-1  compact.trigger_decision  ok  compaction  10ms  triggered=true  reason=usage_pct >= trigger_pct"
        );
        let err = format_line(&json!({"type":"span","trace_id":"t","span_id":"b","name":"flaky",
            "status":"error","started_at":"2026-01-01T00:00:00.000Z","data":{"error":{"message":"boom"}}}))
        .unwrap();
        assert!(err.contains("ERROR") && err.contains("error=boom"), "{err}");
        let tr = format_line(&json!({"type":"trace","trace_id":"t","name":"planner",
            "started_at":"2026-01-01T00:00:01.000Z","metadata":{"agent_name":"planner"}}))
        .unwrap();
        assert_eq!(tr, "00:00:01.000  t  trace  planner  agent_name=planner");
        assert_eq!(format_line(&json!({"type":"connected"})), None);
    }

    #[test]
    fn builds_the_events_url() {
        let opts = TailOptions {
            url: "http://127.0.0.1:5175/".into(),
            trace: Some("s 1".into()),
            kinds: vec!["compaction".into(), "function".into()],
            token: None,
            reconnect_delay: Duration::from_millis(100),
        };
        assert_eq!(
            events_url(&opts).unwrap().as_str(),
            "http://127.0.0.1:5175/events?traceId=s+1&kinds=compaction%2Cfunction"
        );
        let bare = TailOptions {
            trace: None,
            kinds: vec![],
            url: "http://h:1/events".into(),
            ..opts
        };
        assert_eq!(events_url(&bare).unwrap().as_str(), "http://h:1/events");
    }
}
