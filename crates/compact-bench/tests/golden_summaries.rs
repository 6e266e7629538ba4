//! The summaries of three real-shaped sessions, read by eye and pinned: a
//! coding agent's shell loop (`ci-logs`), an analyst with a data agent
//! (`data-json`) and a support thread (`support-prose`), each driven turn by
//! turn at a 16k window with the agent feeding our output back. They are
//! shown in `docs/summarizers.md`; `UPDATE_GOLDEN=1` regenerates them after a
//! deliberate change (then read the diff).

use std::path::PathBuf;

use compact_bench::corpus::Corpus;
use compact_bench::retention::{CallingMode, SUMMARY_MARK, config_for, measure};
use compact_middleware::CompactManager;
use compact_middleware::model::Format;

fn final_summary(corpus: Corpus, seed: u64) -> String {
    let t = corpus
        .generate(seed, Format::Chat)
        .transcript()
        .expect("the corpus decodes");
    let manager = CompactManager::builder(config_for(16_000))
        .without_config_exporters()
        .without_storage()
        .build()
        .expect("manager");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let out = rt.block_on(measure(&manager, "golden", &t, CallingMode::FedBack));
    out.context
        .iter()
        .map(|m| m.plain_text())
        .find(|t| t.starts_with(SUMMARY_MARK))
        .expect("the session compacts")
}

fn check(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/golden/{name}.txt"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).expect("write golden");
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 creates it)", path.display()));
    assert_eq!(
        expected, actual,
        "golden {name} differs; UPDATE_GOLDEN=1 regenerates it"
    );
}

#[test]
fn a_coding_agents_shell_loop() {
    let s = final_summary(Corpus::CiLogs, 1);
    // What a colleague needs: the files, the commands with their outcome.
    assert!(s.contains("Files worked on:"), "{s}");
    assert!(s.contains("Commands run:"), "{s}");
    check("ci-logs", &s);
}

#[test]
fn an_analyst_and_a_data_agent() {
    let s = final_summary(Corpus::DataJson, 1);
    check("data-json", &s);
}

#[test]
fn a_support_thread() {
    let s = final_summary(Corpus::SupportProse, 1);
    check("support-prose", &s);
}
