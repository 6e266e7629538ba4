//! `support-prose`: a long customer-support thread about a network storage
//! device that stopped syncing, a replacement, shipping and billing. The
//! customer writes one to four paragraphs a message, the first one longer
//! (backstory, frustration, what they tried); the agent answers at length; now and then the agent
//! looks a customer, shipment or device up, and the record's notes are
//! prose too. 44-64 turns. A customer restating something says it with
//! the same details, and sometimes quotes the agent's last reply below
//! their message, as email clients do.
//!
//! Facts sit in the middle of paragraphs: identifiers (order, case, email,
//! firmware version, amount, address and port, URL), constraints ("never
//! call me on …", "our data must stay in …"), decisions ("we decided to
//! ship the replacement with …") and the later changes of plan that
//! supersede them, actions; and in tool output, a tracking URL, a depot
//! code or a firmware version.
//!
//! The session is drawn from the seed as a plan free of language
//! ([`plan`]) and written in one language ([`texts`]): English, Chinese,
//! Spanish or German. The same seed gives the same structure and the same
//! identifiers in every language, so a translation's retention can be
//! compared with its English twin's. A fact's anchor is its identifier;
//! its second probe, if any, is the cue word of that language.

mod de;
mod en;
mod es;
mod plan;
mod texts;
mod zh;

use compact_middleware::model::Format;
use serde_json::{Value, json};

use super::items::{self, Call};
use super::plant::{Header, Ledger, assemble};
use super::{Agent, Language, Session};
use crate::rng::Rng;
use plan::{MODEL, Part, Piece, Plan, Slots, Tool, ToolPlan};
use texts::{Say, Texts};

/// The words of `language`.
fn texts(language: Language) -> &'static Texts {
    match language {
        Language::En => &en::EN,
        Language::Zh => &zh::ZH,
        Language::Es => &es::ES,
        Language::De => &de::DE,
    }
}

/// The corpus name of `language`'s support thread.
fn corpus_name(language: Language) -> &'static str {
    match language {
        Language::En => "support-prose",
        Language::Zh => "support-prose-zh",
        Language::Es => "support-prose-es",
        Language::De => "support-prose-de",
    }
}

/// The session of `seed` written in `language` (Chat).
pub(super) fn generate(seed: u64, language: Language) -> Session {
    let plan = plan::draw(seed);
    let tx = texts(language);
    let mut ledger = Ledger::default();
    let sentences: Vec<String> = plan.facts.iter().map(|f| fact_text(tx, f)).collect();
    for (f, text) in plan.facts.iter().zip(&sentences) {
        let mut probes = vec![f.v.clone()];
        probes.extend(tx.cue(f.say.index()).map(str::to_string));
        match f.replaces {
            Some(old) => ledger.supersede(old, f.location, f.turn, probes, text.clone()),
            None => ledger.plant(f.kind, f.location, f.turn, probes, text.clone()),
        };
    }
    let mut previous = String::new();
    let turns = plan
        .turns
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut user = message(tx, &t.user, &sentences);
            if let Some(day) = t.quote {
                let quoted: Vec<String> = previous
                    .lines()
                    .map(|l| format!("{}{l}", tx.quote_prefix).trim_end().to_string())
                    .collect();
                user.push_str(&format!(
                    "\n\n{}\n{}",
                    tx.quote_header.replace("{day}", tx.days[day]),
                    quoted.join("\n")
                ));
            }
            let mut items = vec![items::user(&user)];
            if let Some(tp) = &t.tool {
                let call = lookup(tx, &plan, tp, i + 1);
                items.extend(items::calls(Format::Chat, None, &[call]));
            }
            previous = message(tx, &t.agent, &sentences);
            items.push(items::assistant(Format::Chat, &previous));
            items
        })
        .collect();
    let header = Header {
        corpus: corpus_name(language),
        agent: Agent::Support,
        wire: Format::Chat,
        seed,
    };
    assemble(header, vec![items::system(tx.system)], turns, ledger)
}

fn fact_text(tx: &Texts, f: &plan::Planned) -> String {
    tx.facts[f.say.index()][f.variant]
        .replace("{v}", &f.v)
        .replace("{w}", f.w.as_deref().unwrap_or(""))
}

fn filler(tx: &Texts, part: Part, i: usize, s: &Slots) -> String {
    let template = match part {
        Part::UserOpen => tx.user_open[i],
        Part::UserStory => tx.user_story[i],
        Part::UserClose => tx.user_close[i],
        Part::AgentOpen => tx.agent_open[i],
        Part::AgentBody => tx.agent_body[i],
        Part::AgentClose => tx.agent_close[i],
    };
    template
        .replace("{n}", &s.n.to_string())
        .replace("{day}", tx.days[s.day])
        .replace("{time}", &s.time)
        .replace("{model}", MODEL)
        .replace("{person}", tx.people[s.person])
}

