//! A [`SessionRecord`] stored in parts, so that a save writes what changed
//! and not the whole record (docs/design.md §13).
//!
//! A long session's record is hundreds of kilobytes, most of it the fact
//! ledger and the previous output, and almost none of it changes between
//! two preflights: a fact is added or touched when something leaves the
//! context, the output grows by the turn's messages. So the SQL stores keep
//! it as:
//!
//! - a small **head** (step, breaker, flags, times) in `compact_sessions`,
//!   written at every save with the new etag;
//! - **rows** in `compact_session_rows`, keyed by `(kind, idx)`: the
//!   summary, the ledger's other fields, the last report, the secret
//!   fragments and the session's context are one row each ([`PART`]); every
//!   ledger item ([`FACT`]) and every message of the previous output
//!   ([`OUT`]) is a row; the hash lists of the last call are rows of
//!   [`CHUNK`] hashes ([`RAW`], [`OUT_HASH`], [`PROVIDER_HASH`]), so that a
//!   list one hash longer rewrites its last chunk.
//!
//! A store remembers the [`Shape`] of what it holds (an identity per row)
//! and [`plan`]s a save as the rows whose identity changed, the rows past a
//! shortened list, and the head. Identities are cheap where the record
//! already has one (a message's content hash, the hashes themselves) and a
//! hash of the row's text otherwise.
//!
//! Records written whole by earlier versions (any other layout) load
//! as before; their first save writes every row ([`Plan::full`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use super::record::{LastCallRecord, SessionRecord};
use super::{Etag, StateError};
use crate::model::{Format, Message};

/// `compact_sessions.format` of a record stored in parts (a record stored
/// whole, as JSON in `record`, has its record format there: 1): the head in
/// `head`, the rest in `compact_session_rows`. `record` is left empty, so a
/// version that only knows whole records refuses to read it rather than
/// taking it for a session with no summary and forking the chain.
pub(super) const LAYOUT_PARTS: i32 = 2;

/// One row per part of the record; `idx` says which (`P_*`).
pub(super) const PART: i16 = 0;
/// A ledger item per row, in ledger order.
pub(super) const FACT: i16 = 1;
/// A message of the previous output per row.
pub(super) const OUT: i16 = 2;
/// The last call's raw input hashes, [`CHUNK`] per row.
pub(super) const RAW: i16 = 3;
/// The last output's content hashes, [`CHUNK`] per row.
pub(super) const OUT_HASH: i16 = 4;
/// The last output's provider-copy hashes, [`CHUNK`] per row.
pub(super) const PROVIDER_HASH: i16 = 5;
/// How many kinds of rows there are.
const KINDS: usize = 6;

/// Hashes per row of a hash list: a 1 KiB row, so appending a hash
/// rewrites at most that much.
const CHUNK: usize = 32;

/// How many parts there are, and each one's `idx`.
const PARTS: usize = 5;
const P_SUMMARY: usize = 0;
const P_LEDGER: usize = 1;
const P_REPORT: usize = 2;
const P_SECRETS: usize = 3;
const P_CONTEXT: usize = 4;

/// The identity of every row a store holds for a session, at one etag.
#[derive(Debug, Clone, Default)]
pub(super) struct Shape {
    /// The etag of the head these rows belong to.
    pub(super) etag: Etag,
    rows: [Vec<u128>; KINDS],
}

/// One row to write.
#[derive(Debug)]
pub(super) struct Row {
    pub(super) kind: i16,
    pub(super) idx: i32,
    pub(super) body: String,
}

/// What a save writes.
#[derive(Debug)]
pub(super) struct Plan {
    /// Every row of the session is removed before `rows` are written
    /// (nothing is known of what the store holds).
    pub(super) full: bool,
    /// The head: the record without its parts.
    pub(super) head: String,
    /// Rows to insert or replace.
    pub(super) rows: Vec<Row>,
    /// `(kind, from)`: rows of `kind` at `idx >= from` to remove (a list
    /// that got shorter).
    pub(super) trims: Vec<(i16, i32)>,
    /// The shape of the record once the plan is applied (its etag is set
    /// by the store).
    pub(super) shape: Shape,
}

