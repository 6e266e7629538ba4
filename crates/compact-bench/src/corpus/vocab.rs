//! Words. Two namespaces that never meet: the noise (chatter, prose, log
//! lines, rows, ids such as `req-8f3a2c`, `row 4411`, `src/mod_17.rs:212`)
//! and the fact values (tickets with fact-only prefixes, regions, hosts
//! under `.internal`, `v`-prefixed versions, `port N`, quantities in units
//! the noise never uses, decision choices). That is what lets a probe be
//! unique in a whole session; `Session::verify` checks it anyway.

use super::Agent;

/// The noise of one kind of agent.
pub(super) struct Domain {
    pub system: &'static str,
    pub subjects: &'static [&'static str],
    pub verbs: &'static [&'static str],
    pub objects: &'static [&'static str],
    pub tails: &'static [&'static str],
    /// User requests; `{c}` is a noise component, `{f}` a noise file.
    pub requests: &'static [&'static str],
    pub replies: &'static [&'static str],
    pub doc_titles: &'static [&'static str],
    pub tools: &'static [(&'static str, OutputShape)],
    /// Columns of this agent's tables (noise).
    pub columns: &'static [&'static str],
    /// What the JSON objects of this agent describe.
    pub json_kind: &'static str,
}

/// The shape of a tool's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OutputShape {
    Json,
    Log,
    Table,
    Doc,
}

pub(super) fn domain(agent: Agent) -> &'static Domain {
    match agent {
        Agent::Coding => &CODING,
        Agent::Support => &SUPPORT,
        Agent::Research => &RESEARCH,
    }
}

static CODING: Domain = Domain {
    system: "You are a senior software engineer working in the user's repository. Use the tools to read code, run builds and tests, and query services. Keep changes small and explain what you did.",
    subjects: &[
        "The scheduler",
        "This module",
        "The retry loop",
        "Each worker",
        "The cache layer",
        "The parser",
        "The build script",
        "The integration suite",
        "The connection pool",
        "The request handler",
        "The background flusher",
        "The index writer",
        "The session store",
        "The config loader",
        "The metrics exporter",
        "The test harness",
        "Our wrapper",
        "The upstream client",
    ],
    verbs: &[
        "keeps",
        "flushes",
        "validates",
        "serializes",
        "rebuilds",
        "reads",
        "batches",
        "drops",
        "retries",
        "caches",
        "locks",
        "streams",
        "compresses",
        "parses",
        "emits",
        "clones",
        "spawns",
        "awaits",
        "reorders",
        "coalesces",
    ],
    objects: &[
        "the pending writes",
        "every incoming frame",
        "the config snapshot",
        "its local index",
        "the shard map",
        "the dirty pages",
        "the whole response body",
        "a copy of the headers",
        "the partial results",
        "one task per connection",
        "the stale entries",
        "the lookup table",
        "the error chain",
        "a temporary buffer",
        "the checksum",
        "the open handles",
    ],
    tails: &[
        "before acknowledging the request",
        "on a background thread",
        "when the queue is full",
        "every few seconds",
        "unless the flag is off",
        "after the lock is released",
        "while holding the read guard",
        "for each tenant separately",
        "on the hot path",
        "only in debug builds",
        "when the test times out",
        "during shutdown",
        "without waiting for the reply",
        "in a tight loop",
        "once per batch",
    ],
    requests: &[
        "Can you look into why {c} is slow again?",
        "The tests in {f} are flaky, can you check what is going on?",
        "Please refactor the error handling around {c}.",
        "Could you find where {c} allocates so much?",
        "Can you run the build and tell me what breaks?",
        "Have a look at the warnings in {f}, I think some are real.",
        "Why does {c} hold the lock for so long?",
        "Can you add logging around the retry path in {c}?",
        "Let's clean up {f} before the review.",
        "Check whether {c} still needs the old compatibility shim.",
        "Please bump the dependencies and see what fails.",
        "Can you write a test that reproduces the timeout in {c}?",
    ],
    replies: &[
        "I looked at {c}: the slow part is the serialization step, and I moved it off the hot path.",
        "The build is green again; two warnings in {f} were real and I fixed them.",
        "I added a test that reproduces the timeout and a fix that makes it pass.",
        "The flakiness came from a shared temp directory; each test now gets its own.",
        "I refactored the error handling in {c} so every failure carries its context.",
        "Nothing obviously wrong in {f}; the allocations come from cloning the headers.",
        "I ran the whole suite twice and everything passes locally.",
        "The lock in {c} was held across an await; I narrowed the critical section.",
    ],
    doc_titles: &[
        "Design notes",
        "README",
        "Architecture overview",
        "Contributing guide",
        "Runbook",
        "Migration plan",
        "Postmortem draft",
        "RFC: storage rework",
    ],
    tools: &[
        ("read_file", OutputShape::Doc),
        ("run_tests", OutputShape::Log),
        ("cargo_build", OutputShape::Log),
        ("http_get", OutputShape::Json),
        ("list_dependencies", OutputShape::Table),
        ("query_metrics", OutputShape::Table),
    ],
    columns: &[
        "name", "owner", "status", "p50_ms", "errors", "last_run", "notes",
    ],
    json_kind: "service",
};

