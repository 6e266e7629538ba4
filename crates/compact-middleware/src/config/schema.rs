//! The configuration types. Field names are the YAML keys, field order is the
//! order `compact config print` and `config/default.yaml` use.

use std::collections::BTreeMap;

use garde::Validate;
use serde::{Deserialize, Serialize};

use super::rules;
use crate::summarize::Strategy;
use crate::tokens::{Backend, CharsPerToken, Encoding, EstimatorKind};

/// The whole configuration: what `config/default.yaml` spells out.
///
/// `Default` is the built-in defaults. Deserializing directly (for example a
/// per-request config in JSON) fills missing keys from the defaults and rejects
/// unknown keys; prefer [`super::load`] or [`Config::from_yaml_str`], which also
/// validate and report every problem with its dotted path.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Validate)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Model name; selects the built-in profile (context window, encoding).
    #[garde(custom(rules::non_empty))]
    pub model: String,
    /// Overrides the model's context window; required for models without a profile.
    #[garde(custom(rules::opt_at_least(1)))]
    pub max_context_tokens: Option<usize>,
    /// Which BPE implementation counts tokens (identical counts).
    #[garde(skip)]
    pub tokenizer: Backend,
    /// Extra or overridden model profiles, by model name.
    #[garde(custom(rules::model_names), dive)]
    pub models: BTreeMap<String, ModelOverride>,
    /// Strategy layers per agent name (`agents: {NAME: {policy: ...}}`),
    /// selected per call (docs/design.md §5, precedence). Each is a partial
    /// configuration of `model`, `max_context_tokens`, `policy` and
    /// `summarizer`, or the flat memory-strategy names.
    #[garde(skip)]
    pub agents: BTreeMap<String, serde_json::Value>,
    /// When and how to compact.
    #[garde(dive)]
    pub policy: Policy,
    /// Which summarizer writes summaries, and its endpoint.
    #[garde(dive)]
    pub summarizer: super::sections::SummarizerSettings,
    /// Cross-session memory, memory files, the sliding-window store.
    #[garde(dive)]
    pub memory: super::sections::MemorySettings,
    /// Recall: the index of what left the context (docs/design.md §5).
    #[garde(dive)]
    pub recall: super::sections::RecallSettings,
    /// Where compaction events go.
    #[garde(dive)]
    pub telemetry: Telemetry,
    /// Where transcripts and summaries are archived before anything is dropped.
    #[garde(dive)]
    pub storage: Storage,
    /// Secret scrubbing applied to everything exported or archived.
    #[garde(dive)]
    pub redaction: Redaction,
    /// Where session state lives.
    #[garde(dive)]
    pub state: super::process::StateSettings,
    /// `compact serve`: the trace server and the sidecar routes. Its rules
    /// come with its type (`rules::cross_section` reports them).
    #[garde(skip)]
    pub server: super::process::ServerSettings,
    /// `compact proxy`: the provider-compatible proxy.
    #[garde(dive)]
    pub proxy: super::process::ProxySettings,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            model: "gpt-4o".to_owned(),
            max_context_tokens: None,
            tokenizer: Backend::Bpe,
            models: BTreeMap::new(),
            agents: BTreeMap::new(),
            policy: Policy::default(),
            summarizer: Default::default(),
            memory: Default::default(),
            recall: Default::default(),
            telemetry: Telemetry::default(),
            storage: Storage::default(),
            redaction: Redaction::default(),
            state: Default::default(),
            server: Default::default(),
            proxy: Default::default(),
        }
    }
}

