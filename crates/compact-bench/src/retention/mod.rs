//! `compact bench retention`: how many planted facts survive compaction.
//!
//! Every session of the corpus (generated, the hand-written fixtures, and
//! the named corpora of [`corpus::corpora`]) is driven through a real `CompactManager` at each window, in both
//! calling modes, with the default configuration except the window. After
//! the last turn the final context is flattened (`Message::plain_text` of
//! every message, joined by newlines) and a fact counts as retained iff all
//! its probes are on one line. The report ([`report::build`]) gives
//! retention per window, mode, fact kind and location, the bars of
//! [`report::TARGETS`] with `meets_targets` per window class, and what each
//! run did (compactions, summary size against its cap, nested summary
//! headers, insufficient-budget errors). See `docs/performance.md`.

mod drive;
pub mod report;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use compact_middleware::CompactManager;
use compact_middleware::config::Config;
use compact_middleware::model::Format;
use compact_middleware::tokens::CountCache;
use serde_json::{Value, json};

pub use drive::{CallingMode, RunOutcome, SUMMARY_MARK, check, measure, replay};
pub use report::{Run, TARGETS, Target};

use crate::corpus::{self, Agent, Corpus, SEED_SPLIT, SessionShape, Split, Transcript};

/// The windows the suite measures, in tokens.
pub const WINDOWS: [usize; 5] = [8_000, 12_000, 16_000, 32_000, 128_000];

/// What the suite runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// One session per seed and per (agent, wire format) pair.
    pub seeds: Vec<u64>,
    /// The (agent, wire format) pairs.
    pub kinds: Vec<(Agent, Format)>,
    /// The named corpora ([`corpus::corpora`]): one session per (corpus,
    /// wire format) pair and per seed of `corpus_seeds`.
    pub corpora: Vec<(Corpus, Format)>,
    /// Seeds of the named corpora; a session's split follows from its seed
    /// ([`Split::of_seed`]).
    pub corpus_seeds: Vec<u64>,
    /// Session length and tool output sizes.
    pub shape: SessionShape,
    /// Also the hand-written fixtures.
    pub fixtures: bool,
    /// Also the real agent trajectories of `../shared/real-trajectories`
    /// ([`corpus::trajectories`]), when that directory is there.
    pub trajectories: bool,
    /// Context windows, in tokens.
    pub windows: Vec<usize>,
    /// Runs in parallel (each on its own thread).
    pub threads: usize,
}