static SUPPORT: Domain = Domain {
    system: "You are a customer support agent for a SaaS billing product. Use the tools to look up customers, orders, tickets and logs. Be accurate, empathetic and brief.",
    subjects: &[
        "The customer",
        "Their account",
        "The last invoice",
        "The billing job",
        "The renewal flow",
        "The payment provider",
        "Our status page",
        "The mobile app",
        "The export feature",
        "The admin console",
        "The onboarding email",
        "The retry policy",
        "The help article",
        "The ticket queue",
        "The SSO integration",
        "The usage report",
    ],
    verbs: &[
        "shows",
        "charges",
        "retries",
        "sends",
        "reports",
        "rejects",
        "duplicates",
        "delays",
        "hides",
        "recalculates",
        "syncs",
        "refunds",
        "flags",
        "expires",
        "resets",
        "lists",
    ],
    objects: &[
        "the prorated amount",
        "two charges for the same month",
        "the wrong currency",
        "an empty usage report",
        "the old plan name",
        "a password reset link",
        "the seat count",
        "the tax line",
        "every failed payment",
        "the trial end date",
        "the shipping address",
        "a duplicate receipt",
        "the saved card",
        "the team members",
        "the download link",
    ],
    tails: &[
        "after the plan change",
        "when the card expires",
        "for annual plans only",
        "since last Tuesday",
        "on the first of the month",
        "for some users in the team",
        "when they switch browsers",
        "if the invoice is edited",
        "during the nightly sync",
        "right after checkout",
        "for accounts created before the migration",
        "when the coupon is applied",
        "in the mobile app",
        "each time they log in",
    ],
    requests: &[
        "A customer says {c} is charging them twice, can you check?",
        "Can you see why the invoice email never arrived for this account?",
        "Please look at the latest tickets about {c}.",
        "The customer is upset about {c}; what happened on our side?",
        "Can you check the logs around the failed payment this morning?",
        "Could you find their order history and the last refund?",
        "They can't log in with SSO since yesterday, can you look?",
        "Can you draft a reply explaining the proration on their invoice?",
        "Please check whether this is the same bug as the one from last week.",
        "The usage report shows zero seats, can you figure out why?",
        "Check what the help center says about {c}.",
    ],
    replies: &[
        "I checked the account: the double charge came from a retry after a timeout, and the second charge was voided.",
        "The invoice email bounced; I resent it to the billing contact on file.",
        "This matches the known issue with {c}; I linked the ticket and drafted a reply.",
        "Their SSO certificate expired yesterday; I sent them the steps to upload a new one.",
        "The usage report was empty because the nightly sync failed; it has been re-run.",
        "I drafted a reply explaining the proration and attached the corrected invoice.",
        "Nothing unusual in the logs for this account besides one declined card.",
        "I added an internal note with everything we found so far.",
    ],
    doc_titles: &[
        "Help center: billing FAQ",
        "Internal runbook",
        "Refund policy",
        "Known issues",
        "Escalation guide",
        "Release notes",
        "Macro: proration explained",
    ],
    tools: &[
        ("lookup_customer", OutputShape::Json),
        ("get_order", OutputShape::Json),
        ("search_tickets", OutputShape::Table),
        ("billing_history", OutputShape::Table),
        ("get_service_logs", OutputShape::Log),
        ("kb_search", OutputShape::Doc),
    ],
    columns: &[
        "id",
        "created",
        "status",
        "priority",
        "channel",
        "amount_cents",
        "subject",
    ],
    json_kind: "customer",
};