impl Plan {
    /// Bytes of text the plan writes (head and row bodies): what the
    /// stores count as written.
    pub(super) fn bytes(&self) -> u64 {
        (self.head.len() + self.rows.iter().map(|r| r.body.len()).sum::<usize>()) as u64
    }
}

/// The session's context: what binds it to memory and configuration.
#[derive(Serialize, Deserialize, Default)]
#[serde(default)]
struct Context {
    memory_key: Option<String>,
    cross_session_read: bool,
    cross_session: Option<String>,
    conversation: Option<Value>,
}

/// The last outcome, for `status`.
#[derive(Serialize, Deserialize, Default)]
#[serde(default)]
struct Report {
    last_report: Option<Value>,
    layers: Option<Value>,
}

fn enc(e: impl std::fmt::Display) -> StateError {
    StateError::Encoding(e.to_string())
}

fn text_id(text: &str) -> u128 {
    xxhash_rust::xxh3::xxh3_128(text.as_bytes())
}

/// The identity of a chunk of hashes: computed from the hashes, so an
/// unchanged chunk is never formatted.
fn chunk_id(hashes: &[u128]) -> u128 {
    let mut bytes = Vec::with_capacity(hashes.len() * 16);
    for h in hashes {
        bytes.extend_from_slice(&h.to_le_bytes());
    }
    xxhash_rust::xxh3::xxh3_128(&bytes)
}

fn hex(hashes: &[u128]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(hashes.len() * 32);
    for h in hashes {
        let _ = write!(out, "{h:032x}");
    }
    out
}

fn unhex(text: &str) -> Result<Vec<u128>, StateError> {
    if !text.len().is_multiple_of(32) || !text.is_ascii() {
        return Err(enc("expected 32 hex digits per hash"));
    }
    (0..text.len() / 32)
        .map(|i| u128::from_str_radix(&text[i * 32..(i + 1) * 32], 16).map_err(enc))
        .collect()
}

/// The ledger as its items (each one's JSON text) and the rest of its
/// fields (a JSON object without `items`). A ledger whose JSON is not an
/// object with an `items` array is kept whole in the rest.
fn split_ledger(
    ledger: &crate::summarize::FactLedger,
) -> Result<(Vec<String>, String), StateError> {
    let text = serde_json::to_string(ledger).map_err(enc)?;
    let Ok(mut fields) = serde_json::from_str::<BTreeMap<String, &RawValue>>(&text) else {
        return Ok((Vec::new(), text));
    };
    let Some(items) = fields.remove("items") else {
        return Ok((Vec::new(), text));
    };
    let Ok(items) = serde_json::from_str::<Vec<&RawValue>>(items.get()) else {
        return Ok((Vec::new(), text));
    };
    let items = items.iter().map(|i| i.get().to_owned()).collect();
    Ok((items, serde_json::to_string(&fields).map_err(enc)?))
}

/// The ledger's JSON from its items and the rest of its fields.
fn join_ledger(items: &[String], rest: &str) -> String {
    if items.is_empty() && !rest.starts_with('{') {
        return rest.to_owned();
    }
    let mut out =
        String::with_capacity(rest.len() + items.iter().map(|i| i.len() + 1).sum::<usize>() + 16);
    out.push_str("{\"items\":[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(item);
    }
    out.push(']');
    let inner = rest.trim().strip_prefix('{').unwrap_or("}").trim_start();
    if !inner.starts_with('}') {
        out.push(',');
    }
    out.push_str(inner);
    out
}

/// Builds a [`Plan`] one list of rows at a time.
struct Builder<'a> {
    known: Option<&'a Shape>,
    rows: Vec<Row>,
    trims: Vec<(i16, i32)>,
    shape: Shape,
}

