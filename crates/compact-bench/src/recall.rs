//! Recall (issue 25), measured: what `compact bench recall` reports and the
//! `recall` example prints, from one implementation.
//!
//! - [`latency`]: recall p50 / p99 over a 10,000-entry session index (the
//!   corpora's messages, each round's texts made new), queries made of the
//!   facts' natural words ([`natural_query`]) and by-id reads of their hits;
//!   on SQLite (a file) and on PostgreSQL (`COMPACT_BENCH_POSTGRES_URL`,
//!   skipped when unset).
//! - [`overhead_pairs`]: what indexing adds to a triggered preflight, in
//!   interleaved pairs (recall off, on; the order alternating), each a
//!   fresh session compacting the preflight suite's 100-turn history; the
//!   index write, off the preflight's path, measured apart.
//! - [`triggered_time`]: the triggered preflights of a fed-back replay (the
//!   example compares them with recall on and off).
//!
//! The natural-words query of a fact is the words around its first
//! occurrence and the key's own words split at case changes and
//! punctuation: never the key as written.

use std::time::{Duration, Instant};

use compact_middleware::CompactManager;
use compact_middleware::config::Config;
use compact_middleware::model::Message;
use compact_middleware::recall::{RecallIndex, RecallQuery};
use serde::Serialize;
use serde_json::{Value, json};

use crate::corpus::{Fact, Transcript};
use crate::harness::Stats;
use crate::retention::{self, Options};

/// The database `compact bench recall` measures PostgreSQL on, if any.
pub const POSTGRES_URL_VAR: &str = "COMPACT_BENCH_POSTGRES_URL";

/// Entries of the latency suite's session index.
pub const ENTRIES: usize = 10_000;