/// A `models` entry: a model profile (adds a model or replaces a built-in one),
/// its prices, or both. A profile is `context_window` plus how tokens are
/// counted, `encoding` (a BPE vocabulary) or `estimator` (`bpe-o200k`,
/// `bpe-cl100k`, or `ratio` with `chars_per_token`); an entry with only
/// `price` keeps the model's built-in profile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Validate)]
#[serde(deny_unknown_fields)]
pub struct ModelOverride {
    /// Context window in tokens; `None` in an entry that only gives `price`.
    #[garde(custom(rules::opt_at_least(1)))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<usize>,
    /// The model's BPE vocabulary (the same as `estimator: bpe-<encoding>`).
    #[garde(skip)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<Encoding>,
    /// How tokens are counted: exactly with a BPE vocabulary, or estimated with
    /// characters per token (models without a public tokenizer).
    #[garde(skip)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimator: Option<EstimatorKind>,
    /// Calibration of `estimator: ratio` (default: the `o200k`-calibrated ratios).
    #[garde(skip)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chars_per_token: Option<CharsPerToken>,
    /// List prices per million tokens, instead of the built-in ones
    /// (`crate::price::builtin_price`).
    #[garde(dive)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<crate::price::Price>,
}

impl ModelOverride {
    /// An entry that only prices the model: its built-in profile stays.
    pub fn price_only(price: crate::price::Price) -> Self {
        Self {
            context_window: None,
            encoding: None,
            estimator: None,
            chars_per_token: None,
            price: Some(price),
        }
    }

    /// The profile this entry describes, `None` for an entry without
    /// `context_window` (it only prices the model). Assumes the rules of
    /// `rules::cross_section` hold: a missing encoding counts as `o200k`.
    pub fn profile(&self) -> Option<crate::tokens::ModelProfile> {
        let context_window = self.context_window?;
        let (encoding, ratio) = match self.estimator {
            Some(EstimatorKind::Ratio) => (
                Encoding::O200k,
                Some(self.chars_per_token.unwrap_or(CharsPerToken::O200K)),
            ),
            Some(EstimatorKind::BpeCl100k) => (Encoding::Cl100k, None),
            Some(EstimatorKind::BpeO200k) => (Encoding::O200k, None),
            None => (self.encoding.unwrap_or(Encoding::O200k), None),
        };
        Some(crate::tokens::ModelProfile {
            context_window: context_window as u64,
            encoding,
            ratio,
        })
    }
}

/// What `ModelLimits::from_config` reads (compact-model sits below the
/// configuration, so it names what it needs as a trait).
impl crate::estimate::LimitsSource for Config {
    fn model_name(&self) -> &str {
        &self.model
    }

    fn configured_profile(&self, name: &str) -> Option<crate::tokens::ModelProfile> {
        self.models.get(name).and_then(ModelOverride::profile)
    }

    fn max_context_tokens(&self) -> Option<usize> {
        self.max_context_tokens
    }
}

impl Config {
    /// The prices of `model`: its `models` entry's `price`, else the
    /// built-in one; `None` when neither has one.
    pub fn price_of(&self, model: &str) -> Option<crate::price::Price> {
        self.models
            .get(model)
            .and_then(|m| m.price)
            .or_else(|| crate::price::builtin_price(model))
    }

    /// The prices of the configured `model` ([`Config::price_of`]).
    pub fn price(&self) -> Option<crate::price::Price> {
        self.price_of(&self.model)
    }
}

/// Which compaction behaviour runs (docs/design.md §5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Never touch the history.
    None,
    /// Drop the oldest whole turns, no summary.
    Trim,
    /// Replace old tool I/O with placeholders only (then `auto` if still
    /// over the hard budget).
    Compact,
    /// Always fold the remainder into the rolling summary.
    Summarize,
    /// The tiered pipeline: budgeting, clearing, summarizing, reducing.
    #[default]
    Auto,
    /// The latest completed sliding-window memory plus the gap
    /// messages, summarized in the background (then the `auto` tiers).
    SlidingWindow,
}

/// A message role, as used by `roles_never_prune` and `summary_role`: the
/// model's own role type (`other` pins items with no conversational role,
/// such as provider compaction items).
pub use crate::model::Role;