static RESEARCH: Domain = Domain {
    system: "You are a research assistant. Search the web and the literature, read papers, query datasets and run analyses. Cite sources and say how confident you are.",
    subjects: &[
        "The survey",
        "This paper",
        "The benchmark",
        "The second study",
        "Our pilot run",
        "The ablation",
        "The dataset card",
        "The appendix",
        "The baseline",
        "The meta-analysis",
        "The replication",
        "The preprint",
        "The annotation guide",
        "The error analysis",
        "The held-out split",
        "The reviewer",
    ],
    verbs: &[
        "reports",
        "overstates",
        "controls for",
        "ignores",
        "replicates",
        "contradicts",
        "measures",
        "compares",
        "estimates",
        "samples",
        "filters",
        "reweights",
        "discusses",
        "confirms",
        "questions",
        "averages",
    ],
    objects: &[
        "the effect size",
        "a small but consistent gain",
        "the variance across seeds",
        "the annotator agreement",
        "the length bias",
        "the contamination risk",
        "the confidence intervals",
        "the long tail of rare classes",
        "the prompt sensitivity",
        "the scaling trend",
        "the label noise",
        "the domain shift",
        "the selection effects",
        "the cost per sample",
    ],
    tails: &[
        "across all three settings",
        "only for the largest model",
        "after deduplication",
        "when the prompt is paraphrased",
        "in the low-resource regime",
        "with a fixed budget",
        "on the held-out languages",
        "without any fine-tuning",
        "for short inputs only",
        "under the original protocol",
        "in a later revision",
        "with bootstrapped intervals",
    ],
    requests: &[
        "Can you find recent work on {c}?",
        "Please summarise what the literature says about {c}.",
        "Could you check whether the results on {c} replicate?",
        "Can you pull the numbers from the dataset for the last run?",
        "Read the paper I mentioned and tell me if the method is sound.",
        "Can you run the analysis again with the outliers removed?",
        "What are the strongest criticisms of {c}?",
        "Please compare the two benchmarks on {c}.",
        "Find a good survey on {c} for the intro section.",
        "Can you check the appendix for how they handled ties?",
    ],
    replies: &[
        "I found three relevant papers on {c}; two agree and one reports a much smaller effect.",
        "The results partly replicate: the direction holds, but the effect is about half as large.",
        "The method looks sound, though the ablation does not control for prompt length.",
        "I re-ran the analysis without the outliers; the conclusion does not change.",
        "The strongest criticism is contamination between the training and the evaluation data.",
        "The two benchmarks disagree mostly on the long tail; I summarised the differences.",
        "Here is a short summary with the sources I trust most.",
        "I added the numbers to the notes with their confidence intervals.",
    ],
    doc_titles: &[
        "Abstract and introduction",
        "Related work",
        "Method",
        "Results",
        "Discussion",
        "Blog post",
        "Dataset card",
        "Lecture notes",
    ],
    tools: &[
        ("web_search", OutputShape::Json),
        ("fetch_page", OutputShape::Doc),
        ("read_paper", OutputShape::Doc),
        ("query_dataset", OutputShape::Table),
        ("run_analysis", OutputShape::Log),
    ],
    columns: &[
        "sample",
        "split",
        "score",
        "length",
        "label",
        "annotator",
        "comment",
    ],
    json_kind: "search",
};

