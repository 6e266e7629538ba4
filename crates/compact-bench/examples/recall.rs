//! Recall (issue 25), measured: replays the generated sessions, the named
//! corpora, the fixtures and the real trajectories of
//! `../shared/real-trajectories` (skipped when absent) turn by turn with
//! `recall.enabled`, as the retention suite does (`retention::replay`,
//! agent feeds our output back). Then:
//!
//! - for every probe that is no longer in the final context, a query made
//!   of its natural words (`compact_bench::recall::natural_query`: never the
//!   key as written) must return an entry holding the key in the top 3;
//!   reported with the excerpt holding it, and with the entry holding it;
//! - every recall id any placeholder showed during the replay must give
//!   the original output back, whole (100%);
//! - what indexing adds to a triggered preflight (recall on vs off, same
//!   replay, wall time of the triggered calls);
//! - recall latency over a 10,000-entry session index (a SQLite file; and
//!   PostgreSQL with `--postgres URL`): `compact_bench::recall::latency`,
//!   what `compact bench recall` reports.
//!
//! With `--postgres URL` the replays' index is that database too (each
//! session named for its window and this run), so the quality figures are
//! PostgreSQL's.
//!
//! `cargo run --release -p compact-bench --example recall -- [--quick] [--windows 8000,16000] [--mode compact] [--lost] [--postgres URL]`

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use compact_bench::args::list;
use compact_bench::corpus::Transcript;
use compact_bench::recall::{full_text, latency, natural_query, placeholder_ids, triggered_time};
use compact_bench::retention::{self, CallingMode, Options, check, config_for, replay};
use compact_middleware::CompactManager;
use compact_middleware::recall::{RecallIndex, RecallQuery};

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

