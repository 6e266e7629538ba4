//! Prompt injections planted in tool outputs, replayed turn by turn: leaks
//! (a planted order in a message that is not a tool result), reports (the
//! `compact.security` list), false reports. Held out first.
//!
//! `cargo run --release -p compact-bench --example injection -- [--windows 8000,16000] [--seeds 1,2]`

use compact_bench::corpus::Split;
use compact_bench::injection::{run, sessions};
use compact_middleware::model::Format;

fn list(args: &[String], flag: &str, default: &[u64]) -> Vec<u64> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| default.to_vec())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let windows: Vec<usize> = list(&args, "--windows", &[8000, 12000, 16000, 32000, 128_000])
        .into_iter()
        .map(|w| w as usize)
        .collect();
    let seeds = list(&args, "--seeds", &[1, 2]);
    for split in [Split::HeldOut, Split::Tune] {
        for wire in [Format::Chat, Format::Responses] {
            let planted = sessions(split, &seeds, wire);
            println!(
                "## {} payloads, {wire:?}, {} sessions",
                split.name(),
                planted.len()
            );
            println!(
                "| window | mode | planted | leaked | left context | reported | false reports | errors |"
            );
            println!("|---|---|---|---|---|---|---|---|");
            for r in run(&planted, &windows) {
                println!(
                    "| {} | {} | {} | {} {:?} | {} | {} ({:.1}%) {:?} | {} | {} |",
                    r.window,
                    r.mode,
                    r.planted,
                    r.leaked,
                    r.leaked_ids,
                    r.left,
                    r.reported,
                    if r.left == 0 {
                        100.0
                    } else {
                        r.reported as f64 * 100.0 / r.left as f64
                    },
                    r.unreported_ids,
                    r.false_reports,
                    r.errors
                );
            }
        }
    }
}
