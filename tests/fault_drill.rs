//! The fault drill (docs/operations.md, "Replicas under faults"): three
//! `compact serve` replicas on one PostgreSQL (a real server of the drill's
//! own) and one shared archive, many sessions at once from clients that
//! retry on a connection error or a 5xx against the next replica, while a
//! replica is SIGKILLed (and started again) every few seconds and
//! PostgreSQL is restarted once, as a crash (`pg_ctl -m immediate`).
//!
//! Afterwards: every turn was answered; every answer is provider-clean, has
//! at most one summary and every tool call paired with its result; each
//! session's summary versions never went back; the session's stored version
//! is the last one answered; and every session's archive verifies
//! (`compact archive verify`). Latency p50/p99 per turn (retries included)
//! is printed.
//!
//! `fault_drill_short` runs in CI (12 sessions x 30 turns, a kill every 40
//! turns answered or 1.5 s); the issue's
//! drill, 200 sessions x 50 turns, is `fault_drill_full`, ignored by
//! default: `cargo test --release --test fault_drill -- --ignored
//! --nocapture` (`COMPACT_DRILL_SESSIONS`, `COMPACT_DRILL_TURNS`,
//! `COMPACT_DRILL_KILL_SECS` change it).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{Replica, Serve, add_turn};
use tokio::sync::RwLock;

/// The drill's own PostgreSQL (it is restarted), stopped on drop.
struct Postgres {
    dir: tempfile::TempDir,
    url: String,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/postgres.sh")
}

impl Postgres {
    fn start() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = Command::new(script())
            .arg("start")
            .arg(dir.path())
            .output()
            .expect("scripts/postgres.sh runs");
        assert!(
            out.status.success(),
            "PostgreSQL did not start (Debian: apt-get install -y postgresql): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let url = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        Self { dir, url }
    }

