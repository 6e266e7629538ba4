//! The noise: chatter, prose, and tool outputs of realistic shapes (JSON
//! objects with prose fields, logs with error lines, CSV and pipe tables,
//! prose documents), full of identifier-like tokens that are not facts
//! (request ids, hex ids, row numbers, `src/mod_N.rs:LINE` warnings). A
//! planted line, when given, is placed at a random position.

use serde_json::{Map, Value, json};

use super::vocab::{self, Domain};
use crate::rng::Rng;

/// A sentence of the domain's prose.
pub(super) fn sentence(rng: &mut Rng, d: &Domain) -> String {
    format!(
        "{} {} {} {}.",
        rng.pick(d.subjects),
        rng.pick(d.verbs),
        rng.pick(d.objects),
        rng.pick(d.tails)
    )
}

pub(super) fn sentences(rng: &mut Rng, d: &Domain, n: usize) -> String {
    (0..n)
        .map(|_| sentence(rng, d))
        .collect::<Vec<_>>()
        .join(" ")
}

pub(super) fn noise_file(rng: &mut Rng) -> String {
    format!("src/mod_{}.rs", rng.below(60))
}

pub(super) fn hex(rng: &mut Rng, n: usize) -> String {
    (0..n)
        .map(|_| char::from_digit(rng.below(16) as u32, 16).unwrap_or('0'))
        .collect()
}

fn req_id(rng: &mut Rng) -> String {
    format!("req-{}", hex(rng, 6))
}

/// `{c}` → a component, `{f}` → a noise file.
pub(super) fn fill(rng: &mut Rng, template: &str) -> String {
    let mut s = template.to_string();
    if s.contains("{c}") {
        let c: &&str = rng.pick(vocab::COMPONENTS);
        s = s.replace("{c}", c);
    }
    if s.contains("{f}") {
        let f = noise_file(rng);
        s = s.replace("{f}", &f);
    }
    s
}

/// A UTC timestamp `secs` seconds after the session's start.
pub(super) fn timestamp(secs: u64) -> String {
    let day = 14 + secs / 86_400;
    let s = secs % 86_400;
    format!(
        "2025-03-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        s / 3600,
        (s / 60) % 60,
        s % 60,
        (secs * 7919) % 1000
    )
}

fn date(rng: &mut Rng) -> String {
    format!("2025-0{}-{:02}", rng.range(1, 3), rng.range(1, 28))
}

/// Log lines up to `size` characters, one ERROR line with `plant` in it.
pub(super) fn log(
    rng: &mut Rng,
    d: &Domain,
    size: usize,
    clock: &mut u64,
    plant: Option<&str>,
) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut len = 0;
    while len < size {
        *clock += rng.range(0, 3);
        let ts = timestamp(*clock);
        let src = rng.pick(vocab::LOG_SOURCES);
        let line = match rng.below(20) {
            0..=7 => format!(
                "{ts} INFO  {src}: request {} completed in {} ms (row {})",
                req_id(rng),
                rng.range(2, 900),
                rng.below(50_000)
            ),
            8..=10 => format!(
                "{ts} DEBUG {src}: cache hit ratio 0.{:02} on shard {} trace={}",
                rng.below(100),
                rng.below(32),
                hex(rng, 12)
            ),
            11..=13 => format!(
                "{ts} WARN  {}:{}: {}",
                noise_file(rng),
                rng.range(1, 900),
                rng.pick(&[
                    "unused variable",
                    "slow query took 1200 ms",
                    "deprecated call",
                    "retrying after backoff",
                    "queue depth above 1000"
                ])
            ),
            14..=15 => format!(
                "{ts} ERROR {src}: upstream timeout after {} ms ({}), retrying",
                rng.range(1000, 30_000),
                req_id(rng)
            ),
            16 => format!(
                "{ts} ERROR {src}: worker panicked at {}:{}: index out of bounds",
                noise_file(rng),
                rng.range(1, 900)
            ),
            _ => format!("{ts} INFO  {src}: {}", sentence(rng, d)),
        };
        len += line.len() + 1;
        lines.push(line);
    }
    if let Some(p) = plant {
        *clock += 1;
        let line = format!(
            "{} ERROR {}: {p}",
            timestamp(*clock),
            rng.pick(vocab::LOG_SOURCES)
        );
        let at = rng.below(lines.len() as u64 + 1) as usize;
        lines.insert(at, line);
    }
    lines.join("\n")
}

