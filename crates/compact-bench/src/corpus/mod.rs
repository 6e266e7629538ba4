//! The retention corpus: long agent sessions with planted facts, and the
//! probes that tell whether each fact survived compaction.
//!
//! [`generate`] draws a session from a seed (the same seed, the same
//! session): a coding, support or research agent, in Chat Completions or
//! Responses items (with `reasoning` items), 40-80 turns by default. Each
//! turn is a user message (a request mixed with chatter), zero or more
//! rounds of tool calls (sometimes parallel) whose outputs are JSON
//! objects, logs, tables or prose documents from hundreds of characters to
//! tens of thousands, and an assistant reply. About one fact a turn is
//! planted in a user message, an assistant reply, a reasoning summary or a
//! tool output (a JSON prose field, a log error line, a table row whose key
//! the user names, a sentence of a document).
//!
//! [`fixtures`] are hand-written transcripts with their facts.
//!
//! [`corpora`] lists the named corpora written apart from [`generate`]
//! (which the summarizer was tuned on): `ci-logs` (one task, then rounds of
//! shell calls and logs), `data-json` (JSON tables and padded requests),
//! `support-prose` (long prose) and its twins in other languages, each with
//! a fixed split of seeds into tuning and held out ([`SEED_SPLIT`]).
//!
//! A fact's first probe, its anchor, occurs exactly once in the whole
//! session, on a line that also holds its other probes; a fact for which
//! that does not hold is dropped before the session is returned (counted in
//! [`Session::dropped`]), so a probe is never found by accident.

mod ci_logs;
mod corpora;
mod data_json;
mod facts;
pub mod fixtures;
mod items;
mod noise;
mod plant;
mod support_prose;
pub mod trajectories;
mod vocab;

pub use corpora::{Corpus, CorpusInfo, Language, SEED_SPLIT, SeedSplit, Split, corpora};

use std::collections::HashSet;

use compact_middleware::Message;
use compact_middleware::model::{Format, InputError, Request};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::probe::{Haystack, flatten};
use crate::rng::Rng;
use facts::{Open, Statement, Topic, Writer};
use vocab::{Domain, OutputShape};

/// The kind of agent a session imitates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Agent {
    /// Reads code, builds, runs tests.
    Coding,
    /// Looks up customers, orders, tickets and logs.
    Support,
    /// Searches, reads papers, queries datasets.
    Research,
}

impl Agent {
    /// Every kind, in a fixed order.
    pub const ALL: [Agent; 3] = [Agent::Coding, Agent::Support, Agent::Research];

    /// The lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Agent::Coding => "coding",
            Agent::Support => "support",
            Agent::Research => "research",
        }
    }
}

/// What a fact states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FactKind {
    /// must / never / do not / only / required / before / at most …
    Constraint,
    /// A choice on a subject, with its reason.
    Decision,
    /// A ticket, path, URL, email, version, port, region, host, name,
    /// number with a unit, error code …
    Identifier,
    /// An open action or a blocker.
    Action,
    /// A later decision or limit replacing an earlier one on the same
    /// subject: only the newer one counts.
    Supersession,
    /// A file an agent viewed, created or edited (its path).
    File,
    /// A test command an agent ran, or a test it saw fail.
    Test,
    /// Something an agent worked out and stated (a cause, a value).
    Finding,
    /// An error an agent hit: exception type and message, first line.
    Error,
}

impl FactKind {
    /// Every kind, in a fixed order.
    pub const ALL: [FactKind; 9] = [
        FactKind::Constraint,
        FactKind::Decision,
        FactKind::Identifier,
        FactKind::Action,
        FactKind::Supersession,
        FactKind::File,
        FactKind::Test,
        FactKind::Finding,
        FactKind::Error,
    ];

    /// What any conversation states: the kinds [`generate`] and the
    /// fixtures plant.
    pub const STATED: [FactKind; 5] = [
        FactKind::Constraint,
        FactKind::Decision,
        FactKind::Identifier,
        FactKind::Action,
        FactKind::Supersession,
    ];

    /// The trail of a coding agent's work (what `ci-logs` plants besides
    /// the task's identifiers).
    pub const TRAIL: [FactKind; 4] = [
        FactKind::File,
        FactKind::Test,
        FactKind::Finding,
        FactKind::Error,
    ];