/// Components named in noise (log sources, things users ask about).
pub(super) const COMPONENTS: &[&str] = &[
    "the scheduler",
    "the importer",
    "the gateway",
    "the indexer",
    "the notifier",
    "the poller",
    "the uploader",
    "the reconciler",
    "the renderer",
    "the exporter",
    "the job runner",
    "the webhook handler",
    "the search page",
    "the checkout page",
    "the sync worker",
    "the report builder",
];

/// Log sources in noise.
pub(super) const LOG_SOURCES: &[&str] = &[
    "worker-1",
    "worker-2",
    "worker-3",
    "worker-4",
    "scheduler",
    "gateway",
    "indexer",
    "poller",
    "notifier",
    "janitor",
    "uploader",
    "sync",
    "http",
    "db-pool",
    "cache",
];

/// Everyday asides, in no namespace at all.
pub(super) const CHATTER: &[&str] = &[
    "Morning!",
    "Quick one before standup.",
    "Thanks for the last fix, by the way.",
    "Ugh, the VPN dropped again.",
    "Sorry for the delay, I was in a meeting.",
    "No rush on this one.",
    "Hope your week is going well.",
    "Coffee first, then this.",
    "I'm on my phone, so be brief.",
    "Heads up, I'm out tomorrow afternoon.",
    "That last answer was really helpful.",
    "Let's keep going.",
    "OK, next thing.",
    "I owe you one for yesterday.",
    "The office wifi is terrible today.",
    "Back from lunch.",
    "Same thing as before, roughly.",
    "Let me know if anything is unclear.",
];

/// Acknowledgements an assistant opens or closes with.
pub(super) const ACKS: &[&str] = &[
    "Sure.",
    "On it.",
    "Got it.",
    "Done.",
    "Here is what I found.",
    "Happy to help.",
    "Let me know if you want me to dig further.",
    "I can take the next step when you're ready.",
    "That should cover it.",
    "One more thing worth mentioning:",
];

/// Reasons given for decisions (noise words only).
pub(super) const REASONS: &[&str] = &[
    "it keeps the build simple",
    "the team already knows it",
    "it handles backpressure better",
    "licensing is simpler",
    "the benchmarks favour it",
    "it has fewer moving parts",
    "support for it is better documented",
    "it is cheaper at our volume",
    "the other option had too many open issues",
    "it fits the deadline",
    "the customer asked for it",
    "it is easier to audit",
];

// ---- Fact namespaces: none of these strings occurs in the noise above. ----

/// AWS-style regions: only facts name regions.
pub(super) const REGIONS: &[&str] = &[
    "us-east-1",
    "us-east-2",
    "us-west-1",
    "us-west-2",
    "eu-west-1",
    "eu-west-2",
    "eu-west-3",
    "eu-central-1",
    "eu-central-2",
    "eu-north-1",
    "eu-south-1",
    "ap-south-1",
    "ap-northeast-1",
    "ap-northeast-2",
    "ap-southeast-1",
    "ap-southeast-2",
    "sa-east-1",
    "ca-central-1",
    "me-south-1",
    "af-south-1",
];

/// Ticket prefixes, per agent (the noise has no `PREFIX-1234` ids).
pub(super) fn ticket_prefixes(agent: Agent) -> &'static [&'static str] {
    match agent {
        Agent::Coding => &["OPS", "INFRA", "PLAT", "BUG", "SEC"],
        Agent::Support => &["CS", "ESC", "BILL", "SUP"],
        Agent::Research => &["RQ", "EXP", "DATA", "LIT"],
    }
}

pub(super) const HOST_SERVICES: &[&str] = &[
    "pg",
    "redis",
    "kafka",
    "etcd",
    "nats",
    "mongo",
    "clickhouse",
    "minio",
    "rabbit",
];
pub(super) const HOST_ROLES: &[&str] = &[
    "ledger", "billing", "search", "auth", "orders", "events", "media", "payouts", "catalog",
];
pub(super) const HOST_ENVS: &[&str] = &["prod", "staging", "dr", "perf"];

