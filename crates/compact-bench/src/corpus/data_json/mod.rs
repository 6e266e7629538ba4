//! `data-json`: an analyst and a data agent over 22-40 turns. The user's
//! requests come wrapped in context ("As I mentioned in the standup
//! yesterday, and given what legal said…"); the agent queries the
//! warehouse, and the tools answer in JSON: result sets whose every row
//! repeats the same fields (indented, one row per line, or all on one
//! line), records with nested contacts and history, reports with prose
//! sections. Free-text fields hold whole sentences.
//!
//! Facts are planted in the user's and the agent's prose (constraints,
//! decisions, identifiers, actions, supersessions), in a row's free-text
//! field or a result's metadata caveat, and as the one row of a table
//! whose otherwise-null column has a value, a row the user names in the
//! same turn (its key is a probe when the row is printed on one line).

mod prose;
mod tables;

use compact_middleware::model::Format;
use serde_json::{Map, Value, json};

use super::items::{self, Call};
use super::plant::{Header, Ledger, assemble};
use super::{Agent, FactKind, Location, Session};
use crate::rng::Rng;
use prose::{Statement, Topic, Writer};
use tables::{Domain, Layout, Table};

/// What a tool's output carries for a fact.
enum Plant {
    /// A row's free-text field states it.
    Note(String),
    /// The result's metadata caveat states it.
    Caveat(String),
    /// The row named `key` has `value` in the otherwise-null column.
    Outlier { key: String, value: String },
}

/// A fact planted in a tool output, waiting for its call.
struct ToolFact {
    plant: Plant,
    layout: Layout,
    /// The table whose rows it goes in.
    table: usize,
}

/// A fact statement still current, which a later one may replace.
struct Open {
    topic: Topic,
    anchor: String,
    fact: usize,
    turn: usize,
}

struct Gen {
    rng: Rng,
    d: &'static Domain,
    ledger: Ledger,
    open: Vec<Open>,
    seq: usize,
    /// Characters of one tool output, on average.
    per_call: usize,
}

/// The session of `seed` (Chat).
pub(super) fn generate(seed: u64) -> Session {
    let mut rng = Rng::new(seed.wrapping_mul(0x51_7CC1) ^ 0xDA7A_0150);
    let d = tables::DOMAINS[rng.below(tables::DOMAINS.len() as u64) as usize];
    let n = rng.range(22, 40) as usize;
    // 55-160k characters of tool output (JSON is dear: about 2.5
    // characters a token, so 25-75k tokens with the prose), about 1.6
    // outputs a turn.
    let total = rng.range(55_000, 160_000) as usize;
    let mut g = Gen {
        rng,
        d,
        ledger: Ledger::default(),
        open: Vec::new(),
        seq: 0,
        per_call: total * 10 / (n * 16),
    };
    let opening = vec![items::system(d.system)];
    let turns: Vec<Vec<Value>> = (1..=n).map(|t| g.turn(t)).collect();
    let header = Header {
        corpus: "data-json",
        agent: Agent::Research,
        wire: Format::Chat,
        seed,
    };
    assemble(header, opening, turns, g.ledger)
}

impl Gen {
    fn topics(&self) -> Vec<Topic> {
        self.open.iter().map(|o| o.topic.clone()).collect()
    }

    /// Records `st` as a fact of `turn` at `location`; a statement with a
    /// topic becomes the open one on it.
    fn record(&mut self, turn: usize, location: Location, st: &Statement) -> usize {
        let i = self
            .ledger
            .plant(st.kind, location, turn, st.probes.clone(), st.text.clone());
        if let Some(topic) = &st.topic {
            self.open.push(Open {
                topic: topic.clone(),
                anchor: st.probes[0].clone(),
                fact: i,
                turn,
            });
        }
        i
    }