/// The key's own words: split at punctuation, `_`, and case changes
/// (`LongTrianglePointIndexList` → `long triangle point index list`).
pub fn key_words(key: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in key.chars() {
        if !c.is_alphanumeric() {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower && !cur.is_empty() {
            words.push(std::mem::take(&mut cur));
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        cur.extend(c.to_lowercase());
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// Up to `n` words before and after `key` on the line of its first
/// occurrence in `t` (the key itself left out).
pub fn words_around(t: &Transcript, key: &str, n: usize) -> Vec<String> {
    let word = |s: &str| -> Vec<String> {
        s.split(|c: char| !c.is_alphanumeric() && c != '_')
            .filter(|w| w.chars().count() > 1)
            .map(str::to_lowercase)
            .collect()
    };
    for m in t.messages() {
        let text = m.plain_text();
        let Some(at) = text.find(key) else { continue };
        let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
        let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
        let before = word(&text[start..at]);
        let after = word(&text[at + key.len()..end]);
        let mut out: Vec<String> = before[before.len().saturating_sub(n)..].to_vec();
        out.extend(after.into_iter().take(n));
        return out;
    }
    Vec::new()
}

/// The natural-words query of fact `f`: never the key as written.
pub fn natural_query(t: &Transcript, f: &Fact) -> String {
    let key = &f.probes[0];
    let mut words = words_around(t, key, 6);
    words.extend(key_words(key));
    words.join(" ")
}

/// `(call id, recall id)` of every placeholder that carries one.
pub fn placeholder_ids(context: &[Message]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for m in context {
        for (call, text) in m.tool_outputs() {
            if let Some(rid) = text
                .split("— recall ")
                .nth(1)
                .and_then(|r| r.strip_suffix('⟧'))
            {
                out.push((call.to_owned(), rid.to_owned()));
            }
        }
    }
    out
}

/// An entry's whole text, every page read.
pub fn full_text(
    rt: &tokio::runtime::Runtime,
    m: &CompactManager,
    session: &str,
    id: &str,
) -> Option<String> {
    let mut text = String::new();
    let mut q = RecallQuery::id(id);
    loop {
        let e = rt.block_on(m.recall(session, q.clone())).ok()?.entry?;
        text.push_str(&e.text);
        match e.next_offset {
            Some(n) => q.offset = Some(n),
            None => return Some(text),
        }
    }
}

/// Wall time of each triggered preflight of a fed-back replay of `t`.
pub async fn triggered_time(m: &CompactManager, session: &str, t: &Transcript) -> Vec<Duration> {
    let mut context: Vec<Message> = t.opening.clone();
    let mut total = Vec::new();
    for turn in &t.turns {
        context.extend(turn.iter().cloned());
        let sent = std::mem::take(&mut context);
        let started = Instant::now();
        let r = m.preflight(session, sent.clone()).await;
        let took = started.elapsed();
        context = match r {
            Ok(o) => {
                if o.report.triggered && !o.report.tiers.is_empty() {
                    total.push(took);
                }
                o.messages
            }
            Err(_) => sent,
        };
    }
    total
}

/// `m` with `round` in its text (a token no query has), so that it
/// indexes as a new entry.
fn variant(m: &Message, round: usize) -> Message {
    let outputs: Vec<(String, String)> = m
        .tool_outputs()
        .into_iter()
        .map(|(c, o)| (c.to_owned(), format!("{o}\nxq{round}x")))
        .collect();
    if outputs.is_empty() {
        return Message::text(m.role(), format!("{} xq{round}x", m.plain_text()));
    }
    let mut v = m.clone();
    for (c, o) in outputs {
        v.set_tool_output_for(&c, o);
    }
    v
}

/// Recall latency over one session's index.
#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    /// `sqlite` or `postgres`.
    pub backend: String,
    /// Entries of the session.
    pub entries: usize,
    /// Time to index them (200 messages per write), in milliseconds.
    pub fill_ms: f64,
    /// Queries in natural words (5 hits each).
    pub query: Stats,
    /// By-id reads of the queries' hits.
    pub by_id: Stats,
}

/// Fills `session` of `index` with [`ENTRIES`] entries made of the
/// messages of `transcripts` (each round's texts made new), then times
/// up to `max_queries` natural-words queries and as many by-id reads.
pub fn latency(
    index: &RecallIndex,
    session: &str,
    transcripts: &[Transcript],
    max_queries: usize,
) -> Result<Latency, String> {
    let all: Vec<Message> = transcripts.iter().flat_map(|t| t.messages()).collect();
    if all.is_empty() {
        return Err("no messages to index".into());
    }
    let mut indexed = index.count(session).map_err(|e| e.to_string())?;
    let mut step = 0u32;
    let started = Instant::now();
    'fill: for round in 0..=100 {
        for chunk in all.chunks(200) {
            step += 1;
            let chunk: Vec<Message> = chunk.iter().map(|m| variant(m, round)).collect();
            indexed += index
                .add_messages(session, step, &chunk, &|s: &str| s.to_owned())
                .map_err(|e| e.to_string())?;
            if indexed >= ENTRIES {
                break 'fill;
            }
        }
    }
    let fill = started.elapsed();
    let queries: Vec<String> = transcripts
        .iter()
        .flat_map(|t| t.facts.iter().map(move |f| natural_query(t, f)))
        .take(max_queries)
        .collect();
    if queries.is_empty() {
        return Err("no facts to query".into());
    }
    let (mut q_times, mut ids) = (Vec::new(), Vec::new());
    for q in &queries {
        let query = RecallQuery {
            limit: Some(5),
            ..RecallQuery::text(q.clone())
        };
        let started = Instant::now();
        let a = index.recall(session, &query).map_err(|e| e.to_string())?;
        q_times.push(started.elapsed());
        ids.extend(a.hits.into_iter().map(|h| h.id));
    }
    let mut id_times = Vec::new();
    for id in ids.iter().take(max_queries) {
        let started = Instant::now();
        let _ = index.recall(session, &RecallQuery::id(id));
        id_times.push(started.elapsed());
    }
    if id_times.is_empty() {
        id_times.push(Duration::ZERO);
    }
    Ok(Latency {
        backend: index.backend().to_owned(),
        entries: index.count(session).map_err(|e| e.to_string())?,
        fill_ms: (fill.as_secs_f64() * 10_000.0).round() / 10.0,
        query: Stats::from(q_times),
        by_id: Stats::from(id_times),
    })
}

/// What indexing adds to a triggered preflight.
#[derive(Debug, Clone, Serialize)]
pub struct Overhead {
    /// Pairs measured (after one untimed pair).
    pub pairs: usize,
    /// Triggered preflights with recall off.
    pub off: Stats,
    /// The same with recall on (a SQLite file): finding what is new and
    /// hashing it is on the preflight's path.
    pub on: Stats,
    /// `on.p50_us / off.p50_us`.
    pub ratio_p50: f64,
    /// The median of each pair's on / off.
    pub ratio_pairs_p50: f64,
    /// The index write each compaction queues (redaction, insert), on the
    /// blocking pool, off the preflight's path: waited for after each run.
    pub write: Stats,
    /// Entries each compaction indexed.
    pub entries: usize,
    /// The CPU time of the thread that ran each preflight, recall off and
    /// on (`CLOCK_THREAD_CPUTIME_ID`; `None` where there is none): the
    /// work on the preflight's path, which other processes on a busy
    /// machine do not stretch as they stretch wall time.
    pub cpu: Option<CpuOverhead>,
}

/// [`Overhead`]'s CPU-time side.
#[derive(Debug, Clone, Serialize)]
pub struct CpuOverhead {
    /// Recall off.
    pub off: Stats,
    /// Recall on.
    pub on: Stats,
    /// `on.p50_us / off.p50_us`.
    pub ratio_p50: f64,
}

/// Nanoseconds the calling thread has run on a CPU (`None` where the
/// platform has no per-thread CPU clock).
fn thread_cpu_ns() -> Option<u64> {
    #[cfg(unix)]
    {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        u64::try_from(t.tv_sec)
            .ok()?
            .checked_mul(1_000_000_000)?
            .checked_add(u64::try_from(t.tv_nsec).ok()?)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The manager of [`overhead_pairs`]: the preflight suite's triggered
/// configuration (gpt-4o's 128k window), recall on with the index at
/// `index`, or off.
fn overhead_manager(index: Option<&std::path::Path>) -> Result<CompactManager, String> {
    let mut config = Config {
        model: "gpt-4o".into(),
        ..Config::default()
    };
    if let Some(path) = index {
        config.recall.enabled = true;
        config.recall.path = Some(path.display().to_string());
    }
    CompactManager::builder(config)
        .without_config_exporters()
        .without_storage()
        .build()
        .map_err(|e| e.to_string())
}

/// [`Overhead`] over `pairs` interleaved pairs of triggered preflights of
/// `history(tag)` (a fresh session each: every run compacts and indexes the
/// whole history), recall off and on, the order alternating. Each run's
/// history is counted first, untimed, as the calls before it would have:
/// what the timed preflight counts is what its compaction wrote. With a
/// `history` that gives each tag its own call ids, that is new text on
/// both sides, as in a real session; with one that ignores the tag, `off`
/// finds its placeholders already counted by the runs before it (the
/// same call ids in every session), and `on` does not (its recall ids are
/// the session's own).
pub fn overhead_pairs(
    rt: &tokio::runtime::Runtime,
    history: &dyn Fn(&str) -> Vec<Message>,
    pairs: usize,
) -> Result<Overhead, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = dir.path().join("recall.sqlite3");
    let off = overhead_manager(None)?;
    let on = overhead_manager(Some(&path))?;
    let index = on.recall_index().ok_or("recall is off")?.clone();
    let (mut t_off, mut t_on, mut t_write, mut ratios) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut cpu_off, mut cpu_on) = (Vec::new(), Vec::new());
    let mut entries = 0;
    for pair in 0..=pairs {
        let mut one = |m: &CompactManager, tag: &str| -> Result<Duration, String> {
            let session = format!("bench-recall-{tag}-{pair}");
            let messages = history(&format!("{tag}{pair}_"));
            m.estimate(&messages, &[]);
            // The CPU interval lies inside the wall one: a thread's CPU
            // time never exceeds it.
            let started = Instant::now();
            let cpu_started = thread_cpu_ns();
            let out = rt.block_on(m.preflight(&session, messages));
            let cpu_ended = thread_cpu_ns();
            let took = started.elapsed();
            let out = out.map_err(|e| e.to_string())?;
            if let (Some(a), Some(b)) = (cpu_started, cpu_ended)
                && pair > 0
            {
                let cpu = Duration::from_nanos(b.saturating_sub(a));
                if tag == "on" {
                    cpu_on.push(cpu);
                } else {
                    cpu_off.push(cpu);
                }
            }
            if !out.report.triggered {
                return Err("the preflight did not trigger".into());
            }
            let started = Instant::now();
            rt.block_on(m.flush_recall(Some(&session)));
            if tag == "on" {
                t_write.push(started.elapsed());
                entries = index.count(&session).map_err(|e| e.to_string())?;
            }
            Ok(took)
        };
        let (a, b) = if pair % 2 == 0 {
            let a = one(&off, "off")?;
            (a, one(&on, "on")?)
        } else {
            let b = one(&on, "on")?;
            (one(&off, "off")?, b)
        };
        // The first pair warms both up.
        if pair > 0 {
            t_off.push(a);
            t_on.push(b);
            ratios.push(b.as_secs_f64() / a.as_secs_f64().max(1e-9));
        } else {
            t_write.clear();
        }
    }
    ratios.sort_by(f64::total_cmp);
    let (off, on) = (Stats::from(t_off), Stats::from(t_on));
    let round = |x: f64| (x * 1000.0).round() / 1000.0;
    let cpu = (cpu_off.len() == pairs && cpu_on.len() == pairs && pairs > 0).then(|| {
        let (off, on) = (Stats::from(cpu_off), Stats::from(cpu_on));
        CpuOverhead {
            ratio_p50: round(on.p50_us / off.p50_us.max(1e-9)),
            off,
            on,
        }
    });
    Ok(Overhead {
        pairs,
        ratio_p50: round(on.p50_us / off.p50_us.max(1e-9)),
        ratio_pairs_p50: round(ratios.get(ratios.len() / 2).copied().unwrap_or(0.0)),
        off,
        on,
        write: Stats::from(t_write),
        entries,
        cpu,
    })
}

/// A session name of this run (a shared database may hold other runs').
fn bench_session() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("bench-recall-{}-{nanos}", std::process::id())
}

/// Deletes `session`'s entries from the PostgreSQL index at `url` (best
/// effort: a TLS-only server keeps them).
fn forget(rt: &tokio::runtime::Runtime, url: &str, session: &str) -> bool {
    rt.block_on(async {
        let Ok((client, conn)) = tokio_postgres::connect(url, tokio_postgres::NoTls).await else {
            return false;
        };
        let task = tokio::spawn(conn);
        let ok = client
            .execute(
                "DELETE FROM compact_recall_entries WHERE session = $1",
                &[&session],
            )
            .await
            .is_ok();
        drop(client);
        let _ = task.await;
        ok
    })
}

/// `compact bench recall`.
pub(crate) fn run(quick: bool) -> Value {
    let rt = match crate::harness::current_thread() {
        Ok(rt) => rt,
        Err(e) => return e,
    };
    let sessions = retention::sessions(&if quick {
        Options::quick()
    } else {
        Options::full()
    });
    let max_queries = if quick { 200 } else { 2_000 };
    let latency_json = |r: Result<Latency, String>| match r {
        Ok(l) => json!(l),
        Err(e) => json!({"error": e}),
    };
    let sqlite = match tempfile::tempdir() {
        Ok(dir) => {
            let path = dir.path().join("recall.sqlite3");
            let mut v = latency_json(
                RecallIndex::open(&path)
                    .map_err(|e| e.to_string())
                    .and_then(|i| latency(&i, "bench-recall", &sessions.transcripts, max_queries)),
            );
            if let Ok(meta) = std::fs::metadata(&path) {
                v["file_mb"] = json!((meta.len() as f64 / 1e5).round() / 10.0);
            }
            v
        }
        Err(e) => json!({"error": e.to_string()}),
    };
    let postgres = match std::env::var(POSTGRES_URL_VAR)
        .ok()
        .filter(|u| !u.is_empty())
    {
        None => {
            json!({"skipped": format!("set {POSTGRES_URL_VAR} to a database the bench may write to")})
        }
        Some(url) => {
            let session = bench_session();
            let mut v = latency_json(
                RecallIndex::connect(&url)
                    .map_err(|e| e.to_string())
                    .and_then(|i| latency(&i, &session, &sessions.transcripts, max_queries)),
            );
            v["cleaned_up"] = json!(forget(&rt, &url, &session));
            v
        }
    };
    let pairs = if quick { 5 } else { 30 };
    let overhead =
        |history: &dyn Fn(&str) -> Vec<Message>| match overhead_pairs(&rt, history, pairs) {
            Ok(o) => json!(o),
            Err(e) => json!({"error": e}),
        };
    let own_ids = overhead(&|tag| crate::workload::history_with_ids(100, 3000, tag));
    let same = crate::workload::history(100, 3000);
    let same_ids = overhead(&|_| same.clone());
    json!({
        "sessions": sessions.transcripts.len(),
        "latency": {"sqlite": sqlite, "postgres": postgres},
        "indexing_overhead": own_ids,
        "indexing_overhead_same_ids": same_ids,
        "bars": {"sqlite_p99_ms": 20, "postgres_p99_ms": 50, "indexing_ratio": 1.10},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_words_split_at_case_changes_and_punctuation() {
        assert_eq!(
            key_words("LongTrianglePointIndexList"),
            ["long", "triangle", "point", "index", "list"]
        );
        assert_eq!(key_words("port_48213.v2"), ["port", "48213", "v2"]);
        assert!(key_words("--").is_empty());
    }

    #[test]
    fn overhead_pairs_measure_both_sides_and_the_write() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let history = |tag: &str| crate::workload::history_with_ids(100, 3000, tag);
        let o = overhead_pairs(&rt, &history, 2).expect("measured");
        assert_eq!((o.off.runs, o.on.runs, o.write.runs), (2, 2, 2));
        assert!(o.entries > 100, "{o:?}");
        assert!(o.ratio_p50 > 0.0 && o.ratio_pairs_p50 > 0.0);
        if cfg!(unix) {
            let cpu = o.cpu.expect("the thread's CPU time on Unix");
            assert_eq!((cpu.off.runs, cpu.on.runs), (2, 2));
            // A triggered preflight of 100 turns runs for a while on its
            // thread, and never longer than it took.
            assert!(
                cpu.off.min_us > 100.0 && cpu.off.max_us <= o.off.max_us,
                "{cpu:?}"
            );
        }
    }
}
