//! The Ariadne wire types, timestamps, span ids and the span builder.

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::names;
use crate::payload::Payload;

/// One Ariadne event, exactly the shape `POST /ingest` accepts: an object
/// whose `type` is `"trace"` or `"span"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A trace (for us: one session).
    Trace(TraceEvent),
    /// A span (for us: one decision, or the `compact.preflight` parent).
    Span(SpanEvent),
}

impl Event {
    /// The trace this event belongs to.
    pub fn trace_id(&self) -> &str {
        match self {
            Event::Trace(t) => &t.trace_id,
            Event::Span(s) => &s.trace_id,
        }
    }

    /// The event's name, if it has one.
    pub fn name(&self) -> Option<&str> {
        match self {
            Event::Trace(t) => t.name.as_deref(),
            Event::Span(s) => s.name.as_deref(),
        }
    }

    /// The span, if this is one.
    pub fn as_span(&self) -> Option<&SpanEvent> {
        match self {
            Event::Span(s) => Some(s),
            Event::Trace(_) => None,
        }
    }
}

impl From<TraceEvent> for Event {
    fn from(t: TraceEvent) -> Self {
        Event::Trace(t)
    }
}

impl From<SpanEvent> for Event {
    fn from(s: SpanEvent) -> Self {
        Event::Span(s)
    }
}

/// An Ariadne trace. Every field but `trace_id` is optional and left out of
/// the JSON when absent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceEvent {
    /// The trace id; for compact, the session id.
    pub trace_id: String,
    /// A display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Groups related traces in the viewer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
    /// RFC 3339 UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// RFC 3339 UTC, not before `started_at`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    /// Free-form string metadata (Ariadne only accepts string values).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, String>>,
}

impl TraceEvent {
    /// The trace that opens a session: `trace_id` is the session id, the
    /// name is the agent's, `metadata.agent_name` carries it for filtering,
    /// `started_at` is now.
    pub fn session(session_id: impl Into<String>, agent_name: impl Into<String>) -> Self {
        let agent_name = agent_name.into();
        let mut metadata = BTreeMap::new();
        metadata.insert(names::AGENT_NAME.to_owned(), agent_name.clone());
        TraceEvent {
            trace_id: session_id.into(),
            name: Some(agent_name),
            group_id: None,
            started_at: Some(now_rfc3339()),
            ended_at: None,
            metadata: Some(metadata),
        }
    }
}

/// Whether the span's operation succeeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpanStatus {
    /// Succeeded (also what a span without `status` reads as).
    #[default]
    Ok,
    /// Failed; `data` says why.
    Error,
}

impl SpanStatus {
    /// The wire spelling, `ok` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            SpanStatus::Ok => "ok",
            SpanStatus::Error => "error",
        }
    }
}

/// An Ariadne span.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpanEvent {
    /// The trace (session) it belongs to.
    pub trace_id: String,
    /// Unique id, see [`new_span_id`].
    pub span_id: String,
    /// The enclosing span (for our decision spans: the `compact.preflight` span).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    /// What produced it; ours say [`names::KIND_COMPACTION`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The event name, one of [`names`] for ours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// RFC 3339 UTC.
    pub started_at: String,
    /// RFC 3339 UTC, not before `started_at`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    /// The span's numbers and details (keys as in `docs/events.md`).
    // Read leniently: a span without `data` is still a span.
    #[serde(default)]
    pub data: Map<String, Value>,
    /// `ok` or `error`.
    #[serde(default)]
    pub status: SpanStatus,
}

/// Builds one span: records the start time when created and the end time
/// when finished, so the span's duration is the work done in between.
#[derive(Debug, Clone)]
#[must_use = "a span is only emitted once finished"]
pub struct SpanBuilder {
    span: SpanEvent,
    started_ms: i64,
}

impl SpanBuilder {
    /// Starts a span now, with a fresh span id.
    pub fn start(trace_id: impl Into<String>, name: impl Into<String>) -> Self {
        let started_ms = now_millis();
        SpanBuilder {
            span: SpanEvent {
                trace_id: trace_id.into(),
                span_id: new_span_id(),
                parent_id: None,
                kind: None,
                name: Some(name.into()),
                started_at: format_rfc3339_millis(started_ms),
                ended_at: None,
                data: Map::new(),
                status: SpanStatus::Ok,
            },
            started_ms,
        }
    }

    /// Starts a span that began `ago_ms` milliseconds ago: for work timed
    /// elsewhere (a summarizer call) and reported once it is done.
    pub fn started_ago(trace_id: impl Into<String>, name: impl Into<String>, ago_ms: u64) -> Self {
        let mut b = Self::start(trace_id, name);
        b.started_ms = b
            .started_ms
            .saturating_sub(ago_ms.min(i64::MAX as u64) as i64);
        b.span.started_at = format_rfc3339_millis(b.started_ms);
        b
    }

