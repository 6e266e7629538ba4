//! The retention suite alone, without building the `compact` binary (and
//! its AWS SDK): `cargo run --release -p compact-bench --example retention`.
//!
//! Prints the JSON document of `compact bench retention` (its `retention`
//! member). `--quick` runs the smoke corpus; `--seeds 3,4,5` draws the
//! generated sessions from other seeds (a check that the figures are not
//! the corpus's alone); `--table` prints one line per window and calling
//! mode instead of the JSON.

use serde_json::Value;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let mut opts = if quick {
        compact_bench::retention::Options::quick()
    } else {
        compact_bench::retention::Options::full()
    };
    if let Some(seeds) = args
        .iter()
        .position(|a| a == "--seeds")
        .and_then(|i| args.get(i + 1))
    {
        opts.seeds = seeds
            .split(',')
            .filter_map(|s| s.trim().parse().ok())
            .collect();
    }
    let doc = compact_bench::retention::run_with(&opts);
    if !args.iter().any(|a| a == "--table") {
        println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        return;
    }
    let pct = |v: &Value| {
        v["pct"]
            .as_f64()
            .map_or("-".to_string(), |p| format!("{p:.1}"))
    };
    println!(
        "{:>7} {:<10} {:>6} {:>6} {:>6} | left recent: {:>6} {:>6} | {:>5} {:>5} {:>6} {:>6} {:>11}",
        "window",
        "mode",
        "all",
        "u+a",
        "tool",
        "u+a",
        "tool",
        "comp",
        "summ",
        "insuff",
        "nested",
        "summary/cap"
    );
    if let Some(windows) = doc["by_window"].as_object() {
        for (w, cell) in windows {
            for mode in ["fed_back", "raw_resent"] {
                let c = &cell[mode];
                println!(
                    "{w:>7} {mode:<10} {:>6} {:>6} {:>6} | left recent: {:>6} {:>6} | {:>5} {:>5} {:>6} {:>6} {:>5}/{:<5}",
                    pct(&c["facts"]),
                    pct(&c["user_assistant"]),
                    pct(&c["tool"]),
                    pct(&c["left_recent_window"]["user_assistant"]),
                    pct(&c["left_recent_window"]["tool"]),
                    c["compactions"].to_string(),
                    c["summaries"].to_string(),
                    c["insufficient_budget"].to_string(),
                    c["nested_summary_headers"].to_string(),
                    c["max_summary_tokens"].to_string(),
                    c["summary_cap"].to_string(),
                );
            }
        }
    }
    println!(
        "meets_targets: {}  wall: {} s",
        doc["meets_targets"], doc["wall_secs"]
    );
    println!(
        "\n{:<20} {:<9} {:>7} {:>6} {:>6} {:>6} | by kind",
        "corpus", "split", "window", "u+a", "tool", "insuff"
    );
    let num = |v: &Value| v.as_f64().map_or("-".to_string(), |p| format!("{p:.1}"));
    for row in doc["by_corpus"].as_array().into_iter().flatten() {
        for (w, c) in row["by_window"].as_object().into_iter().flatten() {
            let kinds: Vec<String> = c["by_kind_pct"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| format!("{k} {}", num(v)))
                .collect();
            println!(
                "{:<20} {:<9} {w:>7} {:>6} {:>6} {:>6} | {}",
                row["corpus"].as_str().unwrap_or(""),
                row["split"].as_str().unwrap_or(""),
                num(&c["user_assistant_pct"]),
                num(&c["tool_pct"]),
                c["insufficient_budget"].to_string(),
                kinds.join(", ")
            );
        }
    }
}