    /// The snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            FactKind::Constraint => "constraint",
            FactKind::Decision => "decision",
            FactKind::Identifier => "identifier",
            FactKind::Action => "action",
            FactKind::Supersession => "supersession",
            FactKind::File => "file",
            FactKind::Test => "test",
            FactKind::Finding => "finding",
            FactKind::Error => "error",
        }
    }
}

/// Where a fact was planted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Location {
    /// A user message.
    User,
    /// An assistant reply.
    Assistant,
    /// A reasoning summary (Responses only).
    Reasoning,
    /// A tool output.
    Tool,
}

impl Location {
    /// Every location, in a fixed order.
    pub const ALL: [Location; 4] = [
        Location::User,
        Location::Assistant,
        Location::Reasoning,
        Location::Tool,
    ];

    /// The snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            Location::User => "user",
            Location::Assistant => "assistant",
            Location::Reasoning => "reasoning",
            Location::Tool => "tool",
        }
    }

    /// Tool output, as opposed to the conversation (user, assistant, reasoning).
    pub fn is_tool(self) -> bool {
        self == Location::Tool
    }
}

/// A planted fact and how to find it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fact {
    /// Unique within its session.
    pub id: String,
    /// What it states.
    pub kind: FactKind,
    /// Where it was planted.
    pub location: Location,
    /// The turn it was planted in, from 1.
    pub turn: usize,
    /// The strings that must all appear on one line of a context for the
    /// fact to count as retained. The first is the anchor: it occurs once
    /// in the whole session.
    pub probes: Vec<String>,
    /// For a supersession, the probes of the statement it replaced (which
    /// no longer counts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded: Option<Vec<String>>,
    /// The planted text, for reports.
    #[serde(default)]
    pub text: String,
}

/// How a transcript's probes are looked for in a context.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeMatch {
    /// All of a fact's probes on one line, word-bounded, ASCII case
    /// ignored ([`crate::probe::Haystack::has_on_one_line`]).
    #[default]
    Line,
    /// The fact's first probe is a substring of the context's text, case
    /// kept (the rule of the real trajectories' README).
    Substring,
}

/// How long a generated session is and how big its tool outputs are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionShape {
    /// Turns, drawn in `lo..=hi`.
    pub turns: (usize, usize),
    /// Characters of one tool output, drawn log-uniformly in `lo..=hi`.
    pub output_chars: (usize, usize),
}

impl SessionShape {
    /// The benchmark's sessions: 40-80 turns, outputs of 300 to 32,000 characters.
    pub const FULL: SessionShape = SessionShape {
        turns: (40, 80),
        output_chars: (300, 32_000),
    };
}

/// A generated session: wire items per turn, and its facts.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// `{agent}-{wire}-{seed}`, or `{corpus}-{wire}-{seed}` for a named
    /// corpus.
    pub name: String,
    /// `coding`, `support` or `research` for [`generate`], else the named
    /// corpus (`ci-logs`, `support-prose-zh`, …).
    pub source: String,
    /// Tuning or held out ([`Split::of_seed`] for a named corpus;
    /// [`generate`]'s sessions are all tuning: the summarizer was tuned on
    /// them).
    pub split: Split,
    /// The kind of agent.
    pub agent: Agent,
    /// Chat or Responses.
    pub wire: Format,
    /// The seed it was drawn from.
    pub seed: u64,
    /// System (and developer) messages before the first turn.
    pub opening: Vec<Value>,
    /// The items of each turn, in wire format.
    pub turns: Vec<Vec<Value>>,
    /// The facts, each verified unique.
    pub facts: Vec<Fact>,
    /// Facts dropped because their anchor was not unique (0 by design).
    pub dropped: usize,
}

/// A session ready to be driven: decoded messages per turn and the facts.
#[derive(Debug, Clone)]
pub struct Transcript {
    /// The session's name.
    pub name: String,
    /// `coding`, `support`, `research`, `fixture`, or a named corpus
    /// ([`CorpusInfo::name`]).
    pub source: String,
    /// Tuning or held out.
    pub split: Split,
    /// Chat or Responses.
    pub wire: Format,
    /// Messages before the first turn.
    pub opening: Vec<Message>,
    /// Each turn's messages.
    pub turns: Vec<Vec<Message>>,
    /// The facts to look for.
    pub facts: Vec<Fact>,
    /// How the facts' probes are looked for.
    pub probe_match: ProbeMatch,
}

