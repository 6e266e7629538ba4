//! Debugging aid: one generated session at one window, fed back; prints the
//! final summary and the facts it lost.
//! `cargo run --release -p compact-bench --example retention_dump -- AGENT SEED WINDOW`

use compact_bench::corpus::{self, Agent, SessionShape};
use compact_bench::retention::{CallingMode, config_for, measure};
use compact_middleware::CompactManager;
use compact_middleware::model::Format;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let agent = match args.first().map(String::as_str) {
        Some("support") => Agent::Support,
        Some("research") => Agent::Research,
        _ => Agent::Coding,
    };
    let seed: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1);
    let window: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(8000);
    let s = corpus::generate(seed, agent, Format::Chat, &SessionShape::FULL);
    let Ok(t) = s.transcript() else {
        return;
    };
    let Ok(m) = CompactManager::builder(config_for(window))
        .without_config_exporters()
        .without_storage()
        .build()
    else {
        return;
    };
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    let out = rt.block_on(measure(&m, "dump", &t, CallingMode::FedBack));
    for msg in &out.context {
        let text = msg.plain_text();
        if text.starts_with("COMPACT-SUMMARY") {
            println!(
                "=== SUMMARY ({:?} tokens)\n{text}\n===",
                out.final_summary_tokens
            );
        }
    }
    for (f, kept) in t.facts.iter().zip(&out.retained) {
        println!(
            "{} {:?} {:?} t{} {:?} | {}",
            if *kept { "KEPT" } else { "LOST" },
            f.kind,
            f.location,
            f.turn,
            f.probes,
            f.text
        );
    }
}
