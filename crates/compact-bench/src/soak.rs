//! `compact bench soak --runs N [--seed S]`: the soak harness (`compact-soak`,
//! docs/performance.md) as a benchmark, at any number of runs: CI runs
//! 1,000 in `scripts/test.sh`; a release is checked at 10,000. It spawns the
//! `compact-soak` binary (next to this one, where cargo puts both; or
//! `COMPACT_SOAK_BIN`) with a report file, and returns what a release note
//! needs: invariant violations (with the seeds that replay them), fact
//! retention by window and by contract, the compaction overhead, events the
//! dispatcher dropped, preflight latency, and the whole report.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

/// Runs when `--runs` is not given: CI's.
pub(crate) const DEFAULT_RUNS: usize = 1000;

/// The `compact-soak` binary to spawn.
fn soak_binary() -> Result<PathBuf, String> {
    crate::sidecar::sibling_binary(
        "COMPACT_SOAK_BIN",
        "compact-soak",
        "the soak suite spawns the `compact-soak` binary: build it (`cargo build --release \
         -p compact-soak`) or set COMPACT_SOAK_BIN",
    )
}

/// `runs` runs from `seed`; `quick` is 20 runs.
pub(crate) fn run(runs: Option<usize>, seed: u64, quick: bool) -> Value {
    let runs = runs.unwrap_or(if quick { 20 } else { DEFAULT_RUNS });
    let bin = match soak_binary() {
        Ok(bin) => bin,
        Err(e) => return json!({ "error": e }),
    };
    let report_path = std::env::temp_dir().join(format!(
        "compact-bench-soak-{}-{}.json",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ));
    // Its table goes to our stderr: stdout is the JSON document.
    let status = Command::new(&bin)
        .args([
            "--runs",
            &runs.to_string(),
            "--seed",
            &seed.to_string(),
            "--quiet",
        ])
        .arg("--report")
        .arg(&report_path)
        .stdout(Stdio::from(std::io::stderr()))
        .stderr(Stdio::inherit())
        .status();
    let status = match status {
        Ok(status) => status,
        Err(e) => return json!({"error": format!("cannot run {}: {e}", bin.display())}),
    };
    let report: Value = match std::fs::read(&report_path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(report) => report,
        Err(e) => {
            return json!({
                "error": format!("no report from {} ({status}): {e}", bin.display()),
            });
        }
    };
    let _ = std::fs::remove_file(&report_path);
    summary(runs, seed, status.success(), report)
}

/// The figures a release note quotes, then the whole report.
fn summary(runs: usize, seed: u64, passed: bool, report: Value) -> Value {
    let violations = report["violations"].as_object().map_or(0, |v| {
        v.values()
            .map(|s| s["count"].as_u64().unwrap_or(1))
            .sum::<u64>()
    });
    json!({
        "runs": runs,
        "seed": seed,
        "passed": passed,
        "successful_runs": report["successful_runs"],
        "invariant_violations": violations,
        "violation_kinds": report["violations"],
        "fact_retention_by_window": report["fact_retention_by_window"],
        "fact_retention_retaining_by_window": report["fact_retention_retaining_by_window"],
        "fact_retention_by_contract": report["fact_retention_by_contract"],
        "overhead_share_pct": report["overhead_share_pct"],
        "events_dropped": report["events_dropped"],
        "preflights": report["preflights"],
        "compactions": report["compactions"],
        "preflight_p50_us": report["preflight_p50_us"],
        "preflight_p99_us": report["preflight_p99_us"],
        "wall_secs": report["wall_secs"],
        "report": report,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_counts_violations_and_keeps_the_report() {
        let report = json!({
            "successful_runs": 9,
            "violations": {"lost_result": {"count": 2, "seeds": [3]}, "orphan": {"count": 1}},
            "fact_retention_by_window": {"lt_8k": {"planted": 10, "kept": 5, "pct": 50.0}},
            "overhead_share_pct": 0.9,
            "events_dropped": 0,
        });
        let s = summary(10, 7, false, report.clone());
        assert_eq!(s["invariant_violations"], 3);
        assert_eq!(s["fact_retention_by_window"]["lt_8k"]["pct"], 50.0);
        assert_eq!(s["passed"], false);
        assert_eq!(s["report"], report);
        assert_eq!(
            summary(1, 7, true, json!({"violations": {}}))["invariant_violations"],
            0
        );
    }
}
