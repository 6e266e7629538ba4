//! The data a `data-json` agent reads: tables whose every row repeats the
//! same fields, records with nested objects, and free-text fields. All
//! noise (names, ids, statuses and notes drawn from small pools, so they
//! recur), except what the generator plants: a note that states a fact, a
//! caveat in a result's metadata, or one row's value in a column that is
//! otherwise null.

use serde_json::{Map, Value, json};

use crate::rng::Rng;

/// A column's values.
#[derive(Debug, Clone, Copy)]
pub(super) enum Field {
    /// `{prefix}{digits}`, e.g. `acc_10432`.
    Id(&'static str, u32),
    /// The row's name (a company or a site): the key a user names.
    Name,
    Choice(&'static [&'static str]),
    Int(u64, u64),
    /// Two decimals.
    Amount(u64, u64),
    /// A date of 2025.
    Date,
    Handle,
    Region,
    /// Null in every row but the one a fact plants a value in.
    Sparse,
    /// Free text: null or a short note; a fact's sentence when planted.
    Note,
    Tags,
}

/// A table of the warehouse.
pub(super) struct Table {
    pub name: &'static str,
    pub fields: &'static [(&'static str, Field)],
}

impl Table {
    fn field(&self, kind: fn(&Field) -> bool) -> Option<&'static str> {
        self.fields.iter().find(|(_, f)| kind(f)).map(|(n, _)| *n)
    }

    /// The free-text column.
    pub(super) fn note(&self) -> &'static str {
        self.field(|f| matches!(f, Field::Note)).unwrap_or("notes")
    }

    /// The mostly-null column.
    pub(super) fn sparse(&self) -> &'static str {
        self.field(|f| matches!(f, Field::Sparse)).unwrap_or("flag")
    }
}

/// The business a session's data describes.
pub(super) struct Domain {
    pub system: &'static str,
    pub tables: &'static [Table],
    /// Noise notes.
    pub notes: &'static [&'static str],
    /// What users ask about.
    pub metrics: &'static [&'static str],
    pub segments: &'static [&'static str],
    /// Words for the report a tool returns.
    pub report: &'static str,
}

const COMPANIES: &[&str] = &[
    "Harlow Foods",
    "Meridian Optics",
    "Brackwater Ltd",
    "Nordvik Marine",
    "Calloway & Sons",
    "Pinecrest Clinics",
    "Ostara Bio",
    "Quayside Apparel",
    "Tessaro Labs",
    "Umbra Logistics",
    "Veldt Energy",
    "Wrenfield Press",
    "Yarrow Hotels",
    "Zephyr Analytics",
    "Alder Studio",
    "Brightline Freight",
    "Cobalt Finance",
    "Dunmore Retail",
    "Elmstead Care",
    "Foxglove Media",
    "Granite Peak",
    "Hollis Engineering",
    "Ironbark Tools",
    "Juniper Schools",
    "Kinsale Travel",
    "Lumen Dental",
    "Marlow Legal",
    "Northgate Bakery",
    "Oakhurst Farms",
    "Pelham Audio",
];

const SITES: &[&str] = &[
    "Rotterdam DC",
    "Lyon North",
    "Duisburg Hub",
    "Milan East",
    "Poznan Cross-dock",
    "Valencia Port",
    "Antwerp 2",
    "Leeds Central",
    "Gdansk Quay",
    "Bordeaux South",
];

/// Row names only facts use: a user names one, one row holds it.
pub(super) const FACT_NAMES: &[&str] = &[
    "Larkspur Dental",
    "Saffron & Vine",
    "Thistledown Games",
    "Halcyon Ferries",
    "Inkwell Academy",
    "Moorland Cider",
    "Quillon Security",
    "Redcap Breweries",
    "Silverbirch Homes",
    "Tamarind Kitchens",
    "Wexford Optics",
    "Vesper Aviation",
    "Cormorant Surf",
    "Gilded Lily Spa",
    "Hobnail Boots",
];

const HANDLES: &[&str] = &[
    "m.ferreira",
    "a.nguyen",
    "j.okafor",
    "s.lindqvist",
    "p.rossi",
    "k.tanaka",
    "l.moreau",
    "d.kowalski",
];

const REGIONS: &[&str] = &["eu-west", "eu-north", "us-east", "us-west", "apac"];

const TAGS: &[&str] = &[
    "priority",
    "renewal",
    "migration",
    "vip",
    "billing",
    "onboarding",
    "at-risk",
    "partner",
];

