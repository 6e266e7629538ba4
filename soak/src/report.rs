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
    /// Planted facts retained per policy mode.
    pub fact_retention_by_mode: BTreeMap<String, Retention>,
    /// Per window class (`lt_8k`, `8k_16k`, `16k_plus`), all modes.
    pub fact_retention_by_window: BTreeMap<String, Retention>,
    /// `retaining` (auto, summarize, compact, sliding_window: the modes whose
    /// contract is to keep facts), `trim` (drops turns by design) and `none`
    /// (never compacts).
    pub fact_retention_by_contract: BTreeMap<String, Retention>,
    /// The retaining modes only, per window class.
    pub fact_retention_retaining_by_window: BTreeMap<String, Retention>,
    /// Violations by kind, each with the seeds that replay it.
    pub violations: BTreeMap<String, ViolationSummary>,
    pub wall_secs: f64,
}

/// Planted facts and how many were still in the final context.
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub(crate) struct Retention {
    pub planted: usize,
    pub kept: usize,
    pub pct: f64,
}

impl Retention {
    fn add(&mut self, planted: usize, kept: usize) {
        self.planted += planted;
        self.kept += kept;
        self.pct = if self.planted == 0 {
            100.0
        } else {
            (self.kept as f64 / self.planted as f64 * 1000.0).round() / 10.0
        };
    }
}

/// `lt_8k`, `8k_16k` or `16k_plus`.
pub(crate) fn window_class(window: usize) -> &'static str {
    match window {
        0..8_000 => "lt_8k",
        8_000..16_000 => "8k_16k",
        _ => "16k_plus",
    }
}

/// `retaining`, `trim` or `none`: what a mode promises about facts.
pub(crate) fn contract(mode: &str) -> &'static str {
    match mode {
        "trim" => "trim",
        "none" => "none",
        _ => "retaining",
    }
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
            let (p, k) = (x.facts_planted, x.facts_kept);
            let class = window_class(x.window).to_string();
            r.fact_retention_by_mode
                .entry(x.mode.clone())
                .or_default()
                .add(p, k);
            r.fact_retention_by_window
                .entry(class.clone())
                .or_default()
                .add(p, k);
            r.fact_retention_by_contract
                .entry(contract(&x.mode).to_string())
                .or_default()
                .add(p, k);
            if contract(&x.mode) == "retaining" {
                r.fact_retention_retaining_by_window
                    .entry(class)
                    .or_default()
                    .add(p, k);
            }
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
                "  by contract".into(),
                retention_row(&self.fact_retention_by_contract),
            ),
            (
                "  retaining modes, by window".into(),
                retention_row(&self.fact_retention_retaining_by_window),
            ),
            (
                "  by mode".into(),
                retention_row(&self.fact_retention_by_mode),
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

/// `name=pct% (kept/planted)` for each entry.
fn retention_row(m: &BTreeMap<String, Retention>) -> String {
    m.iter()
        .map(|(k, r)| format!("{k}={:.1}% ({}/{})", r.pct, r.kept, r.planted))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(mode: &str, window: usize, planted: usize, kept: usize) -> RunResult {
        RunResult {
            mode: mode.into(),
            window,
            facts_planted: planted,
            facts_kept: kept,
            ..RunResult::default()
        }
    }

    #[test]
    fn retention_is_split_by_mode_window_class_and_contract() {
        let results = [
            result("auto", 4_000, 10, 5),
            result("auto", 16_000, 10, 9),
            result("summarize", 8_000, 10, 7),
            result("trim", 128_000, 10, 2),
            result("none", 32_000, 10, 10),
        ];
        let r = Report::build(&results, Duration::ZERO);
        assert_eq!(r.fact_retention_pct, 66.0);
        assert_eq!(r.fact_retention_by_mode["auto"].kept, 14);
        assert_eq!(r.fact_retention_by_window["lt_8k"].pct, 50.0);
        assert_eq!(r.fact_retention_by_window["8k_16k"].pct, 70.0);
        assert_eq!(r.fact_retention_by_window["16k_plus"].planted, 30);
        assert_eq!(r.fact_retention_by_contract["retaining"].pct, 70.0);
        assert_eq!(r.fact_retention_by_contract["trim"].pct, 20.0);
        assert_eq!(r.fact_retention_by_contract["none"].pct, 100.0);
        assert_eq!(r.fact_retention_retaining_by_window["16k_plus"].pct, 90.0);
        assert!(!r.fact_retention_retaining_by_window.contains_key("none"));
        let json = r.json();
        assert!(json["fact_retention_pct"].is_number(), "the old key stays");
        assert_eq!(json["fact_retention_by_contract"]["trim"]["planted"], 10);
        assert!(
            r.table().contains("retaining=70.0% (21/30)"),
            "{}",
            r.table()
        );
    }

    #[test]
    fn window_classes_and_contracts() {
        assert_eq!(window_class(4_000), "lt_8k");
        assert_eq!(window_class(8_000), "8k_16k");
        assert_eq!(window_class(12_000), "8k_16k");
        assert_eq!(window_class(16_000), "16k_plus");
        for m in ["auto", "summarize", "compact", "sliding_window"] {
            assert_eq!(contract(m), "retaining");
        }
        assert_eq!(contract("trim"), "trim");
        assert_eq!(contract("none"), "none");
    }
}
