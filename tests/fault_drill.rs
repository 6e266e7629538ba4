//! The fault drill (docs/operations.md, "Replicas under faults"): three
//! `compact serve` replicas on one PostgreSQL (a real server of the drill's
//! own) and one shared archive, many sessions at once from clients that
//! retry on a connection error or a 5xx against the next replica, while a
//! replica is SIGKILLed (and started again) every few seconds and
//! PostgreSQL is restarted once, as a crash (`pg_ctl -m immediate`).
//!
//! Afterwards:
//!
//! - every turn was answered; every answer is provider-clean, has at most
//!   one summary (none nested in another) and every tool call paired with
//!   its result; every 503 said when to retry (`Retry-After`);
//! - each session's summary chain is continuous: the versions its answers
//!   carry never go back, and no version was answered with two different
//!   texts (so the versions of the summaries answered rise strictly with
//!   no duplicate); the store holds the last version answered, with its
//!   text; the archive holds every summary answered, with its text, and
//!   its own summaries' versions never go back, one text per version;
//! - every session's archive verifies (`compact archive verify`);
//! - retention equals the single-process run: the same sessions are then
//!   sent to one more replica, alone, without faults, its state in memory
//!   (one process, as an agent with the library in process would have);
//!   each session must end keeping exactly the same facts in both runs
//!   (`retained`), which is what an agent feels. How many answers differ
//!   at all is printed; see `compare` for why some may.
//!
//! Latency per turn (retries included) p50/p99/max is printed. When a turn
//! goes unanswered the failure shows its attempts, the faults around them,
//! the last lines each replica it tried logged (every replica's stderr is
//! kept in the drill's directory, `logs/r{i}-{start}.log`;
//! `COMPACT_DRILL_KEEP=1` keeps the directory, `COMPACT_DRILL_LOG` sets the
//! replicas' `COMPACT_LOG`) and what PostgreSQL was doing.
//!
//! `fault_drill_short` runs in CI (12 sessions x 30 turns, a kill every 40
//! turns answered or 1.5 s); the drill, 200 sessions x 50 turns, is
//! `fault_drill_full`, ignored by default: `cargo test --release --test
//! fault_drill -- --ignored --nocapture` (release replicas: `cargo test`
//! spawns the `compact` of its own profile; `COMPACT_DRILL_SESSIONS`,
//! `COMPACT_DRILL_TURNS`, `COMPACT_DRILL_KILL_SECS` change it).

#[path = "../crates/compact-middleware/tests/postgres_support/mod.rs"]
mod postgres_support;
mod support;

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{Replica, Serve, add_turn};
use tokio::sync::RwLock;

