//! The benchmarks behind `compact bench`, kept out of the production crates:
//! synthetic workloads, a small timing harness (medians and tails), the
//! token-counting, preflight, server, sidecar, proxy, retention and recall suites, and [`run`], which
//! assembles the one JSON document the CLI prints (its shape is a public
//! contract; see `docs/performance.md`).
//!
//! [`Rng`] is the seeded generator every synthetic session uses: the
//! benchmarks, `compact demo` and the soak harness.
//!
//! Private modules: `harness` (`measure`, `Stats`), `workload` (mixed text
//! and tool-heavy chat histories), `tokens`, `preflight`, `server`, `sidecar` and `proxy` (the
//! suites), `rng` ([`Rng`], seeded and reproducible), `visibility` (preflight end to
//! a live viewer, for the server suite). Public: [`corpus`] (long agent
//! sessions with planted facts, and the hand-written fixtures), [`probe`]
//! (whether a fact is in a context), [`retention`] (the suite the soak
//! harness and `compact replay` reuse), [`injection`] (prompt injections
//! planted in tool outputs, replayed and checked for leaks and reports) and
//! [`cost`] (what sessions cost with a provider's prompt cache, compact
//! beside peer policies simulated on the same sessions), [`recall`] (recall's
//! latency and indexing overhead, which the `recall` example reuses), [`args`] (the
//! examples' comma-separated flag values).

pub mod args;
pub mod corpus;
pub mod cost;
mod demo_visibility;
mod harness;
pub mod injection;
mod preflight;
pub mod probe;
mod proxy;
pub mod recall;
mod reference;
mod replicas;
pub mod retention;
mod rng;
mod server;
mod sidecar;
mod soak;
mod tokens;
mod visibility;
mod workload;

pub use harness::Stats;
pub use rng::Rng;

use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value, json};

/// Which benchmarks `compact bench` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suite {
    /// Token counting and whole-history estimates.
    Tokens,
    /// The preflight path.
    Preflight,
    /// The trace server over loopback HTTP.
    Server,
    /// Facts retained through compaction, per window and calling mode.
    Retention,
    /// `POST /v1/preflight` of a spawned `compact serve`, per session store.
    Sidecar,
    /// What a spawned `compact proxy` adds to a call nothing triggers, and
    /// to a stream's first byte.
    Proxy,
    /// The soak harness (`compact-soak`) at `--runs N`: not part of `all`
    /// (10,000 runs take most of an hour).
    Soak,
    /// Prompt-cache cost per session and call, compact beside peer
    /// policies: not part of `all` (it replays the retention corpus five
    /// times per window).
    Cost,
    /// Recall (issue 25): latency over a 10,000-entry session index
    /// (SQLite, and PostgreSQL with `COMPACT_BENCH_POSTGRES_URL`) and what
    /// indexing adds to a triggered preflight.
    Recall,
    /// All of the above but `soak` and `cost`.
    All,
}

impl Suite {
    /// Every name [`Suite::from_str`] accepts.
    pub const NAMES: [&'static str; 10] = [
        "tokens",
        "preflight",
        "server",
        "retention",
        "sidecar",
        "proxy",
        "soak",
        "cost",
        "recall",
        "all",
    ];

    fn includes(self, other: Suite) -> bool {
        (self == Suite::All && !matches!(other, Suite::Soak | Suite::Cost)) || self == other
    }
}

/// A suite name that is none of [`Suite::NAMES`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownSuite(pub String);

impl fmt::Display for UnknownSuite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown suite {:?}", self.0)
    }
}

impl std::error::Error for UnknownSuite {}

impl FromStr for Suite {
    type Err = UnknownSuite;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "tokens" => Ok(Suite::Tokens),
            "preflight" => Ok(Suite::Preflight),
            "server" => Ok(Suite::Server),
            "retention" => Ok(Suite::Retention),
            "sidecar" => Ok(Suite::Sidecar),
            "proxy" => Ok(Suite::Proxy),
            "soak" => Ok(Suite::Soak),
            "cost" => Ok(Suite::Cost),
            "recall" => Ok(Suite::Recall),
            "all" => Ok(Suite::All),
            other => Err(UnknownSuite(other.to_owned())),
        }
    }
}

/// The machine the figures come from.
pub fn machine() -> Value {
    json!({
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
    })
}

/// Runs `suite` and returns `{"machine", "tokens"?, "preflight"?, "server"?,
/// "retention"?, "sidecar"?, "proxy"?, "soak"?, "cost"?, "recall"?}`. `quick` means fewer runs (a smoke test, not a
/// measurement); the server suite has no quick form. A failing measurement is reported inside the
/// document; the only error is a tokio runtime that cannot start.
pub fn run(suite: Suite, quick: bool) -> std::io::Result<Value> {
    run_with(suite, quick, &SoakOptions::default())
}

/// What `soak` runs: `runs` (default 1,000, as CI) from `seed` (default 7).
#[derive(Debug, Clone, Default)]
pub struct SoakOptions {
    /// Runs; `None`: 1,000 (20 with `quick`).
    pub runs: Option<usize>,
    /// Seed of the first run; `None`: 7, CI's.
    pub seed: Option<u64>,
}

/// [`run`], with the soak's options.
pub fn run_with(suite: Suite, quick: bool, soak: &SoakOptions) -> std::io::Result<Value> {
    let cost = if quick {
        cost::Options::quick()
    } else {
        cost::Options::full()
    };
    run_all_with(suite, quick, soak, &cost)
}

/// [`run_with`], with the cost suite's options.
pub fn run_all_with(
    suite: Suite,
    quick: bool,
    soak: &SoakOptions,
    cost: &cost::Options,
) -> std::io::Result<Value> {
    let mut doc = Map::new();
    doc.insert("machine".into(), machine());
    if suite.includes(Suite::Tokens) {
        doc.insert("tokens".into(), tokens::run(quick));
    }
    if suite.includes(Suite::Preflight) {
        doc.insert("preflight".into(), preflight::run(quick));
    }
    if suite.includes(Suite::Server) {
        let rt = tokio::runtime::Runtime::new()?;
        let report = rt.block_on(server::run(server::BenchOptions::default()));
        doc.insert("server".into(), report);
    }
    if suite.includes(Suite::Retention) {
        doc.insert("retention".into(), retention::run(quick));
    }
    if suite.includes(Suite::Sidecar) {
        doc.insert("sidecar".into(), sidecar::run(quick));
    }
    if suite.includes(Suite::Proxy) {
        doc.insert("proxy".into(), proxy::run(quick));
    }
    if suite.includes(Suite::Soak) {
        doc.insert(
            "soak".into(),
            soak::run(soak.runs, soak.seed.unwrap_or(7), quick),
        );
    }
    if suite.includes(Suite::Cost) {
        doc.insert("cost".into(), cost::run_with(cost));
    }
    if suite.includes(Suite::Recall) {
        doc.insert("recall".into(), recall::run(quick));
    }
    Ok(Value::Object(doc))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suite_names_parse_and_nothing_else_does() {
        for name in Suite::NAMES {
            assert!(name.parse::<Suite>().is_ok(), "{name}");
        }
        assert_eq!(
            "bogus".parse::<Suite>(),
            Err(UnknownSuite("bogus".to_owned()))
        );
        assert!(Suite::All.includes(Suite::Server));
        assert!(!Suite::Tokens.includes(Suite::Preflight));
        assert!(!Suite::All.includes(Suite::Soak) && Suite::Soak.includes(Suite::Soak));
        assert!(!Suite::All.includes(Suite::Cost) && Suite::Cost.includes(Suite::Cost));
    }
}
