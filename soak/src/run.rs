//! One soak run: a long randomized session fed back through the manager,
//! every invariant checked after every preflight.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::collections::HashSet;

use ariadne_exporter::{AriadneExporter, HttpOptions};
use compact_middleware::archive::{Archive, FsAdapter, SessionId, StorageAdapter};
use compact_middleware::events::{CollectingExporter, names};
use compact_middleware::invariants::{self, Violation};
use compact_middleware::model::Message;
use compact_middleware::{CompactError, CompactManager, PreflightOutcome, PreflightRequest};
use serde::Serialize;

use crate::faults::{FaultServer, FlakyStorage, FlakySummarizer, SLOW_EXPORTER};
use crate::workload::{self, RunPlan};
use compact_fixtures::Rng;

/// Simulated model time for one call: a fixed round trip plus prefill.
fn model_time(tokens: usize) -> Duration {
    Duration::from_micros(400_000 + tokens as u64 * 20)
}

/// What one run did.
#[derive(Debug, Default, Clone, Serialize)]
pub(crate) struct RunResult {
    pub seed: u64,
    pub mode: String,
    /// The context window, in tokens.
    pub window: usize,
    pub preflights: usize,
    pub compactions: usize,
    pub tiers: BTreeMap<String, usize>,
    pub tokens_saved: u64,
    pub insufficient: usize,
    pub fallbacks: usize,
    pub latencies_us: Vec<u64>,
    pub overhead: Duration,
    pub model_time: Duration,
    pub events_dropped: u64,
    pub violations: Vec<Violation>,
    /// The drawn policy and session shape, to read next to a violation.
    pub plan: String,
    pub facts_planted: usize,
    pub facts_kept: usize,
}

/// What one session sent and ended with, for the run-level checks.
struct Trace {
    id: String,
    sent: Vec<Message>,
    context: Vec<Message>,
    secrets: Vec<String>,
}