/// The compaction policy: triggers, targets, what is protected.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Validate)]
#[serde(default, deny_unknown_fields)]
pub struct Policy {
    /// Which compaction behaviour runs.
    #[garde(skip)]
    pub mode: Mode,
    /// Compact when estimated usage reaches this share of the window.
    #[garde(custom(rules::fraction))]
    pub trigger_pct: f64,
    /// Compaction stops once usage is at or below this share; below `trigger_pct`
    /// so the next turn does not compact again.
    #[garde(custom(rules::fraction), custom(rules::below("policy.trigger_pct", self.trigger_pct)))]
    pub target_pct: f64,
    /// Also trigger when the estimate exceeds the window minus this many tokens.
    #[garde(skip)]
    pub hard_cap_buffer: usize,
    /// The most recent turns that are never compacted.
    #[garde(custom(rules::at_least(1)))]
    pub keep_recent_turns: usize,
    /// The most recent tool call/result groups whose I/O is never cleared.
    #[garde(skip)]
    pub keep_tool_io_pairs: usize,
    /// Within the latest turn, the most recent rounds (an assistant step
    /// with its tool calls and results) kept whole; older rounds of a longer
    /// turn (an agent's run: one task, then dozens of tool rounds) compact
    /// like older turns.
    #[garde(custom(rules::at_least(1)))]
    pub keep_recent_rounds: usize,
    /// Keep the task (the first user message of the session) whatever else
    /// is compacted, like a pinned message.
    #[garde(skip)]
    pub keep_task: bool,
    /// Messages with these roles are pinned.
    #[garde(skip)]
    pub roles_never_prune: Vec<Role>,
    /// The `meta` key that pins a message when true.
    #[garde(custom(rules::non_empty))]
    pub protected_flag: String,
    /// Summary template.
    #[garde(skip)]
    pub strategy: Strategy,
    /// Also trigger after this many user turns.
    #[garde(custom(rules::opt_at_least(1)))]
    pub compact_trigger_turns: Option<usize>,
    /// Trigger when the estimate exceeds this many tokens.
    #[garde(custom(rules::opt_at_least(1)))]
    pub token_budget: Option<usize>,
    /// A softer token trigger, at most `token_budget`.
    #[garde(custom(rules::opt_at_least(1)), custom(rules::soft_budget(self.token_budget)))]
    pub token_soft_budget: Option<usize>,
    /// Trigger when the remaining share of the window falls below this.
    #[garde(custom(rules::opt_fraction))]
    pub token_remaining_pct: Option<f64>,
    /// Also clear the arguments of old tool calls, not only their results.
    #[garde(skip)]
    pub clear_tool_inputs: bool,
    /// When non-empty, only these tools have their I/O cleared (wins over `exclude_tools`).
    #[garde(inner(custom(rules::non_empty)))]
    pub include_tools: Vec<String>,
    /// These tools never have their I/O cleared.
    #[garde(inner(custom(rules::non_empty)))]
    pub exclude_tools: Vec<String>,
    /// Per tool result character cap (tier 1); head and tail are kept.
    #[garde(custom(rules::at_least(200)))]
    pub tool_result_max_chars: usize,
    /// Consecutive LLM summarizer failures before it is skipped (circuit breaker).
    #[garde(custom(rules::at_least(1)))]
    pub max_compact_failures: usize,
    /// Role of the `COMPACT-SUMMARY` message.
    #[garde(custom(rules::summary_role))]
    pub summary_role: Role,
    /// Cap on the summary's share of the context window.
    #[garde(custom(rules::fraction))]
    pub summary_max_pct: f64,
    /// The tighter target used by `on_context_overflow`.
    #[garde(custom(rules::fraction), custom(rules::at_most("policy.target_pct", self.target_pct)))]
    pub reactive_target_pct: f64,
    /// What to do with input whose tool pairing is already broken.
    #[garde(skip)]
    pub repair: Repair,
    /// Anthropic prompt-cache breakpoints: `auto` places `cache_control`
    /// after the stable layers and at the end of the history (within the
    /// provider's four, the caller's own kept); `off` sends the history as
    /// compaction left it.
    #[garde(skip)]
    pub cache_breakpoints: CacheBreakpoints,
    /// Prompt-cache-aware compaction (`crate::cache::pace`): `auto` also
    /// compacts when carrying the context costs more than re-sending a
    /// compacted one, and compacts deep enough for the observed growth per
    /// call; `off` decides on the token triggers alone.
    #[garde(skip)]
    pub cache: CachePolicy,
    /// With `cache: auto`: the cost model never compacts a context smaller
    /// than this many tokens on cost alone, nor aims below a third of it (the
    /// token triggers still apply).
    #[garde(custom(rules::at_least(1000)))]
    pub cache_min_tokens: usize,
    /// The lifetime of compact's own Anthropic breakpoints: `5m` (the
    /// provider's default) or `1h` (`"ttl": "1h"`, for agents whose calls
    /// are minutes apart: builds, test runs, a human in the loop). With
    /// `1h` the cost model also weighs the 1-hour write price.
    #[garde(skip)]
    pub cache_ttl: CacheTtl,
}