impl Transcript {
    /// Every message, in order.
    pub fn messages(&self) -> Vec<Message> {
        self.opening
            .iter()
            .chain(self.turns.iter().flatten())
            .cloned()
            .collect()
    }
}

impl Session {
    /// Decodes the items into messages.
    pub fn transcript(&self) -> Result<Transcript, InputError> {
        let decode = |items: &[Value]| {
            Request::from_value(Value::Array(items.to_vec()), self.wire).map(|r| r.messages)
        };
        Ok(Transcript {
            name: self.name.clone(),
            source: self.source.clone(),
            split: self.split,
            wire: self.wire,
            opening: decode(&self.opening)?,
            turns: self
                .turns
                .iter()
                .map(|t| decode(t))
                .collect::<Result<_, _>>()?,
            facts: self.facts.clone(),
            probe_match: ProbeMatch::Line,
        })
    }

    /// Every item as one JSON line (what `compact replay` reads).
    pub fn to_jsonl(&self) -> String {
        self.opening
            .iter()
            .chain(self.turns.iter().flatten())
            .map(|v| v.to_string() + "\n")
            .collect()
    }
}

impl Session {
    /// The session holding those of `facts` that [`retain_unique`] keeps,
    /// the others counted as dropped. A session that does not decode
    /// keeps no facts: its tests fail loudly.
    pub(crate) fn with_unique_facts(mut self, mut facts: Vec<Fact>) -> Session {
        self.dropped = match self.transcript() {
            Ok(t) => retain_unique(&t.messages(), &mut facts),
            Err(_) => std::mem::take(&mut facts).len(),
        };
        self.facts = facts;
        self
    }
}

/// Keeps the facts whose anchor occurs exactly once in `messages`, on a
/// line with all their probes; returns how many were dropped.
pub fn retain_unique(messages: &[Message], facts: &mut Vec<Fact>) -> usize {
    let hay = Haystack::new(&flatten(messages));
    let before = facts.len();
    facts.retain(|f| {
        f.probes
            .first()
            .is_some_and(|a| hay.occurrences(a) == 1 && hay.has_on_one_line(&f.probes))
    });
    before - facts.len()
}

/// Draws a session of `agent` in `wire` from `seed`.
pub fn generate(seed: u64, agent: Agent, wire: Format, shape: &SessionShape) -> Session {
    let wire = if wire == Format::Responses {
        Format::Responses
    } else {
        Format::Chat
    };
    // Each (agent, wire) pair of a seed is a different session, not the
    // same draws in other words.
    let salt = 2 * agent as u64 + u64::from(wire == Format::Responses);
    let mut g = Gen {
        rng: Rng::new(seed.wrapping_mul(8).wrapping_add(salt) ^ 0x5E55_1011),
        d: vocab::domain(agent),
        wire,
        shape: *shape,
        writer: Writer::new(agent),
        facts: Vec::new(),
        replaced: HashSet::new(),
        open: Vec::new(),
        call_seq: 0,
        clock: 0,
        scale: 1.0,
    };
    let opening = g.opening();
    let n = g.rng.range(shape.turns.0 as u64, shape.turns.1 as u64) as usize;
    // Shorter sessions get larger outputs, so every session carries about
    // as much text as one of 56 turns (a 128k window compacts it twice).
    g.scale = (56.0 / n.max(1) as f64).max(1.0);
    let turns: Vec<Vec<Value>> = (1..=n).map(|t| g.turn(t)).collect();
    let replaced = g.replaced;
    let facts: Vec<Fact> = g
        .facts
        .into_iter()
        .filter(|f| !replaced.contains(&f.id))
        .collect();
    Session {
        name: format!(
            "{}-{}-{seed}",
            agent.name(),
            if wire == Format::Responses {
                "responses"
            } else {
                "chat"
            }
        ),
        source: agent.name().to_string(),
        split: Split::Tune,
        agent,
        wire,
        seed,
        opening,
        turns,
        facts: Vec::new(),
        dropped: 0,
    }
    .with_unique_facts(facts)
}

/// A fact waiting to be written into its turn.
struct Pending {
    index: usize,
    statement: Statement,
}

struct ToolPlant {
    shape: OutputShape,
    text: String,
    /// For a table row: the key the user names.
    key: Option<String>,
}