    fn restart(&self) {
        let out = Command::new(script())
            .arg("restart")
            .arg(self.dir.path())
            .output()
            .expect("scripts/postgres.sh runs");
        assert!(
            out.status.success(),
            "PostgreSQL did not restart: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = Command::new(script())
            .arg("stop")
            .arg(self.dir.path())
            .status();
    }
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

/// The summary version in an answer (0 without one); more than one
/// summary header is an error.
fn summary_version(messages: &[Value]) -> Result<u64, String> {
    let text = serde_json::to_string(messages).unwrap_or_default();
    let mut found = text.match_indices("COMPACT-SUMMARY v").map(|(i, m)| {
        text[i + m.len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse::<u64>()
            .unwrap_or(0)
    });
    let version = found.next().unwrap_or(0);
    if found.next().is_some() {
        return Err("nested summaries".into());
    }
    Ok(version)
}

/// One session, turn by turn, each answer fed back; a turn goes to the
/// session's replica and, on a connection error or a 5xx, to the next
/// one. Returns each turn's latency (retries included) and the versions.
async fn session(
    client: reqwest::Client,
    bases: Arc<RwLock<Vec<String>>>,
    answered: Arc<AtomicUsize>,
    n: usize,
    turns: usize,
) -> Result<(Vec<Duration>, Vec<u64>), String> {
    let id = format!("drill-{n}");
    let mut fed = vec![json!({"role": "system", "content": "You are a coding agent."})];
    let (mut latencies, mut versions) = (Vec::new(), Vec::new());
    for t in 0..turns {
        add_turn(&mut fed, t);
        let body = json!({"session_id": id, "messages": fed});
        let started = Instant::now();
        let mut attempt = 0usize;
        let (mut last_error, mut last_answer) = (String::new(), String::new());
        let answer = loop {
            if started.elapsed() > Duration::from_secs(180) {
                return Err(format!(
                    "{id} turn {t}: no replica answered in 180 s ({attempt} attempts, the last: {last_error}; the last error answered: {last_answer})"
                ));
            }
            let base = {
                let bases = bases.read().await;
                bases[(n + attempt) % bases.len()].clone()
            };
            attempt += 1;
            match client
                .post(format!("{base}/v1/preflight"))
                .json(&body)
                .timeout(Duration::from_secs(60))
                .send()
                .await
            {
                Ok(r) if r.status().is_success() => {
                    // An unreadable answer: killed while answering.
                    match r.json::<Value>().await {
                        Ok(v) => break v,
                        Err(e) => last_error = format!("{base}: {e}"),
                    }
                }
                Ok(r) if r.status().is_server_error() => {
                    let status = r.status();
                    last_error =
                        format!("{base}: {status}: {}", r.text().await.unwrap_or_default());
                    last_answer.clone_from(&last_error);
                }
                Ok(r) => {
                    let status = r.status();
                    let text = r.text().await.unwrap_or_default();
                    return Err(format!("{id} turn {t}: {status}: {text}"));
                }
                Err(e) => last_error = format!("{base}: {e}"),
            }
            tokio::time::sleep(Duration::from_millis(20 * attempt.min(10) as u64)).await;
        };
        latencies.push(started.elapsed());
        answered.fetch_add(1, Ordering::Relaxed);
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
        let v = summary_version(&messages).map_err(|e| format!("{id} turn {t}: {e}"))?;
        if let Some(&last) = versions.last()
            && v < last
        {
            return Err(format!("{id} turn {t}: summary v{v} after v{last}"));
        }
        versions.push(v);
        fed = messages;
    }
    Ok((latencies, versions))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn run(drill: Drill) {
    let pg = Postgres::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let archive = dir.path().join("archive");
    let client = reqwest::Client::new();
    let data: Vec<PathBuf> = (0..3).map(|i| dir.path().join(format!("r{i}"))).collect();
    let serve = |i: usize| {
        let mut s = Serve::postgres(&data[i], &pg.url);
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
    for i in 0..3 {
        replicas.push(serve(i).start(&client).await);
    }
    let bases = Arc::new(RwLock::new(
        replicas.iter().map(|r| r.base.clone()).collect::<Vec<_>>(),
    ));

    let started = Instant::now();
    let answered = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for n in 0..drill.sessions {
        tasks.push(tokio::spawn(session(
            client.clone(),
            bases.clone(),
            answered.clone(),
            n,
            drill.turns,
        )));
    }

    // The faults, until every session is done: a replica killed and
    // started again every `kill_every`, PostgreSQL restarted once.
    let (mut kills, mut restarted) = (0usize, false);
    let (mut last_kill, mut last_turns) = (Instant::now(), 0usize);
    let mut last_report = Instant::now();
    while !tasks.iter().all(|t| t.is_finished()) {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let done = answered.load(Ordering::Relaxed);
        if last_report.elapsed() > Duration::from_secs(30) {
            eprintln!(
                "fault drill: {:.0} s, {done} of {} turns answered, {kills} kills",
                started.elapsed().as_secs_f64(),
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
        if !restarted && kills == 2 {
            tokio::task::block_in_place(|| pg.restart());
            restarted = true;
        }
        replicas[i] = serve(i).start(&client).await;
        bases.write().await[i] = replicas[i].base.clone();
        (last_kill, last_turns) = (Instant::now(), answered.load(Ordering::Relaxed));
    }
    let wall = started.elapsed();

    let mut latencies = Vec::new();
    let mut finals = Vec::new();
    for (n, task) in tasks.into_iter().enumerate() {
        let (lat, versions) = match task.await.expect("session task") {
            Ok(done) => done,
            Err(e) => {
                // What the database was doing: a lock left behind shows here.
                let activity = Command::new("psql")
                    .arg(&pg.url)
                    .args([
                        "-Atc",
                        "SELECT pid, state, wait_event_type, wait_event, now() - xact_start, \
                         left(query, 80) FROM pg_stat_activity WHERE datname IS NOT NULL \
                         AND pid <> pg_backend_pid() ORDER BY xact_start",
                    ])
                    .output()
                    .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                    .unwrap_or_default();
                panic!("{e}\npg_stat_activity:\n{activity}");
            }
        };
        assert_eq!(lat.len(), drill.turns, "drill-{n}: every turn answered");
        latencies.extend(lat);
        finals.push(versions.last().copied().unwrap_or(0));
    }
    assert!(
        kills >= 2 && restarted,
        "the faults happened: {kills} kills"
    );

    // What the store holds is what was answered last, and every archive
    // verifies.
    let base = bases.read().await[0].clone();
    for (n, last) in finals.iter().enumerate() {
        let status = support::status(&client, &base, &format!("drill-{n}")).await;
        assert_eq!(
            support::version(&status),
            *last,
            "drill-{n}: the stored summary is the last one answered: {status}"
        );
        assert!(*last >= 1, "drill-{n} was compacted");
        let out = Command::new(support::compact_bin())
            .args(["archive", "verify", &format!("drill-{n}"), "--archive"])
            .arg(&archive)
            .env("HOME", dir.path())
            .output()
            .expect("compact archive verify runs");
        assert!(
            out.status.success(),
            "drill-{n}: the archive does not verify: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    latencies.sort();
    println!(
        "fault drill: {} sessions x {} turns on 3 replicas, {kills} SIGKILLs, 1 PostgreSQL restart, {:.1} s: \
         every turn answered; per turn (retries included) p50 {:?}, p99 {:?}, max {:?}",
        drill.sessions,
        drill.turns,
        wall.as_secs_f64(),
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        latencies.last().copied().unwrap_or_default(),
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
#[ignore = "the full drill (200 sessions x 50 turns) takes many minutes: run it with --ignored"]
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