/// A prose document of about `size` characters with `plant` inside one paragraph.
pub(super) fn doc(rng: &mut Rng, d: &Domain, size: usize, plant: Option<&str>) -> String {
    let mut blocks: Vec<String> = vec![format!("# {}", rng.pick(d.doc_titles))];
    let mut len = 0;
    while len < size {
        let block = match rng.below(10) {
            0 => format!("## {}", rng.pick(d.doc_titles)),
            1 => (0..rng.range(2, 5))
                .map(|_| format!("- {}", sentence(rng, d)))
                .collect::<Vec<_>>()
                .join("\n"),
            2 => format!(
                "```\nlet r = mod_{}::run(&ctx)?; // row {}\nassert_eq!(r.len(), {});\n```",
                rng.below(60),
                rng.below(9999),
                rng.below(64)
            ),
            _ => {
                let n = rng.range(2, 6) as usize;
                sentences(rng, d, n)
            }
        };
        len += block.len() + 2;
        blocks.push(block);
    }
    if let Some(p) = plant {
        // Into a paragraph, at a sentence boundary.
        let paragraphs: Vec<usize> = (1..blocks.len())
            .filter(|&i| !blocks[i].starts_with(['#', '-', '`']))
            .collect();
        if paragraphs.is_empty() {
            blocks.push(p.to_string());
        } else {
            let i = *rng.pick(&paragraphs);
            let mut parts: Vec<String> = blocks[i].split(". ").map(str::to_string).collect();
            let at = rng.below(parts.len() as u64 + 1) as usize;
            parts.insert(at, p.trim_end_matches('.').to_string());
            let mut joined = parts.join(". ");
            if !joined.ends_with('.') {
                joined.push('.');
            }
            blocks[i] = joined;
        }
    }
    blocks.join("\n\n")
}

fn cell(rng: &mut Rng, column: &str) -> String {
    match column {
        "name" | "id" | "sample" => format!("r-{:05}", rng.below(100_000)),
        "owner" | "annotator" => format!("team-{}", rng.pick(&["a", "b", "c", "core", "edge"])),
        "status" => rng
            .pick(&["ok", "degraded", "open", "closed", "pending"])
            .to_string(),
        "split" => rng.pick(&["train", "dev", "test"]).to_string(),
        "label" => rng.pick(&["pos", "neg", "neutral", "unclear"]).to_string(),
        "priority" => rng.pick(&["low", "normal", "high"]).to_string(),
        "channel" => rng.pick(&["email", "chat", "phone", "web"]).to_string(),
        "last_run" | "created" => date(rng),
        "notes" | "comment" | "subject" => rng.pick(vocab::COMPONENTS).to_string(),
        _ => rng.below(10_000).to_string(),
    }
}

