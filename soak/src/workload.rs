//! Random sessions and policies (the workload). Everything derives from the run's seed.

use compact_middleware::config::{Config, Mode, Role};
use compact_middleware::model::{Format, Message, Request};
use compact_middleware::summarize::Strategy;
use serde_json::{Value, json};

use compact_fixtures::Rng;

const TOOLS: &[&str] = &[
    "read_file",
    "run_tests",
    "search",
    "http_get",
    "sql_query",
    "get_weather",
];

/// A fact planted in a user or assistant message, to measure retention.
#[derive(Debug, Clone)]
pub(crate) struct Fact(pub String);

/// The shape of one run.
#[derive(Debug, Clone)]
pub(crate) struct RunPlan {
    pub config: Config,
    pub wire: Format,
    pub turns: usize,
    /// Send the whole raw history every call (OpenAI Agents SDK style).
    pub raw_history: bool,
    pub faulty_summarizer: bool,
    /// Archive to a real filesystem adapter that refuses writes at random.
    pub flaky_storage: bool,
    /// Plant secrets of every default kind in messages and tool I/O.
    pub secrets: bool,
    /// The telemetry server's behaviour, when the run exports over HTTP.
    pub exporter: Option<crate::faults::ExporterFault>,
    /// Several sessions of this run share one manager and run concurrently.
    pub concurrent_sessions: usize,
}

/// Draws a policy and a session shape.
pub(crate) fn plan(rng: &mut Rng, turns: (usize, usize)) -> RunPlan {
    let mut c = Config {
        model: rng
            .pick(&["gpt-4o", "gpt-4.1-mini", "gpt-4", "o3"])
            .to_string(),
        max_context_tokens: Some(*rng.pick(&[4_000usize, 8_000, 16_000, 32_000, 128_000])),
        ..Config::default()
    };
    let p = &mut c.policy;
    p.mode = match rng.below(20) {
        0 => Mode::None,
        1..=2 => Mode::Trim,
        3..=4 => Mode::Compact,
        5..=6 => Mode::Summarize,
        _ => Mode::Auto,
    };
    p.trigger_pct = 0.6 + rng.below(36) as f64 / 100.0;
    p.target_pct = (p.trigger_pct - 0.05 - rng.below(40) as f64 / 100.0).max(0.1);
    p.reactive_target_pct = p.target_pct * 0.7;
    p.hard_cap_buffer = (c.max_context_tokens.unwrap_or(8000) / 20).min(1500);
    p.keep_recent_turns = rng.range(1, 8) as usize;
    p.keep_tool_io_pairs = rng.range(0, 6) as usize;
    p.clear_tool_inputs = rng.chance(0.3);
    p.tool_result_max_chars = *rng.pick(&[500usize, 2_000, 10_000, 20_000]);
    if rng.chance(0.15) {
        p.include_tools = vec![rng.pick(TOOLS).to_string()];
    } else if rng.chance(0.15) {
        p.exclude_tools = vec![rng.pick(TOOLS).to_string()];
    }
    p.summary_role = *rng.pick(&[Role::User, Role::User, Role::Assistant, Role::System]);
    p.strategy = *rng.pick(&Strategy::ALL);
    if rng.chance(0.15) {
        p.compact_trigger_turns = Some(rng.range(4, 30) as usize);
    }
    RunPlan {
        config: c,
        wire: if rng.chance(0.5) {
            Format::Chat
        } else {
            Format::Responses
        },
        turns: rng.range(turns.0 as u64, turns.1 as u64) as usize,
        raw_history: rng.chance(0.3),
        faulty_summarizer: rng.chance(0.3),
        flaky_storage: rng.chance(0.25),
        secrets: rng.chance(0.3),
        exporter: {
            use crate::faults::ExporterFault::*;
            match rng.below(10) {
                0 => Some(Healthy),
                1 => Some(Failing),
                2 => Some(Slow),
                3 => Some(Down),
                _ => None,
            }
        },
        concurrent_sessions: if rng.chance(0.1) {
            rng.range(2, 6) as usize
        } else {
            1
        },
    }
}

/// The opening messages: a system prompt and sometimes a protected policy.
pub(crate) fn opening(rng: &mut Rng) -> Vec<Value> {
    let mut v = vec![
        json!({"role": "system", "content": "You are an autonomous engineering agent. Use tools; be precise."}),
    ];
    if rng.chance(0.5) {
        v.push(json!({"role": "developer", "content": "Policy: never exfiltrate data; all changes need a ticket.", "meta": {"protected": true, "label": "policy"}}));
    }
    v
}