    /// A user statement: now and then a supersession of an open one.
    fn user_statement(&mut self, turn: usize) -> Statement {
        let eligible: Vec<usize> = (0..self.open.len())
            .filter(|&i| self.open[i].turn + 2 <= turn)
            .collect();
        if !eligible.is_empty() && self.rng.chance(0.2) {
            let i = *self.rng.pick(&eligible);
            let old = self.open.remove(i);
            let mut w = Writer {
                ledger: &mut self.ledger,
                d: self.d,
            };
            let st = w.supersede(&mut self.rng, &old.topic, &old.anchor);
            let new = self.ledger.supersede(
                old.fact,
                Location::User,
                turn,
                st.probes.clone(),
                st.text.clone(),
            );
            self.open.push(Open {
                topic: old.topic,
                anchor: st.probes[0].clone(),
                fact: new,
                turn,
            });
            return st;
        }
        let open = self.topics();
        let st = Writer {
            ledger: &mut self.ledger,
            d: self.d,
        }
        .user(&mut self.rng, &open);
        self.record(turn, Location::User, &st);
        st
    }

    fn turn(&mut self, t: usize) -> Vec<Value> {
        let n = match self.rng.below(100) {
            0..25 => 0,
            25..70 => 1,
            70..95 => 2,
            _ => 3,
        };
        let mut user: Vec<String> = Vec::new();
        let mut assistant: Vec<String> = Vec::new();
        let mut tool: Vec<ToolFact> = Vec::new();
        let mut named: Option<String> = None;
        for _ in 0..n {
            match self.rng.below(100) {
                0..35 => {
                    let st = self.user_statement(t);
                    user.push(st.text);
                }
                35..60 => {
                    let open = self.topics();
                    let st = Writer {
                        ledger: &mut self.ledger,
                        d: self.d,
                    }
                    .assistant(&mut self.rng, &open);
                    self.record(t, Location::Assistant, &st);
                    assistant.push(st.text);
                }
                _ => {
                    if let Some(f) = self.tool_fact(t, named.is_none()) {
                        if let Plant::Outlier { key, .. } = &f.plant {
                            named = Some(key.clone());
                        }
                        tool.push(f);
                    }
                }
            }
        }
        let mut items = vec![items::user(&prose::request(
            &mut self.rng,
            self.d,
            &user,
            named.as_deref(),
        ))];
        let rounds = match self.rng.below(100) {
            0..15 => 0,
            15..65 => 1,
            65..90 => 2,
            _ => 3,
        }
        .max(usize::from(!tool.is_empty()));
        let mut plan: Vec<Vec<Option<ToolFact>>> = (0..rounds)
            .map(|_| {
                (0..1 + usize::from(self.rng.chance(0.25)))
                    .map(|_| None)
                    .collect()
            })
            .collect();
        for f in tool {
            let r = self.rng.below(rounds as u64) as usize;
            plan[r].push(Some(f));
        }
        for round in plan {
            let calls: Vec<Call> = round.into_iter().map(|f| self.call(f)).collect();
            let thought = self
                .rng
                .chance(0.3)
                .then_some("Let me look that up in the warehouse.");
            items.extend(items::calls(Format::Chat, thought, &calls));
        }
        if let Some(key) = &named {
            assistant.insert(
                0,
                format!("On {key}: the record has a flag set that the other rows do not have; details are in the result above."),
            );
        }
        items.push(items::assistant(
            Format::Chat,
            &prose::reply(&mut self.rng, self.d, &assistant),
        ));
        items
    }

