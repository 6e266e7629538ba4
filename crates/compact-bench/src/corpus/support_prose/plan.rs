//! The plan of a `support-prose` session, free of any language: which
//! sentence (by index) goes where, which facts are stated where and with
//! which values. Drawn from the seed alone, so the English session and its
//! translations share structure and identifiers.

use std::collections::HashMap;

use super::texts::Say;
use crate::corpus::plant::Ledger;
use crate::corpus::{FactKind, Location};
use crate::rng::Rng;

/// A part of a message a filler sentence comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Part {
    UserOpen,
    UserStory,
    UserClose,
    AgentOpen,
    AgentBody,
    AgentClose,
}

impl Part {
    const ALL: [Part; 6] = [
        Part::UserOpen,
        Part::UserStory,
        Part::UserClose,
        Part::AgentOpen,
        Part::AgentBody,
        Part::AgentClose,
    ];

    /// How many sentences every language has for the part (the lengths of
    /// [`super::texts::Texts`]' arrays).
    fn len(self) -> usize {
        match self {
            Part::UserOpen | Part::UserClose | Part::AgentClose => 6,
            Part::UserStory => 44,
            Part::AgentOpen => 8,
            Part::AgentBody => 32,
        }
    }
}

/// What a filler sentence's slots hold.
#[derive(Debug, Clone)]
pub(super) struct Slots {
    pub n: u64,
    pub day: usize,
    pub time: String,
    pub person: usize,
}

/// A sentence of a paragraph.
#[derive(Debug, Clone)]
pub(super) enum Piece {
    Filler(Part, usize, Slots),
    /// The sentence of fact `i` of [`Plan::facts`].
    Fact(usize),
}

/// A fact to state.
#[derive(Debug, Clone)]
pub(super) struct Planned {
    pub say: Say,
    /// Which of the two wordings.
    pub variant: usize,
    /// The identifier (the anchor).
    pub v: String,
    /// The replaced value, for a supersession.
    pub w: Option<String>,
    pub kind: FactKind,
    pub location: Location,
    pub turn: usize,
    /// The fact a supersession replaces.
    pub replaces: Option<usize>,
}

/// Which record the agent looks up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tool {
    Customer,
    Shipment,
    Device,
}

/// A lookup before the agent's reply.
#[derive(Debug, Clone)]
pub(super) struct ToolPlan {
    pub tool: Tool,
    /// A fact its output states.
    pub fact: Option<usize>,
    /// Draws the output's noise.
    pub seed: u64,
}

/// One turn: the customer's paragraphs, maybe a lookup, the agent's
/// paragraphs.
#[derive(Debug, Clone)]
pub(super) struct TurnPlan {
    pub user: Vec<Vec<Piece>>,
    /// The weekday of the previous reply, quoted below the customer's
    /// message as email clients do (only a reply that states no fact, so
    /// an anchor still occurs once).
    pub quote: Option<usize>,
    pub tool: Option<ToolPlan>,
    pub agent: Vec<Vec<Piece>>,
}

/// A whole session.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    pub customer: String,
    pub turns: Vec<TurnPlan>,
    pub facts: Vec<Planned>,
}

/// The customer's device (noise: it recurs).
pub(super) const MODEL: &str = "HX-200";