fn manager(
    window: usize,
    recall: bool,
    mode: Option<&str>,
    postgres: Option<&str>,
) -> Option<CompactManager> {
    let mut config = config_for(window);
    if let Some(mode) = mode {
        config.policy.mode = serde_json::from_value(serde_json::Value::String(mode.into())).ok()?;
    }
    config.recall.enabled = recall;
    config.recall.path = Some(postgres.unwrap_or(":memory:").to_owned());
    CompactManager::builder(config)
        .without_config_exporters()
        .without_storage()
        .build()
        .ok()
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
    let windows: Vec<usize> = list(&args, "--windows").unwrap_or_else(|| vec![8_000, 16_000]);
    // `--mode compact`: another `policy.mode` (clearing keeps placeholders in the context).
    let mode = args
        .iter()
        .position(|a| a == "--mode")
        .and_then(|i| args.get(i + 1))
        .map(String::as_str);
    // `--postgres URL`: the index in that database (sessions named for this run).
    let postgres = args
        .iter()
        .position(|a| a == "--postgres")
        .and_then(|i| args.get(i + 1))
        .map(String::as_str);
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
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
            let Some(m) = manager(w, true, mode, postgres) else {
                return;
            };
            // One index may serve every window (PostgreSQL): a session each.
            let name = match postgres {
                Some(_) => format!("{}-w{w}-{run}", t.name),
                None => t.name.clone(),
            };
            let mut shown: BTreeMap<String, String> = BTreeMap::new();
            let context = rt.block_on(replay(&m, &name, t, CallingMode::FedBack, |_, result| {
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
            lost_probes(&rt, &m, &name, t, &retained, w, flag("--lost"), tally);
            shown_ids(&rt, &m, &name, t, &shown, w, flag("--lost"), tally);
            // Indexing's share of a triggered preflight: the same replay with
            // recall off, alternated three times.
            for _ in 0..if flag("--no-overhead") { 0 } else { 3 } {
                let Some(off) = manager(w, false, mode, None) else {
                    return;
                };
                let Some(on) = manager(w, true, mode, None) else {
                    return;
                };
                off_time.extend(rt.block_on(triggered_time(&off, &t.name, t)));
                on_time.extend(rt.block_on(triggered_time(&on, &t.name, t)));
                rt.block_on(on.flush_recall(None));
            }
        }
    }
    print_tallies(&tallies);
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

    indexing_halves(&sessions.transcripts);

    latencies(&sessions.transcripts, postgres, run);
}

/// Queries, in natural words, every probe of `t` that `retained` says the
/// final context lost (`w`'s replay, session `name`): whether the top 3
/// holds its key in an excerpt and in an entry; `show` prints the misses.
#[allow(clippy::too_many_arguments)]
fn lost_probes(
    rt: &tokio::runtime::Runtime,
    m: &CompactManager,
    name: &str,
    t: &Transcript,
    retained: &[bool],
    w: usize,
    show: bool,
    tally: &mut Tally,
) {
    for (f, kept) in t.facts.iter().zip(retained) {
        if *kept {
            continue;
        }
        tally.lost += 1;
        let key = &f.probes[0];
        let q = RecallQuery {
            limit: Some(3),
            ..RecallQuery::text(natural_query(t, f))
        };
        let Ok(a) = rt.block_on(m.recall(name, q.clone())) else {
            continue;
        };
        let excerpt = a.hits.iter().any(|h| h.excerpt.contains(key.as_str()));
        let entry = a
            .hits
            .iter()
            .any(|h| full_text(rt, m, name, &h.id).is_some_and(|e| e.contains(key.as_str())));
        tally.excerpt_top3 += usize::from(excerpt);
        tally.entry_top3 += usize::from(entry);
        if !(entry && excerpt) && show {
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
}

/// Whether every recall id a placeholder showed (`shown`: id -> call)
/// gives the call's original output back, whole; `show` prints the
/// inexact ones.
#[allow(clippy::too_many_arguments)]
fn shown_ids(
    rt: &tokio::runtime::Runtime,
    m: &CompactManager,
    name: &str,
    t: &Transcript,
    shown: &BTreeMap<String, String>,
    w: usize,
    show: bool,
    tally: &mut Tally,
) {
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
    for (rid, call) in shown {
        tally.ids += 1;
        let text = full_text(rt, m, name, rid);
        tally.ids_found += usize::from(text.is_some());
        let exact = text.is_some() && originals.get(call) == text.as_ref();
        tally.ids_exact += usize::from(exact);
        if !exact && show {
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
}

/// The quality table: per window and group of sessions.
fn print_tallies(tallies: &BTreeMap<(usize, &str), Tally>) {
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
    for ((w, g), t) in tallies {
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
}

/// The two halves of indexing, each session's whole history once (what
/// its compactions index in all): finding what is new and hashing it (on
/// the preflight's path), redacting and writing it (on the blocking pool).
fn indexing_halves(transcripts: &[Transcript]) {
    if let Ok(scratch) = RecallIndex::open(":memory:") {
        let redactor = compact_middleware::redact::Redactor::from_config(
            &compact_middleware::config::Config::default().redaction,
        );
        let (mut prep, mut write, mut n) = (Duration::ZERO, Duration::ZERO, 0);
        for t in transcripts {
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
            transcripts.len(),
            prep.as_secs_f64() * 1000.0,
            write.as_secs_f64() * 1000.0
        );
    }
}

/// Latency over a 10,000-entry session index: a SQLite file, and the
/// PostgreSQL database when one is given (`compact bench recall`'s figures).
fn latencies(transcripts: &[Transcript], postgres: Option<&str>, run: u64) {
    let print = |what: &str, r: Result<compact_bench::recall::Latency, String>| match r {
        Ok(l) => println!(
            "\n{what}: {} entries (session `big`, {:.0} ms to fill): {} queries p50 {:.2} ms p99 {:.2} ms max {:.2} ms; {} by-id p50 {:.3} ms p99 {:.3} ms",
            l.entries,
            l.fill_ms,
            l.query.runs,
            l.query.p50_us / 1000.0,
            l.query.p99_us / 1000.0,
            l.query.max_us / 1000.0,
            l.by_id.runs,
            l.by_id.p50_us / 1000.0,
            l.by_id.p99_us / 1000.0,
        ),
        Err(e) => println!("\n{what}: {e}"),
    };
    if let Ok(dir) = tempfile::tempdir() {
        let index = RecallIndex::open(dir.path().join("recall.sqlite3")).map_err(|e| e.to_string());
        print(
            "sqlite",
            index.and_then(|i| latency(&i, "big", transcripts, 2_000)),
        );
    }
    if let Some(url) = postgres {
        let session = format!("big-{run}");
        let index = RecallIndex::connect(url).map_err(|e| e.to_string());
        print(
            "postgres",
            index.and_then(|i| latency(&i, &session, transcripts, 2_000)),
        );
    }
}