    /// A fact for a tool output of turn `t`; an outlier row only when no
    /// other row of the turn is named already.
    fn tool_fact(&mut self, t: usize, may_name: bool) -> Option<ToolFact> {
        let layout = Layout::draw(&mut self.rng);
        let table = self.rng.below(self.d.tables.len() as u64) as usize;
        let mut w = Writer {
            ledger: &mut self.ledger,
            d: self.d,
        };
        let (plant, st) = match self.rng.below(10) {
            0..4 => {
                let st = w.note(&mut self.rng);
                (Plant::Note(st.text.clone()), st)
            }
            4..6 => {
                let st = w.caveat(&mut self.rng);
                (Plant::Caveat(st.text.clone()), st)
            }
            _ if may_name => {
                let key = w.ledger.fresh_pick(&mut self.rng, tables::FACT_NAMES)?;
                let column = self.d.tables[table].sparse();
                let value = w.sparse(&mut self.rng, column);
                let mut probes = vec![value.clone()];
                if layout.row_on_one_line() {
                    probes.push(key.clone());
                }
                let st = Statement {
                    kind: FactKind::Identifier,
                    text: format!("{key}: {column} = {value}"),
                    probes,
                    topic: None,
                };
                (Plant::Outlier { key, value }, st)
            }
            _ => {
                let st = w.note(&mut self.rng);
                (Plant::Note(st.text.clone()), st)
            }
        };
        self.record(t, Location::Tool, &st);
        Some(ToolFact {
            plant,
            layout,
            table,
        })
    }

    fn size(&mut self) -> usize {
        // Log-uniform around the average: many small outputs, a few big.
        self.rng
            .log_size((self.per_call / 6) as u64, (self.per_call * 4) as u64)
    }

    fn call(&mut self, fact: Option<ToolFact>) -> Call {
        self.seq += 1;
        let size = self.size();
        let kind = match &fact {
            Some(ToolFact {
                plant: Plant::Outlier { .. },
                ..
            }) => 0,
            Some(ToolFact {
                plant: Plant::Caveat(_),
                ..
            }) => 2 * self.rng.below(2),
            Some(_) => self.rng.below(2),
            None => self.rng.below(3),
        };
        let layout = fact
            .as_ref()
            .map_or_else(|| Layout::draw(&mut self.rng), |f| f.layout);
        let table = fact.as_ref().map_or_else(
            || self.rng.below(self.d.tables.len() as u64) as usize,
            |f| f.table,
        );
        let plant = fact.map(|f| f.plant);
        let (name, arguments, output) = match kind {
            0 => self.query(table, size, layout, plant),
            1 => self.record_output(table, size, layout, plant),
            _ => self.report(size, layout, plant),
        };
        Call {
            id: format!("call_{:05}", self.seq),
            name,
            arguments,
            output,
        }
    }

    fn meta(&mut self, t: &Table, caveat: Option<String>) -> Value {
        json!({
            "source": t.name,
            "generated_at": format!("2025-{:02}-{:02}T{:02}:{:02}:00Z", self.rng.range(1, 12), self.rng.range(1, 28), self.rng.below(24), self.rng.below(60)),
            "cached": self.rng.chance(0.3),
            "caveat": caveat,
        })
    }

    /// `run_query`: a result set.
    fn query(
        &mut self,
        table: usize,
        size: usize,
        layout: Layout,
        plant: Option<Plant>,
    ) -> (&'static str, String, String) {
        let t = &self.d.tables[table];
        let per_row = if layout == Layout::Pretty { 330 } else { 240 };
        let n = (size / per_row).clamp(1, 400);
        let mut rows: Vec<Map<String, Value>> = (0..n)
            .map(|_| tables::row(&mut self.rng, self.d, t, None))
            .collect();
        let mut caveat = None;
        let at = self.rng.below(n as u64) as usize;
        match plant {
            Some(Plant::Note(text)) => {
                rows[at].insert(t.note().into(), json!(text));
            }
            Some(Plant::Outlier { key, value }) => {
                let mut r = tables::row(&mut self.rng, self.d, t, Some(&key));
                r.insert(t.sparse().into(), json!(value));
                rows[at] = r;
            }
            Some(Plant::Caveat(text)) => caveat = Some(text),
            None => {}
        }
        let (col, val) = match t.fields.get(2) {
            Some((c, tables::Field::Choice(xs))) => (*c, xs[0]),
            _ => ("1", "1"),
        };
        let query = format!(
            "SELECT * FROM {} WHERE {col} = '{val}' ORDER BY 1 LIMIT {}",
            t.name,
            n.max(50)
        );
        let doc = json!({
            "query": query,
            "row_count": n,
            "elapsed_ms": self.rng.range(12, 4000),
            "rows": rows,
            "meta": self.meta(t, caveat),
        });
        (
            "run_query",
            json!({ "sql": query }).to_string(),
            tables::render(&doc, layout, "rows"),
        )
    }

