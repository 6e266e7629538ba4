//! The words of a `data-json` session: requests padded with the context
//! people wrap them in, the agent's replies, and the sentences that state
//! facts (each with an identifier drawn fresh for the session, and a cue
//! word where the sentence has one).

use super::tables::Domain;
use crate::corpus::FactKind;
use crate::corpus::plant::Ledger;
use crate::rng::Rng;

/// What padded requests open with.
const OPENERS: &[&str] = &[
    "As I mentioned in the standup yesterday, and given what legal said about the data-sharing addendum,",
    "Following up on the thread with finance from this morning,",
    "Sorry if this is a repeat, I lost track of what we already pulled, but",
    "Before the Thursday review, and since the numbers in the last deck were questioned,",
    "Quick one while I remember, and no pressure if it takes a while,",
    "For the deck that Priya is putting together for the leadership offsite,",
    "Per the discussion in the analytics channel, which you probably saw,",
    "Okay, so after the call with the regional leads, where everyone had a different number,",
    "This is partly for my own understanding and partly because the CFO asked,",
    "Circling back on last week's question, now that the quarter has closed,",
    "I know we looked at something similar in January, but the definitions changed since, so",
    "Hi again! Building on what you found earlier,",
];

/// What they close with.
const CLOSERS: &[&str] = &[
    "No rush, but ideally before lunch.",
    "Thanks a lot, this is super helpful.",
    "Let me know if anything looks off.",
    "Happy to jump on a call if that's easier.",
    "If the data is messy, just tell me and we'll figure it out.",
    "Keep it rough, this is only for internal discussion.",
    "Appreciate it, as always.",
];

const ASKS: &[&str] = &[
    "could you please pull the {m} for {s} over the last two quarters?",
    "can you break down the {m} by month for {s}?",
    "could you check whether {s} look any different on {m} since the pricing change?",
    "can you find out why the {m} dropped for {s} in the last period?",
    "would you mind listing the biggest movers on {m} within {s}?",
    "could you compare the {m} of {s} with the rest of the book?",
    "can you get me the raw rows behind the {m} figure for {s}, so I can sanity check them?",
];

const REPLY_OPENERS: &[&str] = &[
    "Here is what the data shows.",
    "I pulled the rows and aggregated them.",
    "Short version first, details below.",
    "I ran the query against the warehouse and checked the totals.",
    "Done. A few things stood out.",
];

const REPLY_BODIES: &[&str] = &[
    "Most of the change is concentrated in a handful of rows; the long tail is flat.",
    "The totals match the report to within rounding, so the source looks consistent.",
    "Two months stand out, both around the migration; everything else is within the usual range.",
    "The distribution is skewed: the top ten rows account for more than half of the total.",
    "There are some nulls in the free-text columns, but none in the fields the figure depends on.",
    "I excluded voided and duplicate rows; including them moves the figure by less than one percent.",
    "The trend is steady quarter over quarter, with the usual dip in August.",
];

/// Words only fact values use.
const FACT_WORDS: &[&str] = &[
    "amber", "birch", "cedar", "falcon", "garnet", "hazel", "indigo", "jasper", "lagoon", "marble",
    "nimbus", "onyx", "pebble", "quartz", "raven", "sable", "topaz", "willow",
];

const FIRST: &[&str] = &[
    "ines",
    "tomas",
    "greta",
    "oluwaseun",
    "mei",
    "rafael",
    "anouk",
    "dmitri",
    "saanvi",
    "erik",
];

const LAST: &[&str] = &[
    "varga", "holloway", "brennan", "achebe", "lindgren", "moreno", "castell", "petrov", "iyer",
];

const DOMAINS: &[&str] = &[
    "harbourline.eu",
    "northwind-analytics.com",
    "corp-legal.net",
];

const FACT_REGIONS: &[&str] = &[
    "eu-central-2",
    "ap-southeast-3",
    "sa-east-1",
    "me-central-1",
    "af-south-1",
    "ca-west-1",
    "eu-south-2",
    "ap-northeast-3",
];

/// A sentence that states a fact, and how to find it.
pub(super) struct Statement {
    pub kind: FactKind,
    pub text: String,
    pub probes: Vec<String>,
    /// What a later statement may replace.
    pub topic: Option<Topic>,
}

