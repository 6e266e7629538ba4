//! The timing harness: untimed warm-up and setup, timed runs, and the
//! distribution of the samples. Timings are wall clock on a shared machine:
//! compare medians and ratios.

use std::time::{Duration, Instant};

use serde::Serialize;

/// Distribution of one measurement, in microseconds.
#[derive(Debug, Clone, Serialize)]
pub struct Stats {
    /// Timed runs (warm-up excluded).
    pub runs: usize,
    /// Median, in microseconds (0.1 µs resolution).
    pub p50_us: f64,
    /// 90th percentile (nearest rank), in microseconds.
    pub p90_us: f64,
    /// 99th percentile (nearest rank), in microseconds.
    pub p99_us: f64,
    /// Fastest run, in microseconds.
    pub min_us: f64,
    /// Slowest run, in microseconds.
    pub max_us: f64,
}

impl Stats {
    pub(crate) fn from(mut samples: Vec<Duration>) -> Self {
        samples.sort();
        let us = |d: Duration| (d.as_nanos() as f64 / 1_000.0 * 10.0).round() / 10.0;
        let at = |q: f64| us(samples[((samples.len() - 1) as f64 * q).round() as usize]);
        Stats {
            runs: samples.len(),
            p50_us: at(0.5),
            p90_us: at(0.9),
            p99_us: at(0.99),
            min_us: us(samples[0]),
            max_us: us(samples[samples.len() - 1]),
        }
    }
}

/// Runs `f` `runs` times after `warmup` untimed runs.
pub(crate) fn measure(warmup: usize, runs: usize, mut f: impl FnMut()) -> Stats {
    measure_with(warmup, runs, || (), |()| f())
}

/// Like [`measure`], with an untimed `setup` producing each run's input
/// (so building the request is not charged to the code under test).
pub(crate) fn measure_with<T>(
    warmup: usize,
    runs: usize,
    mut setup: impl FnMut() -> T,
    mut f: impl FnMut(T),
) -> Stats {
    for _ in 0..warmup {
        f(setup());
    }
    let samples = (0..runs.max(1))
        .map(|_| {
            let input = setup();
            let t = Instant::now();
            f(input);
            t.elapsed()
        })
        .collect();
    Stats::from(samples)
}

/// A current-thread runtime for a suite, or the suite's JSON error: the
/// paths measured are CPU-bound and run without scheduler noise.
pub(crate) fn current_thread() -> Result<tokio::runtime::Runtime, serde_json::Value> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| serde_json::json!({"error": format!("cannot build a tokio runtime: {e}")}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_are_order_statistics_of_the_samples() {
        let samples = (1..=100).rev().map(Duration::from_micros).collect();
        let s = Stats::from(samples);
        assert_eq!(s.runs, 100);
        assert_eq!((s.min_us, s.max_us), (1.0, 100.0));
        assert_eq!((s.p50_us, s.p90_us, s.p99_us), (51.0, 90.0, 99.0));
    }

    #[test]
    fn measure_runs_setup_and_body_warmup_plus_runs_times() {
        let (mut setups, mut bodies) = (0, 0);
        let s = measure_with(2, 5, || setups += 1, |()| bodies += 1);
        assert_eq!((setups, bodies, s.runs), (7, 7, 5));
    }
}