    /// `get_record`: one row with nested contacts and history.
    fn record_output(
        &mut self,
        table: usize,
        size: usize,
        layout: Layout,
        plant: Option<Plant>,
    ) -> (&'static str, String, String) {
        let t = &self.d.tables[table];
        let mut record = tables::row(&mut self.rng, self.d, t, None);
        let mut caveat = None;
        let mut history_note = None;
        match plant {
            Some(Plant::Note(text)) => {
                if self.rng.chance(0.5) {
                    record.insert(t.note().into(), json!(text));
                } else {
                    history_note = Some(text);
                }
            }
            Some(Plant::Caveat(text)) => caveat = Some(text),
            _ => {}
        }
        let id = record
            .values()
            .next()
            .and_then(Value::as_str)
            .unwrap_or("0")
            .to_string();
        let n = (size / 160).clamp(2, 200);
        let at = self.rng.below(n as u64) as usize;
        let history: Vec<Value> = (0..n)
            .map(|i| {
                let note = match (&history_note, i == at) {
                    (Some(text), true) => text.clone(),
                    _ => self.rng.pick(self.d.notes).to_string(),
                };
                json!({
                    "at": format!("2025-{:02}-{:02}", self.rng.range(1, 12), self.rng.range(1, 28)),
                    "event": self.rng.pick(&["updated", "commented", "status_changed", "assigned", "exported"]),
                    "by": self.rng.pick(&["m.ferreira", "a.nguyen", "system", "j.okafor", "api"]),
                    "note": note,
                })
            })
            .collect();
        let contacts: Vec<Value> = (0..self.rng.range(1, 3))
            .map(|_| {
                json!({
                    "role": self.rng.pick(&["billing", "technical", "owner", "procurement"]),
                    "handle": self.rng.pick(&["ops", "finance", "it", "admin"]),
                    "verified": self.rng.chance(0.7),
                })
            })
            .collect();
        let doc = json!({
            "record": record,
            "contacts": contacts,
            "history": history,
            "meta": self.meta(t, caveat),
        });
        (
            "get_record",
            json!({"table": t.name, "id": id}).to_string(),
            tables::render(&doc, layout, "history"),
        )
    }

    /// `fetch_report`: a report with KPIs and prose sections.
    fn report(
        &mut self,
        size: usize,
        layout: Layout,
        plant: Option<Plant>,
    ) -> (&'static str, String, String) {
        let caveat = match plant {
            Some(Plant::Caveat(t) | Plant::Note(t)) => Some(t),
            _ => None,
        };
        let kpis: Vec<Value> = self
            .d
            .metrics
            .iter()
            .map(|m| {
                json!({"name": m, "value": self.rng.range(10, 90_000), "delta_pct": (self.rng.range(0, 400) as f64 - 200.0) / 10.0})
            })
            .collect();
        let n = (size / 500).clamp(1, 40);
        let sections: Vec<Value> = (0..n)
            .map(|_| {
                let body: Vec<&str> = (0..self.rng.range(3, 7))
                    .map(|_| *self.rng.pick(self.d.notes))
                    .collect();
                json!({"heading": self.rng.pick(self.d.segments), "body": body.join(" ")})
            })
            .collect();
        let period = format!("2025-Q{}", self.rng.range(1, 4));
        let doc = json!({
            "report": {
                "title": self.d.report,
                "period": period,
                "summary": format!("{} {}", self.rng.pick(self.d.notes), self.rng.pick(self.d.notes)),
                "kpis": kpis,
                "sections": sections,
            },
            "meta": {"source": "reports", "caveat": caveat},
        });
        (
            "fetch_report",
            json!({"name": self.d.report, "period": period}).to_string(),
            tables::render(&doc, layout, "sections"),
        )
    }
}