pub(super) const PATH_DIRS: &[&str] = &[
    "billing", "auth", "ledger", "sync", "export", "ingest", "api", "payouts", "catalog",
];
pub(super) const PATH_NAMES: &[&str] = &[
    "invoice_sync",
    "token_refresh",
    "rate_limiter",
    "batch_writer",
    "schema_guard",
    "retry_budget",
    "shard_router",
    "webhook_verify",
    "quota_check",
    "ledger_close",
    "dedupe_window",
    "fx_rates",
];

pub(super) const URL_HOSTS: &[&str] = &[
    "wiki.acme-corp.dev",
    "status.brightpay.io",
    "grafana.ops-acme.net",
    "docs.lumenlabs.ai",
    "portal.northwind-cloud.com",
    "runbooks.acme-corp.dev",
];
pub(super) const URL_WORDS: &[&str] = &[
    "incident",
    "cutover",
    "rollback",
    "quota",
    "pricing",
    "oncall",
    "ledger",
    "playbook",
    "latency",
    "migration",
    "reports",
    "escalation",
];

pub(super) const FIRST_NAMES: &[&str] = &[
    "maria", "jonas", "aiko", "dev", "lena", "omar", "priya", "tomas", "ines", "kwame", "sofia",
    "felix",
];
pub(super) const LAST_NAMES: &[&str] = &[
    "okafor",
    "lindqvist",
    "tanaka",
    "patel",
    "moreau",
    "haddad",
    "novak",
    "silva",
    "becker",
    "mensah",
    "rossi",
    "kowalski",
];
pub(super) const EMAIL_DOMAINS: &[&str] = &[
    "acme-corp.dev",
    "brightpay.io",
    "northwind-cloud.com",
    "lumenlabs.ai",
];

pub(super) const BRANCH_WORDS: &[&str] = &[
    "ledger", "retry", "quota", "webhook", "cutover", "shard", "payout", "schema", "backfill",
    "throttle", "audit", "rollover",
];

pub(super) const FN_VERBS: &[&str] = &[
    "reconcile",
    "rebalance",
    "verify",
    "compact",
    "settle",
    "replay",
    "hydrate",
    "evict",
];
pub(super) const FN_NOUNS: &[&str] = &[
    "ledger", "batch", "invoice", "payout", "shard", "quota", "webhook", "snapshot", "tenant",
    "cursor",
];

pub(super) const ERROR_FAMILIES: &[&str] = &["CONN", "AUTH", "DISK", "TLS", "QUOTA", "SCHEMA"];

/// Units only facts use (the noise counts in ms, KB, rows and lines).
pub(super) const UNITS: &[&str] = &["GiB", "rps", "TB", "GPU hours", "vCPUs", "minutes"];

pub(super) const TABLE_WORDS: &[&str] = &[
    "ledger_entries",
    "payout_batches",
    "invoice_lines",
    "usage_events",
    "audit_trail",
    "tenant_quotas",
    "fx_snapshots",
    "session_tokens",
];

pub(super) const DATASETS: &[&str] = &[
    "MMLU-Redux",
    "GSM-Hard",
    "XSum-Clean",
    "TyDi-QA",
    "CodeContests-v2",
    "BEIR-NQ",
    "FLORES-200",
    "HellaSwag-Pro",
    "ARC-Easy-v2",
    "SciFact-Open",
    "WikiBio-Lite",
    "CoQA-Dialog",
    "MedQA-USMLE",
    "LegalBench-Mini",
    "PubMedQA-L",
    "StrategyQA-2",
    "DROP-Num",
    "QuAC-Long",
    "MBPP-Plus",
    "HumanEval-X",
    "BoolQ-Hard",
    "NarrativeQA-S",
    "MultiNLI-M",
    "ANLI-R3",
];

pub(super) const TENANT_WORDS: &[&str] = &[
    "globex",
    "initech",
    "umbrella",
    "hooli",
    "vandelay",
    "stark",
    "wayne",
    "tyrell",
    "soylent",
    "cyberdyne",
    "aperture",
    "gringotts",
];