/// Paragraphs, one a line, separated by a blank line.
fn message(tx: &Texts, paragraphs: &[Vec<Piece>], facts: &[String]) -> String {
    paragraphs
        .iter()
        .map(|p| {
            p.iter()
                .map(|piece| match piece {
                    Piece::Filler(part, i, slots) => filler(tx, *part, *i, slots),
                    Piece::Fact(f) => facts.get(*f).cloned().unwrap_or_default(),
                })
                .collect::<Vec<_>>()
                .join(tx.sep)
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn stamp(rng: &mut Rng) -> String {
    format!(
        "2025-{:02}-{:02}T{:02}:{:02}:00Z",
        rng.range(3, 4),
        rng.range(1, 28),
        rng.range(6, 21),
        rng.below(60)
    )
}

/// The agent's lookup in turn `turn` and the record it returns: English
/// keys, notes in the thread's language.
fn lookup(tx: &Texts, plan: &Plan, tp: &ToolPlan, turn: usize) -> Call {
    // Drawn from the plan's seed: the same record in every language.
    let mut rng = Rng::new(tp.seed);
    let fact = tp.fact.and_then(|f| plan.facts.get(f));
    let note = |rng: &mut Rng| tx.notes[rng.below(tx.notes.len() as u64) as usize];
    let fact_note = fact.filter(|f| f.say != Say::Url).map(|f| fact_text(tx, f));
    let serial = format!("SN{}", 40_000_000 + rng.below(9_000_000));
    let (name, arguments, output) = match tp.tool {
        Tool::Customer => {
            let notes: Vec<&str> = (0..rng.range(2, 5)).map(|_| note(&mut rng)).collect();
            (
                "get_customer",
                json!({"customer_id": plan.customer}),
                json!({
                    "customer_id": plan.customer,
                    "since": "2022-11-03",
                    "devices": [{"model": MODEL, "serial": serial, "status": "offline"}],
                    "open_cases": rng.range(1, 3),
                    "notes": notes,
                }),
            )
        }
        Tool::Shipment => {
            let tracking = fact.filter(|f| f.say == Say::Url).map(|f| f.v.clone());
            let n = rng.range(3, 9) as usize;
            let at = rng.below(n as u64) as usize;
            let events: Vec<Value> = (0..n)
                .map(|i| {
                    let text = match (&fact_note, i == at) {
                        (Some(t), true) => t.clone(),
                        _ => note(&mut rng).to_string(),
                    };
                    json!({"at": stamp(&mut rng), "hub": format!("HUB{}", rng.range(1, 9)), "note": text})
                })
                .collect();
            (
                "check_shipment",
                json!({"customer_id": plan.customer}),
                json!({
                    "customer_id": plan.customer,
                    "carrier": rng.pick(&["PostNL", "Correos Express", "DB Schenker"]),
                    "status": rng.pick(&["in_transit", "held", "out_for_delivery"]),
                    "tracking_url": tracking,
                    "events": events,
                }),
            )
        }
        Tool::Device => {
            let log: Vec<Value> = (0..rng.range(4, 14))
                .map(|_| {
                    json!({
                        "at": stamp(&mut rng),
                        "level": rng.pick(&["info", "warn", "error"]),
                        "message": rng.pick(&["sync: connection refused", "disk: health ok", "net: dhcp lease renewed", "sync: retry scheduled", "fan: speed high"]),
                    })
                })
                .collect();
            (
                "get_device",
                json!({"serial": serial}),
                json!({
                    "serial": serial,
                    "model": MODEL,
                    "last_seen": stamp(&mut rng),
                    "channel": "stable",
                    "log": log,
                    "note": fact_note.unwrap_or_else(|| note(&mut rng).to_string()),
                }),
            )
        }
    };
    Call {
        id: format!("call_{turn:03}"),
        name,
        arguments: arguments.to_string(),
        output: serde_json::to_string_pretty(&output).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every language's fact sentence holds its value slot and its cue.
    #[test]
    fn every_fact_sentence_holds_its_value_and_cue_in_every_language() {
        for lang in [Language::En, Language::Zh, Language::Es, Language::De] {
            let tx = texts(lang);
            for (i, variants) in tx.facts.iter().enumerate() {
                for s in variants {
                    assert!(s.contains("{v}"), "{lang:?} {i}: {s}");
                    if let Some(cue) = tx.cue(i) {
                        let probe = crate::probe::Haystack::new(s);
                        assert_eq!(probe.occurrences(cue), 1, "{lang:?} {i}: {s} lacks {cue:?}");
                    }
                }
            }
        }
    }
}