impl Builder<'_> {
    /// The rows of `kind`: `n` of them, the `i`th with identity `id(i)`;
    /// `body(i)` is only called for a row that is written.
    fn list(
        &mut self,
        kind: i16,
        n: usize,
        mut id: impl FnMut(usize) -> u128,
        mut body: impl FnMut(usize) -> Result<String, StateError>,
    ) -> Result<(), StateError> {
        let k = kind as usize;
        let old: &[u128] = self.known.map_or(&[], |s| &s.rows[k]);
        let mut ids = Vec::with_capacity(n);
        for i in 0..n {
            let row_id = id(i);
            if self.known.is_none() || old.get(i) != Some(&row_id) {
                let idx = i32::try_from(i).map_err(enc)?;
                self.rows.push(Row {
                    kind,
                    idx,
                    body: body(i)?,
                });
            }
            ids.push(row_id);
        }
        if self.known.is_some() && old.len() > n {
            self.trims.push((kind, i32::try_from(n).map_err(enc)?));
        }
        self.shape.rows[k] = ids;
        Ok(())
    }
}

/// What saving `record` writes over a store that holds `known` (`None`:
/// unknown, so everything is written after removing what is there).
pub(super) fn plan(record: &SessionRecord, known: Option<&Shape>) -> Result<Plan, StateError> {
    let head = SessionRecord {
        format: record.format,
        step: record.step,
        breaker: record.breaker,
        trace_sent: record.trace_sent,
        estimate_error: record.estimate_error,
        // Three numbers that change with every call.
        pace: record.pace,
        updated_at_ms: record.updated_at_ms,
        // A few hashes at most, and they change with every output.
        last: LastCallRecord {
            marks: record.last.marks.clone(),
            ..LastCallRecord::default()
        },
        ..SessionRecord::default()
    };
    let head = String::from_utf8(head.to_json()?).map_err(enc)?;
    let (items, ledger_rest) = split_ledger(&record.ledger)?;
    let parts: [String; PARTS] = [
        to_text(&record.summary)?,
        ledger_rest,
        to_text(&Report {
            last_report: record.last_report.clone(),
            layers: record.layers.clone(),
        })?,
        to_text(&record.secrets)?,
        to_text(&Context {
            memory_key: record.memory_key.clone(),
            cross_session_read: record.cross_session_read,
            cross_session: record.cross_session.clone(),
            conversation: record.conversation.clone(),
        })?,
    ];
    let mut b = Builder {
        known,
        rows: Vec::new(),
        trims: Vec::new(),
        shape: Shape::default(),
    };
    b.list(
        PART,
        parts.len(),
        |i| text_id(&parts[i]),
        |i| Ok(parts[i].clone()),
    )?;
    b.list(
        FACT,
        items.len(),
        |i| text_id(&items[i]),
        |i| Ok(items[i].clone()),
    )?;
    let out = &record.last.out;
    b.list(
        OUT,
        out.len(),
        |i| out[i].content_hash(),
        |i| serde_json::to_string(out[i].raw()).map_err(enc),
    )?;
    let last: &LastCallRecord = &record.last;
    for (kind, hashes) in [
        (RAW, &last.raw),
        (OUT_HASH, &last.out_hashes),
        (PROVIDER_HASH, &last.out_provider_hashes),
    ] {
        let chunks: Vec<&[u128]> = hashes.chunks(CHUNK).collect();
        b.list(
            kind,
            chunks.len(),
            |i| chunk_id(chunks[i]),
            |i| Ok(hex(chunks[i])),
        )?;
    }
    Ok(Plan {
        full: known.is_none(),
        head,
        rows: b.rows,
        trims: b.trims,
        shape: b.shape,
    })
}

fn to_text<T: Serialize>(value: &T) -> Result<String, StateError> {
    serde_json::to_string(value).map_err(enc)
}

