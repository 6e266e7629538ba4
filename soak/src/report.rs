//! The soak report: a table for people, JSON for machines.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;
use serde_json::json;

use crate::run::RunResult;

/// Everything the runs did, aggregated.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Report {
    pub runs: usize,
    pub successful_runs: usize,
    pub success_rate: f64,
    pub preflights: usize,
    pub compactions: usize,
    pub tiers: BTreeMap<String, usize>,
    pub modes: BTreeMap<String, usize>,
    pub tokens_saved: u64,
    pub insufficient_budget: usize,
    pub summarizer_fallbacks: usize,
    pub preflight_p50_us: u64,
    pub preflight_p99_us: u64,
    pub preflight_max_us: u64,
    pub overhead_share_pct: f64,
    pub events_dropped: u64,
    /// Batches the soak's own telemetry server accepted (healthy and slow runs).
    pub telemetry_posts_received: u64,
    pub fact_retention_pct: f64,
    /// Violations by kind, each with the seeds that replay it.
    pub violations: BTreeMap<String, ViolationSummary>,
    pub wall_secs: f64,
}

#[derive(Debug, Default, Serialize)]
pub(crate) struct ViolationSummary {
    pub count: usize,
    pub invariant: u8,
    pub seeds: Vec<u64>,
    pub example: String,
}

impl Report {
    pub(crate) fn build(results: &[RunResult], wall: Duration) -> Self {
        let mut r = Report {
            runs: results.len(),
            wall_secs: (wall.as_secs_f64() * 10.0).round() / 10.0,
            ..Report::default()
        };
        let mut lat: Vec<u64> = Vec::new();
        let (mut overhead, mut model) = (Duration::ZERO, Duration::ZERO);
        let (mut planted, mut kept) = (0usize, 0usize);
        for x in results {
            if x.violations.is_empty() {
                r.successful_runs += 1;
            }
            r.preflights += x.preflights;
            r.compactions += x.compactions;
            for (k, v) in &x.tiers {
                *r.tiers.entry(k.clone()).or_default() += v;
            }
            *r.modes.entry(x.mode.clone()).or_default() += 1;
            r.tokens_saved += x.tokens_saved;
            r.insufficient_budget += x.insufficient;
            r.summarizer_fallbacks += x.fallbacks;
            r.events_dropped += x.events_dropped;
            lat.extend(&x.latencies_us);
            overhead += x.overhead;
            model += x.model_time;
            planted += x.facts_planted;
            kept += x.facts_kept;
            for v in &x.violations {
                let e = r.violations.entry(v.kind.to_string()).or_default();
                e.count += 1;
                e.invariant = v.invariant;
                if !e.seeds.contains(&x.seed) && e.seeds.len() < 20 {
                    e.seeds.push(x.seed);
                }
                if e.example.is_empty() {
                    e.example = v.detail.clone();
                }
            }
        }
        r.success_rate = if r.runs == 0 {
            1.0
        } else {
            r.successful_runs as f64 / r.runs as f64
        };
        lat.sort_unstable();
        let at = |q: f64| {
            lat.get(((lat.len().max(1) - 1) as f64 * q).round() as usize)
                .copied()
                .unwrap_or(0)
        };
        r.preflight_p50_us = at(0.5);
        r.preflight_p99_us = at(0.99);
        r.preflight_max_us = lat.last().copied().unwrap_or(0);
        let total = overhead + model;
        r.overhead_share_pct = if total.is_zero() {
            0.0
        } else {
            (overhead.as_secs_f64() / total.as_secs_f64() * 100_000.0).round() / 1000.0
        };
        r.fact_retention_pct = if planted == 0 {
            100.0
        } else {
            (kept as f64 / planted as f64 * 1000.0).round() / 10.0
        };
        r
    }

    /// The human table.
    pub(crate) fn table(&self) -> String {
        let mut rows: Vec<(String, String)> = vec![
            ("runs".into(), self.runs.to_string()),
            (
                "success rate".into(),
                format!(
                    "{:.2}% ({}/{})",
                    self.success_rate * 100.0,
                    self.successful_runs,
                    self.runs
                ),
            ),
            ("preflights".into(), self.preflights.to_string()),
            ("compactions".into(), self.compactions.to_string()),
        ];
        for (k, v) in &self.tiers {
            rows.push((format!("  tier {k}"), v.to_string()));
        }
        rows.extend([
            (
                "modes".into(),
                self.modes
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            ("tokens saved".into(), self.tokens_saved.to_string()),
            (
                "insufficient budget (legitimate)".into(),
                self.insufficient_budget.to_string(),
            ),
            (
                "summarizer fallbacks".into(),
                self.summarizer_fallbacks.to_string(),
            ),
            (
                "preflight latency p50 / p99 / max".into(),
                format!(
                    "{} / {} / {} µs",
                    self.preflight_p50_us, self.preflight_p99_us, self.preflight_max_us
                ),
            ),
            (
                "compaction overhead share".into(),
                format!(
                    "{:.3}% of (simulated model time + overhead)",
                    self.overhead_share_pct
                ),
            ),
            ("events dropped".into(), self.events_dropped.to_string()),
            (
                "telemetry batches received (HTTP)".into(),
                self.telemetry_posts_received.to_string(),
            ),
            (
                "planted facts retained".into(),
                format!("{:.1}%", self.fact_retention_pct),
            ),
            (
                "invariant violations".into(),
                self.violations
                    .values()
                    .map(|v| v.count)
                    .sum::<usize>()
                    .to_string(),
            ),
            ("wall time".into(), format!("{:.1} s", self.wall_secs)),
        ]);
        let w = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        let mut s = String::new();
        for (k, v) in rows {
            s.push_str(&format!("{k:<w$}  {v}\n"));
        }
        for (kind, v) in &self.violations {
            s.push_str(&format!(
                "VIOLATION {kind} (invariant {}): {} times; replay: {}; e.g. {}\n",
                v.invariant,
                v.count,
                v.seeds
                    .iter()
                    .map(|s| format!("--seed {s} --runs 1"))
                    .collect::<Vec<_>>()
                    .join(" | "),
                v.example
            ));
        }
        s
    }

    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_else(|e| json!({"error": e.to_string()}))
    }
}