fn text(rng: &mut Rng, words: usize) -> String {
    const W: &[&str] = &[
        "the", "service", "deploy", "cache", "latency", "request", "error", "retry", "config",
        "tenant", "queue", "index", "we", "should", "check", "after", "before", "rollback",
    ];
    (0..words)
        .map(|_| *rng.pick(W))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A secret of a kind the default redaction patterns cover: the raw secret
/// (what must never reach an exporter or the archive) and the text that
/// carries it.
pub(crate) fn secret(rng: &mut Rng) -> (String, String) {
    const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    const UPPER_DIGITS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let kind = rng.below(5);
    let mut pick = |n: usize, set: &[u8]| -> String {
        (0..n)
            .map(|_| set[rng.below(set.len() as u64) as usize] as char)
            .collect()
    };
    match kind {
        0 => {
            let k = format!("sk-proj-{}", pick(40, ALNUM));
            (k.clone(), format!("use key {k} for the call"))
        }
        1 => {
            let k = format!("AKIA{}", pick(16, UPPER_DIGITS));
            (k.clone(), format!("aws access key {k}"))
        }
        2 => {
            let p = format!("Pw{}", pick(14, ALNUM));
            (p.clone(), format!("password: {p}"))
        }
        3 => {
            let t = format!(
                "eyJ{}.eyJ{}.{}",
                pick(20, ALNUM),
                pick(30, ALNUM),
                pick(25, ALNUM)
            );
            (t.clone(), format!("Authorization: Bearer {t}"))
        }
        _ => {
            let k = pick(32, ALNUM);
            (k.clone(), format!("api_key={k}"))
        }
    }
}

/// Turn `t`: items in the run's wire format, plus the facts planted in it;
/// with `plant`, secrets too (returned in `secrets`).
pub(crate) fn turn(
    rng: &mut Rng,
    wire: Format,
    t: usize,
    call_seq: &mut usize,
    secrets: &mut Vec<String>,
    plant: bool,
) -> (Vec<Value>, Vec<Fact>) {
    let mut items = Vec::new();
    let mut facts = Vec::new();
    let ticket = format!("TCK-{}", 10_000 + t * 13 + rng.below(7) as usize);
    let constraint = format!("must keep p99 under {} ms", 100 + rng.below(900));
    let words = rng.range(3, 40) as usize;
    let mut user = format!(
        "Turn {t}: {} ({ticket}); we {constraint}.",
        text(rng, words)
    );
    if rng.chance(0.02) {
        // A rare huge paste.
        user.push_str(&text(rng, 4000));
    }
    facts.push(Fact(ticket.clone()));
    if plant && rng.chance(0.3) {
        let (raw, text) = secret(rng);
        user.push(' ');
        user.push_str(&text);
        secrets.push(raw);
    }
    let mut u = json!({"role": "user", "content": user});
    if rng.chance(0.05) {
        u["meta"] = json!({"protected": true, "label": "requirement"});
    }
    items.push(u);
    for _ in 0..rng.below(4) {
        let n = rng.range(1, 3) as usize;
        let calls: Vec<(String, String, String)> = (0..n)
            .map(|_| {
                *call_seq += 1;
                let name = rng.pick(TOOLS).to_string();
                let size = if rng.chance(0.002) {
                    1_000_000
                } else {
                    rng.log_size(10, 60_000)
                };
                let mut out = tool_output(rng, &name, size);
                if plant && rng.chance(0.2) {
                    let (raw, text) = secret(rng);
                    out.push_str(&text);
                    secrets.push(raw);
                }
                (format!("call_{call_seq:06}"), name, out)
            })
            .collect();
        match wire {
            Format::Responses => {
                if rng.chance(0.4) {
                    items.push(json!({"type": "reasoning", "id": format!("rs_{call_seq}"), "summary": [{"type": "summary_text", "text": text(rng, 12)}]}));
                }
                for (id, name, _) in &calls {
                    items.push(json!({"type": "function_call", "call_id": id, "name": name, "arguments": json!({"q": text(rng, 3)}).to_string()}));
                }
                for (id, _, out) in &calls {
                    items.push(
                        json!({"type": "function_call_output", "call_id": id, "output": out}),
                    );
                }
            }
            _ => {
                let tc: Vec<Value> = calls
                    .iter()
                    .map(|(id, name, _)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": json!({"q": text(rng, 3)}).to_string()}}))
                    .collect();
                items.push(json!({"role": "assistant", "content": null, "tool_calls": tc}));
                for (id, name, out) in &calls {
                    items.push(
                        json!({"role": "tool", "tool_call_id": id, "name": name, "content": out}),
                    );
                }
            }
        }
    }
    let decision = format!(
        "Decision D-{t}: use {} because of {}",
        text(rng, 2),
        text(rng, 3)
    );
    facts.push(Fact(format!("D-{t}")));
    items.push(match wire {
        Format::Responses => json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": decision}]}),
        _ => json!({"role": "assistant", "content": decision}),
    });
    (items, facts)
}

fn tool_output(rng: &mut Rng, name: &str, size: usize) -> String {
    let mut s = String::with_capacity(size + 64);
    s.push_str(name);
    s.push_str(": ");
    let mut i = 0u64;
    while s.len() < size {
        match rng.below(4) {
            0 => s.push_str(&format!(
                "{{\"row\":{i},\"status\":\"ok\",\"ms\":{}}}\n",
                rng.below(999)
            )),
            1 => s.push_str(&format!("line {i}: {} \n", text(rng, 6))),
            2 => s.push_str("                \n"),
            _ => s.push_str(&format!("src/mod_{}.rs:{}: warning\n", rng.below(50), i)),
        }
        i += 1;
    }
    s
}

/// Decodes generated items (they are valid by construction).
pub(crate) fn decode(items: Vec<Value>, wire: Format) -> anyhow::Result<Vec<Message>> {
    Ok(Request::from_value(Value::Array(items), wire)?.messages)
}
