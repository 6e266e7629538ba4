//! One soak run: a long randomized session fed back through the manager,
//! every invariant checked after every preflight.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use compact_middleware::events::{CollectingExporter, names};
use compact_middleware::invariants::{self, Violation};
use compact_middleware::model::Message;
use compact_middleware::{CompactError, CompactManager, PreflightRequest};
use serde::Serialize;

use crate::faults::FlakySummarizer;
use crate::rng::Rng;
use crate::workload::{self, RunPlan};

/// Simulated model time for one call: a fixed round trip plus prefill.
fn model_time(tokens: usize) -> Duration {
    Duration::from_micros(400_000 + tokens as u64 * 20)
}

/// What one run did.
#[derive(Debug, Default, Clone, Serialize)]
pub struct RunResult {
    pub seed: u64,
    pub mode: String,
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

pub async fn run(seed: u64, turns: (usize, usize)) -> RunResult {
    let mut rng = Rng::new(seed);
    let plan = workload::plan(&mut rng, turns);
    let collector = Arc::new(CollectingExporter::new());
    let mut builder = CompactManager::builder(plan.config.clone())
        .without_config_exporters()
        .exporter(collector.clone());
    if plan.faulty_summarizer {
        builder = builder.summarizer(Arc::new(FlakySummarizer::new(seed ^ 0xFA17, 0.4)));
    }
    let mut result = RunResult {
        seed,
        mode: format!("{:?}", plan.config.policy.mode).to_lowercase(),
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
            result.violations.push(Violation {
                invariant: 0,
                kind: "build",
                detail: e.to_string(),
            });
            return result;
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
    for t in tasks {
        match t.await {
            Ok(r) => merge(&mut result, r),
            Err(e) => result.violations.push(Violation {
                invariant: 0,
                kind: "panic",
                detail: e.to_string(),
            }),
        }
    }

    // Events consistent with what happened.
    manager.dispatcher().flush(Duration::from_secs(10));
    let stats = manager.dispatcher().stats();
    result.events_dropped = stats.dropped + stats.lagged;
    if result.events_dropped == 0 {
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
        let errors = result.fallbacks + result.insufficient;
        if count(names::ERROR) != errors {
            result.violations.push(Violation {
                invariant: 0,
                kind: "events",
                detail: format!(
                    "{} compact.error events for {errors} fallbacks/failures",
                    count(names::ERROR)
                ),
            });
        }
    }
    manager.dispatcher().shutdown(Duration::from_secs(5));
    result
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

async fn session(manager: &CompactManager, plan: &RunPlan, seed: u64, id: &str) -> RunResult {
    let mut rng = Rng::new(seed);
    let mut r = RunResult::default();
    let policy = &manager.config().policy;
    let tools: Vec<serde_json::Value> = Vec::new();
    let mut call_seq = 0usize;
    let Ok(mut context) = workload::decode(workload::opening(&mut rng), plan.wire) else {
        return r;
    };
    let mut raw: Vec<Message> = context.clone();
    let mut previous: Vec<Message> = Vec::new();
    let mut facts = Vec::new();
    for t in 1..=plan.turns {
        let (items, planted) = workload::turn(&mut rng, plan.wire, t, &mut call_seq);
        facts.extend(planted);
        let new = match workload::decode(items, plan.wire) {
            Ok(n) => n,
            Err(e) => {
                r.violations.push(Violation {
                    invariant: 0,
                    kind: "generator",
                    detail: e.to_string(),
                });
                return r;
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
                // What the pipeline saw: in raw mode, our previous output in
                // place of the raw prefix it already compacted.
                let effective: Vec<Message>;
                let input: &[Message] = if plan.raw_history
                    && out.report.continuation
                        == compact_middleware::manager::ContinuationKind::RawPrefix
                {
                    effective = previous
                        .iter()
                        .cloned()
                        .chain(sent[out.report.reused_messages..].iter().cloned())
                        .collect();
                    &effective
                } else {
                    &sent
                };
                let v = invariants::check_output(
                    policy,
                    manager.estimator(),
                    input,
                    &tools,
                    &out.messages,
                    &out.report,
                );
                r.violations.extend(v.into_iter().map(|mut x| {
                    x.detail = format!("turn {t}: {}", x.detail);
                    x
                }));
                r.model_time += model_time(out.report.tokens_after);
                if out.report.triggered {
                    r.compactions += 1;
                    r.tokens_saved +=
                        out.report
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
    r
}