struct Call {
    id: String,
    name: &'static str,
    arguments: String,
    output: String,
}

struct Gen {
    rng: Rng,
    d: &'static Domain,
    wire: Format,
    shape: SessionShape,
    writer: Writer,
    facts: Vec<Fact>,
    /// Ids of facts a supersession replaced.
    replaced: HashSet<String>,
    open: Vec<Open>,
    call_seq: usize,
    clock: u64,
    /// Multiplies the drawn tool output sizes.
    scale: f64,
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

impl Gen {
    fn opening(&mut self) -> Vec<Value> {
        let mut v = vec![json!({"role": "system", "content": self.d.system})];
        if self.rng.chance(0.5) {
            v.push(json!({"role": "developer", "content": "Follow the team's conventions. Ask before anything destructive."}));
        }
        v
    }

    fn responses(&self) -> bool {
        self.wire == Format::Responses
    }

    fn location(&mut self) -> Location {
        let r = self.rng.below(100);
        if self.responses() {
            match r {
                0..30 => Location::User,
                30..52 => Location::Assistant,
                52..67 => Location::Reasoning,
                _ => Location::Tool,
            }
        } else {
            match r {
                0..35 => Location::User,
                35..65 => Location::Assistant,
                _ => Location::Tool,
            }
        }
    }

    /// A statement of a random kind, registered as open when it has a topic.
    fn statement(&mut self, t: usize, location: Location) -> Statement {
        let r = self.rng.below(100);
        let eligible: Vec<usize> = (0..self.open.len())
            .filter(|&i| self.open[i].turn + 2 <= t)
            .collect();
        let mut st = if r < 16 && !eligible.is_empty() && location != Location::Tool {
            let i = *self.rng.pick(&eligible);
            let old = self.open[i].clone();
            match self.writer.supersede(&mut self.rng, &old) {
                Some(st) => {
                    self.replaced.insert(self.facts[old.fact].id.clone());
                    self.open.remove(i);
                    Some(st)
                }
                None => None,
            }
        } else {
            None
        };
        if st.is_none() {
            st = match r {
                0..38 => {
                    let avoid: Vec<Topic> = self.open.iter().map(|o| o.topic.clone()).collect();
                    Some(self.writer.constraint(&mut self.rng, &avoid))
                }
                38..54 => self.writer.decision(&mut self.rng),
                54..70 => Some(self.writer.action(&mut self.rng)),
                _ => None,
            };
        }
        st.unwrap_or_else(|| self.writer.identifier(&mut self.rng))
    }

    fn record(&mut self, t: usize, location: Location, st: &Statement, text: String) -> usize {
        let index = self.facts.len();
        if let Some(topic) = &st.topic {
            self.open.push(Open {
                topic: topic.clone(),
                value: st.probes[0].clone(),
                fact: index,
                turn: t,
            });
        }
        self.facts.push(Fact {
            id: format!("f{index}"),
            kind: st.kind,
            location,
            turn: t,
            probes: st.probes.clone(),
            superseded: st.superseded.clone(),
            text,
        });
        index
    }

    /// A fact planted in a tool output of a random shape: a table row (by
    /// its key), a log line (an identifier) or a sentence.
    fn tool_plant(&mut self, t: usize, location: Location) -> ToolPlant {
        let shape = *self.rng.pick(&[
            OutputShape::Json,
            OutputShape::Log,
            OutputShape::Table,
            OutputShape::Doc,
        ]);
        match shape {
            OutputShape::Table => {
                let (key, st) = self.writer.row_fact(&mut self.rng);
                let text = st.clause.clone();
                self.record(t, location, &st, format!("{key}: {text}"));
                ToolPlant {
                    shape,
                    text,
                    key: Some(key),
                }
            }
            OutputShape::Log => {
                let st = self.writer.identifier(&mut self.rng);
                self.record(t, location, &st, st.clause.clone());
                ToolPlant {
                    shape,
                    text: st.clause,
                    key: None,
                }
            }
            _ => {
                let st = self.statement(t, location);
                let text = capitalize(&st.clause) + ".";
                self.record(t, location, &st, text.clone());
                ToolPlant {
                    shape,
                    text,
                    key: None,
                }
            }
        }
    }

