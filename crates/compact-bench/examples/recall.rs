//! Recall (issue 25), measured: replays the generated sessions, the named
//! corpora, the fixtures and the real trajectories of
//! `../shared/real-trajectories` (skipped when absent) turn by turn with
//! `recall.enabled`, as the retention suite does (`retention::replay`,
//! agent feeds our output back). Then:
//!
//! - for every probe that is no longer in the final context, a query made
//!   of its natural words (the words around its first occurrence, and the
//!   key's own words split at case changes and punctuation: never the key as
//!   written) must return an entry holding the key in the top 3; reported
//!   with the excerpt holding it, and with the entry holding it;
//! - every recall id any placeholder showed during the replay must give
//!   the original output back, whole (100%);
//! - what indexing adds to a triggered preflight (recall on vs off, same
//!   replay, wall time of the triggered calls);
//! - recall latency over a 10,000-message session index (a SQLite file):
//!   p50 / p99 of queries and of by-id reads.
//!
//! `cargo run --release -p compact-bench --example recall -- [--quick] [--windows 8000,16000] [--mode compact] [--lost]`

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use compact_bench::corpus::{Fact, Transcript};
use compact_bench::retention::{self, CallingMode, Options, check, config_for, replay};
use compact_middleware::model::Message;
use compact_middleware::recall::{RecallIndex, RecallQuery};
use compact_middleware::{CompactManager, PreflightRequest};