/// A CSV or pipe table of about `size` characters; `plant` = (key, value)
/// puts a row with the key in the first column and the value in the last.
pub(super) fn table(rng: &mut Rng, d: &Domain, size: usize, plant: Option<(&str, &str)>) -> String {
    let cols = d.columns;
    let pipe = rng.chance(0.4);
    let render = |cells: &[String]| {
        if pipe {
            format!("| {} |", cells.join(" | "))
        } else {
            cells.join(",")
        }
    };
    let mut rows: Vec<String> = Vec::new();
    let mut len = 0;
    while len < size {
        let cells: Vec<String> = cols.iter().map(|c| cell(rng, c)).collect();
        let row = render(&cells);
        len += row.len() + 1;
        rows.push(row);
    }
    if let Some((key, value)) = plant {
        let mut cells: Vec<String> = cols.iter().map(|c| cell(rng, c)).collect();
        cells[0] = key.to_string();
        if let Some(last) = cells.last_mut() {
            *last = value.to_string();
        }
        let at = rng.below(rows.len() as u64 + 1) as usize;
        rows.insert(at, render(&cells));
    }
    let header: Vec<String> = cols.iter().map(|c| c.to_string()).collect();
    let mut out = vec![render(&header)];
    if pipe {
        out.push(format!("|{}|", vec!["---"; cols.len()].join("|")));
    }
    out.extend(rows);
    out.join("\n")
}

/// A pretty-printed JSON object of about `size` characters, `plant` as
/// one of its prose fields.
pub(super) fn json_object(
    rng: &mut Rng,
    d: &Domain,
    size: usize,
    clock: &mut u64,
    plant: Option<&str>,
) -> String {
    let (mut top, list, prose_key) = match d.json_kind {
        "customer" => (
            json!({
                "customer_id": format!("cus_{}", hex(rng, 10)),
                "name": format!("Customer {}", rng.below(9000) + 1000),
                "plan": rng.pick(&["starter", "team", "business"]),
                "seats": rng.range(1, 400),
                "notes": sentence(rng, d),
            }),
            "history",
            "detail",
        ),
        "search" => (
            json!({
                "query": rng.pick(vocab::COMPONENTS),
                "took_ms": rng.range(40, 900),
                "request_id": req_id(rng),
            }),
            "results",
            "snippet",
        ),
        _ => (
            json!({
                "service": rng.pick(vocab::LOG_SOURCES),
                "status": rng.pick(&["ok", "degraded"]),
                "request_id": req_id(rng),
                "summary": sentence(rng, d),
            }),
            "events",
            "message",
        ),
    };
    let mut entries: Vec<Value> = Vec::new();
    let mut len = 200;
    let mut i = 0u64;
    while len < size {
        *clock += rng.range(1, 60);
        let mut e = Map::new();
        match d.json_kind {
            "customer" => {
                e.insert("at".into(), json!(timestamp(*clock)));
                e.insert(
                    "event".into(),
                    json!(rng.pick(&[
                        "invoice.paid",
                        "card.declined",
                        "plan.changed",
                        "login",
                        "ticket.opened"
                    ])),
                );
                e.insert("amount_cents".into(), json!(rng.below(90_000)));
            }
            "search" => {
                e.insert("rank".into(), json!(i + 1));
                e.insert(
                    "title".into(),
                    json!(format!(
                        "{} ({})",
                        rng.pick(d.doc_titles),
                        rng.range(2015, 2024)
                    )),
                );
                e.insert(
                    "url".into(),
                    json!(format!(
                        "https://www.example.org/articles/{}",
                        rng.below(99_999)
                    )),
                );
            }
            _ => {
                e.insert("at".into(), json!(timestamp(*clock)));
                e.insert("level".into(), json!(rng.pick(&["info", "warn", "error"])));
                e.insert("row".into(), json!(rng.below(50_000)));
                e.insert("trace".into(), json!(hex(rng, 16)));
            }
        }
        let n = rng.range(1, 3) as usize;
        e.insert(prose_key.into(), json!(sentences(rng, d, n)));
        let v = Value::Object(e);
        len += v.to_string().len() + 16;
        entries.push(v);
        i += 1;
    }
    if let Some(p) = plant {
        if entries.is_empty() {
            top["notes"] = json!(p);
        } else {
            let at = rng.below(entries.len() as u64) as usize;
            entries[at][prose_key] = json!(p);
        }
    }
    top[list] = Value::Array(entries);
    serde_json::to_string_pretty(&top).unwrap_or_default()
}