const CARRIERS: &[&str] = &[
    "DHL Express",
    "UPS Standard",
    "FedEx Priority",
    "GLS",
    "DPD",
    "SEUR",
    "Hermes",
];
const MODELS: &[&str] = &[
    "HX-300 Pro",
    "HX-210",
    "HX-150 Lite",
    "HX-400 Max",
    "HX-250",
];
const PLANS: &[&str] = &[
    "Team Plus",
    "Business Annual",
    "Starter Monthly",
    "Pro Yearly",
    "Office Flex",
];
const REGIONS: &[&str] = &[
    "eu-central-1",
    "eu-west-3",
    "eu-north-1",
    "eu-south-2",
    "ca-central-1",
    "ap-east-1",
];
const FIRST: &[&str] = &[
    "laura", "marco", "jonas", "lin", "tomas", "elena", "samir", "greta", "wei", "lucia",
];
const LAST: &[&str] = &[
    "moreno", "keller", "fischer", "zhang", "ortiz", "berg", "nakamura", "silva",
];
const DOMAINS: &[&str] = &[
    "harbourmail.com",
    "officebox.net",
    "studio-nord.de",
    "kanzlei-weber.de",
    "estudio-sol.es",
];
const SLUGS: &[&str] = &[
    "sync-errors",
    "reset-without-data-loss",
    "orange-status-light",
    "replace-device",
    "setup-code",
];

/// A decision subject and its open decision.
struct Open {
    subject: usize,
    fact: usize,
    value: String,
    turn: usize,
}

/// Cycles through a part's sentences in a shuffled order, so a session
/// repeats a sentence only after using all the others.
struct Deck {
    order: Vec<usize>,
    at: usize,
}

impl Deck {
    fn new(n: usize) -> Self {
        Self {
            order: (0..n).collect(),
            at: n,
        }
    }

    fn next(&mut self, rng: &mut Rng) -> usize {
        if self.at >= self.order.len() {
            for i in (1..self.order.len()).rev() {
                let j = rng.below(i as u64 + 1) as usize;
                self.order.swap(i, j);
            }
            self.at = 0;
        }
        self.at += 1;
        self.order[self.at - 1]
    }
}

struct Drawer {
    rng: Rng,
    values: Ledger,
    decks: Vec<Deck>,
    facts: Vec<Planned>,
    open: Vec<Open>,
    /// Decision subjects decided (carrier, model, plan, refund).
    decided: [bool; 4],
    /// Sentences of the message being written: not repeated in it.
    in_message: Vec<(Part, usize)>,
    /// The slots of each sentence used so far: a sentence said again says
    /// the same thing (a customer restating "we restarted it 4 times"
    /// does not change the number).
    said: HashMap<(Part, usize), Slots>,
    /// The last reply states no fact, so a customer may quote it.
    quotable: bool,
    /// The customer's and the agent's names (indices): the same all
    /// thread long; colleagues are the other names.
    customer: usize,
    agent: usize,
}

/// The plan of `seed`.
pub(super) fn draw(seed: u64) -> Plan {
    let mut d = Drawer {
        rng: Rng::new(seed.wrapping_mul(0x2545_F491) ^ 0x0509_97A1),
        values: Ledger::default(),
        decks: Part::ALL.iter().map(|p| Deck::new(p.len())).collect(),
        facts: Vec::new(),
        open: Vec::new(),
        decided: [false; 4],
        in_message: Vec::new(),
        said: HashMap::new(),
        quotable: false,
        customer: 0,
        agent: 0,
    };
    d.customer = d.rng.below(8) as usize;
    d.agent = (d.customer + 1 + d.rng.below(7) as usize) % 8;
    let customer = format!("C-{}", d.rng.range(1000, 9999));
    let n = d.rng.range(44, 64) as usize;
    let turns = (1..=n).map(|t| d.turn(t)).collect();
    Plan {
        customer,
        turns,
        facts: d.facts,
    }
}

impl Drawer {
    fn filler(&mut self, part: Part) -> Piece {
        let mut i = self.decks[part as usize].next(&mut self.rng);
        // A deck reshuffled mid-message would repeat a sentence in it.
        for _ in 0..part.len() {
            if !self.in_message.contains(&(part, i)) {
                break;
            }
            i = self.decks[part as usize].next(&mut self.rng);
        }
        self.in_message.push((part, i));
        if let Some(slots) = self.said.get(&(part, i)) {
            return Piece::Filler(part, i, slots.clone());
        }
        let person = match part {
            Part::UserOpen | Part::UserClose | Part::AgentOpen => self.customer,
            Part::AgentClose => self.agent,
            Part::UserStory | Part::AgentBody => loop {
                let p = self.rng.below(8) as usize;
                if p != self.customer && p != self.agent {
                    break p;
                }
            },
        };
        let r = &mut self.rng;
        let slots = Slots {
            n: r.range(2, 40),
            day: r.below(7) as usize,
            time: format!("{:02}:{:02}", r.range(7, 22), 15 * r.below(4)),
            person,
        };
        self.said.insert((part, i), slots.clone());
        Piece::Filler(part, i, slots)
    }