pub(crate) async fn run(seed: u64, turns: (usize, usize), server: Arc<FaultServer>) -> RunResult {
    let mut rng = Rng::new(seed);
    let plan = workload::plan(&mut rng, turns);
    let collector = Arc::new(CollectingExporter::new());
    let work = std::env::temp_dir().join(format!("compact-soak-{}-{seed}", std::process::id()));
    let mut config = plan.config.clone();
    config.storage.spool_path = work.join("spool").display().to_string();
    let mut builder = CompactManager::builder(config)
        .without_config_exporters()
        .exporter(collector.clone());
    if plan.faulty_summarizer {
        builder = builder.summarizer(Arc::new(FlakySummarizer::new(seed ^ 0xFA17, 0.4)));
    }
    let fs: Option<Arc<dyn StorageAdapter>> = plan
        .flaky_storage
        .then(|| Arc::new(FsAdapter::new(work.join("archive"))) as Arc<dyn StorageAdapter>);
    builder = match &fs {
        Some(fs) => builder.storage(Arc::new(FlakyStorage::new(fs.clone(), seed ^ 0x5707, 0.3))),
        None => builder.without_storage(),
    };
    if let Some(fault) = plan.exporter {
        match AriadneExporter::new(&server.url(fault), HttpOptions::default()) {
            Ok(e) => builder = builder.exporter(Arc::new(e)),
            Err(e) => return build_failure(seed, e.to_string()),
        }
    }
    let mut result = RunResult {
        seed,
        mode: mode_name(plan.config.policy.mode),
        window: plan.config.max_context_tokens.unwrap_or(0),
        plan: format!(
            "model={} window={:?} wire={:?} raw_history={} faulty_summarizer={} sessions={} turns={} policy={}",
            plan.config.model,
            plan.config.max_context_tokens,
            plan.wire,
            plan.raw_history,
            plan.faulty_summarizer,
            plan.concurrent_sessions,
            plan.turns,
            serde_json::to_string(&plan.config.policy).unwrap_or_default()
        ),
        ..RunResult::default()
    };
    let manager = match builder.build() {
        Ok(m) => m,
        Err(e) => {
            return build_failure(seed, e.to_string());
        }
    };
    let sessions = plan.concurrent_sessions;
    let mut tasks = Vec::new();
    for s in 0..sessions {
        let manager = manager.clone();
        let plan = plan.clone();
        let session_seed = seed.wrapping_mul(31).wrapping_add(s as u64);
        tasks.push(tokio::spawn(async move {
            session(&manager, &plan, session_seed, &format!("soak-{seed}-{s}")).await
        }));
    }
    let mut traces = Vec::new();
    for t in tasks {
        match t.await {
            Ok((r, trace)) => {
                merge(&mut result, r);
                traces.push(trace);
            }
            Err(e) => result.violations.push(Violation {
                invariant: 0,
                kind: "panic",
                detail: e.to_string(),
            }),
        }
    }

    // 8. No preflight waited on an exporter (the slow server takes longer than this).
    if let Some(&max) = result.latencies_us.iter().max()
        && Duration::from_micros(max) >= SLOW_EXPORTER
    {
        result.violations.push(Violation {
            invariant: 8,
            kind: "blocked_on_exporter",
            detail: format!(
                "a preflight took {max} µs with exporter {:?}",
                plan.exporter
            ),
        });
    }
    if let Some(fs) = &fs {
        check_archive(&manager, fs.as_ref(), &traces, plan.secrets, &mut result).await;
    }

    // Events consistent with what happened. Wait for the in-memory collector
    // only: a run's HTTP exporter may be slow or failing on purpose.
    let emitted = manager.dispatcher().stats().emitted;
    for _ in 0..1000 {
        if collector.len() as u64 >= emitted {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let stats = manager.dispatcher().stats();
    result.events_dropped = stats.dropped + stats.lagged;
    if result.events_dropped == 0 {
        check_events(&mut result, &collector, plan.flaky_storage);
    }
    // 7. No planted secret reached an exporter.
    check_secrets_not_exported(&mut result, &collector, &traces);
    // Do not wait for a slow or failing exporter to drain.
    manager.dispatcher().shutdown(Duration::from_millis(200));
    let _ = std::fs::remove_dir_all(&work);
    result
}

/// Invariant: the events say what happened (a preflight event per
/// preflight, a summary event per summary, an error event per fallback or
/// failure, archive failures only with storage faults).
fn check_events(result: &mut RunResult, collector: &CollectingExporter, flaky_storage: bool) {
    let names = collector.names();
    let count = |n: &str| names.iter().filter(|x| x.as_deref() == Some(n)).count();
    let preflights = count(names::PREFLIGHT);
    if preflights != result.preflights {
        result.violations.push(Violation {
            invariant: 0,
            kind: "events",
            detail: format!(
                "{preflights} compact.preflight events for {} preflights",
                result.preflights
            ),
        });
    }
    let summaries = result.tiers.get("summarize").copied().unwrap_or(0);
    if count(names::SUMMARY_CREATED) != summaries {
        result.violations.push(Violation {
            invariant: 0,
            kind: "events",
            detail: format!(
                "{} summary_created events for {summaries} summaries",
                count(names::SUMMARY_CREATED)
            ),
        });
    }
    // Archive failures are errors too (the write went to the spool);
    // the report counts summarizer fallbacks and budget failures.
    let archive_errors = collector
        .events()
        .iter()
        .filter_map(|e| e.as_span())
        .filter(|s| {
            s.name.as_deref() == Some(names::ERROR)
                && s.data.get("error_type").and_then(|v| v.as_str()) == Some("ArchiveFailed")
        })
        .count();
    if archive_errors > 0 && !flaky_storage {
        result.violations.push(Violation {
            invariant: 0,
            kind: "events",
            detail: format!("{archive_errors} archive failures without storage faults"),
        });
    }
    let errors = result.fallbacks + result.insufficient;
    if count(names::ERROR) - archive_errors != errors {
        result.violations.push(Violation {
            invariant: 0,
            kind: "events",
            detail: format!(
                "{} compact.error events for {errors} fallbacks/failures",
                count(names::ERROR) - archive_errors
            ),
        });
    }
}

/// Invariant 7: no planted secret reached an exporter.
fn check_secrets_not_exported(
    result: &mut RunResult,
    collector: &CollectingExporter,
    traces: &[Trace],
) {
    let secrets: Vec<&String> = traces.iter().flat_map(|t| t.secrets.iter()).collect();
    if !secrets.is_empty() {
        for e in collector.events() {
            let text = serde_json::to_string(&e).unwrap_or_default();
            if let Some(s) = secrets.iter().find(|s| text.contains(s.as_str())) {
                result.violations.push(Violation {
                    invariant: 7,
                    kind: "secret_exported",
                    detail: format!("{} in event {:?}", preview(s), e.name()),
                });
                break;
            }
        }
    }
}

/// The mode's name as the configuration spells it (`sliding_window`).
fn mode_name(mode: compact_middleware::config::Mode) -> String {
    serde_json::to_value(mode)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{mode:?}").to_lowercase())
}

fn build_failure(seed: u64, detail: String) -> RunResult {
    RunResult {
        seed,
        violations: vec![Violation {
            invariant: 0,
            kind: "build",
            detail,
        }],
        ..RunResult::default()
    }
}

fn preview(s: &str) -> String {
    s.chars().take(6).collect::<String>() + "…"
}

/// Invariants 6 and 7 on the archive: once the spool is delivered, the
/// archived transcripts plus the final context hold every message each
/// session sent, and no planted secret is in any archived file.
async fn check_archive(
    manager: &CompactManager,
    fs: &dyn StorageAdapter,
    traces: &[Trace],
    secrets_planted: bool,
    result: &mut RunResult,
) {
    // The flaky adapter refuses ~30% of writes: a few rounds deliver the spool.
    let mut remaining = usize::MAX;
    for _ in 0..50 {
        match manager.deliver_spool().await {
            Ok(d) if d.remaining == 0 => {
                remaining = 0;
                break;
            }
            Ok(d) => remaining = d.remaining,
            Err(_) => {}
        }
    }
    if remaining != 0 {
        result.violations.push(Violation {
            invariant: 6,
            kind: "spool_stuck",
            detail: format!("{remaining} spooled writes never delivered"),
        });
        return;
    }
    let redactor = manager.redactor();
    for t in traces {
        let Ok(id) = SessionId::parse(&t.id) else {
            continue;
        };
        let archive = Archive::new(fs);
        let files = archive.files(&id).await.unwrap_or_default();
        let mut archived: HashSet<String> = HashSet::new();
        let mut all_text = String::new();
        for f in &files {
            let Ok(bytes) = archive.read(&id, f).await else {
                continue;
            };
            let text = String::from_utf8_lossy(&bytes).into_owned();
            if f.starts_with("transcript-") {
                archived.extend(
                    text.lines()
                        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                        .map(|v| v.to_string()),
                );
            }
            all_text.push_str(&text);
        }
        if let Some(s) = t.secrets.iter().find(|s| all_text.contains(s.as_str())) {
            result.violations.push(Violation {
                invariant: 7,
                kind: "secret_archived",
                detail: format!("{} in the archive of {}", preview(s), t.id),
            });
        }
        // Messages carrying a planted secret are archived redacted (and
        // scrubbed); compare the others exactly.
        if secrets_planted {
            continue;
        }
        let kept: HashSet<String> = t
            .context
            .iter()
            .map(|m| redactor.redact_value(&m.to_value()).to_string())
            .collect();
        let lost = t
            .sent
            .iter()
            .map(|m| redactor.redact_value(&m.to_value()).to_string())
            .filter(|v| !archived.contains(v) && !kept.contains(v))
            .count();
        if lost > 0 {
            result.violations.push(Violation {
                invariant: 6,
                kind: "message_lost",
                detail: format!(
                    "{lost} of {} messages of {} neither archived nor in context",
                    t.sent.len(),
                    t.id
                ),
            });
        }
    }
}

fn merge(into: &mut RunResult, r: RunResult) {
    into.preflights += r.preflights;
    into.compactions += r.compactions;
    for (k, v) in r.tiers {
        *into.tiers.entry(k).or_default() += v;
    }
    into.tokens_saved += r.tokens_saved;
    into.insufficient += r.insufficient;
    into.fallbacks += r.fallbacks;
    into.latencies_us.extend(r.latencies_us);
    into.overhead += r.overhead;
    into.model_time += r.model_time;
    into.violations.extend(r.violations);
    into.facts_planted += r.facts_planted;
    into.facts_kept += r.facts_kept;
}

/// Checks one answered turn `t`: every invariant on the output (against
/// what the pipeline saw), the summary's cap and nesting, and the report;
/// adds its figures to `r`.
#[allow(clippy::too_many_arguments)]
fn check_answer(
    r: &mut RunResult,
    manager: &CompactManager,
    plan: &RunPlan,
    t: usize,
    sent: &[Message],
    previous: &[Message],
    tools: &[serde_json::Value],
    out: &PreflightOutcome,
) {
    let policy = &manager.config().policy;
    // What the pipeline saw: in raw mode, our previous output in
    // place of the raw prefix it already compacted.
    let effective: Vec<Message>;
    let input: &[Message] = if plan.raw_history
        && out.report.continuation == compact_middleware::manager::ContinuationKind::RawPrefix
    {
        effective = previous
            .iter()
            .cloned()
            .chain(sent[out.report.reused_messages..].iter().cloned())
            .collect();
        &effective
    } else {
        sent
    };
    let v = invariants::check_output(
        policy,
        manager.estimator(),
        input,
        tools,
        &out.messages,
        &out.report,
    );
    r.violations.extend(v.into_iter().map(|mut x| {
        x.detail = format!("turn {t}: {}", x.detail);
        x
    }));
    // The summary stays within its cap and never quotes a
    // previous one (docs/summarizers.md).
    let cap = (policy.summary_max_pct * out.report.max_tokens as f64) as usize;
    if let Some(tokens) = out.report.summary_tokens
        && tokens > cap
    {
        r.violations.push(Violation {
            invariant: 5,
            kind: "summary_over_cap",
            detail: format!("turn {t}: summary of {tokens} tokens, cap {cap}"),
        });
    }
    if let Some(m) = out.messages.iter().find(|m| {
        m.plain_text()
            .matches(compact_middleware::pipeline::SUMMARY_HEADER)
            .count()
            > 1
    }) {
        r.violations.push(Violation {
            invariant: 5,
            kind: "nested_summary",
            detail: format!("turn {t}: {}", preview(&m.plain_text())),
        });
    }
    r.model_time += model_time(out.report.tokens_after);
    if out.report.triggered {
        r.compactions += 1;
        r.tokens_saved += out
            .report
            .tokens_before
            .saturating_sub(out.report.tokens_after) as u64;
        for tier in &out.report.tiers {
            let name = serde_json::to_value(tier)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            *r.tiers.entry(name).or_default() += 1;
        }
        if out.report.summary_version.is_some()
            && !out
                .report
                .tiers
                .iter()
                .any(|t| format!("{t:?}") == "Summarize")
        {
            r.violations.push(Violation {
                invariant: 0,
                kind: "report",
                detail: "summary without Summarize tier".into(),
            });
        }
    }
    r.fallbacks += out.report.fallbacks.len();
}

async fn session(
    manager: &CompactManager,
    plan: &RunPlan,
    seed: u64,
    id: &str,
) -> (RunResult, Trace) {
    let mut rng = Rng::new(seed);
    let mut r = RunResult::default();
    let policy = &manager.config().policy;
    let tools: Vec<serde_json::Value> = Vec::new();
    let mut call_seq = 0usize;
    let mut trace = Trace {
        id: id.to_string(),
        sent: Vec::new(),
        context: Vec::new(),
        secrets: Vec::new(),
    };
    let Ok(mut context) = workload::decode(workload::opening(&mut rng), plan.wire) else {
        return (r, trace);
    };
    let mut raw: Vec<Message> = context.clone();
    let mut previous: Vec<Message> = Vec::new();
    let mut facts = Vec::new();
    for t in 1..=plan.turns {
        let (items, planted) = workload::turn(
            &mut rng,
            plan.wire,
            t,
            &mut call_seq,
            &mut trace.secrets,
            plan.secrets,
        );
        facts.extend(planted);
        let new = match workload::decode(items, plan.wire) {
            Ok(n) => n,
            Err(e) => {
                r.violations.push(Violation {
                    invariant: 0,
                    kind: "generator",
                    detail: e.to_string(),
                });
                return (r, trace);
            }
        };
        raw.extend(new.iter().cloned());
        context.extend(new);
        let sent = if plan.raw_history {
            raw.clone()
        } else {
            context.clone()
        };
        let overflow = rng.chance(0.01);
        let started = Instant::now();
        let res = if overflow {
            manager
                .on_context_overflow(id, sent.clone(), "context_length_exceeded")
                .await
        } else {
            manager
                .preflight_with(
                    id,
                    PreflightRequest {
                        messages: sent.clone(),
                        tools: tools.clone(),
                        ..Default::default()
                    },
                )
                .await
        };
        let took = started.elapsed();
        r.preflights += 1;
        r.latencies_us.push(took.as_micros() as u64);
        r.overhead += took;
        match res {
            Ok(out) => {
                check_answer(&mut r, manager, plan, t, &sent, &previous, &tools, &out);
                previous = out.messages.clone();
                context = out.messages;
            }
            Err(e) => {
                let v = invariants::check_error(policy, manager.estimator(), &sent, &e);
                r.violations.extend(v);
                if matches!(e, CompactError::InsufficientBudget { .. }) {
                    r.insufficient += 1;
                }
                // The agent cannot continue this session.
                break;
            }
        }
    }
    // Retention: planted facts still in the context (summary included).
    let text: String = context
        .iter()
        .map(|m| m.plain_text())
        .collect::<Vec<_>>()
        .join("\n");
    r.facts_planted = facts.len();
    r.facts_kept = facts.iter().filter(|f| text.contains(&f.0)).count();
    trace.sent = raw;
    trace.context = context;
    (r, trace)
}
