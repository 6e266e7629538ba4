//! What the named corpora share: a ledger that reserves every fact value
//! (so no two facts share an anchor), records the facts as they are
//! written, and assembles the items into a checked [`Session`].

use std::collections::HashSet;

use compact_middleware::model::Format;
use serde_json::Value;

use super::{Agent, Fact, FactKind, Location, Session, Split};
use crate::rng::Rng;

/// The facts of one session and the values they reserved.
#[derive(Default)]
pub(super) struct Ledger {
    facts: Vec<Fact>,
    reserved: HashSet<String>,
    /// Facts a later statement replaced: they no longer count.
    replaced: HashSet<usize>,
}

impl Ledger {
    /// Reserves `v` (ignoring ASCII case); false when it was taken.
    pub(super) fn reserve(&mut self, v: &str) -> bool {
        self.reserved.insert(v.to_ascii_lowercase())
    }

    /// `draw` until the value is new to the session. After many collisions
    /// the value gets the count of reserved values glued on, so an earlier
    /// value (drawn values end in a word character) is not a word-bounded
    /// part of it.
    pub(super) fn fresh(
        &mut self,
        rng: &mut Rng,
        mut draw: impl FnMut(&mut Rng) -> String,
    ) -> String {
        for _ in 0..64 {
            let v = draw(rng);
            if self.reserve(&v) {
                return v;
            }
        }
        let v = format!("{}{}", draw(rng), self.reserved.len());
        self.reserve(&v);
        v
    }

    /// Picks an unreserved element of `xs` and reserves it (None when all
    /// are taken).
    pub(super) fn fresh_pick(&mut self, rng: &mut Rng, xs: &[&str]) -> Option<String> {
        let free: Vec<&str> = xs
            .iter()
            .copied()
            .filter(|x| !self.reserved.contains(&x.to_ascii_lowercase()))
            .collect();
        if free.is_empty() {
            return None;
        }
        let v = rng.pick(&free).to_string();
        self.reserve(&v);
        Some(v)
    }

    /// Records a fact; returns its index.
    pub(super) fn plant(
        &mut self,
        kind: FactKind,
        location: Location,
        turn: usize,
        probes: Vec<String>,
        text: impl Into<String>,
    ) -> usize {
        let index = self.facts.len();
        self.facts.push(Fact {
            id: format!("f{index}"),
            kind,
            location,
            turn,
            probes,
            superseded: None,
            text: text.into(),
        });
        index
    }

    /// Records a supersession of fact `old`: `old` no longer counts, and
    /// the new fact remembers its probes as the stale statement.
    pub(super) fn supersede(
        &mut self,
        old: usize,
        location: Location,
        turn: usize,
        probes: Vec<String>,
        text: impl Into<String>,
    ) -> usize {
        let stale = self.facts.get(old).map(|f| f.probes.clone());
        let index = self.plant(FactKind::Supersession, location, turn, probes, text);
        self.facts[index].superseded = stale;
        self.replaced.insert(old);
        index
    }

    /// The facts still counting, in order.
    fn current(self) -> Vec<Fact> {
        let replaced = self.replaced;
        self.facts
            .into_iter()
            .enumerate()
            .filter(|(i, _)| !replaced.contains(i))
            .map(|(_, f)| f)
            .collect()
    }
}

/// Who a session is.
pub(super) struct Header {
    pub corpus: &'static str,
    pub agent: Agent,
    pub wire: Format,
    pub seed: u64,
}

/// The session of `items`, with the facts whose anchor occurs once in it
/// (the others dropped and counted: a test holds that count at 0).
pub(super) fn assemble(
    h: Header,
    opening: Vec<Value>,
    turns: Vec<Vec<Value>>,
    ledger: Ledger,
) -> Session {
    let wire = if h.wire == Format::Responses {
        "responses"
    } else {
        "chat"
    };
    Session {
        name: format!("{}-{wire}-{}", h.corpus, h.seed),
        source: h.corpus.to_string(),
        split: Split::of_seed(h.seed),
        agent: h.agent,
        wire: h.wire,
        seed: h.seed,
        opening,
        turns,
        facts: Vec::new(),
        dropped: 0,
    }
    .with_unique_facts(ledger.current())
}

/// The first letter upper-cased.
pub(super) fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}