/// `policy.cache_ttl`: how long Anthropic keeps what compact's breakpoints
/// cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CacheTtl {
    /// Anthropic's default lifetime, written at 1.25x the input price.
    #[default]
    #[serde(rename = "5m")]
    FiveMinutes,
    /// An hour, written at 2x the input price; a breakpoint of ours after
    /// one of the caller's 5-minute ones stays a 5-minute one (Anthropic
    /// wants longer lifetimes first).
    #[serde(rename = "1h")]
    OneHour,
}

impl CacheTtl {
    /// The lifetime as the price table names it.
    pub fn ttl(self) -> crate::price::Ttl {
        match self {
            CacheTtl::FiveMinutes => crate::price::Ttl::FiveMinutes,
            CacheTtl::OneHour => crate::price::Ttl::OneHour,
        }
    }
}

impl From<crate::price::Ttl> for CacheTtl {
    fn from(ttl: crate::price::Ttl) -> Self {
        match ttl {
            crate::price::Ttl::FiveMinutes => CacheTtl::FiveMinutes,
            crate::price::Ttl::OneHour => CacheTtl::OneHour,
        }
    }
}

/// Whether compaction decisions weigh the provider's prompt cache
/// (`policy.cache`, `crate::cache::pace`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CachePolicy {
    /// Compact when it pays, deep enough for the observed growth.
    #[default]
    Auto,
    /// The token triggers and `target_pct` alone.
    Off,
}

impl<'de> Deserialize<'de> for CachePolicy {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(if auto_or_off(d)? {
            Self::Auto
        } else {
            Self::Off
        })
    }
}

/// `auto` (true) or `off` (false); YAML reads a bare `off` as the boolean
/// false (and `on` as true), so booleans are taken too.
fn auto_or_off<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Spelled {
        Bool(bool),
        Name(String),
    }
    match Spelled::deserialize(d)? {
        Spelled::Bool(b) => Ok(b),
        Spelled::Name(s) => match s.as_str() {
            "auto" => Ok(true),
            "off" => Ok(false),
            other => Err(serde::de::Error::unknown_variant(other, &["auto", "off"])),
        },
    }
}

/// Whether compact places Anthropic `cache_control` breakpoints
/// (`policy.cache_breakpoints`, `crate::cache::breakpoints`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheBreakpoints {
    /// Place breakpoints on Anthropic requests, up to the provider's limit.
    #[default]
    Auto,
    /// Place none: the output is what compaction alone produced.
    Off,
}

impl<'de> Deserialize<'de> for CacheBreakpoints {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(if auto_or_off(d)? {
            Self::Auto
        } else {
            Self::Off
        })
    }
}