    fn code(&mut self, prefix: &str, digits: u32) -> String {
        let lo = 10u64.pow(digits - 1);
        self.values.fresh(&mut self.rng, |r| {
            format!("{prefix}{}", r.range(lo, 10 * lo - 1))
        })
    }

    fn version(&mut self) -> String {
        self.values.fresh(&mut self.rng, |r| {
            format!("{}.{}.{}", r.range(3, 6), r.range(0, 20), r.range(0, 9))
        })
    }

    fn email(&mut self, domain: Option<&str>) -> String {
        self.values.fresh(&mut self.rng, |r| {
            format!(
                "{}.{}@{}",
                r.pick(FIRST),
                r.pick(LAST),
                domain.unwrap_or_else(|| {
                    let d: &&str = r.pick(DOMAINS);
                    d
                })
            )
        })
    }

    fn push(
        &mut self,
        say: Say,
        v: String,
        w: Option<String>,
        location: Location,
        turn: usize,
    ) -> usize {
        use Say::*;
        let kind = match say {
            Order | Email | Version | Amount | Address | Case | Url | Depot | Firmware => {
                FactKind::Identifier
            }
            NeverCall | DataRegion | ArriveBefore | OnlyEmail | MaxAmount | KeepAddress => {
                FactKind::Constraint
            }
            DecideCarrier | DecideModel | DecidePlan | DecideRefund => FactKind::Decision,
            SwitchCarrier | SwitchModel | SwitchPlan | SwitchRefund => FactKind::Supersession,
            SendRma | FollowUp => FactKind::Action,
        };
        let variant = self.rng.below(2) as usize;
        self.facts.push(Planned {
            say,
            variant,
            v,
            w,
            kind,
            location,
            turn,
            replaces: None,
        });
        self.facts.len() - 1
    }

    /// A decision on an undecided subject among `subjects`, or a
    /// supersession of an open one; None when neither is possible.
    fn decision(&mut self, subjects: &[usize], location: Location, turn: usize) -> Option<usize> {
        let eligible: Vec<usize> = (0..self.open.len())
            .filter(|&i| self.open[i].turn + 2 <= turn && subjects.contains(&self.open[i].subject))
            .collect();
        if !eligible.is_empty() && self.rng.chance(0.5) {
            let i = *self.rng.pick(&eligible);
            let old = self.open.remove(i);
            let (say, v) = match old.subject {
                0 => (
                    Say::SwitchCarrier,
                    self.values.fresh_pick(&mut self.rng, CARRIERS)?,
                ),
                1 => (
                    Say::SwitchModel,
                    self.values.fresh_pick(&mut self.rng, MODELS)?,
                ),
                2 => (
                    Say::SwitchPlan,
                    self.values.fresh_pick(&mut self.rng, PLANS)?,
                ),
                _ => (Say::SwitchRefund, self.code("RF-", 6)),
            };
            let f = self.push(say, v, Some(old.value), location, turn);
            self.facts[f].replaces = Some(old.fact);
            return Some(f);
        }
        let free: Vec<usize> = subjects
            .iter()
            .copied()
            .filter(|&s| !self.decided[s])
            .collect();
        if free.is_empty() {
            return None;
        }
        let subject = *self.rng.pick(&free);
        self.decided[subject] = true;
        let (say, v) = match subject {
            0 => (
                Say::DecideCarrier,
                self.values.fresh_pick(&mut self.rng, CARRIERS)?,
            ),
            1 => (
                Say::DecideModel,
                self.values.fresh_pick(&mut self.rng, MODELS)?,
            ),
            2 => (
                Say::DecidePlan,
                self.values.fresh_pick(&mut self.rng, PLANS)?,
            ),
            _ => (Say::DecideRefund, self.code("SC-", 5)),
        };
        let f = self.push(say, v.clone(), None, location, turn);
        self.open.push(Open {
            subject,
            fact: f,
            value: v,
            turn,
        });
        Some(f)
    }