/// The record stored as `head` and `rows` (`(kind, idx, body)`, in any
/// order), and the shape of what is stored. Rows of a kind this version
/// does not know are ignored.
pub(super) fn join(
    head: &str,
    rows: Vec<(i16, i32, String)>,
    etag: Etag,
) -> Result<(SessionRecord, Shape), StateError> {
    let mut record = SessionRecord::from_json(head.as_bytes())?;
    let mut by_kind: [Vec<(i32, String)>; KINDS] = Default::default();
    for (kind, idx, body) in rows {
        if let Some(list) = usize::try_from(kind).ok().and_then(|k| by_kind.get_mut(k)) {
            list.push((idx, body));
        }
    }
    let mut shape = Shape {
        etag,
        ..Shape::default()
    };
    let mut lists: [Vec<String>; KINDS] = Default::default();
    for (k, mut list) in by_kind.into_iter().enumerate() {
        list.sort_unstable_by_key(|(idx, _)| *idx);
        for (i, (idx, _)) in list.iter().enumerate() {
            if usize::try_from(*idx).ok() != Some(i) {
                return Err(enc(format!(
                    "session rows of kind {k}: row {idx} where {i} was expected"
                )));
            }
        }
        lists[k] = list.into_iter().map(|(_, body)| body).collect();
    }
    let [parts, facts, out, raw, out_hashes, provider_hashes] = lists;
    let part = |i: usize| parts.get(i).map(String::as_str);

    if let Some(text) = part(P_SUMMARY) {
        record.summary = serde_json::from_str(text).map_err(enc)?;
    }
    record.ledger = match serde_json::from_str(&join_ledger(&facts, part(P_LEDGER).unwrap_or("{}")))
    {
        Ok(ledger) => ledger,
        Err(e) => {
            tracing::warn!(error = %e, "a stored fact ledger could not be read; starting an empty one");
            crate::summarize::FactLedger::default()
        }
    };
    if let Some(text) = part(P_REPORT) {
        let report: Report = serde_json::from_str(text).map_err(enc)?;
        record.last_report = report.last_report;
        record.layers = report.layers;
    }
    if let Some(text) = part(P_SECRETS) {
        record.secrets = serde_json::from_str(text).map_err(enc)?;
    }
    if let Some(text) = part(P_CONTEXT) {
        let context: Context = serde_json::from_str(text).map_err(enc)?;
        record.memory_key = context.memory_key;
        record.cross_session_read = context.cross_session_read;
        record.cross_session = context.cross_session;
        record.conversation = context.conversation;
    }
    shape.rows[PART as usize] = parts.iter().map(|p| text_id(p)).collect();
    shape.rows[FACT as usize] = facts.iter().map(|f| text_id(f)).collect();

    let items = out
        .iter()
        .map(|body| serde_json::from_str::<Value>(body).map_err(enc))
        .collect::<Result<Vec<_>, _>>()?;
    let messages = if items.is_empty() {
        Vec::new()
    } else {
        crate::model::Request::from_value(Value::Array(items), Format::Auto)
            .map_err(enc)?
            .messages
    };
    shape.rows[OUT as usize] = messages.iter().map(Message::content_hash).collect();
    record.last.out = messages;

    for (kind, chunks, into) in [
        (RAW, raw, &mut record.last.raw),
        (OUT_HASH, out_hashes, &mut record.last.out_hashes),
        (
            PROVIDER_HASH,
            provider_hashes,
            &mut record.last.out_provider_hashes,
        ),
    ] {
        let mut ids = Vec::with_capacity(chunks.len());
        into.clear();
        for chunk in &chunks {
            let hashes = unhex(chunk)?;
            ids.push(chunk_id(&hashes));
            into.extend(hashes);
        }
        shape.rows[kind as usize] = ids;
    }
    Ok((record, shape))
}

/// Sessions whose shape a store remembers; past this, an arbitrary one is
/// forgotten (its next save writes every row once).
const MAX_SHAPES: usize = 4096;

/// The shapes of the records a store wrote or read last, by session.
#[derive(Debug, Default)]
pub(super) struct Shapes(
    std::sync::Mutex<std::collections::HashMap<crate::archive::SessionId, Shape>>,
);