/// What the database is doing: a lock left behind shows here.
fn activity(url: &str) -> String {
    Command::new("psql")
        .arg(url)
        .args([
            "-Atc",
            "SELECT pid, state, wait_event_type, wait_event, now() - xact_start, \
             left(query, 80) FROM pg_stat_activity WHERE datname IS NOT NULL \
             AND pid <> pg_backend_pid() ORDER BY xact_start",
        ])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// What the drill runs.
struct Drill {
    sessions: usize,
    turns: usize,
    /// A replica is killed (and started again) this often, or after this
    /// many turns were answered, whichever comes first (a fast machine
    /// must see the faults too).
    kill_every: Duration,
    kill_every_turns: usize,
}

/// Every tool call has its result and every result its call.
fn paired(messages: &[Value]) -> Result<(), String> {
    let mut open = std::collections::BTreeSet::new();
    for m in messages {
        for call in m["tool_calls"].as_array().into_iter().flatten() {
            open.insert(call["id"].as_str().unwrap_or_default().to_owned());
        }
        if m["role"] == "tool" {
            let id = m["tool_call_id"].as_str().unwrap_or_default();
            if !open.remove(id) {
                return Err(format!("a result without its call: {id}"));
            }
        }
    }
    match open.first() {
        Some(id) => Err(format!("a call without its result: {id}")),
        None => Ok(()),
    }
}

const HEADER: &str = "COMPACT-SUMMARY v";

/// The version in `text`'s summary header (0 without one).
fn header_version(text: &str) -> u64 {
    text.find(HEADER)
        .map(|i| {
            text[i + HEADER.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
                .parse::<u64>()
                .unwrap_or(0)
        })
        .unwrap_or(0)
}

/// The summary in an answer: its version and its text; `None` without
/// one. More than one summary header anywhere (two summaries, or one
/// nested in another) is an error.
fn summary_of(messages: &[Value]) -> Result<Option<(u64, String)>, String> {
    let headers = serde_json::to_string(messages)
        .unwrap_or_default()
        .matches(HEADER)
        .count();
    if headers > 1 {
        return Err(format!("{headers} summary headers (nested summaries)"));
    }
    Ok(messages
        .iter()
        .filter_map(|m| m["content"].as_str())
        .find(|text| text.contains(HEADER))
        .map(|text| (header_version(text), text.to_owned())))
}

/// Which turns' facts `messages` still carry: turn `t` told the agent
/// "ticket OPS-t belongs to team-t" (`support::add_turn`), kept verbatim
/// in its message or in the summary's lines.
fn retained(messages: &[Value], turns: usize) -> Vec<bool> {
    let text = serde_json::to_string(messages).unwrap_or_default();
    (0..turns)
        .map(|t| text.contains(&format!("OPS-{t} belongs to team-{t}.")))
        .collect()
}

fn digest(messages: &[Value]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(messages)
        .unwrap_or_default()
        .hash(&mut h);
    h.finish()
}

/// What one session's client saw.
#[derive(Default)]
struct Seen {
    /// Per turn, retries included.
    latencies: Vec<Duration>,
    /// Per turn: the answer's summary version (0 without one).
    versions: Vec<u64>,
    /// Every summary version answered, with its one text.
    summaries: BTreeMap<u64, String>,
    /// Per turn: a digest of the answer, to compare runs.
    digests: Vec<u64>,
    /// The last answer.
    last: Vec<Value>,
    /// Attempts that were not answered: a 503 "busy" (`state.wait_ms`),
    /// another 5xx, no answer (a connection refused or cut).
    busy: usize,
    failed: usize,
    cut: usize,
    /// The 5xx answers by what they said (digits as `#`).
    errors: BTreeMap<String, usize>,
}

/// Where a session's client sends its turns: the replicas' addresses (a
/// restarted replica has a new one), and when the drill started.
#[derive(Clone)]
struct Target {
    bases: Arc<RwLock<Vec<String>>>,
    answered: Arc<AtomicUsize>,
    epoch: Instant,
}

/// One session, turn by turn, each answer fed back; a turn goes to the
/// session's replica and, on a connection error or a 5xx, to the next
/// one. Checks every answer as it comes.
async fn session(
    client: reqwest::Client,
    target: Target,
    n: usize,
    turns: usize,
) -> Result<Seen, String> {
    let id = format!("drill-{n}");
    let mut fed = vec![json!({"role": "system", "content": "You are a coding agent."})];
    let mut seen = Seen::default();
    for t in 0..turns {
        add_turn(&mut fed, t);
        let body = json!({"session_id": id, "messages": fed});
        let started = Instant::now();
        let mut attempt = 0usize;
        // Every attempt of this turn: when (since the drill started),
        // where, in how long, what came back.
        let mut tried: Vec<String> = Vec::new();
        let answer = loop {
            if started.elapsed() > Duration::from_secs(180) {
                return Err(format!(
                    "{id} turn {t}: no replica answered in 180 s ({attempt} attempts):\n{}",
                    tried.join("\n")
                ));
            }
            let base = {
                let bases = target.bases.read().await;
                bases[(n + attempt) % bases.len()].clone()
            };
            attempt += 1;
            let at = target.epoch.elapsed();
            let reply = client
                .post(format!("{base}/v1/preflight"))
                .json(&body)
                .timeout(Duration::from_secs(60))
                .send()
                .await;
            let outcome = match reply {
                Ok(r) if r.status().is_success() => {
                    // An unreadable answer: killed while answering.
                    match r.json::<Value>().await {
                        Ok(v) => break v,
                        Err(e) => {
                            seen.cut += 1;
                            format!("{e}")
                        }
                    }
                }
                Ok(r) if r.status().is_server_error() => {
                    let status = r.status();
                    if status.as_u16() == 503 && r.headers().get("retry-after").is_none() {
                        return Err(format!("{id} turn {t}: a 503 without Retry-After"));
                    }
                    let text = r.text().await.unwrap_or_default();
                    if text.contains("session store busy") {
                        seen.busy += 1;
                    } else {
                        seen.failed += 1;
                    }
                    let kind: String = serde_json::from_str::<Value>(&text)
                        .ok()
                        .and_then(|v| v["message"].as_str().map(str::to_owned))
                        .unwrap_or_else(|| text.clone())
                        .chars()
                        .map(|c| if c.is_ascii_digit() { '#' } else { c })
                        .collect();
                    *seen.errors.entry(format!("{status}: {kind}")).or_default() += 1;
                    format!("{status}: {text}")
                }
                Ok(r) => {
                    let status = r.status();
                    let text = r.text().await.unwrap_or_default();
                    return Err(format!("{id} turn {t}: {status}: {text}"));
                }
                Err(e) => {
                    seen.cut += 1;
                    format!("{e}")
                }
            };
            tried.push(format!(
                "  +{:.2} s {base}: {:.2} s: {outcome}",
                at.as_secs_f64(),
                (target.epoch.elapsed() - at).as_secs_f64(),
            ));
            tokio::time::sleep(Duration::from_millis(20 * attempt.min(10) as u64)).await;
        };
        seen.latencies.push(started.elapsed());
        target.answered.fetch_add(1, Ordering::Relaxed);
        let messages = answer["messages"]
            .as_array()
            .ok_or_else(|| format!("{id} turn {t}: no messages: {answer}"))?
            .clone();
        if serde_json::to_string(&messages)
            .unwrap_or_default()
            .contains("\"meta\"")
        {
            return Err(format!("{id} turn {t}: not provider-clean"));
        }
        paired(&messages).map_err(|e| format!("{id} turn {t}: {e}"))?;
        let summary = summary_of(&messages).map_err(|e| format!("{id} turn {t}: {e}"))?;
        let v = summary.as_ref().map_or(0, |s| s.0);
        if let Some(&last) = seen.versions.last()
            && v < last
        {
            return Err(format!("{id} turn {t}: summary v{v} after v{last}"));
        }
        if let Some((v, text)) = summary {
            match seen.summaries.get(&v) {
                Some(before) if *before != text => {
                    return Err(format!(
                        "{id} turn {t}: summary v{v} answered with two texts:\n{before}\n---\n{text}"
                    ));
                }
                Some(_) => {}
                None => {
                    seen.summaries.insert(v, text);
                }
            }
        }
        seen.versions.push(v);
        seen.digests.push(digest(&messages));
        fed = messages;
    }
    seen.last = fed;
    Ok(seen)
}

/// Every session at once against `target`, each a task.
fn start_sessions(
    client: &reqwest::Client,
    target: &Target,
    drill: &Drill,
) -> Vec<tokio::task::JoinHandle<Result<Seen, String>>> {
    (0..drill.sessions)
        .map(|n| tokio::spawn(session(client.clone(), target.clone(), n, drill.turns)))
        .collect()
}

/// A session's summaries as the archive holds them, in step order:
/// `(step, version, text)`.
fn archived_summaries(archive: &Path, session: &str) -> Vec<(u32, u64, String)> {
    let dir = archive.join(session);
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("the session's archive") {
        let name = entry.expect("an entry").file_name();
        let name = name.to_string_lossy();
        let Some(step) = name
            .strip_prefix("summary-")
            .and_then(|s| s.strip_suffix(".json"))
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let doc: Value = serde_json::from_slice(&std::fs::read(dir.join(&*name)).expect("read"))
            .expect("a summary document");
        let text = doc["message"]["content"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let version = doc["summary_version"].as_u64().unwrap_or(0);
        assert_eq!(
            header_version(&text),
            version,
            "{session}/{name}: the text's header is its version"
        );
        out.push((step, version, text));
    }
    out.sort_by_key(|s| s.0);
    out
}

/// The archive's summary chain: versions never go back from one step to
/// the next and each version has one text; every summary answered is
/// there, with the text answered. A version may be archived at two steps:
/// a replica killed after archiving a compaction and before committing it
/// (the record is saved last) left a step the retry, on another replica,
/// archives again from the same record and input, so with the same text.
fn check_archive(archive: &Path, session: &str, seen: &Seen) -> Result<(), String> {
    let stored = archived_summaries(archive, session);
    let mut texts: BTreeMap<u64, &str> = BTreeMap::new();
    let mut last = 0;
    for (step, version, text) in &stored {
        if *version < last {
            return Err(format!(
                "{session}: the archive's step {step} has v{version} after v{last}"
            ));
        }
        last = *version;
        if let Some(before) = texts.insert(*version, text)
            && before != text
        {
            return Err(format!(
                "{session}: the archive holds two texts of v{version}:\n{before}\n---\n{text}"
            ));
        }
    }
    for (version, text) in &seen.summaries {
        match texts.get(version) {
            Some(archived) if archived == text => {}
            Some(_) => {
                return Err(format!(
                    "{session}: v{version} was answered with a text the archive does not hold"
                ));
            }
            None => return Err(format!("{session}: v{version} was answered, not archived")),
        }
    }
    Ok(())
}

/// The drill against the single-process run, session by session: the same
/// facts kept at the end (asserted), and how many answers differ at all
/// (returned). Answers may differ when a replica was killed after
/// committing a turn and before its answer left: the retry finds the turn
/// already done and answers from the stored record, which can compact at a
/// different turn than one process did; the summary's bounded lines then
/// drift for a few turns. What is kept at the end must not differ.
fn compare(n: usize, turns: usize, drill: &Seen, single: &Seen) -> usize {
    assert_eq!(
        retained(&drill.last, turns),
        retained(&single.last, turns),
        "drill-{n}: the facts kept differ from the single-process run\ndrill:  {}\nsingle: {}",
        serde_json::to_string(&drill.last).unwrap_or_default(),
        serde_json::to_string(&single.last).unwrap_or_default(),
    );
    drill
        .digests
        .iter()
        .zip(&single.digests)
        .filter(|(a, b)| a != b)
        .count()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn run(drill: Drill) {
    let pg = postgres_support::own_server();
    // COMPACT_DRILL_KEEP: the directory (logs, archives) stays for a look.
    let dir = tempfile::Builder::new()
        .disable_cleanup(std::env::var_os("COMPACT_DRILL_KEEP").is_some())
        .tempdir()
        .expect("tempdir");
    eprintln!("fault drill: in {}", dir.path().display());
    let archive = dir.path().join("archive");
    let client = reqwest::Client::new();
    let logs = dir.path().join("logs");
    std::fs::create_dir_all(&logs).expect("the logs' directory");
    let log_level = std::env::var_os("COMPACT_DRILL_LOG").unwrap_or_else(|| "info".into());
    let log_of = |i: usize, start: usize| logs.join(format!("r{i}-{start}.log"));
    let data: Vec<PathBuf> = (0..3).map(|i| dir.path().join(format!("r{i}"))).collect();
    let serve = |i: usize, start: usize| {
        let mut s = Serve::postgres(&data[i], &pg.url);
        s.log = Some(log_of(i, start));
        s.env.push(("COMPACT_LOG", log_level.clone()));
        // One archive for every replica: a session's steps, whichever
        // replica wrote them, are one hash chain.
        s.env.push(("COMPACT_STORAGE_PATH", archive.clone().into()));
        s.env.push((
            "COMPACT_STORAGE_SPOOL_PATH",
            dir.path().join(format!("spool{i}")).into(),
        ));
        s
    };
    let mut replicas: Vec<Replica> = Vec::new();
    // Which log each replica's address writes.
    let mut log_by_base = HashMap::new();
    for i in 0..3 {
        replicas.push(serve(i, 0).start(&client).await);
        log_by_base.insert(replicas[i].base.clone(), log_of(i, 0));
    }
    let target = Target {
        bases: Arc::new(RwLock::new(
            replicas.iter().map(|r| r.base.clone()).collect::<Vec<_>>(),
        )),
        answered: Arc::new(AtomicUsize::new(0)),
        epoch: Instant::now(),
    };
    let tasks = start_sessions(&client, &target, &drill);

    // The faults, until every session is done: a replica killed and
    // started again every `kill_every`, PostgreSQL restarted once.
    let mut faults = Vec::<String>::new();
    let at = || format!("+{:.2} s", target.epoch.elapsed().as_secs_f64());
    let (mut kills, mut restarted) = (0usize, false);
    let (mut last_kill, mut last_turns) = (Instant::now(), 0usize);
    let mut last_report = Instant::now();
    while !tasks.iter().all(|t| t.is_finished()) {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let done = target.answered.load(Ordering::Relaxed);
        if last_report.elapsed() > Duration::from_secs(30) {
            eprintln!(
                "fault drill: {:.0} s, {done} of {} turns answered, {kills} kills",
                target.epoch.elapsed().as_secs_f64(),
                drill.sessions * drill.turns
            );
            last_report = Instant::now();
        }
        if last_kill.elapsed() < drill.kill_every
            && done < last_turns.saturating_add(drill.kill_every_turns)
        {
            continue;
        }
        let i = kills % replicas.len();
        replicas[i].kill();
        kills += 1;
        let mut log = vec![format!("{} r{i} {} SIGKILLed", at(), replicas[i].base)];
        if !restarted && kills == 2 {
            tokio::task::block_in_place(|| pg.restart());
            restarted = true;
            log.push(format!("{} PostgreSQL restarted", at()));
        }
        let start = kills / replicas.len() + 1;
        replicas[i] = serve(i, start).start(&client).await;
        log_by_base.insert(replicas[i].base.clone(), log_of(i, start));
        target.bases.write().await[i] = replicas[i].base.clone();
        log.push(format!("{} r{i} {} up", at(), replicas[i].base));
        faults.extend(log);
        (last_kill, last_turns) = (Instant::now(), target.answered.load(Ordering::Relaxed));
    }
    let wall = target.epoch.elapsed();

    let mut seen = Vec::new();
    for task in tasks {
        match task.await.expect("session task") {
            Ok(s) => seen.push(s),
            Err(e) => {
                // The replicas that turn tried: what they logged last.
                let mut tails = String::new();
                for (base, log) in &log_by_base {
                    if !e.contains(base.as_str()) {
                        continue;
                    }
                    let text = std::fs::read_to_string(log).unwrap_or_default();
                    let lines: Vec<&str> = text.lines().collect();
                    tails.push_str(&format!(
                        "--- {base} ({}), its last lines:\n{}\n",
                        log.display(),
                        lines[lines.len().saturating_sub(30)..].join("\n")
                    ));
                }
                panic!(
                    "{e}\nthe faults:\n{}\npg_stat_activity:\n{}\n{tails}",
                    faults.join("\n"),
                    activity(&pg.url)
                );
            }
        }
    }
    assert!(
        kills >= 2 && restarted,
        "the faults happened: {kills} kills"
    );

    // What the store holds is what was answered last; the archive holds
    // every summary answered, its chain continuous, and verifies.
    let base = target.bases.read().await[0].clone();
    for (n, s) in seen.iter().enumerate() {
        assert_eq!(
            s.latencies.len(),
            drill.turns,
            "drill-{n}: every turn answered"
        );
        let id = format!("drill-{n}");
        let last = s.versions.last().copied().unwrap_or(0);
        assert!(last >= 1, "{id} was compacted");
        let status = support::status(&client, &base, &id).await;
        assert_eq!(
            support::version(&status),
            last,
            "{id}: the stored summary is the last one answered: {status}"
        );
        let stored = status["summary"]["text"].as_str().unwrap_or_default();
        assert!(
            !stored.is_empty() && s.summaries.get(&last).is_some_and(|t| t.contains(stored)),
            "{id}: the stored summary's text is the one answered: {status}"
        );
        check_archive(&archive, &id, s).unwrap_or_else(|e| panic!("{e}"));
        let out = Command::new(support::compact_bin())
            .args(["archive", "verify", &id, "--archive"])
            .arg(&archive)
            .env("HOME", dir.path())
            .output()
            .expect("compact archive verify runs");
        assert!(
            out.status.success(),
            "{id}: the archive does not verify: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    drop(replicas);

    // The single-process run: the same sessions through one replica,
    // without faults, its state in its memory.
    let single_dir = dir.path().join("single");
    let single = Serve {
        dir: &single_dir,
        env: vec![
            ("COMPACT_STATE_STORE", "memory".into()),
            ("COMPACT_STORAGE_PATH", single_dir.join("archive").into()),
            (
                "COMPACT_STORAGE_SPOOL_PATH",
                single_dir.join("spool").into(),
            ),
            ("COMPACT_LOG", log_level.clone()),
        ],
        args: Vec::new(),
        window: 3000,
        log: Some(logs.join("single.log")),
    }
    .start(&client)
    .await;
    let one = Target {
        bases: Arc::new(RwLock::new(vec![single.base.clone()])),
        answered: Arc::new(AtomicUsize::new(0)),
        epoch: Instant::now(),
    };
    let mut reference = Vec::new();
    for task in start_sessions(&client, &one, &drill) {
        reference.push(
            task.await
                .expect("session task")
                .unwrap_or_else(|e| panic!("the single-process run: {e}")),
        );
    }
    let (mut kept, mut kept_single, mut differing) = (0, 0, 0);
    for (n, (s, r)) in seen.iter().zip(&reference).enumerate() {
        differing += compare(n, drill.turns, s, r);
        kept += retained(&s.last, drill.turns)
            .iter()
            .filter(|k| **k)
            .count();
        kept_single += retained(&r.last, drill.turns)
            .iter()
            .filter(|k| **k)
            .count();
    }

    let mut errors: BTreeMap<&str, usize> = BTreeMap::new();
    for (kind, k) in seen.iter().flat_map(|s| &s.errors) {
        *errors.entry(kind).or_default() += k;
    }
    for (kind, k) in &errors {
        println!("fault drill: {k} x {kind}");
    }
    let mut latencies: Vec<Duration> = seen.iter().flat_map(|s| s.latencies.clone()).collect();
    latencies.sort();
    let total = drill.sessions * drill.turns;
    let count = |f: fn(&Seen) -> usize| seen.iter().map(f).sum::<usize>();
    println!(
        "fault drill: {} sessions x {} turns on 3 replicas, {kills} SIGKILLs, 1 PostgreSQL restart, {:.1} s: \
         every turn answered; per turn (retries included) p50 {:?}, p99 {:?}, max {:?}; \
         attempts not answered: {} cut off, {} busy (503), {} other 5xx; \
         facts kept at the end {kept} of {} (single process: {kept_single}); \
         answers identical to the single process's: {} of {total}",
        drill.sessions,
        drill.turns,
        wall.as_secs_f64(),
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        latencies.last().copied().unwrap_or_default(),
        count(|s| s.cut),
        count(|s| s.busy),
        count(|s| s.failed),
        drill.sessions * drill.turns,
        total - differing,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_drill_short() {
    run(Drill {
        sessions: 12,
        turns: 30,
        kill_every: Duration::from_millis(1500),
        kill_every_turns: 40,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "the full drill (200 sessions x 50 turns) takes minutes: run it with --release --ignored"]
async fn fault_drill_full() {
    let var = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    run(Drill {
        sessions: var("COMPACT_DRILL_SESSIONS", 200),
        turns: var("COMPACT_DRILL_TURNS", 50),
        kill_every: Duration::from_secs(var("COMPACT_DRILL_KILL_SECS", 3) as u64),
        kill_every_turns: usize::MAX,
    })
    .await;
}