    fn user_fact(&mut self, turn: usize) -> usize {
        let loc = Location::User;
        let r = self.rng.below(100);
        if r < 18
            && let Some(f) = self.decision(&[0, 1, 2], loc, turn)
        {
            return f;
        }
        let (say, v) = match r % 11 {
            0 => (Say::Order, self.code("ORD-", 6)),
            1 => (Say::Email, self.email(None)),
            2 => (Say::Version, self.version()),
            3 => {
                let v = self.values.fresh(&mut self.rng, |r| {
                    format!("{}.{:02} EUR", r.range(20, 900), r.below(100))
                });
                (Say::Amount, v)
            }
            4 => {
                let v = self.values.fresh(&mut self.rng, |r| {
                    format!(
                        "192.168.{}.{}:{}",
                        r.range(0, 9),
                        r.range(10, 250),
                        r.pick(&[8443, 8080, 9000, 5001, 8888, 4443, 10443])
                    )
                });
                let say = if self.rng.chance(0.5) {
                    Say::Address
                } else {
                    Say::KeepAddress
                };
                (say, v)
            }
            5 => {
                let v = self.values.fresh(&mut self.rng, |r| {
                    format!(
                        "+{} {} {} {}",
                        r.pick(&[34, 49, 44, 86, 33]),
                        r.range(600, 799),
                        r.range(100, 999),
                        r.range(1000, 9999)
                    )
                });
                (Say::NeverCall, v)
            }
            6 => match self.values.fresh_pick(&mut self.rng, REGIONS) {
                Some(v) => (Say::DataRegion, v),
                None => (Say::Order, self.code("ORD-", 6)),
            },
            7 => {
                let v = self.values.fresh(&mut self.rng, |r| {
                    format!("2025-{:02}-{:02}", r.range(5, 9), r.range(1, 28))
                });
                (Say::ArriveBefore, v)
            }
            8 => (Say::OnlyEmail, self.email(None)),
            9 => {
                let v = self
                    .values
                    .fresh(&mut self.rng, |r| format!("{}.00 EUR", 10 * r.range(5, 90)));
                (Say::MaxAmount, v)
            }
            _ => (Say::Order, self.code("ORD-", 6)),
        };
        self.push(say, v, None, loc, turn)
    }

    fn agent_fact(&mut self, turn: usize) -> usize {
        let loc = Location::Assistant;
        let r = self.rng.below(100);
        if r < 20
            && let Some(f) = self.decision(&[0, 3], loc, turn)
        {
            return f;
        }
        let (say, v) = match r % 4 {
            0 => (Say::Case, self.code("CS-", 5)),
            1 => {
                let v = self.values.fresh(&mut self.rng, |r| {
                    if r.chance(0.5) {
                        format!(
                            "https://status.hexanet.example/incidents/{}",
                            r.range(1000, 9999)
                        )
                    } else {
                        format!(
                            "https://help.hexanet.example/articles/{}-{}",
                            r.range(100, 999),
                            r.pick(SLUGS)
                        )
                    }
                });
                (Say::Url, v)
            }
            2 => (Say::SendRma, self.code("RMA-", 5)),
            _ => (Say::FollowUp, self.email(Some("hexanet-support.com"))),
        };
        self.push(say, v, None, loc, turn)
    }

