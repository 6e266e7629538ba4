//! Fact values and the clauses that state them. Every value is drawn from
//! a fact namespace (`vocab`) and reserved, so no two facts share a value.

use std::collections::HashSet;

use super::vocab;
use super::{Agent, FactKind};
use crate::rng::Rng;

/// A fact as it will be written: a clause (lowercase start, no final
/// period) and the probes that find it.
#[derive(Debug, Clone)]
pub(super) struct Statement {
    pub kind: FactKind,
    pub clause: String,
    pub probes: Vec<String>,
    pub superseded: Option<Vec<String>>,
    /// What a later supersession may replace.
    pub topic: Option<Topic>,
}

/// Something a later statement can replace: a decision's subject or a
/// numeric limit. One open statement per topic.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Topic {
    Subject(usize),
    Limit(Limit),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Limit {
    Retries,
    Deadline,
    Connections,
    Discount,
    Refund,
    Gpu,
}

/// A statement that is still current, and the probes it was found by.
#[derive(Debug, Clone)]
pub(super) struct Open {
    pub topic: Topic,
    pub value: String,
    pub fact: usize,
    pub turn: usize,
}

/// Draws values and writes statements for one session.
pub(super) struct Writer {
    pub agent: Agent,
    pub reserved: HashSet<String>,
    used_subjects: HashSet<usize>,
}

#[derive(Debug, Clone, Copy)]
enum ValueKind {
    Ticket,
    Host,
    Path,
    Url,
    Email,
    Version,
    Port,
    Region,
    Branch,
    Function,
    Quantity,
    ErrorCode,
    Account,
    Order,
    Invoice,
    Arxiv,
    Doi,
    Dataset,
    Table,
}

impl Writer {
    pub(super) fn new(agent: Agent) -> Self {
        Self {
            agent,
            reserved: HashSet::new(),
            used_subjects: HashSet::new(),
        }
    }

    /// `draw` until the value is new to the session (bounded: after many
    /// collisions the value gets a suffix glued on with `_`, so the earlier
    /// value is not a word-bounded part of it).
    fn fresh(&mut self, rng: &mut Rng, mut draw: impl FnMut(&mut Rng) -> String) -> String {
        for _ in 0..64 {
            let v = draw(rng);
            if self.reserved.insert(v.to_ascii_lowercase()) {
                return v;
            }
        }
        let v = format!("{}_{}", draw(rng), self.reserved.len());
        self.reserved.insert(v.to_ascii_lowercase());
        v
    }

