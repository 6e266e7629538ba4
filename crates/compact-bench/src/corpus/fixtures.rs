//! The hand-written transcripts of `fixtures/retention/`: each a JSONL file
//! (one message a line) and a sidecar `NAME.facts.json` listing its facts.
//! They are compiled in, so the benchmark needs no files at run time.
//!
//! A sidecar is `{"format": "chat"|"responses", "facts": [...]}` where each
//! fact is a [`Fact`] with `line` (the 1-based JSONL line of the message
//! that states it) instead of `turn`.

use compact_middleware::model::{Format, Request, turns};
use serde::Deserialize;
use serde_json::Value;

use super::{Fact, FactKind, Location, Transcript};
use crate::probe::{Haystack, flatten};

/// The fixtures: (name, transcript JSONL, sidecar JSON).
pub const FIXTURES: [(&str, &str, &str); 4] = [
    (
        "oncall-incident",
        include_str!("../../fixtures/retention/oncall-incident.jsonl"),
        include_str!("../../fixtures/retention/oncall-incident.facts.json"),
    ),
    (
        "refactoring-session",
        include_str!("../../fixtures/retention/refactoring-session.jsonl"),
        include_str!("../../fixtures/retention/refactoring-session.facts.json"),
    ),
    (
        "data-pipeline",
        include_str!("../../fixtures/retention/data-pipeline.jsonl"),
        include_str!("../../fixtures/retention/data-pipeline.facts.json"),
    ),
    (
        "support-escalation",
        include_str!("../../fixtures/retention/support-escalation.jsonl"),
        include_str!("../../fixtures/retention/support-escalation.facts.json"),
    ),
];

/// A fixture that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    /// A JSONL line or the sidecar is not valid JSON.
    #[error("{fixture}: {what}: {error}")]
    Json {
        /// The fixture's name.
        fixture: String,
        /// Which file and line.
        what: String,
        /// The parser's message.
        error: String,
    },
    /// The messages do not decode in the sidecar's format.
    #[error("{fixture}: {error}")]
    Input {
        /// The fixture's name.
        fixture: String,
        /// The decoder's message.
        #[source]
        error: compact_middleware::model::InputError,
    },
    /// A fact whose line is not a message of a turn, or whose probes are
    /// not unique in the transcript or not on one line of its message.
    #[error("{fixture}: fact {id}: {problem}")]
    Fact {
        /// The fixture's name.
        fixture: String,
        /// The fact's id.
        id: String,
        /// What is wrong.
        problem: String,
    },
}

#[derive(Deserialize)]
struct Sidecar {
    format: Format,
    facts: Vec<SidecarFact>,
}

#[derive(Deserialize)]
struct SidecarFact {
    id: String,
    kind: FactKind,
    location: Location,
    line: usize,
    probes: Vec<String>,
    #[serde(default)]
    superseded: Option<Vec<String>>,
    #[serde(default)]
    text: String,
}

/// Every fixture, loaded and checked.
pub fn all() -> Result<Vec<Transcript>, FixtureError> {
    FIXTURES
        .iter()
        .map(|(name, jsonl, sidecar)| load(name, jsonl, sidecar))
        .collect()
}

/// Loads one fixture: splits it into turns (a user message and what follows
/// it, as `compact replay` does) and checks every fact.
pub fn load(name: &str, jsonl: &str, sidecar: &str) -> Result<Transcript, FixtureError> {
    let json_err = |what: String, e: serde_json::Error| FixtureError::Json {
        fixture: name.to_string(),
        what,
        error: e.to_string(),
    };
    let side: Sidecar = serde_json::from_str(sidecar).map_err(|e| json_err("sidecar".into(), e))?;
    let mut items = Vec::new();
    let mut line_of_item = Vec::new();
    for (n, line) in jsonl.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value =
            serde_json::from_str(line).map_err(|e| json_err(format!("line {}", n + 1), e))?;
        items.push(v);
        line_of_item.push(n + 1);
    }
    let messages = Request::from_value(Value::Array(items), side.format)
        .map_err(|error| FixtureError::Input {
            fixture: name.to_string(),
            error,
        })?
        .messages;
    let fact_err = |id: &str, problem: String| FixtureError::Fact {
        fixture: name.to_string(),
        id: id.to_string(),
        problem,
    };
    let ranges = turns(&messages);
    let first_is_turn = ranges
        .first()
        .is_some_and(|r| messages.get(r.start).is_some_and(|m| m.starts_turn()));
    let hay = Haystack::new(&flatten(&messages));
    let mut facts = Vec::new();
    for f in side.facts {
        let Some(index) = line_of_item.iter().position(|&l| l == f.line) else {
            return Err(fact_err(&f.id, format!("line {} is not a message", f.line)));
        };
        let Some(r) = ranges.iter().position(|r| r.contains(&index)) else {
            return Err(fact_err(&f.id, "its message is in no turn".into()));
        };
        let turn = if first_is_turn { r + 1 } else { r };
        if turn == 0 {
            return Err(fact_err(
                &f.id,
                "its message is before the first turn".into(),
            ));
        }
        let anchor = f.probes.first().map(String::as_str).unwrap_or("");
        let n = hay.occurrences(anchor);
        if n != 1 {
            return Err(fact_err(
                &f.id,
                format!("anchor {anchor:?} occurs {n} times (must be once)"),
            ));
        }
        if !Haystack::new(&messages[index].plain_text()).has_on_one_line(&f.probes) {
            return Err(fact_err(
                &f.id,
                format!(
                    "probes {:?} are not on one line of line {}",
                    f.probes, f.line
                ),
            ));
        }
        facts.push(Fact {
            id: f.id,
            kind: f.kind,
            location: f.location,
            turn,
            probes: f.probes,
            superseded: f.superseded,
            text: f.text,
        });
    }
    let mut opening = Vec::new();
    let mut batches = Vec::new();
    for (i, r) in ranges.iter().enumerate() {
        let batch: Vec<_> = messages[r.clone()].to_vec();
        if i == 0 && !first_is_turn {
            opening = batch;
        } else {
            batches.push(batch);
        }
    }
    Ok(Transcript {
        name: name.to_string(),
        source: "fixture".into(),
        // The summarizer was tuned on the fixtures.
        split: super::Split::Tune,
        wire: side.format,
        opening,
        turns: batches,
        facts,
        probe_match: super::ProbeMatch::Line,
    })
}