    fn tool_fact(&mut self, turn: usize) -> (Tool, usize) {
        let loc = Location::Tool;
        match self.rng.below(3) {
            0 => {
                let v = self.values.fresh(&mut self.rng, |r| {
                    format!(
                        "https://track.parcelnet.example/p/{}",
                        r.range(1_000_000_000, 9_999_999_999)
                    )
                });
                (Tool::Shipment, self.push(Say::Url, v, None, loc, turn))
            }
            1 => {
                let v = self.code("DEP-", 3);
                (Tool::Shipment, self.push(Say::Depot, v, None, loc, turn))
            }
            _ => {
                let v = self.version();
                (Tool::Device, self.push(Say::Firmware, v, None, loc, turn))
            }
        }
    }

    /// Paragraphs of `np` paragraphs of `lo..=hi` sentences of `part`,
    /// facts put inside a paragraph, never first.
    fn paragraphs(
        &mut self,
        part: Part,
        np: usize,
        lo: u64,
        hi: u64,
        facts: &[usize],
    ) -> Vec<Vec<Piece>> {
        let mut paras: Vec<Vec<Piece>> = (0..np)
            .map(|_| {
                let k = self.rng.range(lo, hi) as usize;
                (0..k).map(|_| self.filler(part)).collect()
            })
            .collect();
        for &f in facts {
            let p = self.rng.below(np as u64) as usize;
            let at = self.rng.range(1, paras[p].len().max(1) as u64) as usize;
            let at = at.min(paras[p].len());
            paras[p].insert(at, Piece::Fact(f));
        }
        paras
    }

    fn turn(&mut self, t: usize) -> TurnPlan {
        let k = match self.rng.below(100) {
            0..20 => 0,
            20..70 => 1,
            70..95 => 2,
            _ => 3,
        };
        let (mut user, mut agent, mut tool) = (Vec::new(), Vec::new(), None);
        for _ in 0..k {
            match self.rng.below(100) {
                0..48 => user.push(self.user_fact(t)),
                48..85 => agent.push(self.agent_fact(t)),
                _ if tool.is_none() => tool = Some(self.tool_fact(t)),
                _ => agent.push(self.agent_fact(t)),
            }
        }
        self.in_message.clear();
        let np = if t == 1 {
            self.rng.range(4, 6)
        } else {
            self.rng.range(1, 4)
        } as usize;
        let mut user_paras = self.paragraphs(Part::UserStory, np, 2, 6, &user);
        let open = self.filler(Part::UserOpen);
        user_paras[0].insert(0, open);
        if self.rng.chance(0.8) {
            let close = self.filler(Part::UserClose);
            if let Some(last) = user_paras.last_mut() {
                last.push(close);
            }
        }
        let tool = match tool {
            Some((tool, f)) => Some(ToolPlan {
                tool,
                fact: Some(f),
                seed: self.rng.next_u64(),
            }),
            None if self.rng.chance(0.1) => Some(ToolPlan {
                tool: *self
                    .rng
                    .pick(&[Tool::Customer, Tool::Shipment, Tool::Device]),
                fact: None,
                seed: self.rng.next_u64(),
            }),
            None => None,
        };
        self.in_message.clear();
        let na = self.rng.range(1, 3) as usize;
        let mut agent_paras = self.paragraphs(Part::AgentBody, na, 2, 4, &agent);
        let open = self.filler(Part::AgentOpen);
        agent_paras[0].insert(0, open);
        if self.rng.chance(0.7) {
            let close = self.filler(Part::AgentClose);
            agent_paras.push(vec![close]);
        }
        let quote = (self.quotable && self.rng.chance(0.5)).then(|| self.rng.below(7) as usize);
        self.quotable = !agent_paras
            .iter()
            .flatten()
            .any(|p| matches!(p, Piece::Fact(_)));
        TurnPlan {
            user: user_paras,
            quote,
            tool,
            agent: agent_paras,
        }
    }
}