    fn turn(&mut self, t: usize) -> Vec<Value> {
        self.clock += self.rng.range(60, 900);
        let n = match self.rng.below(100) {
            0..30 => 0,
            30..75 => 1,
            75..93 => 2,
            _ => 3,
        };
        let mut user: Vec<Pending> = Vec::new();
        let mut assistant: Vec<Pending> = Vec::new();
        let mut reasoning: Vec<Pending> = Vec::new();
        let mut tool: Vec<ToolPlant> = Vec::new();
        for _ in 0..n {
            let location = self.location();
            if location == Location::Tool {
                tool.push(self.tool_plant(t, location));
            } else {
                let st = self.statement(t, location);
                let index = self.record(t, location, &st, st.clause.clone());
                let pending = Pending {
                    index,
                    statement: st,
                };
                match location {
                    Location::User => user.push(pending),
                    Location::Reasoning => reasoning.push(pending),
                    _ => assistant.push(pending),
                }
            }
        }
        let mut items = vec![self.user_message(&user, &tool)];
        let rounds = match self.rng.below(100) {
            0..15 => 0,
            15..55 => 1,
            55..85 => 2,
            _ => 3,
        }
        .max(usize::from(!tool.is_empty()));
        // Calls per round; each tool fact gets a call of its own in a random round.
        let mut plan: Vec<Vec<(&'static str, Option<ToolPlant>)>> = (0..rounds)
            .map(|_| {
                let k = match self.rng.below(10) {
                    0..7 => 1,
                    7..9 => 2,
                    _ => 3,
                };
                (0..k)
                    .map(|_| (self.rng.pick(self.d.tools).0, None))
                    .collect()
            })
            .collect();
        for p in tool {
            let name = self
                .d
                .tools
                .iter()
                .filter(|(_, s)| *s == p.shape)
                .map(|(n, _)| *n)
                .next()
                .unwrap_or(self.d.tools[0].0);
            let r = self.rng.below(rounds as u64) as usize;
            let at = self.rng.below(plan[r].len() as u64 + 1) as usize;
            plan[r].insert(at, (name, Some(p)));
        }
        // Reasoning slots: one per round and one before the reply.
        let mut slots: Vec<bool> = (0..=rounds)
            .map(|i| self.responses() && self.rng.chance(if i < rounds { 0.5 } else { 0.3 }))
            .collect();
        if !reasoning.is_empty() && !slots.iter().any(|&s| s) {
            let i = self.rng.below(slots.len() as u64) as usize;
            slots[i] = true;
        }
        let present: Vec<usize> = (0..slots.len()).filter(|&i| slots[i]).collect();
        let mut in_slot: Vec<Vec<Pending>> = (0..slots.len()).map(|_| Vec::new()).collect();
        for p in reasoning {
            let i = *self.rng.pick(&present);
            in_slot[i].push(p);
        }
        let mut in_slot = in_slot.into_iter();
        for (r, round) in plan.into_iter().enumerate() {
            let thoughts = in_slot.next().unwrap_or_default();
            if slots[r] {
                items.push(self.reasoning_item(&thoughts));
            }
            let calls: Vec<Call> = round
                .into_iter()
                .map(|(name, plant)| self.call(name, plant))
                .collect();
            items.extend(self.call_items(&calls));
        }
        let thoughts = in_slot.next().unwrap_or_default();
        if slots[rounds] {
            items.push(self.reasoning_item(&thoughts));
        }
        items.push(self.assistant_message(&assistant));
        items
    }

    fn clause_in(&mut self, prefixes: &[&str], st: &Statement) -> String {
        let prefix = *self.rng.pick(prefixes);
        if prefix.is_empty() {
            capitalize(&st.clause) + "."
        } else {
            format!("{prefix}{}.", st.clause)
        }
    }

    fn user_message(&mut self, facts: &[Pending], tool: &[ToolPlant]) -> Value {
        let mut parts: Vec<String> = Vec::new();
        if self.rng.chance(0.4) {
            parts.push(self.rng.pick(vocab::CHATTER).to_string());
        }
        let template = *self.rng.pick(self.d.requests);
        parts.push(noise::fill(&mut self.rng, template));
        for p in tool {
            if let Some(key) = &p.key {
                parts.push(format!("Also, what do we have on file for {key}?"));
            }
        }
        for p in facts {
            let s = self.clause_in(
                &[
                    "Also, ",
                    "Important: ",
                    "FYI, ",
                    "One more thing: ",
                    "Note that ",
                    "",
                ],
                &p.statement,
            );
            self.facts[p.index].text = s.clone();
            parts.push(s);
        }
        if self.rng.chance(0.2) {
            parts.push(self.rng.pick(vocab::CHATTER).to_string());
        }
        json!({"role": "user", "content": parts.join(" ")})
    }

    fn assistant_message(&mut self, facts: &[Pending]) -> Value {
        let mut parts: Vec<String> = Vec::new();
        if self.rng.chance(0.3) {
            parts.push(self.rng.pick(vocab::ACKS).to_string());
        }
        let reply = self.rng.pick(self.d.replies).to_string();
        parts.push(noise::fill(&mut self.rng, &reply));
        for p in facts {
            let s = self.clause_in(
                &["Noted: ", "To recap, ", "For the record, ", ""],
                &p.statement,
            );
            self.facts[p.index].text = s.clone();
            parts.push(s);
        }
        if self.rng.chance(0.2) {
            parts.push(self.rng.pick(vocab::ACKS).to_string());
        }
        let text = parts.join(" ");
        if self.responses() {
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]})
        } else {
            json!({"role": "assistant", "content": text})
        }
    }

    fn reasoning_item(&mut self, facts: &[Pending]) -> Value {
        let mut parts = vec![format!(
            "I should look at {} first and then check {}.",
            self.rng.pick(vocab::COMPONENTS),
            noise::noise_file(&mut self.rng)
        )];
        for p in facts {
            let s = self.clause_in(
                &["Keep in mind: ", "Note to self: ", "Relevant here: "],
                &p.statement,
            );
            self.facts[p.index].text = s.clone();
            parts.push(s);
        }
        self.call_seq += 1;
        json!({
            "type": "reasoning",
            "id": format!("rs_{:05}", self.call_seq),
            "summary": [{"type": "summary_text", "text": parts.join(" ")}],
        })
    }

    fn call(&mut self, name: &'static str, plant: Option<ToolPlant>) -> Call {
        self.call_seq += 1;
        let shape = self
            .d
            .tools
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(OutputShape::Doc, |(_, s)| *s);
        let (lo, hi) = self.shape.output_chars;
        let size = self.rng.log_size(
            (lo as f64 * self.scale) as u64,
            (hi as f64 * self.scale) as u64,
        );
        let rng = &mut self.rng;
        let d = self.d;
        let text = plant.as_ref().map(|p| p.text.as_str());
        let output = match shape {
            OutputShape::Json => noise::json_object(rng, d, size, &mut self.clock, text),
            OutputShape::Log => noise::log(rng, d, size, &mut self.clock, text),
            OutputShape::Doc => noise::doc(rng, d, size, text),
            OutputShape::Table => {
                let row = plant
                    .as_ref()
                    .and_then(|p| p.key.as_deref().map(|k| (k, p.text.as_str())));
                noise::table(rng, d, size, row)
            }
        };
        let arguments = match shape {
            OutputShape::Doc => json!({"path": format!("docs/page_{}.md", rng.below(400))}),
            OutputShape::Log => {
                json!({"source": rng.pick(vocab::LOG_SOURCES), "since": noise::timestamp(self.clock)})
            }
            OutputShape::Json => json!({"id": format!("req-{}", noise::hex(rng, 6))}),
            OutputShape::Table => {
                json!({"query": format!("select * from t_{} limit 500", rng.below(90))})
            }
        };
        Call {
            id: format!("call_{:05}", self.call_seq),
            name,
            arguments: arguments.to_string(),
            output,
        }
    }

    fn call_items(&self, calls: &[Call]) -> Vec<Value> {
        let mut items = Vec::new();
        if self.responses() {
            for c in calls {
                items.push(json!({"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}));
            }
            for c in calls {
                items.push(
                    json!({"type": "function_call_output", "call_id": c.id, "output": c.output}),
                );
            }
        } else {
            let tc: Vec<Value> = calls
                .iter()
                .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                .collect();
            items.push(json!({"role": "assistant", "content": null, "tool_calls": tc}));
            for c in calls {
                items.push(json!({"role": "tool", "tool_call_id": c.id, "content": c.output}));
            }
        }
        items
    }
}