    fn value(&mut self, rng: &mut Rng, kind: ValueKind) -> String {
        let agent = self.agent;
        self.fresh(rng, |r| match kind {
            ValueKind::Ticket => format!(
                "{}-{}",
                r.pick(vocab::ticket_prefixes(agent)),
                r.range(100, 9999)
            ),
            ValueKind::Host => format!(
                "{}-{}-{:02}.{}.internal",
                r.pick(vocab::HOST_SERVICES),
                r.pick(vocab::HOST_ROLES),
                r.range(1, 40),
                r.pick(vocab::HOST_ENVS)
            ),
            ValueKind::Path => {
                if r.chance(0.7) {
                    format!(
                        "src/{}/{}.rs",
                        r.pick(vocab::PATH_DIRS),
                        r.pick(vocab::PATH_NAMES)
                    )
                } else {
                    format!(
                        "deploy/{}/{}.yaml",
                        r.pick(vocab::HOST_ENVS),
                        r.pick(vocab::PATH_NAMES)
                    )
                }
            }
            ValueKind::Url => format!(
                "https://{}/{}/{}-{}",
                r.pick(vocab::URL_HOSTS),
                r.pick(vocab::URL_WORDS),
                r.pick(vocab::URL_WORDS),
                r.range(10, 999)
            ),
            ValueKind::Email => format!(
                "{}.{}@{}",
                r.pick(vocab::FIRST_NAMES),
                r.pick(vocab::LAST_NAMES),
                r.pick(vocab::EMAIL_DOMAINS)
            ),
            ValueKind::Version => {
                format!("v{}.{}.{}", r.range(1, 9), r.range(0, 40), r.range(0, 20))
            }
            ValueKind::Port => format!("port {}", r.range(1025, 65_000)),
            ValueKind::Region => r.pick(vocab::REGIONS).to_string(),
            ValueKind::Branch => format!(
                "{}/{}-{}",
                r.pick(&["feature", "fix", "hotfix"]),
                r.pick(vocab::BRANCH_WORDS),
                r.pick(vocab::BRANCH_WORDS)
            ),
            ValueKind::Function => format!(
                "{}_{}_{}",
                r.pick(vocab::FN_VERBS),
                r.pick(vocab::FN_NOUNS),
                r.pick(vocab::FN_NOUNS)
            ),
            ValueKind::Quantity => {
                format!("{} {}", r.range(2, 4000), r.pick(vocab::UNITS))
            }
            ValueKind::ErrorCode => format!(
                "E-{}-{}",
                r.pick(vocab::ERROR_FAMILIES),
                r.range(1000, 9999)
            ),
            ValueKind::Account => format!("ACCT-{}", r.range(10_000, 99_999)),
            ValueKind::Order => format!("ORD-{}", r.range(100_000, 999_999)),
            ValueKind::Invoice => format!("INV-2025-{}", r.range(10_000, 99_999)),
            ValueKind::Arxiv => format!(
                "arXiv:{}{:02}.{}",
                r.range(22, 24),
                r.range(1, 12),
                r.range(10_000, 19_999)
            ),
            ValueKind::Doi => format!(
                "10.{}/{}.{}.{}",
                r.range(1000, 9999),
                r.pick(&["jmlr", "tacl", "acl", "nips"]),
                r.range(2019, 2024),
                r.range(100, 999)
            ),
            ValueKind::Dataset => r.pick(vocab::DATASETS).to_string(),
            ValueKind::Table => format!(
                "{}_{}q{}",
                r.pick(vocab::TABLE_WORDS),
                r.range(2021, 2024),
                r.range(1, 4)
            ),
        })
    }