    /// Starts one of compact's spans now: named `P::NAME`, kind
    /// [`names::KIND_COMPACTION`]. Fill it with [`SpanBuilder::payload`]
    /// or finish it with [`SpanBuilder::finish_payload`].
    pub fn for_payload<P: Payload>(trace_id: impl Into<String>) -> Self {
        Self::start(trace_id, P::NAME).kind(names::KIND_COMPACTION)
    }

    /// This span's id, so children can name it as their parent before it finishes.
    pub fn span_id(&self) -> &str {
        &self.span.span_id
    }

    /// Sets the parent span.
    pub fn parent(mut self, parent_id: impl Into<String>) -> Self {
        self.span.parent_id = Some(parent_id.into());
        self
    }

    /// Sets the kind (ours: [`names::KIND_COMPACTION`]).
    pub fn kind(mut self, kind: impl Into<String>) -> Self {
        self.span.kind = Some(kind.into());
        self
    }

    /// Adds (or replaces) one `data` field.
    pub fn data(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.span.data.insert(key.into(), value.into());
        self
    }

    /// Adds one `data` field from anything serializable (a struct, a map).
    /// A value that cannot be represented as JSON is recorded as `null`
    /// rather than failing: telemetry must never break the caller.
    pub fn data_serialize<T: Serialize + ?Sized>(self, key: impl Into<String>, value: &T) -> Self {
        let value = serde_json::to_value(value).unwrap_or(Value::Null);
        self.data(key, value)
    }

    /// Adds (or replaces) every field of `payload` in `data`, in the
    /// payload's field order, so the typed payload yields the same keys as
    /// one `data` call per field. The span's name is not checked against
    /// `P::NAME`.
    pub fn payload<P: Payload>(mut self, payload: &P) -> Self {
        self.insert_payload(payload);
        self
    }

    /// [`SpanBuilder::payload`] in place.
    pub fn insert_payload<P: Payload>(&mut self, payload: &P) {
        match serde_json::to_value(payload) {
            Ok(Value::Object(fields)) => self.span.data.extend(fields),
            // A derived struct always serializes to an object; telemetry
            // must never break the caller, so anything else is only logged.
            Ok(other) => {
                tracing::warn!(name = P::NAME, value = %other, "span payload is not a JSON object; ignored");
            }
            Err(e) => {
                tracing::warn!(name = P::NAME, error = %e, "span payload cannot be encoded; ignored");
            }
        }
    }

    /// Adds `payload` and ends the span now with the payload's
    /// [`status`](Payload::status).
    pub fn finish_payload<P: Payload>(self, payload: &P) -> Event {
        let status = payload.status();
        self.payload(payload).finish(status)
    }

    /// Adds (or replaces) one `data` field in place, for code that builds
    /// the span across several steps.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<Value>) {
        self.span.data.insert(key.into(), value.into());
    }

    /// Ends the span now with `status`.
    pub fn finish(self, status: SpanStatus) -> Event {
        Event::Span(self.finish_span(status))
    }

    /// Like [`SpanBuilder::finish`], returning the span itself.
    pub fn finish_span(mut self, status: SpanStatus) -> SpanEvent {
        // The wall clock may step backwards (NTP) between start and finish;
        // Ariadne rejects a span that ends before it starts.
        let ended_ms = now_millis().max(self.started_ms);
        self.span.ended_at = Some(format_rfc3339_millis(ended_ms));
        self.span.status = status;
        self.span
    }
}

/// Now, as RFC 3339 UTC with milliseconds and `Z`: `2026-01-01T00:00:00.042Z`.
pub fn now_rfc3339() -> String {
    format_rfc3339_millis(now_millis())
}

/// Milliseconds since the Unix epoch (negative before 1970).
pub fn now_millis() -> i64 {
    system_time_millis(SystemTime::now())
}

/// A `SystemTime` as milliseconds since the Unix epoch.
pub fn system_time_millis(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => {
            // Round towards negative infinity so sub-millisecond times before
            // the epoch do not collapse onto 0.
            let d = e.duration();
            let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
            if d.subsec_nanos() % 1_000_000 != 0 {
                -ms - 1
            } else {
                -ms
            }
        }
    }
}

const MS_PER_DAY: i64 = 86_400_000;

/// Formats milliseconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
///
/// The fixed width makes the strings sort like the instants they name (for
/// years 0000-9999). Years outside that range are clamped to it, since RFC
/// 3339 has no spelling for them.
pub fn format_rfc3339_millis(ms: i64) -> String {
    // 0000-01-01 and 9999-12-31T23:59:59.999 in epoch milliseconds.
    const MIN: i64 = -62_167_219_200_000;
    const MAX: i64 = 253_402_300_799_999;
    let ms = ms.clamp(MIN, MAX);
    let days = ms.div_euclid(MS_PER_DAY);
    let in_day = ms.rem_euclid(MS_PER_DAY);
    let (y, m, d) = civil_from_days(days);
    let (hh, rest) = (in_day / 3_600_000, in_day % 3_600_000);
    let (mm, rest) = (rest / 60_000, rest % 60_000);
    let (ss, milli) = (rest / 1000, rest % 1000);
    format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{milli:03}Z")
}