impl Options {
    /// The measurement: 12 sessions (every agent in both formats, two
    /// seeds each), the fixtures, and every named corpus in each of its
    /// formats at the tuning and the held-out seeds of [`SEED_SPLIT`], at
    /// every window of [`WINDOWS`].
    pub fn full() -> Self {
        Self {
            seeds: vec![1, 2],
            kinds: Agent::ALL
                .iter()
                .flat_map(|&a| [(a, Format::Chat), (a, Format::Responses)])
                .collect(),
            corpora: corpus::corpora()
                .iter()
                .flat_map(|c| c.wires.iter().map(move |&w| (c.corpus, w)))
                .collect(),
            corpus_seeds: SEED_SPLIT
                .tune
                .iter()
                .chain(&SEED_SPLIT.held_out)
                .copied()
                .collect(),
            shape: SessionShape::FULL,
            fixtures: true,
            trajectories: true,
            windows: WINDOWS.to_vec(),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }

    /// A smoke run: three shorter sessions (both formats), the fixtures,
    /// and a held-out session of two named corpora (ci-logs, and a
    /// translation).
    pub fn quick() -> Self {
        Self {
            seeds: vec![1],
            kinds: vec![
                (Agent::Coding, Format::Chat),
                (Agent::Support, Format::Responses),
                (Agent::Research, Format::Responses),
            ],
            corpora: vec![
                (Corpus::CiLogs, Format::Chat),
                (Corpus::SupportProseZh, Format::Chat),
            ],
            corpus_seeds: vec![SEED_SPLIT.held_out[0]],
            shape: SessionShape {
                turns: (30, 40),
                ..SessionShape::FULL
            },
            ..Self::full()
        }
    }
}

/// The configuration of a run at `window`: the defaults, and the window.
pub fn config_for(window: usize) -> Config {
    Config {
        max_context_tokens: Some(window),
        ..Config::default()
    }
}

/// `compact bench retention` (`--quick`: [`Options::quick`]).
pub fn run(quick: bool) -> Value {
    run_with(&if quick {
        Options::quick()
    } else {
        Options::full()
    })
}

/// The sessions of a run: every transcript `opts` asks for, what could not
/// be used, and where the real trajectories came from.
#[derive(Debug, Clone, Default)]
pub struct Sessions {
    /// The transcripts, in a fixed order: generated, named corpora,
    /// fixtures, real trajectories.
    pub transcripts: Vec<Transcript>,
    /// Sessions or files that could not be used, and dropped facts.
    pub problems: Vec<String>,
    /// `N runs from DIR`, `skipped: …` or `not asked for`.
    pub trajectories: String,
}

/// The sessions `opts` names (the retention and cost suites share them).
pub fn sessions(opts: &Options) -> Sessions {
    let mut transcripts: Vec<Transcript> = Vec::new();
    let mut problems: Vec<String> = Vec::new();
    let mut keep = |s: corpus::Session| {
        if s.dropped > 0 {
            problems.push(format!(
                "{}: {} facts not unique, dropped",
                s.name, s.dropped
            ));
        }
        match s.transcript() {
            Ok(t) => transcripts.push(t),
            Err(e) => problems.push(format!("{}: {e}", s.name)),
        }
    };
    for &seed in &opts.seeds {
        for &(agent, wire) in &opts.kinds {
            keep(corpus::generate(seed, agent, wire, &opts.shape));
        }
    }
    for &(c, wire) in &opts.corpora {
        for &seed in &opts.corpus_seeds {
            keep(c.generate(seed, wire));
        }
    }
    if opts.fixtures {
        match corpus::fixtures::all() {
            Ok(f) => transcripts.extend(f),
            Err(e) => problems.push(e.to_string()),
        }
    }
    let mut trajectories = "not asked for".to_string();
    if opts.trajectories {
        match corpus::trajectories::dir() {
            None => trajectories = "skipped: ../shared/real-trajectories not found".into(),
            Some(dir) => match corpus::trajectories::load_dir(&dir) {
                Ok(t) => {
                    trajectories = format!("{} runs from {}", t.len(), dir.display());
                    transcripts.extend(t);
                }
                Err(e) => problems.push(e.to_string()),
            },
        }
    }
    Sessions {
        transcripts,
        problems,
        trajectories,
    }
}

/// The suite with `opts`: the report of [`report::build`] plus the corpus
/// and the wall time.
pub fn run_with(opts: &Options) -> Value {
    let started = Instant::now();
    let Sessions {
        transcripts,
        problems,
        trajectories,
    } = sessions(opts);
    let keep_recent_turns = Config::default().policy.keep_recent_turns;
    let runs = run_all(&transcripts, &opts.windows, opts.threads);
    let runs = match runs {
        Ok(r) => r,
        Err(e) => return json!({"error": e}),
    };
    let mut doc = report::build(&transcripts, &opts.windows, keep_recent_turns, &runs);
    // How big each session is without compaction.
    if let (Ok(m), Some(sessions)) = (
        CompactManager::builder(config_for(usize::MAX / 4))
            .without_config_exporters()
            .without_storage()
            .build(),
        doc["sessions"].as_array_mut(),
    ) {
        for (s, t) in sessions.iter_mut().zip(&transcripts) {
            s["tokens"] = json!(m.estimate(&t.messages(), &[]).t_est);
        }
    }
    doc["corpus"] = json!({
        "seeds": opts.seeds,
        "kinds": opts.kinds.iter().map(|(a, w)| json!({"agent": a, "wire": w})).collect::<Vec<_>>(),
        "turns": [opts.shape.turns.0, opts.shape.turns.1],
        "output_chars": [opts.shape.output_chars.0, opts.shape.output_chars.1],
        "fixtures": opts.fixtures,
        "trajectories": trajectories,
        "corpora": opts.corpora.iter().map(|(c, w)| json!({"corpus": c.name(), "wire": w})).collect::<Vec<_>>(),
        "corpus_seeds": opts.corpus_seeds.iter().map(|&s| json!({"seed": s, "split": Split::of_seed(s).name()})).collect::<Vec<_>>(),
        "problems": problems,
    });
    doc["wall_secs"] = json!((started.elapsed().as_secs_f64() * 10.0).round() / 10.0);
    doc
}

/// `work(rt, job)` for every job, on `threads` threads, each with its own
/// current-thread runtime, a thread taking the next job as one ends: the
/// results in the jobs' order (`None` where `work` gave none).
pub fn on_threads<J: Sync, R: Send>(
    jobs: &[J],
    threads: usize,
    work: impl Fn(&tokio::runtime::Runtime, &J) -> Option<R> + Sync,
) -> Vec<Option<R>> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                else {
                    return;
                };
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(i) else {
                        break;
                    };
                    if let Some(r) = work(&rt, job)
                        && let Ok(mut results) = results.lock()
                    {
                        results[i] = Some(r);
                    }
                }
            });
        }
    });
    results.into_inner().unwrap_or_default()
}

/// Every (transcript index, window, calling mode) of `transcripts`
/// transcripts in `windows`, transcript by transcript.
pub fn jobs(transcripts: usize, windows: &[usize]) -> Vec<(usize, usize, CallingMode)> {
    (0..transcripts)
        .flat_map(|t| {
            windows
                .iter()
                .flat_map(move |&w| CallingMode::ALL.map(|m| (t, w, m)))
        })
        .collect()
}

/// Every (transcript, window, mode) run, on `threads` threads, each with
/// its own current-thread runtime. Runs share one count cache.
fn run_all(
    transcripts: &[Transcript],
    windows: &[usize],
    threads: usize,
) -> Result<Vec<Run>, String> {
    let jobs = jobs(transcripts.len(), windows);
    // Build every manager once up front: a bad configuration is one error.
    for &w in windows {
        CompactManager::builder(config_for(w))
            .without_config_exporters()
            .without_storage()
            .build()
            .map_err(|e| format!("window {w}: {e}"))?;
    }
    let cache = Arc::new(CountCache::new(400_000));
    let threads = threads.clamp(1, jobs.len().max(1));
    let results = on_threads(&jobs, threads, |rt, &(t, window, mode)| {
        let manager = CompactManager::builder(config_for(window))
            .without_config_exporters()
            .without_storage()
            .count_cache(cache.clone())
            .build()
            .ok()?;
        let id = format!("{}-{window}-{}", transcripts[t].name, mode.name());
        let outcome = rt.block_on(measure(&manager, &id, &transcripts[t], mode));
        Some(Run {
            transcript: t,
            window,
            mode,
            outcome: RunOutcome {
                // The report does not need the contexts; free them.
                context: Vec::new(),
                ..outcome
            },
        })
    });
    let done = results.iter().filter(|r| r.is_some()).count();
    if done != jobs.len() {
        return Err(format!("only {done} of {} runs finished", jobs.len()));
    }
    Ok(results.into_iter().flatten().collect())
}