    fn identifier_kinds(&self) -> &'static [ValueKind] {
        use ValueKind::*;
        match self.agent {
            Agent::Coding => &[
                Ticket, Host, Path, Url, Email, Version, Port, Region, Branch, Function, Quantity,
                ErrorCode,
            ],
            Agent::Support => &[
                Ticket, Account, Order, Invoice, Url, Email, Quantity, ErrorCode, Host, Version,
            ],
            Agent::Research => &[
                Ticket, Url, Email, Arxiv, Doi, Dataset, Quantity, Version, Path, Host,
            ],
        }
    }

    /// An identifier stated in a clause.
    pub(super) fn identifier(&mut self, rng: &mut Rng) -> Statement {
        let kind = *rng.pick(self.identifier_kinds());
        let v = self.value(rng, kind);
        let templates: &[&str] = match kind {
            ValueKind::Ticket => &[
                "this is tracked in {v}",
                "I opened {v} for it",
                "the full history is in {v}",
                "the root cause is written up in {v}",
            ],
            ValueKind::Host => &[
                "the primary is {v}",
                "the job runs on {v}",
                "traffic is pinned to {v} for now",
            ],
            ValueKind::Path | ValueKind::Table => &[
                "the logic lives in {v}",
                "the problem is in {v}",
                "the settings come from {v}",
            ],
            ValueKind::Url => &[
                "the runbook is at {v}",
                "the dashboard is {v}",
                "the details are on {v}",
            ],
            ValueKind::Email => &[
                "the owner is {v}",
                "reports go to {v}",
                "the contact on file is {v}",
            ],
            ValueKind::Version => &[
                "production runs {v}",
                "the fix shipped in {v}",
                "the client is on {v}",
            ],
            ValueKind::Port => &[
                "the admin API listens on {v}",
                "the sidecar exposes metrics on {v}",
            ],
            ValueKind::Region => &["the primary cluster is in {v}", "the replica runs in {v}"],
            ValueKind::Branch => &["the work is on {v}", "the fix was pushed to {v}"],
            ValueKind::Function => &["the entry point is {v}()", "the hot spot is {v}()"],
            ValueKind::Quantity => &[
                "peak usage was {v}",
                "the budget is {v}",
                "it needs roughly {v}",
            ],
            ValueKind::ErrorCode => &[
                "the client gets {v} back",
                "it fails with {v}",
                "the error code is {v}",
            ],
            ValueKind::Account => &["the account is {v}", "this concerns {v}"],
            ValueKind::Order => &[
                "the order in question is {v}",
                "the replacement order is {v}",
            ],
            ValueKind::Invoice => &[
                "the disputed invoice is {v}",
                "the corrected invoice is {v}",
            ],
            ValueKind::Arxiv => &["the preprint is {v}", "the key reference is {v}"],
            ValueKind::Doi => &[
                "the journal version has DOI {v}",
                "the paper to cite is {v}",
            ],
            ValueKind::Dataset => &["the evaluation uses {v}", "the numbers come from {v}"],
        };
        Statement {
            kind: FactKind::Identifier,
            clause: rng.pick(templates).replace("{v}", &v),
            probes: vec![v],
            superseded: None,
            topic: None,
        }
    }

    /// A value for a table row's last column, and the row's key (which the
    /// user names elsewhere).
    pub(super) fn row_fact(&mut self, rng: &mut Rng) -> (String, Statement) {
        let prefix = match self.agent {
            Agent::Research => "run",
            _ => "tenant",
        };
        let key = self.fresh(rng, |r| {
            format!(
                "{prefix}-{}-{:02}",
                r.pick(vocab::TENANT_WORDS),
                r.range(1, 99)
            )
        });
        let kind = *rng.pick(&[
            ValueKind::Quantity,
            ValueKind::Host,
            ValueKind::Email,
            ValueKind::Version,
            ValueKind::Region,
        ]);
        let v = self.value(rng, kind);
        let statement = Statement {
            kind: FactKind::Identifier,
            clause: v.clone(),
            probes: vec![v, key.clone()],
            superseded: None,
            topic: None,
        };
        (key, statement)
    }

    /// A constraint. `avoid` lists the limits already open (one per topic).
    pub(super) fn constraint(&mut self, rng: &mut Rng, avoid: &[Topic]) -> Statement {
        let limits: Vec<Limit> = self
            .limits()
            .iter()
            .copied()
            .filter(|l| !avoid.contains(&Topic::Limit(*l)))
            .collect();
        if !limits.is_empty() && rng.chance(0.45) {
            let limit = *rng.pick(&limits);
            return self.limit(rng, limit, None);
        }
        let (clause, probes) = match (self.agent, rng.below(4)) {
            (_, 0) => {
                let r = self.value(rng, ValueKind::Region);
                let (t, cue) = *rng.pick(&[
                    ("never deploy to {v}; legal has not cleared it", "never"),
                    ("do not store customer data in {v}", "do not"),
                    ("only run the batch jobs in {v}", "only"),
                ]);
                (t.replace("{v}", &r), vec![r, cue.to_string()])
            }
            (Agent::Coding, 1) => {
                let p = self.value(rng, ValueKind::Path);
                (
                    format!("a second reviewer is required for any change to {p}"),
                    vec![p, "required".into()],
                )
            }
            (Agent::Coding, 2) => {
                let b = self.value(rng, ValueKind::Branch);
                (format!("never force-push to {b}"), vec![b, "never".into()])
            }
            (Agent::Support, 1) => {
                let e = self.value(rng, ValueKind::Email);
                (
                    format!("only contact {e} about billing questions"),
                    vec![e, "only".into()],
                )
            }
            (Agent::Support, 2) => {
                let a = self.value(rng, ValueKind::Account);
                (
                    format!("do not change the plan of {a} without written sign-off"),
                    vec![a, "do not".into()],
                )
            }
            (Agent::Research, 1) => {
                let d = self.value(rng, ValueKind::Dataset);
                (
                    format!("do not train on {d}, it overlaps the test set"),
                    vec![d, "do not".into()],
                )
            }
            (Agent::Research, 2) => {
                let d = self.value(rng, ValueKind::Arxiv);
                (
                    format!("we must replicate the main table of {d} before citing it"),
                    vec![d, "must".into()],
                )
            }
            (_, 3) => {
                let v = self.value(rng, ValueKind::Version);
                (
                    format!("the client library must stay pinned at {v}"),
                    vec![v, "must".into()],
                )
            }
            _ => {
                let h = self.value(rng, ValueKind::Host);
                (
                    format!("never run migrations against {h} directly"),
                    vec![h, "never".into()],
                )
            }
        };
        Statement {
            kind: FactKind::Constraint,
            clause,
            probes,
            superseded: None,
            topic: None,
        }
    }

    fn limits(&self) -> &'static [Limit] {
        match self.agent {
            Agent::Coding => &[Limit::Retries, Limit::Deadline, Limit::Connections],
            Agent::Support => &[Limit::Discount, Limit::Refund, Limit::Deadline],
            Agent::Research => &[Limit::Gpu, Limit::Deadline, Limit::Retries],
        }
    }

    /// A numeric limit; with `old`, the statement that replaces it.
    fn limit(&mut self, rng: &mut Rng, limit: Limit, old: Option<&str>) -> Statement {
        let (value, clause, cue) = match limit {
            Limit::Retries => {
                let v = self.fresh(rng, |r| format!("{} retries", r.range(2, 12)));
                (
                    v.clone(),
                    format!("the client may make at most {v} per request"),
                    "at most",
                )
            }
            Limit::Deadline => {
                let v = self.fresh(rng, |r| {
                    format!("{:02}:{:02} UTC", r.below(24), 15 * r.below(4))
                });
                let what = *rng.pick(&["migration", "cutover", "backfill", "rollout"]);
                (
                    v.clone(),
                    format!("the {what} must finish before {v}"),
                    "before",
                )
            }
            Limit::Connections => {
                let v = self.fresh(rng, |r| format!("{} connections", 8 * r.range(2, 40)));
                (
                    v.clone(),
                    format!("the pool may open at most {v}"),
                    "at most",
                )
            }
            Limit::Discount => {
                let v = self.fresh(rng, |r| format!("{}% off", 5 * r.range(1, 10)));
                (
                    v.clone(),
                    format!("never offer more than {v} without approval"),
                    "never",
                )
            }
            Limit::Refund => {
                let v = self.fresh(rng, |r| format!("{} EUR", 50 * r.range(4, 60)));
                (
                    v.clone(),
                    format!("manager approval is required for refunds above {v}"),
                    "required",
                )
            }
            Limit::Gpu => {
                let v = self.fresh(rng, |r| format!("{} GPU-hours", 100 * r.range(2, 40)));
                (
                    v.clone(),
                    format!("the whole study may use at most {v}"),
                    "at most",
                )
            }
        };
        let probes = vec![value.clone(), cue.to_string()];
        match old {
            None => Statement {
                kind: FactKind::Constraint,
                clause,
                probes,
                superseded: None,
                topic: Some(Topic::Limit(limit)),
            },
            Some(old) => Statement {
                kind: FactKind::Supersession,
                clause: format!("update, replacing the earlier {old}: {clause}"),
                probes,
                superseded: Some(vec![old.to_string(), cue.to_string()]),
                topic: Some(Topic::Limit(limit)),
            },
        }
    }

    /// A decision on a subject not decided yet (None when all are).
    pub(super) fn decision(&mut self, rng: &mut Rng) -> Option<Statement> {
        let subjects = vocab::subjects(self.agent);
        let free: Vec<usize> = (0..subjects.len())
            .filter(|i| !self.used_subjects.contains(i))
            .collect();
        if free.is_empty() {
            return None;
        }
        let i = *rng.pick(&free);
        self.used_subjects.insert(i);
        let (subject, choices) = subjects[i];
        let choice = self.choice(rng, choices)?;
        let reason = rng.pick(vocab::REASONS);
        let clause = match rng.below(3) {
            0 => format!("we'll use {choice} for the {subject} because {reason}"),
            1 => format!("decision: {choice} for the {subject}, since {reason}"),
            _ => format!("let's go with {choice} as the {subject}; {reason}"),
        };
        Some(Statement {
            kind: FactKind::Decision,
            clause,
            probes: vec![choice, subject.to_string()],
            superseded: None,
            topic: Some(Topic::Subject(i)),
        })
    }

    fn choice(&mut self, rng: &mut Rng, choices: &[&str]) -> Option<String> {
        let free: Vec<&str> = choices
            .iter()
            .copied()
            .filter(|c| !self.reserved.contains(&c.to_ascii_lowercase()))
            .collect();
        if free.is_empty() {
            return None;
        }
        let c = rng.pick(&free).to_string();
        self.reserved.insert(c.to_ascii_lowercase());
        Some(c)
    }

    /// The statement that replaces `open` (None when nothing can replace it).
    pub(super) fn supersede(&mut self, rng: &mut Rng, open: &Open) -> Option<Statement> {
        match &open.topic {
            Topic::Subject(i) => {
                let (subject, choices) = vocab::subjects(self.agent)[*i];
                let new = self.choice(rng, choices)?;
                let old = &open.value;
                let reason = rng.pick(vocab::REASONS);
                let clause = match rng.below(2) {
                    0 => format!(
                        "change of plan: the {subject} will use {new} instead of {old}, because {reason}"
                    ),
                    _ => format!(
                        "scratch that, we're switching the {subject} to {new} (not {old}) since {reason}"
                    ),
                };
                Some(Statement {
                    kind: FactKind::Supersession,
                    clause,
                    probes: vec![new, subject.to_string()],
                    superseded: Some(vec![old.clone(), subject.to_string()]),
                    topic: Some(open.topic.clone()),
                })
            }
            Topic::Limit(l) => Some(self.limit(rng, *l, Some(&open.value))),
        }
    }

    /// An open action or blocker.
    pub(super) fn action(&mut self, rng: &mut Rng) -> Statement {
        let (clause, probes) = match (self.agent, rng.below(6)) {
            (_, 0) => {
                let t = self.value(rng, ValueKind::Ticket);
                (
                    format!("we're blocked on {t} until the vendor replies"),
                    vec![t, "blocked".into()],
                )
            }
            (_, 1) => {
                let t = self.value(rng, ValueKind::Ticket);
                (
                    format!("waiting on {t} before we can close this out"),
                    vec![t, "waiting on".into()],
                )
            }
            (_, 2) => {
                let e = self.value(rng, ValueKind::Email);
                (
                    format!("follow up with {e} about the renewal"),
                    vec![e, "follow up".into()],
                )
            }
            (Agent::Coding, 3) => {
                let f = self.value(rng, ValueKind::Function);
                (
                    format!("TODO: add a regression test for {f}()"),
                    vec![f, "TODO".into()],
                )
            }
            (Agent::Support, 3) => {
                let a = self.value(rng, ValueKind::Invoice);
                (
                    format!("open action: send the corrected {a} to the customer"),
                    vec![a, "open action".into()],
                )
            }
            (Agent::Research, 3) => {
                let d = self.value(rng, ValueKind::Dataset);
                (
                    format!("TODO: re-run the ablation on {d}"),
                    vec![d, "TODO".into()],
                )
            }
            (_, 4) => {
                let t = self.value(rng, ValueKind::Table);
                (
                    format!("we still need to backfill {t}"),
                    vec![t, "still need".into()],
                )
            }
            _ => {
                let h = self.value(rng, ValueKind::Host);
                (
                    format!("TODO: rotate the credentials on {h}"),
                    vec![h, "TODO".into()],
                )
            }
        };
        Statement {
            kind: FactKind::Action,
            clause,
            probes,
            superseded: None,
            topic: None,
        }
    }
}