/// Decision subjects and their possible choices, per agent. A choice is
/// named nowhere else.
pub(super) fn subjects(agent: Agent) -> &'static [(&'static str, &'static [&'static str])] {
    match agent {
        Agent::Coding => &[
            (
                "database layer",
                &["sqlx", "diesel", "sea-orm", "tokio-postgres"],
            ),
            ("HTTP client", &["reqwest", "ureq", "isahc"]),
            ("job queue", &["apalis", "faktory", "graphile-worker"]),
            (
                "serialization format",
                &["bincode", "postcard", "MessagePack"],
            ),
            (
                "feature flag service",
                &["Unleash", "Flagsmith", "GrowthBook"],
            ),
            ("CI runner", &["Buildkite", "CircleCI", "Woodpecker"]),
            ("cache backend", &["Memcached", "KeyDB", "Dragonfly"]),
            ("tracing backend", &["Jaeger", "Grafana Tempo", "Honeycomb"]),
            ("load-testing tool", &["k6", "Locust", "Vegeta"]),
            (
                "container base image",
                &["distroless", "wolfi", "ubi-minimal"],
            ),
            (
                "rollout strategy",
                &["blue-green", "shadow traffic", "ring deploys"],
            ),
            ("secrets manager", &["Doppler", "Infisical", "sops"]),
            ("migration tool", &["refinery", "sqitch", "atlas"]),
            (
                "benchmark harness",
                &["criterion", "divan", "iai-callgrind"],
            ),
            ("web framework", &["axum", "actix-web", "poem"]),
            ("object store", &["Backblaze B2", "Cloudflare R2", "Wasabi"]),
        ],
        Agent::Support => &[
            (
                "refund method",
                &["store credit", "card reversal", "bank transfer"],
            ),
            (
                "replacement carrier",
                &["DHL Express", "UPS Next Day", "FedEx Priority"],
            ),
            (
                "escalation path",
                &["tier-3 engineering", "the account director", "legal review"],
            ),
            (
                "compensation",
                &["a free month", "a service credit", "a plan upgrade"],
            ),
            (
                "communication channel",
                &["phone callback", "email only", "a shared Slack channel"],
            ),
            ("data export format", &["Parquet", "XLSX", "JSON Lines"]),
            ("SLA tier", &["Premier", "Gold Plus", "Platinum"]),
            (
                "onboarding track",
                &["white-glove", "self-serve", "guided cohort"],
            ),
            (
                "migration date",
                &[
                    "the long weekend",
                    "end of quarter",
                    "the maintenance window",
                ],
            ),
            ("payment processor", &["Adyen", "Braintree", "Mollie"]),
            ("survey tool", &["Typeform", "SurveyMonkey", "Qualtrics"]),
            ("knowledge base", &["Zendesk Guide", "Confluence", "Notion"]),
        ],
        Agent::Research => &[
            ("primary dataset", &["RedPajama", "The Pile", "FineWeb-Edu"]),
            ("evaluation metric", &["ROUGE-L", "chrF", "BERTScore"]),
            (
                "baseline model",
                &["Llama-2-7B", "Mistral-7B", "Pythia-1.4B"],
            ),
            (
                "statistical test",
                &[
                    "Wilcoxon signed-rank",
                    "paired bootstrap",
                    "permutation test",
                ],
            ),
            ("annotation tool", &["Prodigy", "Label Studio", "Argilla"]),
            ("citation manager", &["Zotero", "Mendeley", "JabRef"]),
            ("plotting library", &["matplotlib", "Vega-Lite", "ggplot2"]),
            (
                "tokenizer",
                &["SentencePiece", "WordPiece", "byte-level BPE"],
            ),
            (
                "sampling strategy",
                &[
                    "stratified sampling",
                    "reservoir sampling",
                    "cluster sampling",
                ],
            ),
            ("compute provider", &["Lambda Labs", "CoreWeave", "RunPod"]),
            ("report format", &["LaTeX", "Quarto", "Jupyter Book"]),
            ("embedding model", &["e5-large", "bge-base", "gte-small"]),
        ],
    }
}
