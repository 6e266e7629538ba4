//! The named corpora: sessions of other shapes and languages than
//! [`super::generate`]'s, written apart from it so that the summarizer is
//! not measured only on the corpus it was tuned on.
//!
//! Every corpus is deterministic per seed. Seeds are split once, here, into
//! those tuning may look at and those it may not ([`SEED_SPLIT`]): a figure
//! on the held-out seeds is the one to report.

use compact_middleware::model::Format;
use serde::{Deserialize, Serialize};

use super::{Session, ci_logs, data_json, support_prose};

/// Whether a session may be looked at while tuning.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Split {
    /// Tuning may look at it (the default: [`super::generate`]'s sessions
    /// and the fixtures are what the summarizer was tuned on).
    #[default]
    Tune,
    /// Never looked at while tuning: its figure is the honest one.
    HeldOut,
}

impl Split {
    /// The snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            Split::Tune => "tune",
            Split::HeldOut => "held_out",
        }
    }

    /// The split of a named corpus's session drawn from `seed`: tuning for
    /// the seeds of [`SEED_SPLIT`]`.tune`, held out for every other seed
    /// (so a seed nobody chose is never one that was tuned on).
    pub fn of_seed(seed: u64) -> Split {
        if SEED_SPLIT.tune.contains(&seed) {
            Split::Tune
        } else {
            Split::HeldOut
        }
    }
}

/// Which seeds of the named corpora are for tuning and which are held out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeedSplit {
    /// Seeds tuning may look at.
    pub tune: [u64; 2],
    /// The held-out seeds the suite reports (any seed not in `tune` is
    /// held out too).
    pub held_out: [u64; 2],
}

/// The one split of the named corpora: seeds 1-2 tune, seeds 3-4 (and any
/// other) held out.
pub const SEED_SPLIT: SeedSplit = SeedSplit {
    tune: [1, 2],
    held_out: [3, 4],
};

/// The language of a corpus's prose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Language {
    /// English.
    En,
    /// Simplified Chinese.
    Zh,
    /// Spanish.
    Es,
    /// German.
    De,
}

impl Language {
    /// The ISO 639-1 code.
    pub fn code(self) -> &'static str {
        match self {
            Language::En => "en",
            Language::Zh => "zh",
            Language::Es => "es",
            Language::De => "de",
        }
    }
}

/// A named corpus.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Corpus {
    /// A log-heavy CI/debugging agent: one task, then 30-120 rounds of
    /// shell calls and their output.
    CiLogs,
    /// A data agent: JSON tables and records, requests padded with context.
    DataJson,
    /// A prose-heavy customer-support conversation, in English.
    SupportProse,
    /// [`Corpus::SupportProse`] in Chinese.
    SupportProseZh,
    /// [`Corpus::SupportProse`] in Spanish.
    SupportProseEs,
    /// [`Corpus::SupportProse`] in German.
    SupportProseDe,
}

/// What the registry says of a corpus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CorpusInfo {
    /// The corpus.
    pub corpus: Corpus,
    /// Its name, which is also its sessions' `source`.
    pub name: &'static str,
    /// The language of its prose.
    pub language: Language,
    /// For a translation, the English corpus drawing the same sessions
    /// (same structure, same identifiers) from the same seed.
    pub twin: Option<Corpus>,
    /// The wire formats it is written in; the first is its default.
    pub wires: &'static [Format],
    /// What it imitates, in a line.
    pub imitates: &'static str,
}

const CORPORA: [CorpusInfo; 6] = [
    CorpusInfo {
        corpus: Corpus::CiLogs,
        name: "ci-logs",
        language: Language::En,
        twin: None,
        wires: &[Format::Chat, Format::Responses],
        imitates: "a coding agent fixing a bug report in a shell loop (mini-swe-agent and SWE-agent in Chat, Codex in Responses): one task, 30-120 rounds of one call and its output",
    },
    CorpusInfo {
        corpus: Corpus::DataJson,
        name: "data-json",
        language: Language::En,
        twin: None,
        wires: &[Format::Chat],
        imitates: "an analyst's data agent: JSON tables of repeated fields, nested records with sentence-long notes, requests padded with context",
    },
    CorpusInfo {
        corpus: Corpus::SupportProse,
        name: "support-prose",
        language: Language::En,
        twin: None,
        wires: &[Format::Chat],
        imitates: "a long customer-support thread: customers' multi-paragraph messages, an agent's long replies, few tool calls",
    },
    CorpusInfo {
        corpus: Corpus::SupportProseZh,
        name: "support-prose-zh",
        language: Language::Zh,
        twin: Some(Corpus::SupportProse),
        wires: &[Format::Chat],
        imitates: "support-prose in Simplified Chinese",
    },
    CorpusInfo {
        corpus: Corpus::SupportProseEs,
        name: "support-prose-es",
        language: Language::Es,
        twin: Some(Corpus::SupportProse),
        wires: &[Format::Chat],
        imitates: "support-prose in Spanish",
    },
    CorpusInfo {
        corpus: Corpus::SupportProseDe,
        name: "support-prose-de",
        language: Language::De,
        twin: Some(Corpus::SupportProse),
        wires: &[Format::Chat],
        imitates: "support-prose in German",
    },
];

/// Every named corpus, in a fixed order.
pub fn corpora() -> &'static [CorpusInfo] {
    &CORPORA
}

impl Corpus {
    /// Every named corpus, in the order of [`corpora`].
    pub const ALL: [Corpus; 6] = [
        Corpus::CiLogs,
        Corpus::DataJson,
        Corpus::SupportProse,
        Corpus::SupportProseZh,
        Corpus::SupportProseEs,
        Corpus::SupportProseDe,
    ];

    /// Its registry entry.
    pub fn info(self) -> &'static CorpusInfo {
        // CORPORA lists every variant in the order of ALL.
        &CORPORA[self as usize]
    }

    /// Its name (`ci-logs`, `support-prose-zh`, …).
    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// The corpus named `name`.
    pub fn from_name(name: &str) -> Option<Corpus> {
        CORPORA.iter().find(|c| c.name == name).map(|c| c.corpus)
    }

    /// The session of this corpus drawn from `seed` in `wire` (a format
    /// the corpus is not written in falls back to its default). The same
    /// seed gives the same session; its split is [`Split::of_seed`].
    pub fn generate(self, seed: u64, wire: Format) -> Session {
        let wires = self.info().wires;
        let wire = if wires.contains(&wire) {
            wire
        } else {
            wires[0]
        };
        match self {
            Corpus::CiLogs => ci_logs::generate(seed, wire),
            Corpus::DataJson => data_json::generate(seed),
            Corpus::SupportProse => support_prose::generate(seed, Language::En),
            Corpus::SupportProseZh => support_prose::generate(seed, Language::Zh),
            Corpus::SupportProseEs => support_prose::generate(seed, Language::Es),
            Corpus::SupportProseDe => support_prose::generate(seed, Language::De),
        }
    }
}
