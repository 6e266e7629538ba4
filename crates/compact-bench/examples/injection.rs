//! Prompt injections planted in tool outputs, replayed turn by turn: leaks
//! (a planted order in a message that is not a tool result), reports (the
//! `compact.security` list), false reports. Held out first: a public attack
//! set when one is given (`--public PATH` or `COMPACT_INJECTION_PUBLIC`,
//! written by `crates/compact-bench/scripts/agentdojo_payloads.py`; skipped
//! when absent), then the built-in payloads, then the built-in payloads
//! again with the agent's next reply repeating each one (an echo).
//!
//! `cargo run --release -p compact-bench --example injection -- [--windows 8000,16000] [--seeds 1,2] [--wires chat,responses,anthropic] [--public PATH] [--only public|builtin]`

use compact_bench::corpus::Split;
use compact_bench::injection::{
    PUBLIC_ENV, Payload, Planted, public, public_from_env, run, sessions, sessions_echoed,
    sessions_of,
};
use compact_middleware::model::Format;

fn value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

fn list(args: &[String], flag: &str, default: &[u64]) -> Vec<u64> {
    value(args, flag)
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| default.to_vec())
}

fn table(title: &str, planted: &[Planted], windows: &[usize]) {
    println!("## {title}, {} sessions", planted.len());
    println!(
        "| window | mode | planted | leaked | left context | reported | false reports | errors |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for r in run(planted, windows) {
        println!(
            "| {} | {} | {}{} | {} {:?} | {} | {} ({:.1}%) {:?} | {} | {} |",
            r.window,
            r.mode,
            r.planted,
            if r.echoed > 0 {
                format!(" ({} echoed)", r.echoed)
            } else {
                String::new()
            },
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

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let windows: Vec<usize> = list(&args, "--windows", &[8000, 12000, 16000, 32000, 128_000])
        .into_iter()
        .map(|w| w as usize)
        .collect();
    let seeds = list(&args, "--seeds", &[1, 2]);
    let wires: Vec<Format> = value(&args, "--wires")
        .unwrap_or("chat,responses,anthropic")
        .split(',')
        .filter_map(|w| w.trim().parse().ok())
        .collect();
    let only = value(&args, "--only");
    let public_set = match value(&args, "--public") {
        Some(path) => Some(public(std::path::Path::new(path))),
        None => public_from_env(),
    };
    match public_set {
        None => println!("(no public attack set: pass --public PATH or set {PUBLIC_ENV})\n"),
        Some(Err(e)) => println!("(public attack set skipped: {e})\n"),
        Some(Ok(set)) if only != Some("builtin") => {
            for split in [Split::HeldOut, Split::Tune] {
                let payloads: Vec<Payload> =
                    set.iter().filter(|p| p.split == split).cloned().collect();
                // Every payload planted once per wire: as many per session
                // as the seeds' sessions need.
                let sessions_n = (seeds.len() * 3).max(1);
                let per = payloads.len().div_ceil(sessions_n).max(1);
                for &wire in &wires {
                    let planted = sessions_of(&payloads, &seeds, wire, per);
                    table(
                        &format!(
                            "public {} ({} payloads), {wire:?}",
                            split.name(),
                            payloads.len()
                        ),
                        &planted,
                        &windows,
                    );
                }
            }
        }
        Some(Ok(_)) => {}
    }
    if only == Some("public") {
        return;
    }
    for split in [Split::HeldOut, Split::Tune] {
        for &wire in &wires {
            let planted = sessions(split, &seeds, wire);
            table(
                &format!("{} payloads, {wire:?}", split.name()),
                &planted,
                &windows,
            );
        }
    }
    // The agent's next reply repeats each order, refusing it.
    for split in [Split::HeldOut, Split::Tune] {
        for &wire in &wires {
            let planted = sessions_echoed(split, &seeds, wire);
            table(
                &format!("{} payloads echoed by the agent, {wire:?}", split.name()),
                &planted,
                &windows,
            );
        }
    }
}