static BILLING: Domain = Domain {
    system: "You are a data assistant for the revenue operations team. You have read-only access to the billing warehouse through the tools run_query, get_record and fetch_report. Show your numbers, say which table they come from, and never modify data.",
    tables: &[
        Table {
            name: "billing.accounts",
            fields: &[
                ("account_id", Field::Id("acc_", 5)),
                ("name", Field::Name),
                (
                    "plan",
                    Field::Choice(&["starter", "growth", "scale", "enterprise"]),
                ),
                (
                    "status",
                    Field::Choice(&[
                        "active", "active", "active", "trialing", "past_due", "churned",
                    ]),
                ),
                ("mrr_eur", Field::Int(90, 4800)),
                ("region", Field::Region),
                ("owner", Field::Handle),
                ("renewal_date", Field::Date),
                ("hold_reason", Field::Sparse),
                ("notes", Field::Note),
            ],
        },
        Table {
            name: "billing.invoices",
            fields: &[
                ("invoice_id", Field::Id("in_", 6)),
                ("customer", Field::Name),
                ("issued_at", Field::Date),
                ("amount_eur", Field::Amount(40, 9000)),
                (
                    "state",
                    Field::Choice(&["paid", "paid", "paid", "open", "void", "uncollectible"]),
                ),
                ("dunning_stage", Field::Int(0, 3)),
                ("dispute_ref", Field::Sparse),
                ("memo", Field::Note),
            ],
        },
    ],
    notes: &[
        "Auto-renew is on; no changes requested.",
        "Renewal call scheduled with their procurement team.",
        "Customer asked for a copy of last year's invoices.",
        "Moved to annual billing at the last renewal.",
        "Contact changed after their reorganisation.",
        "Card on file expires soon; reminder sent.",
        "Usage is flat compared with the previous quarter.",
        "Discount from the launch campaign has ended.",
        "Paid late twice this year, both within the grace period.",
        "Uses the API integration for invoice downloads.",
    ],
    metrics: &[
        "MRR",
        "net revenue",
        "churned MRR",
        "expansion revenue",
        "open invoices",
        "days sales outstanding",
    ],
    segments: &[
        "the enterprise accounts",
        "the accounts in eu-west",
        "the growth plan",
        "accounts renewing this quarter",
        "the trialing accounts",
    ],
    report: "Revenue summary",
};

static LOGISTICS: Domain = Domain {
    system: "You are a data assistant for the logistics planning team. You can query the shipment warehouse (run_query), open single records (get_record) and fetch the weekly reports (fetch_report). Quote the shipment or site ids you rely on and do not change any record.",
    tables: &[
        Table {
            name: "ops.shipments",
            fields: &[
                ("shipment_id", Field::Id("SHP-", 5)),
                ("consignee", Field::Name),
                (
                    "origin",
                    Field::Choice(&["Rotterdam DC", "Duisburg Hub", "Antwerp 2", "Valencia Port"]),
                ),
                (
                    "carrier",
                    Field::Choice(&["DHL Freight", "DSV", "Geodis", "Dachser", "Raben"]),
                ),
                (
                    "status",
                    Field::Choice(&[
                        "in_transit",
                        "in_transit",
                        "delivered",
                        "delivered",
                        "delayed",
                        "at_hub",
                    ]),
                ),
                ("eta", Field::Date),
                ("weight_kg", Field::Amount(20, 2400)),
                ("pallets", Field::Int(1, 33)),
                ("exception_code", Field::Sparse),
                ("remarks", Field::Note),
            ],
        },
        Table {
            name: "ops.sites",
            fields: &[
                ("site_code", Field::Id("ST", 3)),
                ("site", Field::Name),
                ("region", Field::Region),
                ("capacity_pallets", Field::Int(800, 12000)),
                ("utilization_pct", Field::Int(35, 99)),
                ("manager", Field::Handle),
                ("audit_flag", Field::Sparse),
                ("notes", Field::Note),
            ],
        },
    ],
    notes: &[
        "Consolidated with the weekly Lyon run.",
        "Tail-lift required at delivery.",
        "Customs documents received and checked.",
        "Pallets re-wrapped at the hub after inspection.",
        "Booked on the night linehaul.",
        "Delivery window agreed with the consignee.",
        "Temperature logger attached; readings normal.",
        "Partial delivery; remainder follows next week.",
        "Driver reported a short wait at the gate.",
        "Labels reprinted after the scanner fault.",
    ],
    metrics: &[
        "on-time delivery rate",
        "average transit days",
        "delayed shipments",
        "hub utilization",
        "cost per pallet",
        "damage claims",
    ],
    segments: &[
        "the Rotterdam lanes",
        "DSV shipments",
        "the Iberian routes",
        "last week's delayed loads",
        "the cross-dock sites",
    ],
    report: "Weekly network report",
};