/// What a supersession replaces: the source of a metric, or the row cap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Topic {
    Source(&'static str),
    Cap,
}

/// Draws fresh values and writes fact sentences for one session.
pub(super) struct Writer<'a> {
    pub ledger: &'a mut Ledger,
    pub d: &'static Domain,
}

fn st(kind: FactKind, text: String, probes: Vec<String>) -> Statement {
    Statement {
        kind,
        text,
        probes,
        topic: None,
    }
}

impl Writer<'_> {
    fn email(&mut self, rng: &mut Rng) -> String {
        self.ledger.fresh(rng, |r| {
            format!("{}.{}@{}", r.pick(FIRST), r.pick(LAST), r.pick(DOMAINS))
        })
    }

    fn table(&mut self, rng: &mut Rng) -> String {
        self.ledger.fresh(rng, |r| {
            format!(
                "{}.{}_{}",
                r.pick(&["sandbox", "staging", "finance", "legacy"]),
                r.pick(FACT_WORDS),
                r.pick(FACT_WORDS)
            )
        })
    }

    /// A view a metric can come from.
    pub(super) fn view(&mut self, rng: &mut Rng) -> String {
        self.ledger.fresh(rng, |r| {
            format!(
                "analytics.{}_{}_v{}",
                r.pick(FACT_WORDS),
                r.pick(FACT_WORDS),
                r.range(2, 9)
            )
        })
    }

    fn code(&mut self, rng: &mut Rng, prefix: &str, digits: u32) -> String {
        let lo = 10u64.pow(digits - 1);
        self.ledger
            .fresh(rng, |r| format!("{prefix}{}", r.range(lo, 10 * lo - 1)))
    }

    fn old_date(&mut self, rng: &mut Rng) -> String {
        // Facts' dates are in 2023 or 2026; the rows' are all in 2025.
        self.ledger.fresh(rng, |r| {
            format!(
                "{}-{:02}-{:02}",
                r.pick(&[2023, 2026]),
                r.range(1, 12),
                r.range(1, 28)
            )
        })
    }

    fn cap(&mut self, rng: &mut Rng) -> String {
        self.ledger
            .fresh(rng, |r| format!("{} rows", 500 * r.range(4, 180)))
    }

    /// A statement in the user's words; `open` lists the topics a new
    /// constraint or decision must not reopen.
    pub(super) fn user(&mut self, rng: &mut Rng, open: &[Topic]) -> Statement {
        let subject = *rng.pick(self.d.metrics);
        match rng.below(10) {
            0 => {
                let t = self.table(rng);
                st(
                    FactKind::Constraint,
                    format!(
                        "Please never include rows from {t}, those are our internal test tenants."
                    ),
                    vec![t, "never".into()],
                )
            }
            1 => {
                let r = self
                    .ledger
                    .fresh_pick(rng, FACT_REGIONS)
                    .unwrap_or_else(|| "eu-central-2".into());
                st(
                    FactKind::Constraint,
                    format!(
                        "Only count customers in {r} for this, the others are on a separate contract."
                    ),
                    vec![r, "only".into()],
                )
            }
            2 => {
                let e = self.email(rng);
                st(
                    FactKind::Constraint,
                    format!(
                        "Don't send anything to {e} until legal has signed off on the addendum."
                    ),
                    vec![e, "don't".into()],
                )
            }
            3 if !open.contains(&Topic::Cap) => {
                let c = self.cap(rng);
                Statement {
                    kind: FactKind::Constraint,
                    text: format!(
                        "Cap every extract at {c}; the BI tool chokes on anything bigger."
                    ),
                    probes: vec![c, "cap".into()],
                    topic: Some(Topic::Cap),
                }
            }
            4 if !open.contains(&Topic::Source(subject)) => {
                let v = self.view(rng);
                Statement {
                    kind: FactKind::Decision,
                    text: format!(
                        "We decided to use {v} for {subject} from now on, because the old table double counts refunds."
                    ),
                    probes: vec![v, subject.to_string()],
                    topic: Some(Topic::Source(subject)),
                }
            }
            5 => {
                let (what, v) = match rng.below(3) {
                    0 => (
                        "the dashboard everyone looks at is",
                        self.ledger.fresh(rng, |r| {
                            format!(
                                "https://bi.harbourline.internal/d/{}-{}",
                                r.pick(FACT_WORDS),
                                r.range(100, 999)
                            )
                        }),
                    ),
                    1 => ("this is tracked in", self.code(rng, "DATA-", 4)),
                    _ => (
                        "the snapshot we froze for the audit is",
                        self.ledger.fresh(rng, |r| {
                            format!("snap_2024_{:02}_{:02}", r.range(1, 12), r.range(1, 28))
                        }),
                    ),
                };
                st(
                    FactKind::Identifier,
                    format!("By the way, {what} {v}."),
                    vec![v],
                )
            }
            6 => {
                let d = self.old_date(rng);
                st(
                    FactKind::Constraint,
                    format!("The deadline for the board pack is {d}, and it cannot move."),
                    vec![d, "deadline".into()],
                )
            }
            7 => {
                let e = self.email(rng);
                st(
                    FactKind::Action,
                    format!(
                        "Can you remind me to send the cleaned extract to {e} once we're done?"
                    ),
                    vec![e, "send".into()],
                )
            }
            _ => {
                let t = self.table(rng);
                st(
                    FactKind::Action,
                    format!("We still need to backfill {t} for March, that one is on us."),
                    vec![t, "backfill".into()],
                )
            }
        }
    }

    /// The statement replacing an earlier one on `topic`, whose anchor was
    /// `old`.
    pub(super) fn supersede(&mut self, rng: &mut Rng, topic: &Topic, old: &str) -> Statement {
        match topic {
            Topic::Source(subject) => {
                let v = self.view(rng);
                Statement {
                    kind: FactKind::Supersession,
                    text: format!(
                        "Actually, scrap that: use {v} for {subject} instead of {old}, finance changed the definition last week."
                    ),
                    probes: vec![v, subject.to_string()],
                    topic: Some(topic.clone()),
                }
            }
            Topic::Cap => {
                let c = self.cap(rng);
                Statement {
                    kind: FactKind::Supersession,
                    text: format!(
                        "Change of plan on the cap: {c}, not {old}, the BI team raised the limit."
                    ),
                    probes: vec![c, "cap".into()],
                    topic: Some(topic.clone()),
                }
            }
        }
    }

    /// A statement in the agent's words.
    pub(super) fn assistant(&mut self, rng: &mut Rng, open: &[Topic]) -> Statement {
        let subject = *rng.pick(self.d.metrics);
        match rng.below(5) {
            0 => {
                let p = self.ledger.fresh(rng, |r| {
                    format!(
                        "s3://harbourline-exports/{}/{}/part-0000.parquet",
                        r.pick(FACT_WORDS),
                        r.range(1000, 9999)
                    )
                });
                st(
                    FactKind::Identifier,
                    format!("I saved the full extract to {p} in case you want the raw rows."),
                    vec![p],
                )
            }
            1 => {
                let q = self.code(rng, "Q-", 5);
                st(
                    FactKind::Identifier,
                    format!("The query behind these numbers is saved as {q}."),
                    vec![q],
                )
            }
            2 if !open.contains(&Topic::Source(subject)) => {
                let v = self.view(rng);
                Statement {
                    kind: FactKind::Decision,
                    text: format!(
                        "I'll use {v} for {subject}, since it is the only source with FX-adjusted amounts."
                    ),
                    probes: vec![v, subject.to_string()],
                    topic: Some(Topic::Source(subject)),
                }
            }
            3 => {
                let t = self.table(rng);
                st(
                    FactKind::Action,
                    format!("I still need to reconcile {t} against the ledger; I'll do that next."),
                    vec![t, "reconcile".into()],
                )
            }
            _ => {
                let n = self
                    .ledger
                    .fresh(rng, |r| format!("{} duplicate rows", r.range(12, 4000)));
                st(
                    FactKind::Identifier,
                    format!("The gap comes from {n} that the nightly job loaded twice."),
                    vec![n],
                )
            }
        }
    }

    /// A sentence for a free-text field of a tool's output.
    pub(super) fn note(&mut self, rng: &mut Rng) -> Statement {
        match rng.below(5) {
            0 => {
                let c = self
                    .ledger
                    .fresh(rng, |r| format!("CN-2024-{}", r.range(1000, 9999)));
                st(
                    FactKind::Constraint,
                    format!(
                        "Finance confirmed credit note {c} must be applied before the renewal."
                    ),
                    vec![c, "must".into()],
                )
            }
            1 => {
                let p = self.code(rng, "PO-", 5);
                st(
                    FactKind::Constraint,
                    format!("Customer requires purchase order {p} on every invoice."),
                    vec![p, "requires".into()],
                )
            }
            2 => {
                let e = self.email(rng);
                st(
                    FactKind::Constraint,
                    format!("Escalated to {e}; do not contact the customer directly."),
                    vec![e, "do not".into()],
                )
            }
            3 => {
                let d = self.old_date(rng);
                st(
                    FactKind::Identifier,
                    format!("Migrated from the legacy system on {d} by the platform team."),
                    vec![d],
                )
            }
            _ => {
                let e = self.email(rng);
                st(
                    FactKind::Action,
                    format!("Waiting on {e} to confirm the new billing contact."),
                    vec![e, "waiting on".into()],
                )
            }
        }
    }

    /// A caveat for a result's metadata.
    pub(super) fn caveat(&mut self, rng: &mut Rng) -> Statement {
        let d = self.old_date(rng);
        st(
            FactKind::Identifier,
            format!("Rows before {d} come from the legacy system and exclude partial refunds."),
            vec![d],
        )
    }

    /// The value of a row's otherwise-null column (`column` names it).
    pub(super) fn sparse(&mut self, rng: &mut Rng, column: &str) -> String {
        let prefix = match column {
            "hold_reason" => "LGL-",
            "dispute_ref" => "DSP-",
            "exception_code" => "EXC-",
            "audit_flag" => "AUD-",
            "escalation_ref" => "ESC-",
            _ => "FUP-",
        };
        self.code(rng, prefix, 4)
    }
}