/// The key's own words: split at punctuation, `_`, and case changes
/// (`LongTrianglePointIndexList` → `long triangle point index list`).
fn key_words(key: &str) -> Vec<String> {
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
fn words_around(t: &Transcript, key: &str, n: usize) -> Vec<String> {
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
fn natural_query(t: &Transcript, f: &Fact) -> String {
    let key = &f.probes[0];
    let mut words = words_around(t, key, 6);
    words.extend(key_words(key));
    let q = words.join(" ");
    debug_assert!(!q.contains(key.as_str()) || key_words(key).join(" ") == *key);
    q
}

/// `(call id, recall id)` of every placeholder that carries one.
fn placeholder_ids(context: &[Message]) -> Vec<(String, String)> {
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

#[derive(Default)]
struct Tally {
    lost: usize,
    excerpt_top3: usize,
    entry_top3: usize,
    ids: usize,
    ids_found: usize,
    ids_exact: usize,
    /// Not exact, but only where redaction replaced a secret.
    ids_redacted: usize,
}

fn pct(a: usize, b: usize) -> String {
    if b == 0 {
        "-".into()
    } else {
        format!("{:.1}%", 100.0 * a as f64 / b as f64)
    }
}

fn manager(window: usize, recall: bool, mode: Option<&str>) -> Option<CompactManager> {
    let mut config = config_for(window);
    if let Some(mode) = mode {
        config.policy.mode = serde_json::from_value(serde_json::Value::String(mode.into())).ok()?;
    }
    config.recall.enabled = recall;
    config.recall.path = Some(":memory:".into());
    CompactManager::builder(config)
        .without_config_exporters()
        .without_storage()
        .build()
        .ok()
}

/// Wall time of each triggered preflight of a fed-back replay of `t`.
async fn triggered_time(m: &CompactManager, session: &str, t: &Transcript) -> Vec<Duration> {
    let mut context: Vec<Message> = t.opening.clone();
    let mut total = Vec::new();
    for turn in &t.turns {
        context.extend(turn.iter().cloned());
        let sent = std::mem::take(&mut context);
        let started = Instant::now();
        let r = m
            .preflight_with(
                session,
                PreflightRequest {
                    messages: sent.clone(),
                    ..PreflightRequest::default()
                },
            )
            .await;
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

/// An entry's whole text, every page read.
fn full_text(
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

fn quantile(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |f: &str| args.iter().any(|a| a == f);
    let windows: Vec<usize> = args
        .iter()
        .position(|a| a == "--windows")
        .and_then(|i| args.get(i + 1))
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![8_000, 16_000]);
    // `--mode compact`: another `policy.mode` (clearing keeps placeholders in the context).
    let mode = args
        .iter()
        .position(|a| a == "--mode")
        .and_then(|i| args.get(i + 1))
        .map(String::as_str);
    let mut opts = if flag("--quick") {
        Options::quick()
    } else {
        Options::full()
    };
    opts.trajectories = true;
    let sessions = retention::sessions(&opts);
    println!("trajectories: {}", sessions.trajectories);
    for p in &sessions.problems {
        println!("problem: {p}");
    }
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    let group = |t: &Transcript| {
        if t.source == "trajectory" || t.name.contains("deepseek") {
            "real trajectories"
        } else {
            "corpora"
        }
    };
    let mut tallies: BTreeMap<(usize, &str), Tally> = BTreeMap::new();
    let (mut on_time, mut off_time): (Vec<Duration>, Vec<Duration>) = (Vec::new(), Vec::new());
    for &w in &windows {
        for t in &sessions.transcripts {
            let Some(m) = manager(w, true, mode) else {
                return;
            };
            let mut shown: BTreeMap<String, String> = BTreeMap::new();
            let context = rt.block_on(replay(&m, &t.name, t, CallingMode::FedBack, |_, result| {
                if let Ok(o) = result {
                    shown.extend(
                        placeholder_ids(&o.messages)
                            .into_iter()
                            .map(|(c, r)| (r, c)),
                    );
                }
            }));
            let (retained, _) = check(&context, t);
            let tally = tallies.entry((w, group(t))).or_default();
            for (f, kept) in t.facts.iter().zip(&retained) {
                if *kept {
                    continue;
                }
                tally.lost += 1;
                let key = &f.probes[0];
                let q = RecallQuery {
                    limit: Some(3),
                    ..RecallQuery::text(natural_query(t, f))
                };
                let Ok(a) = rt.block_on(m.recall(&t.name, q.clone())) else {
                    continue;
                };
                let excerpt = a.hits.iter().any(|h| h.excerpt.contains(key.as_str()));
                let entry = a.hits.iter().any(|h| {
                    full_text(&rt, &m, &t.name, &h.id).is_some_and(|e| e.contains(key.as_str()))
                });
                tally.excerpt_top3 += usize::from(excerpt);
                tally.entry_top3 += usize::from(entry);
                if !(entry && excerpt) && flag("--lost") {
                    println!(
                        "  MISS ({}) {w} {} {key:?} query {:?}",
                        if entry { "excerpt" } else { "entry" },
                        t.name,
                        q.query
                    );
                    for h in &a.hits {
                        println!("     {} {:.2} {:?}", h.id, h.score, h.excerpt);
                    }
                }
            }
            let originals: BTreeMap<String, String> = t
                .messages()
                .iter()
                .flat_map(|m| {
                    m.tool_outputs()
                        .into_iter()
                        .map(|(c, o)| (c.to_owned(), o.into_owned()))
                        .collect::<Vec<_>>()
                })
                .collect();
            for (rid, call) in &shown {
                tally.ids += 1;
                let text = full_text(&rt, &m, &t.name, rid);
                tally.ids_found += usize::from(text.is_some());
                let exact = text.is_some() && originals.get(call) == text.as_ref();
                tally.ids_exact += usize::from(exact);
                if !exact && flag("--lost") {
                    println!(
                        "  INEXACT {w} {} {rid} {call}: capped before {}, original {} chars, entry {} chars",
                        t.name,
                        text.as_ref().is_some_and(|t| t.contains("⟦truncated: ")),
                        originals.get(call).map_or(0, |o| o.chars().count()),
                        text.as_ref().map_or(0, |t| t.chars().count())
                    );
                }
                tally.ids_redacted +=
                    usize::from(!exact && text.as_ref().is_some_and(|t| t.contains("<REDACTED>")));
            }
            // Indexing's share of a triggered preflight: the same replay with
            // recall off, alternated three times.
            for _ in 0..if flag("--no-overhead") { 0 } else { 3 } {
                let Some(off) = manager(w, false, mode) else {
                    return;
                };
                let Some(on) = manager(w, true, mode) else {
                    return;
                };
                off_time.extend(rt.block_on(triggered_time(&off, &t.name, t)));
                on_time.extend(rt.block_on(triggered_time(&on, &t.name, t)));
                rt.block_on(on.flush_recall(None));
            }
        }
    }
    println!(
        "\n{:>7} {:<18} {:>6} {:>14} {:>12} {:>7} {:>9} {:>9} {:>9}",
        "window",
        "sessions",
        "lost",
        "excerpt top3",
        "entry top3",
        "ids",
        "by id",
        "exact",
        "redacted"
    );
    for ((w, g), t) in &tallies {
        println!(
            "{w:>7} {g:<18} {:>6} {:>14} {:>12} {:>7} {:>9} {:>9} {:>9}",
            t.lost,
            pct(t.excerpt_top3, t.lost),
            pct(t.entry_top3, t.lost),
            t.ids,
            pct(t.ids_found, t.ids),
            pct(t.ids_exact, t.ids),
            t.ids_redacted,
        );
    }
    on_time.sort();
    off_time.sort();
    let total = |v: &[Duration]| v.iter().sum::<Duration>().as_secs_f64() * 1000.0;
    println!(
        "\ntriggered preflights (3 alternated replays): recall off {} calls, median {:.2} ms, total {:.0} ms; on {} calls, median {:.2} ms ({:+.1}%), total {:.0} ms",
        off_time.len(),
        quantile(&off_time, 0.5),
        total(&off_time),
        on_time.len(),
        quantile(&on_time, 0.5),
        100.0 * (quantile(&on_time, 0.5) / quantile(&off_time, 0.5).max(1e-9) - 1.0),
        total(&on_time),
    );

    // The two halves of indexing, each session's whole history once (what
    // its compactions index in all): finding what is new and hashing it (on
    // the preflight's path), redacting and writing it (on the blocking pool).
    if let Ok(scratch) = RecallIndex::open(":memory:") {
        let redactor = compact_middleware::redact::Redactor::from_config(
            &compact_middleware::config::Config::default().redaction,
        );
        let (mut prep, mut write, mut n) = (Duration::ZERO, Duration::ZERO, 0);
        for t in &sessions.transcripts {
            let messages = t.messages();
            let started = Instant::now();
            let pending = scratch.prepare(&t.name, &messages);
            prep += started.elapsed();
            n += pending.len();
            let started = Instant::now();
            let clean = |s: &str| match &redactor {
                Ok(r) => r.redact_str(s).into_owned(),
                Err(_) => s.to_owned(),
            };
            let _ = scratch.write(pending, 1, &clean);
            write += started.elapsed();
        }
        println!(
            "indexing {n} entries of {} sessions: prepare (preflight path) {:.1} ms, redact + write (blocking pool) {:.1} ms",
            sessions.transcripts.len(),
            prep.as_secs_f64() * 1000.0,
            write.as_secs_f64() * 1000.0
        );
    }

    // Latency over a 10,000-message session index in a SQLite file.
    let Ok(dir) = std::env::temp_dir()
        .join(format!("compact-recall-bench-{}", std::process::id()))
        .canonicalize()
        .or_else(|_| {
            let d =
                std::env::temp_dir().join(format!("compact-recall-bench-{}", std::process::id()));
            std::fs::create_dir_all(&d).map(|_| d)
        })
    else {
        return;
    };
    let path = dir.join("recall.sqlite3");
    let _ = std::fs::remove_file(&path);
    let Ok(index) = RecallIndex::open(&path) else {
        return;
    };
    let all: Vec<Message> = sessions
        .transcripts
        .iter()
        .flat_map(|t| t.messages())
        .collect();
    let mut indexed = 0;
    let mut step = 0u32;
    let started = Instant::now();
    'fill: for round in 0.. {
        for chunk in all.chunks(200) {
            step += 1;
            // Each round's texts differ (the round number), so they are new entries.
            let chunk: Vec<Message> = chunk.iter().map(|m| variant(m, round)).collect();
            indexed += index
                .add_messages("big", step, &chunk, &|s: &str| s.to_owned())
                .unwrap_or_default();
            if indexed >= 10_000 {
                break 'fill;
            }
        }
        if all.is_empty() || round > 100 {
            break;
        }
    }
    let fill = started.elapsed();
    let queries: Vec<String> = sessions
        .transcripts
        .iter()
        .flat_map(|t| t.facts.iter().map(move |f| natural_query(t, f)))
        .take(2_000)
        .collect();
    let mut q_times = Vec::new();
    let mut ids = Vec::new();
    for q in &queries {
        let started = Instant::now();
        let a = index.recall(
            "big",
            &RecallQuery {
                limit: Some(5),
                ..RecallQuery::text(q.clone())
            },
        );
        q_times.push(started.elapsed());
        if let Ok(a) = a {
            ids.extend(a.hits.into_iter().map(|h| h.id));
        }
    }
    let mut id_times = Vec::new();
    for id in ids.iter().take(2_000) {
        let started = Instant::now();
        let _ = index.recall("big", &RecallQuery::id(id));
        id_times.push(started.elapsed());
    }
    q_times.sort();
    id_times.sort();
    println!(
        "\nindex of {} entries (session `big`, {:.0} ms to fill, {:.1} MB): {} queries p50 {:.2} ms p99 {:.2} ms max {:.2} ms; {} by-id p50 {:.3} ms p99 {:.3} ms",
        index.count("big").unwrap_or_default(),
        fill.as_secs_f64() * 1000.0,
        std::fs::metadata(&path).map_or(0.0, |m| m.len() as f64 / 1e6),
        q_times.len(),
        quantile(&q_times, 0.5),
        quantile(&q_times, 0.99),
        quantile(&q_times, 1.0),
        id_times.len(),
        quantile(&id_times, 0.5),
        quantile(&id_times, 0.99),
    );
    drop(index);
    let _ = std::fs::remove_dir_all(&dir);
}