static SUPPORT_OPS: Domain = Domain {
    system: "You are a data assistant for the customer support operations team. You can query the ticket warehouse (run_query), open single tickets or customers (get_record) and fetch the monthly reports (fetch_report). Say which query each figure comes from.",
    tables: &[
        Table {
            name: "support.tickets",
            fields: &[
                ("ticket_id", Field::Id("T-", 6)),
                ("customer", Field::Name),
                (
                    "priority",
                    Field::Choice(&["low", "normal", "normal", "high", "urgent"]),
                ),
                (
                    "state",
                    Field::Choice(&["solved", "solved", "open", "pending", "on_hold"]),
                ),
                ("opened_at", Field::Date),
                ("first_response_min", Field::Int(2, 900)),
                ("assignee", Field::Handle),
                ("tags", Field::Tags),
                ("escalation_ref", Field::Sparse),
                ("summary", Field::Note),
            ],
        },
        Table {
            name: "support.csat",
            fields: &[
                ("survey_id", Field::Id("csat_", 6)),
                ("customer", Field::Name),
                ("score", Field::Int(1, 5)),
                (
                    "channel",
                    Field::Choice(&["email", "chat", "phone", "chat"]),
                ),
                ("answered_at", Field::Date),
                ("agent", Field::Handle),
                ("follow_up", Field::Sparse),
                ("comment", Field::Note),
            ],
        },
    ],
    notes: &[
        "Customer could not log in after the password reset.",
        "Asked how to export their data to CSV.",
        "Billing question forwarded to finance.",
        "Bug reproduced and linked to the engineering issue.",
        "Solved with the knowledge base article on SSO.",
        "Customer thanked the agent for the quick answer.",
        "Waiting on the customer's screenshots.",
        "Feature request logged for the roadmap review.",
        "Duplicate of an earlier ticket; merged.",
        "Slow response over the holiday weekend.",
    ],
    metrics: &[
        "first response time",
        "CSAT",
        "backlog",
        "reopen rate",
        "tickets per agent",
        "escalations",
    ],
    segments: &[
        "the urgent tickets",
        "chat conversations",
        "the enterprise customers",
        "last month's backlog",
        "tickets tagged billing",
    ],
    report: "Monthly support report",
};

/// Every domain, one per session.
pub(super) const DOMAINS: [&Domain; 3] = [&BILLING, &LOGISTICS, &SUPPORT_OPS];

fn date(rng: &mut Rng) -> String {
    format!("2025-{:02}-{:02}", rng.range(1, 12), rng.range(1, 28))
}

/// A noise row of `t`; a row for `key` when given.
pub(super) fn row(rng: &mut Rng, d: &Domain, t: &Table, key: Option<&str>) -> Map<String, Value> {
    let mut m = Map::new();
    for &(name, field) in t.fields {
        let v = match field {
            Field::Id(prefix, digits) => {
                let lo = 10u64.pow(digits - 1);
                json!(format!("{prefix}{}", rng.range(lo, 10 * lo - 1)))
            }
            Field::Name => json!(key.map(str::to_string).unwrap_or_else(|| {
                if t.name.ends_with("sites") {
                    rng.pick(SITES).to_string()
                } else {
                    rng.pick(COMPANIES).to_string()
                }
            })),
            Field::Choice(xs) => json!(rng.pick(xs)),
            Field::Int(lo, hi) => json!(rng.range(lo, hi)),
            Field::Amount(lo, hi) => {
                json!((rng.range(lo * 100, hi * 100) as f64) / 100.0)
            }
            Field::Date => json!(date(rng)),
            Field::Handle => json!(rng.pick(HANDLES)),
            Field::Region => json!(rng.pick(REGIONS)),
            Field::Sparse => Value::Null,
            Field::Note => {
                if rng.chance(0.45) {
                    json!(rng.pick(d.notes))
                } else {
                    Value::Null
                }
            }
            Field::Tags => {
                let n = rng.below(3);
                json!((0..n).map(|_| *rng.pick(TAGS)).collect::<Vec<_>>())
            }
        };
        m.insert(name.to_string(), v);
    }
    m
}

/// How a tool prints its JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Layout {
    /// Indented: every field on its own line.
    Pretty,
    /// One row per line inside an indented envelope (what many SQL tools
    /// print).
    RowLines,
    /// The whole document on one line.
    Compact,
}

impl Layout {
    pub(super) fn draw(rng: &mut Rng) -> Layout {
        match rng.below(10) {
            0..5 => Layout::Pretty,
            5..8 => Layout::RowLines,
            _ => Layout::Compact,
        }
    }

    /// Whether a row's fields share a line (so a row's key and value can
    /// both be probes).
    pub(super) fn row_on_one_line(self) -> bool {
        self != Layout::Pretty
    }
}

/// `doc` printed in `layout`; `rows_at` names the array of rows for
/// [`Layout::RowLines`].
pub(super) fn render(doc: &Value, layout: Layout, rows_at: &str) -> String {
    match layout {
        Layout::Pretty => serde_json::to_string_pretty(doc).unwrap_or_default(),
        Layout::Compact => doc.to_string(),
        Layout::RowLines => {
            let Some(obj) = doc.as_object() else {
                return doc.to_string();
            };
            let mut out = String::from("{\n");
            let n = obj.len();
            for (i, (k, v)) in obj.iter().enumerate() {
                let comma = if i + 1 < n { "," } else { "" };
                match v.as_array() {
                    Some(rows) if k == rows_at => {
                        out.push_str(&format!("  \"{k}\": [\n"));
                        for (j, r) in rows.iter().enumerate() {
                            let c = if j + 1 < rows.len() { "," } else { "" };
                            out.push_str(&format!("    {r}{c}\n"));
                        }
                        out.push_str(&format!("  ]{comma}\n"));
                    }
                    _ => out.push_str(&format!("  \"{k}\": {v}{comma}\n")),
                }
            }
            out.push('}');
            out
        }
    }
}
