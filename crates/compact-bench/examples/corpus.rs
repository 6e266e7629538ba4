//! Prints a named corpus's session the way a reader of the context sees it
//! (every message's text, one block per turn) and then its facts, so a
//! corpus can be read by eye:
//! `cargo run -p compact-bench --example corpus -- NAME [SEED] [chat|responses] [--facts]`.
//! Without arguments, lists the corpora.

use compact_bench::corpus::{Corpus, corpora};
use compact_middleware::CompactManager;
use compact_middleware::config::Config;
use compact_middleware::model::Format;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(corpus) = args.first().and_then(|n| Corpus::from_name(n)) else {
        for c in corpora() {
            println!(
                "{:<18} {}  twin: {:<14} wires: {:?}  {}",
                c.name,
                c.language.code(),
                c.twin.map_or("-", |t| t.name()),
                c.wires,
                c.imitates
            );
        }
        return;
    };
    let seed = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1);
    let wire = if args.iter().any(|a| a == "responses") {
        Format::Responses
    } else {
        Format::Chat
    };
    let facts_only = args.iter().any(|a| a == "--facts");
    let s = corpus.generate(seed, wire);
    let Ok(t) = s.transcript() else {
        eprintln!("{}: does not decode", s.name);
        return;
    };
    if !facts_only {
        for m in &t.opening {
            println!("[{:?}] {}", m.role(), m.plain_text());
        }
        for (i, turn) in t.turns.iter().enumerate() {
            println!("=== turn {}", i + 1);
            for m in turn {
                println!("[{:?}] {}", m.role(), m.plain_text());
            }
        }
    }
    let tokens = CompactManager::builder(Config {
        max_context_tokens: Some(usize::MAX / 4),
        ..Config::default()
    })
    .without_config_exporters()
    .without_storage()
    .build()
    .map_or(0, |m| m.estimate(&t.messages(), &[]).t_est);
    println!(
        "### {} ({} split): {} turns, {tokens} tokens, {} facts, {} dropped",
        s.name,
        s.split.name(),
        t.turns.len(),
        t.facts.len(),
        s.dropped
    );
    for f in &t.facts {
        println!(
            "t{:<4} {:<12} {:<10} {:?}",
            f.turn,
            f.kind.name(),
            f.location.name(),
            f.probes
        );
    }
}