impl Shapes {
    fn map(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<crate::archive::SessionId, Shape>>
    {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes the session's shape if it is the one of `etag` (the stored
    /// head's, as read under the session's lock).
    pub(super) fn take(&self, id: &crate::archive::SessionId, etag: Etag) -> Option<Shape> {
        let mut map = self.map();
        match map.remove(id) {
            Some(shape) if shape.etag == etag => Some(shape),
            _ => None,
        }
    }

    /// Remembers what the store holds for the session now.
    pub(super) fn put(&self, id: &crate::archive::SessionId, shape: Shape) {
        let mut map = self.map();
        if map.len() >= MAX_SHAPES
            && !map.contains_key(id)
            && let Some(evict) = map.keys().next().cloned()
        {
            map.remove(&evict);
        }
        map.insert(id.clone(), shape);
    }

    /// Forgets the session (deleted, or its stored form is not known).
    pub(super) fn forget(&self, id: &crate::archive::SessionId) {
        self.map().remove(id);
    }
}

/// What a guard knows of the stored head, from its load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Observed {
    /// Not read under this guard.
    Unknown,
    /// No record.
    Absent,
    /// The head at this etag.
    At(Etag),
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::state::record::SummaryRecord;
    use crate::summarize::{FactLedger, SummaryEntry};

    /// A store in a map: applies plans as the SQL stores do.
    #[derive(Default)]
    struct Table {
        head: String,
        rows: BTreeMap<(i16, i32), String>,
    }

    impl Table {
        fn apply(&mut self, plan: &Plan) {
            if plan.full {
                self.rows.clear();
            }
            for (kind, from) in &plan.trims {
                self.rows.retain(|(k, i), _| k != kind || i < from);
            }
            for r in &plan.rows {
                self.rows.insert((r.kind, r.idx), r.body.clone());
            }
            self.head = plan.head.clone();
        }

        fn load(&self, etag: Etag) -> (SessionRecord, Shape) {
            let rows = self
                .rows
                .iter()
                .rev() // any order
                .map(|((k, i), b)| (*k, *i, b.clone()))
                .collect();
            join(&self.head, rows, etag).unwrap()
        }
    }

    fn ledger(n: usize) -> FactLedger {
        let mut ledger = FactLedger::new();
        for i in 0..n {
            ledger.absorb(&[SummaryEntry::new(
                "user",
                format!(
                    "We must keep service-{i} on port {} for ticket OPS-{i}.",
                    8000 + i
                ),
            )]);
        }
        ledger
    }

    fn record(turns: usize) -> SessionRecord {
        let out: Vec<Message> = (0..turns)
            .map(|i| Message::user(format!("message {i}")).with_meta("protected", i == 0))
            .collect();
        SessionRecord {
            format: crate::state::RECORD_FORMAT,
            summary: Some(SummaryRecord {
                version: 2,
                body: "COMPACT-SUMMARY v2".into(),
                hashes: vec![1, 2],
            }),
            last: LastCallRecord {
                raw: (0..turns as u128 * 3).collect(),
                out_hashes: out.iter().map(Message::content_hash).collect(),
                out_provider_hashes: out.iter().map(Message::provider_hash).collect(),
                out,
                marks: vec![super::super::record::MarkRecord {
                    index: 3,
                    hashes: vec![7, 8],
                    block: 1,
                    from_string: false,
                }],
            },
            step: Some(3),
            secrets: vec!["sk-live-abc".into()],
            conversation: Some(serde_json::json!({"policy": {"keep_recent_rounds": 2}})),
            memory_key: Some("alice".into()),
            last_report: Some(serde_json::json!({"tokens_before": turns})),
            ledger: ledger(turns),
            updated_at_ms: 7,
            ..SessionRecord::default()
        }
    }

    fn same(a: &SessionRecord, b: &SessionRecord) {
        // Everything but the time of writing.
        let strip = |r: &SessionRecord| {
            let mut v = serde_json::to_value(r).unwrap();
            v["updated_at_ms"] = Value::Null;
            v
        };
        assert_eq!(strip(a), strip(b));
    }

    #[test]
    fn a_record_round_trips_through_its_rows() {
        let r = record(100);
        let plan = plan(&r, None).unwrap();
        assert!(plan.full && plan.trims.is_empty());
        let mut t = Table::default();
        t.apply(&plan);
        let (back, shape) = t.load(9);
        same(&r, &back);
        assert_eq!(back.last.out, r.last.out);
        assert_eq!(shape.etag, 9);
        // Loading gives the shape saving made: nothing to write again.
        let again = super::plan(&back, Some(&shape)).unwrap();
        assert!(again.rows.is_empty() && again.trims.is_empty(), "{again:?}");
        assert_eq!(again.bytes(), again.head.len() as u64);

        // An empty record too.
        let empty = SessionRecord::default();
        let mut t = Table::default();
        t.apply(&super::plan(&empty, None).unwrap());
        same(&empty, &t.load(1).0);
    }

    #[test]
    fn a_save_writes_only_what_changed() {
        let r = record(100);
        let mut t = Table::default();
        let first = plan(&r, None).unwrap();
        t.apply(&first);
        let shape = first.shape.clone();

        // The next turn: one more message in and out, the report; the
        // ledger and the summary as they were.
        let mut next = record(101);
        next.ledger = r.ledger.clone();
        let p = plan(&next, Some(&shape)).unwrap();
        let written: Vec<(i16, i32)> = p.rows.iter().map(|r| (r.kind, r.idx)).collect();
        assert!(written.contains(&(OUT, 100)));
        assert!(!written.iter().any(|(k, _)| *k == FACT));
        assert!(!written.contains(&(PART, P_SUMMARY as i32)));
        assert!(written.contains(&(PART, P_REPORT as i32)));
        // Hash lists rewrite their last chunk only.
        assert_eq!(written.iter().filter(|(k, _)| *k == RAW).count(), 1);
        assert!(
            p.bytes() * 10 < first.bytes(),
            "{} vs {}",
            p.bytes(),
            first.bytes()
        );
        t.apply(&p);
        same(&next, &t.load(2).0);

        // A shorter output and a new summary: rows past the end go, the
        // summary is written.
        let mut shorter = record(10);
        shorter.ledger = r.ledger.clone();
        shorter.summary.as_mut().unwrap().version = 3;
        let p = plan(&shorter, Some(&p.shape)).unwrap();
        assert!(p.trims.contains(&(OUT, 10)));
        assert!(
            p.rows
                .iter()
                .any(|r| (r.kind, r.idx) == (PART, P_SUMMARY as i32))
        );
        t.apply(&p);
        same(&shorter, &t.load(3).0);

        // A statement learnt: its facts' rows and the ledger's other
        // fields, not the facts before them.
        let mut learnt = shorter.clone();
        learnt.ledger.absorb(&[SummaryEntry::new(
            "user",
            "We decided to move billing to eu-west-1.",
        )]);
        let before = p.shape.rows[FACT as usize].len() as i32;
        let p = plan(&learnt, Some(&p.shape)).unwrap();
        let facts: Vec<i32> = p
            .rows
            .iter()
            .filter(|r| r.kind == FACT)
            .map(|r| r.idx)
            .collect();
        // (The previous latest request may be re-filed as a goal.)
        assert!(facts.contains(&before) && facts.len() < 10, "{facts:?}");
        t.apply(&p);
        let (back, _) = t.load(4);
        same(&learnt, &back);
        assert!(back.ledger.texts().any(|t| t.contains("eu-west-1")));
    }

    #[test]
    fn rows_that_do_not_follow_on_are_an_error() {
        let r = record(3);
        let mut t = Table::default();
        t.apply(&plan(&r, None).unwrap());
        t.rows.remove(&(OUT, 1));
        let rows = t
            .rows
            .iter()
            .map(|((k, i), b)| (*k, *i, b.clone()))
            .collect();
        assert!(matches!(
            join(&t.head, rows, 1),
            Err(StateError::Encoding(_))
        ));
    }
}