/// `{m}` → a metric, `{s}` → a segment.
fn fill(rng: &mut Rng, d: &Domain, template: &str) -> String {
    let m: &&str = rng.pick(d.metrics);
    let s: &&str = rng.pick(d.segments);
    template.replace("{m}", m).replace("{s}", s)
}

/// A request padded the way people write them: context, the ask, the
/// facts, sometimes a question about a named row, a closing line.
pub(super) fn request(rng: &mut Rng, d: &Domain, facts: &[String], named: Option<&str>) -> String {
    let opener: &&str = rng.pick(OPENERS);
    let ask: &&str = rng.pick(ASKS);
    let mut parts = vec![format!("{opener} {}", fill(rng, d, ask))];
    if rng.chance(0.5) {
        parts.push(
            rng.pick(&[
                "I'm asking because the numbers in the weekly email didn't add up for me.",
                "The context is that we're revisiting the targets for next year.",
                "Somebody upstairs saw a spike and wants an explanation before Friday.",
                "I'd like to understand it myself before I present it.",
            ])
            .to_string(),
        );
    }
    parts.extend(facts.iter().cloned());
    if let Some(n) = named {
        parts.push(format!(
            "Also, what's going on with {n}? It looked odd in the last export."
        ));
    }
    if rng.chance(0.7) {
        parts.push(rng.pick(CLOSERS).to_string());
    }
    parts.join(" ")
}

/// A reply: an opening, what the data shows (a small table of aggregates
/// now and then), and the facts it states.
pub(super) fn reply(rng: &mut Rng, d: &Domain, facts: &[String]) -> String {
    let mut out = format!("{} {}", rng.pick(REPLY_OPENERS), rng.pick(REPLY_BODIES));
    if rng.chance(0.4) {
        let m = rng.pick(d.metrics);
        out.push_str(&format!("\n\n| month | {m} | change |\n|---|---|---|\n"));
        for month in ["Jan", "Feb", "Mar", "Apr"] {
            out.push_str(&format!(
                "| {month} | {} | {}{}% |\n",
                rng.range(100, 90_000),
                if rng.chance(0.5) { "+" } else { "-" },
                rng.range(0, 30)
            ));
        }
        out.push('\n');
    } else {
        out.push(' ');
    }
    let body: &&str = rng.pick(REPLY_BODIES);
    out.push_str(body);
    for f in facts {
        out.push(' ');
        out.push_str(f);
    }
    out
}
