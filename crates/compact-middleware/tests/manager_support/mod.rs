//! Configurations and managers the integration tests share: a small window
//! with its archive and spool in a test's directory, a manager on an
//! optional session store, one that collects its events, and a session
//! driven turn by turn across managers (replicas, restarts).
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use compact_middleware::config::{Config, ExporterKind, Policy};
use compact_middleware::events::CollectingExporter;
use compact_middleware::state::SessionStore;
use compact_middleware::{CompactManager, Message};

/// A `window`-token configuration whose archive and spool live under `dir`,
/// exporting nothing.
pub(crate) fn config_in(dir: &Path, window: usize) -> Config {
    let mut config = Config {
        max_context_tokens: Some(window),
        ..Config::default()
    };
    config.storage.path = dir.join("archive").display().to_string();
    config.storage.spool_path = dir.join("spool").display().to_string();
    config.telemetry.exporter = ExporterKind::None;
    config
}

/// A manager on `store` (the in-process default when `None`).
pub(crate) fn manager(config: &Config, store: Option<Arc<dyn SessionStore>>) -> CompactManager {
    let mut b = CompactManager::builder(config.clone());
    if let Some(store) = store {
        b = b.session_store(store);
    }
    b.build().unwrap_or_else(|e| panic!("{e}"))
}

/// A manager whose only exporter collects its events, and the collector.
pub(crate) fn collecting(config: Config) -> (CompactManager, Arc<CollectingExporter>) {
    let collect = Arc::new(CollectingExporter::new());
    let manager = CompactManager::builder(config)
        .without_config_exporters()
        .exporter(collect.clone())
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    (manager, collect)
}

/// A manager without storage: `policy` over a `window`-token context.
pub(crate) fn policy_manager(policy: Policy, window: usize) -> CompactManager {
    CompactManager::builder(Config {
        max_context_tokens: Some(window),
        policy,
        ..Config::default()
    })
    .without_storage()
    .build()
    .expect("manager")
}

/// Runs `turns` turns (`turn(i)` adds turn `i`) of session `s1`, the agent
/// feeding our output back (`feed_back`) or resending its raw history;
/// `pick(i)` chooses the manager of turn `i`. Returns every output.
pub(crate) async fn drive(
    managers: &[CompactManager],
    pick: impl Fn(usize) -> usize,
    turns: usize,
    feed_back: bool,
    turn: impl Fn(usize) -> Vec<Message>,
) -> Vec<Vec<Message>> {
    let mut raw = vec![Message::system("You are an agent.")];
    let mut fed = raw.clone();
    let mut outputs = Vec::new();
    for i in 0..turns {
        raw.extend(turn(i));
        fed.extend(turn(i));
        let input = if feed_back { fed.clone() } else { raw.clone() };
        let out = managers[pick(i)]
            .preflight("s1", input)
            .await
            .unwrap_or_else(|e| panic!("turn {i}: {e}"));
        fed = out.messages.clone();
        outputs.push(out.messages);
    }
    outputs
}

/// The session-store tests' configuration: 2,000 tokens, under `dir`.
pub(crate) fn store_config(dir: &Path) -> Config {
    config_in(dir, 2_000)
}

/// Turn `i` of the session-store tests: a user message naming ticket
/// OPS-`i` and its team (with `port`, also a decision to keep service-`i`
/// on port 8000 + `i`), padded, and the reply.
pub(crate) fn ticket_turn(i: usize, port: bool) -> Vec<Message> {
    let decided = if port {
        format!("We decided to keep service-{i} on port {}. ", 8000 + i)
    } else {
        String::new()
    };
    vec![
        Message::user(format!(
            "turn {i}: ticket OPS-{i} belongs to team-{i}. {decided}{}",
            "lorem ipsum ".repeat(40)
        )),
        Message::assistant(format!("Done with OPS-{i}. {}", "dolor sit ".repeat(40))),
    ]
}

/// A multi-thread runtime of two workers, for tests that drive a manager
/// from synchronous code.
pub(crate) fn two_worker_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"))
}