/// Parses an RFC 3339 timestamp (`Z` or a numeric offset, any number of
/// fraction digits, `T`/`t`/space separator) to milliseconds since the Unix
/// epoch, truncating below the millisecond. `None` when it is not one.
pub fn parse_rfc3339_millis(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let digits = b.get(range)?;
        let mut v = 0i64;
        for &c in digits {
            if !c.is_ascii_digit() {
                return None;
            }
            v = v * 10 + i64::from(c - b'0');
        }
        Some(v)
    };
    let sep_ok = b[4] == b'-'
        && b[7] == b'-'
        && matches!(b[10], b'T' | b't' | b' ')
        && b[13] == b':'
        && b[16] == b':';
    if !sep_ok {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    // Leap second 60 is legal RFC 3339; it folds onto the next second.
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut i = 19;
    let mut millis = 0i64;
    if b[i] == b'.' {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            if i - start < 3 {
                millis = millis * 10 + i64::from(b[i] - b'0');
            }
            i += 1;
        }
        let n = i - start;
        if n == 0 {
            return None;
        }
        for _ in n..3 {
            millis *= 10;
        }
    }
    let offset_minutes = match b.get(i..)? {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let digit = |c: &u8| c.is_ascii_digit().then(|| i64::from(c - b'0'));
            let h = digit(h1)? * 10 + digit(h2)?;
            let m = digit(m1)? * 10 + digit(m2)?;
            if h > 23 || m > 59 {
                return None;
            }
            let total = h * 60 + m;
            if *sign == b'-' { -total } else { total }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    Some(secs * 1000 + millis)
}

fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

// Proleptic Gregorian calendar arithmetic on 400-year eras (146 097 days),
// with years starting in March so the leap day falls at the end of a year.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let month_from_march = (m + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + d - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let d = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let m = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let y = year_of_era + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// A new span id: 16 lowercase hex characters.
///
/// Unique within the process (a counter passed through a bijective mixer,
/// so two calls can only collide after 2^64 ids) and unlikely to collide
/// across processes (the counter starts from a per-process random seed).
pub fn new_span_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{:016x}", mix64(process_seed().wrapping_add(n)))
}

// A per-process seed without a `rand` dependency: wall time, monotonic
// time, pid, thread and an ASLR-dependent address, hashed together.
fn process_seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(|| {
        let mut buf = Vec::with_capacity(64);
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        buf.extend_from_slice(&wall.as_nanos().to_le_bytes());
        buf.extend_from_slice(&std::process::id().to_le_bytes());
        let local = 0u8;
        buf.extend_from_slice(&(std::ptr::addr_of!(local) as usize).to_le_bytes());
        buf.extend_from_slice(format!("{:?}", std::thread::current().id()).as_bytes());
        buf.extend_from_slice(format!("{:?}", std::time::Instant::now()).as_bytes());
        xxhash_rust::xxh3::xxh3_64(&buf)
    })
}

// Each step (xor with a right shift, multiply by an odd constant) is
// invertible on u64, so the whole function is a permutation: distinct
// counters give distinct ids.
fn mix64(mut x: u64) -> u64 {
    x ^= x >> 31;
    x = x.wrapping_mul(0x7fb5_d329_728e_a185);
    x ^= x >> 27;
    x = x.wrapping_mul(0x81da_def4_bc2d_d44d);
    x ^= x >> 33;
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_round_trip() {
        for days in (-800_000..800_000).step_by(7) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    #[test]
    fn known_dates() {
        assert_eq!(format_rfc3339_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_rfc3339_millis(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(
            format_rfc3339_millis(1_767_225_600_042),
            "2026-01-01T00:00:00.042Z"
        );
        assert_eq!(
            format_rfc3339_millis(951_782_400_000),
            "2000-02-29T00:00:00.000Z"
        );
    }

    #[test]
    fn parse_variants() {
        assert_eq!(
            parse_rfc3339_millis("2026-01-01T00:00:00.042Z"),
            Some(1_767_225_600_042)
        );
        assert_eq!(
            parse_rfc3339_millis("2026-01-01T01:00:00.042123+01:00"),
            Some(1_767_225_600_042)
        );
        assert_eq!(
            parse_rfc3339_millis("2025-12-31T23:00:00.5-01:00"),
            Some(1_767_225_600_500)
        );
        assert_eq!(parse_rfc3339_millis("2026-02-29T00:00:00Z"), None);
        assert_eq!(parse_rfc3339_millis("2026-01-01T00:00:00"), None);
        assert_eq!(parse_rfc3339_millis("2026-01-01T00:00:00.Z"), None);
        assert_eq!(parse_rfc3339_millis("garbage-but-long-enough"), None);
    }

    #[test]
    fn mixer_is_injective_on_a_sample() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..10_000u64 {
            assert!(seen.insert(mix64(u64::MAX - i)));
        }
    }
}