/// What a preflight does with input that already has pairing problems (an orphaned
/// tool result, a call without a result, a second result for one call).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Repair {
    /// Go on, and report them: `Report::input_problems`, the `compact.token_estimate`
    /// event, a warning from the CLI. Compaction never makes them worse.
    #[default]
    Report,
    /// Reject the input (`CompactError::InvalidInput`, CLI exit 2).
    Strict,
    /// Drop orphaned and duplicate results, answer unanswered calls with a placeholder
    /// result; the input as received is archived and the fixes are reported
    /// (`Report::repaired`).
    Fix,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            mode: Mode::Auto,
            trigger_pct: 0.85,
            target_pct: 0.6,
            hard_cap_buffer: 1500,
            keep_recent_turns: 6,
            keep_tool_io_pairs: 4,
            keep_recent_rounds: 10,
            keep_task: true,
            roles_never_prune: vec![Role::System, Role::Developer],
            protected_flag: "protected".to_owned(),
            strategy: Strategy::TaskState,
            compact_trigger_turns: None,
            token_budget: None,
            token_soft_budget: None,
            token_remaining_pct: None,
            clear_tool_inputs: false,
            include_tools: Vec::new(),
            exclude_tools: Vec::new(),
            tool_result_max_chars: 10_000,
            max_compact_failures: 3,
            summary_role: Role::User,
            summary_max_pct: 0.25,
            reactive_target_pct: 0.4,
            repair: Repair::Report,
            cache_breakpoints: CacheBreakpoints::Auto,
            cache: CachePolicy::Auto,
            cache_min_tokens: 14_000,
            cache_ttl: CacheTtl::FiveMinutes,
        }
    }
}

/// Which exporter receives compaction events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExporterKind {
    /// Events are dropped.
    #[default]
    None,
    /// Human-readable lines on stderr.
    Console,
    /// One JSON event per line in `jsonl_path`.
    Jsonl,
    /// HTTP to an Ariadne `/ingest` at `ariadne_url`.
    Ariadne,
    /// OTLP/HTTP to `otlp_endpoint`.
    Otlp,
}

/// The encoding of OTLP/HTTP bodies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum OtlpProtocolKind {
    /// `application/json` (the first form of the exporter).
    #[default]
    #[serde(rename = "http/json")]
    HttpJson,
    /// `application/x-protobuf`: OTLP's default, and the only form some
    /// receivers (Arize Phoenix) take.
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
}

/// Event export settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Validate)]
#[serde(default, deny_unknown_fields)]
pub struct Telemetry {
    /// Which exporter receives events.
    #[garde(skip)]
    pub exporter: ExporterKind,
    /// Ariadne ingest URL.
    #[garde(custom(rules::http_url))]
    pub ariadne_url: String,
    /// File the `jsonl` exporter appends to.
    #[garde(custom(rules::non_empty))]
    pub jsonl_path: String,
    /// OTLP/HTTP traces endpoint.
    #[garde(custom(rules::http_url))]
    pub otlp_endpoint: String,
    /// How OTLP bodies are encoded: `http/json` or `http/protobuf`
    /// (OpenTelemetry's `OTEL_EXPORTER_OTLP_PROTOCOL` names).
    #[garde(skip)]
    pub otlp_protocol: OtlpProtocolKind,
    /// Written into each trace's metadata.
    #[garde(custom(rules::non_empty))]
    pub agent_name: String,
    /// Dispatcher queue length; events beyond it are dropped and counted.
    #[garde(custom(rules::at_least(1)))]
    pub queue_capacity: usize,
    /// Events per exporter call.
    #[garde(custom(rules::at_least(1)))]
    pub batch_size: usize,
    /// Longest time an event waits for its batch to fill.
    #[garde(custom(rules::at_least_u64(1)))]
    pub flush_interval_ms: u64,
}

impl Default for Telemetry {
    fn default() -> Self {
        Self {
            exporter: ExporterKind::None,
            ariadne_url: "http://localhost:5175/ingest".to_owned(),
            jsonl_path: "./.compact/events.jsonl".to_owned(),
            otlp_endpoint: "http://localhost:4318/v1/traces".to_owned(),
            otlp_protocol: OtlpProtocolKind::HttpJson,
            agent_name: "compact-agent".to_owned(),
            queue_capacity: 10_000,
            batch_size: 100,
            flush_interval_ms: 200,
        }
    }
}

/// Which storage adapter archives transcripts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StorageAdapterKind {
    /// The local filesystem under `storage.path`.
    #[default]
    Fs,
    /// S3 or an S3-compatible store (`storage.s3`).
    S3,
    /// No archive.
    None,
}

/// Archive settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Validate)]
#[serde(default, deny_unknown_fields)]
pub struct Storage {
    /// Which adapter archives.
    #[garde(skip)]
    pub adapter: StorageAdapterKind,
    /// Root directory of the filesystem archive.
    #[garde(custom(rules::non_empty))]
    pub path: String,
    /// Local spool for archive writes that could not be delivered yet.
    #[garde(custom(rules::non_empty))]
    pub spool_path: String,
    /// S3 settings, used when `adapter` is `s3`.
    #[garde(dive)]
    pub s3: S3Settings,
}

impl Default for Storage {
    fn default() -> Self {
        Self {
            adapter: StorageAdapterKind::Fs,
            path: "./.compact/archive".to_owned(),
            spool_path: "./.compact/spool".to_owned(),
            s3: S3Settings::default(),
        }
    }
}

/// S3 archive settings. Credentials never live here: they come from the
/// standard AWS chain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Validate)]
#[serde(default, deny_unknown_fields)]
pub struct S3Settings {
    /// Bucket name; required when `storage.adapter` is `s3`.
    #[garde(custom(rules::opt_non_empty))]
    pub bucket: Option<String>,
    /// Key prefix; objects go under `{prefix}/{session_id}/`.
    #[garde(skip)]
    pub prefix: String,
    /// AWS region; the AWS chain decides when unset.
    #[garde(custom(rules::opt_non_empty))]
    pub region: Option<String>,
    /// Custom endpoint for S3-compatible stores.
    #[garde(custom(rules::opt_http_url))]
    pub endpoint_url: Option<String>,
    /// SSE-KMS key; objects are encrypted with it when set.
    #[garde(custom(rules::opt_non_empty))]
    pub kms_key_id: Option<String>,
}

impl Default for S3Settings {
    fn default() -> Self {
        Self {
            bucket: None,
            prefix: "compact".to_owned(),
            region: None,
            endpoint_url: None,
            kms_key_id: None,
        }
    }
}

/// Secret scrubbing settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Validate)]
#[serde(default, deny_unknown_fields)]
pub struct Redaction {
    /// Turning it off is allowed but reported with a high-severity event.
    #[garde(skip)]
    pub enabled: bool,
    /// Regexes added to the built-in patterns; matches become `<REDACTED>`.
    #[garde(inner(custom(rules::regex)))]
    pub patterns: Vec<String>,
}

impl Policy {
    /// Whether `m` is pinned by this policy: a `roles_never_prune` role, the
    /// `protected_flag` in its `meta`, or a provider-native compaction (opaque state
    /// only the provider can read). (Our own summary is never pinned, whatever its
    /// role: callers that can see it exclude it.)
    pub fn pins(&self, m: &crate::model::Message) -> bool {
        self.roles_never_prune.contains(&m.role())
            || m.is_protected(&self.protected_flag)
            || m.kind().compaction
    }
}

impl Default for Redaction {
    fn default() -> Self {
        Self {
            enabled: true,
            patterns: Vec::new(),
        }
    }
}
