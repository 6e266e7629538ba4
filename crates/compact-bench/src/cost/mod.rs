//! `compact bench cost`: what a session costs with a provider's prompt
//! cache, compact beside other tools' policies.
//!
//! Every session of the retention suite's corpora ([`retention::sessions`]:
//! the generated sessions, the named corpora's tuning and held-out seeds,
//! the fixtures and the real trajectories when `../shared/real-trajectories`
//! is there) is replayed turn by turn at each window under each
//! [`Policy`]: compact at default settings in both calling modes (through
//! [`retention::replay`], the one replay loop), once per cache rule with
//! that rule's prices to plan for ([`compact_config`], [`plans`]), and the peers of
//! [`peers`], simulated with the same counter. Each call's request, as the
//! provider receives it, goes through the cache rules of [`cache`]:
//! OpenAI's (shared leading tokens, 1,024 minimum, 128-token steps) and
//! Anthropic's (breakpoints after the agent's instructions and on the last
//! message, as an agent using automatic caching places them, or none with
//! [`Options::caller_breakpoints`] off; on compact's requests also the ones
//! `policy.cache_breakpoints: auto` adds, as the Anthropic codec places
//! them; 5-minute and 1-hour lifetimes, calls `gap_secs` apart). The token
//! figures are priced with the configuration's price table
//! (`models.NAME.price`, else the built-in prices of
//! `compact_middleware::price`).
//!
//! A call's output is the model output of the next turn (the same for every
//! policy). A peer's compaction also makes a summary request
//! ([`peers::SummaryCall`]), priced on its own; compact's default
//! summarizer is extractive and makes none. With
//! [`Options::summary_prompts`], each compaction of compact's that wrote a
//! summary is also priced as the request a model summarizer would have
//! made, under `summarizer.prompt: fresh` and `agent_prefix`
//! ([`own_summary`]), apart from every other figure.
//!
//! The report ([`report::build`]) gives, per split (held out first), corpus,
//! window and policy: cost per session and per call, cache hit %, prefix
//! breaks (calls that could not reuse the previous call's whole request)
//! and retention (the retention harness's probes on the final context).

pub mod cache;
mod own_summary;
pub mod peers;
pub mod report;

use std::sync::Arc;
use std::time::Instant;

use compact_middleware::cache::breakpoints;
use compact_middleware::config::{CacheBreakpoints, Config, ModelOverride};
use compact_middleware::estimate::Estimator;
use compact_middleware::invariants::is_summary;
use compact_middleware::model::Role;
use compact_middleware::price::{CallTokens, Price, Ttl};
use compact_middleware::tokens::{CountCache, EstimatorKind, REPLY_PRIMING};
use compact_middleware::{CompactManager, Message};
use serde_json::{Value, json};

use cache::{ANTHROPIC_MIN_TOKENS, AnthropicCache, Block, OpenAiCache, Request};
use peers::{Peer, SummaryCall};

use crate::corpus::Transcript;
use crate::retention::{self, CallingMode, check, replay};

/// The windows the suite measures, in tokens.
pub const WINDOWS: [usize; 4] = [8_000, 16_000, 32_000, 128_000];
/// The OpenAI model whose prices the OpenAI rows use by default (cached
/// input at a tenth of input).
pub const OPENAI_MODEL: &str = "gpt-5.1";
/// The Anthropic model whose prices the Anthropic rows use by default.
pub const ANTHROPIC_MODEL: &str = "claude-sonnet-4-5";
/// Seconds between two calls of a session by default: well within both
/// cache lifetimes (an agent loop calls every few seconds to a minute).
pub const CALL_GAP_SECS: u64 = 30;

/// Who decides what each call sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Policy {
    /// compact at default settings, in one calling mode.
    Compact(CallingMode),
    /// A peer policy, simulated.
    Peer(Peer),
}

impl Policy {
    /// compact in both modes, then every peer.
    pub const ALL: [Policy; 5] = [
        Policy::Compact(CallingMode::FedBack),
        Policy::Compact(CallingMode::RawResent),
        Policy::Peer(Peer::LangChainLike),
        Policy::Peer(Peer::CodexLike),
        Policy::Peer(Peer::NoCompaction),
    ];

    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Compact(CallingMode::FedBack) => "compact_fed_back",
            Policy::Compact(CallingMode::RawResent) => "compact_raw_resent",
            Policy::Peer(p) => p.name(),
        }
    }

    /// compact itself, in either mode.
    pub fn is_compact(self) -> bool {
        matches!(self, Policy::Compact(_))
    }
}

/// How the token figures are priced: a cache rule and a price.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Pricing {
    /// OpenAI's cache, the OpenAI model's prices.
    OpenAi,
    /// Anthropic's cache with 5-minute entries, the Anthropic model's prices.
    Anthropic5m,
    /// Anthropic's cache with 1-hour entries.
    Anthropic1h,
}

impl Pricing {
    /// Every pricing.
    pub const ALL: [Pricing; 3] = [Pricing::OpenAi, Pricing::Anthropic5m, Pricing::Anthropic1h];

    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Pricing::OpenAi => "openai",
            Pricing::Anthropic5m => "anthropic_5m",
            Pricing::Anthropic1h => "anthropic_1h",
        }
    }

    /// The lifetime cache writes are priced at.
    pub fn ttl(self) -> Ttl {
        match self {
            Pricing::Anthropic1h => Ttl::OneHour,
            _ => Ttl::FiveMinutes,
        }
    }

    /// The pricing called `name` (as [`Pricing::name`] spells it).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// What the suite runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Which sessions (the retention suite's selection; its windows are not used).
    pub sessions: retention::Options,
    /// Context windows, in tokens.
    pub windows: Vec<usize>,
    /// Policies.
    pub policies: Vec<Policy>,
    /// The model whose prices the OpenAI rows use.
    pub openai_model: String,
    /// The model whose prices the Anthropic rows use.
    pub anthropic_model: String,
    /// Seconds between two calls of a session.
    pub gap_secs: u64,
    /// The agent places its own Anthropic breakpoints (after its
    /// instructions and on the last message), as an agent using automatic
    /// caching does; `false`: a client that places none, so that on the
    /// Anthropic rows only compact's (`policy.cache_breakpoints`) are there.
    pub caller_breakpoints: bool,
    /// The base configuration: compact runs with it at each window, and its
    /// `models.NAME.price` entries override the built-in prices.
    pub config: Config,
    /// Runs in parallel.
    pub threads: usize,
    /// Also price compact's own summary requests as a model summarizer
    /// would make them, under both `summarizer.prompt` values
    /// ([`own_summary`]; calling mode `fed_back` only, where the agent's
    /// history is what the provider received).
    pub summary_prompts: bool,
    /// What compact plans for: its cost model (`policy.cache: auto`) weighs
    /// the price of the rows it is judged by ([`compact_config`]). `None`
    /// (the default): each rule's rows come from a replay planned for that
    /// rule. `Some(rule)`: one replay, planned for `rule`, priced under
    /// every rule (faster; the other rules' rows then price calls planned
    /// for another price).
    pub plan_for: Option<Pricing>,
}

impl Options {
    /// The measurement: the retention suite's full corpus, every window of
    /// [`WINDOWS`], every policy.
    pub fn full() -> Self {
        let sessions = retention::Options::full();
        Self {
            threads: sessions.threads,
            sessions,
            windows: WINDOWS.to_vec(),
            policies: Policy::ALL.to_vec(),
            openai_model: OPENAI_MODEL.to_string(),
            anthropic_model: ANTHROPIC_MODEL.to_string(),
            gap_secs: CALL_GAP_SECS,
            caller_breakpoints: true,
            config: Config::default(),
            summary_prompts: false,
            plan_for: None,
        }
    }

    /// A smoke run: the retention suite's quick corpus.
    pub fn quick() -> Self {
        Self {
            sessions: retention::Options {
                trajectories: false,
                ..retention::Options::quick()
            },
            ..Self::full()
        }
    }
}

/// One call's figures.
#[derive(Debug, Clone, Copy, Default)]
pub struct Call {
    /// Input tokens of the request.
    pub prompt: usize,
    /// Output tokens.
    pub output: usize,
    /// The policy rewrote the history before this call.
    pub compacted: bool,
    /// The request does not start with the whole previous request: some of
    /// what the previous call sent was rewritten or dropped.
    pub broke: bool,
    /// The request exceeds the window (the provider would refuse it).
    pub over_window: bool,
    /// The input split by each [`Pricing`]'s cache rule (output included).
    pub tokens: [CallTokens; 3],
}

/// One session at one window under one policy.
#[derive(Debug, Clone)]
pub struct Run {
    /// Index into the transcripts.
    pub transcript: usize,
    /// The window, in tokens.
    pub window: usize,
    /// The policy.
    pub policy: Policy,
    /// The rule compact planned for (`None` for a peer).
    pub plan: Option<Pricing>,
    /// The agent's calls.
    pub calls: Vec<Call>,
    /// The summary requests compactions made.
    pub summaries: Vec<Call>,
    /// compact's own summary requests as a model summarizer would make
    /// them: (`fresh`, `agent_prefix`), with [`Options::summary_prompts`].
    pub own_summaries: Vec<(Call, Call)>,
    /// Per fact of the transcript: retained in the final context.
    pub retained: Vec<bool>,
}

/// What the provider caches of one session's requests, by each rule.
struct Meter {
    estimator: Estimator,
    window: usize,
    openai: OpenAiCache,
    anthropic: [AnthropicCache; 2],
    clock: u64,
    gap: u64,
    last: Option<Request>,
    /// The agent places its own breakpoints ([`Options::caller_breakpoints`]).
    caller: bool,
    /// compact's breakpoints go on the Anthropic requests, by this policy
    /// (`policy.cache_breakpoints: auto`, compact's runs only).
    ours: Option<compact_middleware::config::Policy>,
}

impl Meter {
    fn new(estimator: Estimator, window: usize, gap: u64) -> Self {
        Self {
            estimator,
            window,
            openai: OpenAiCache::new(),
            anthropic: [
                AnthropicCache::new(Ttl::FiveMinutes, ANTHROPIC_MIN_TOKENS),
                AnthropicCache::new(Ttl::OneHour, ANTHROPIC_MIN_TOKENS),
            ],
            clock: 0,
            gap,
            last: None,
            caller: true,
            ours: None,
        }
    }

    /// `messages` as a request, with the breakpoints an agent places (after
    /// its instructions, the leading system and developer messages, and on
    /// the last message) and, for compact, the ones compact adds within the
    /// provider's four (`compact_middleware::cache::breakpoints`, as the
    /// Anthropic codec places them; any message can carry one here).
    fn request(&self, messages: &[Message]) -> Request {
        let blocks: Vec<Block> = messages
            .iter()
            .map(|m| Block::new(m, self.estimator.count_message(m)))
            .collect();
        let lead = messages
            .iter()
            .take_while(|m| matches!(m.role(), Role::System | Role::Developer))
            .count();
        let mut breakpoints = Vec::new();
        if self.caller {
            if lead > 0 && lead < messages.len() {
                breakpoints.push(lead - 1);
            }
            if !messages.is_empty() {
                breakpoints.push(messages.len() - 1);
            }
        }
        if let Some(policy) = &self.ours {
            // The agent's own are of the rule's lifetime, as every entry of
            // the simulated cache is: they bound neither side of ours.
            let existing = breakpoints::Existing {
                count: breakpoints.len(),
                at: breakpoints.clone(),
                ..breakpoints::Existing::default()
            };
            // The previous request ends here when this one starts with it.
            let previous_end = self.last.as_ref().and_then(|prev| {
                let k = prev.blocks.len();
                (k > 0
                    && k < blocks.len()
                    && prev
                        .blocks
                        .iter()
                        .zip(&blocks)
                        .all(|(a, b)| a.hash == b.hash))
                .then(|| k - 1)
            });
            let planned = breakpoints::plan(
                &breakpoints::Request {
                    messages,
                    existing: &existing,
                    summary_index: messages.iter().position(is_summary),
                    previous_end,
                },
                policy,
                &|_| true,
            );
            breakpoints.extend(planned.iter().map(|p| p.index));
            breakpoints.sort_unstable();
            breakpoints.dedup();
        }
        Request {
            blocks,
            trailer: REPLY_PRIMING,
            breakpoints,
        }
    }

    /// One call sending `messages`, answered with `output` tokens.
    fn call(&mut self, messages: &[Message], output: usize) -> Call {
        let req = self.request(messages);
        let e = self.estimator.clone();
        let count = move |s: &str| e.count_text(s);
        let (mut openai, shared) = self.openai.call(&req, &count);
        let now = self.clock;
        self.clock += self.gap;
        let mut a5 = self.anthropic[0].call(&req, now);
        let mut a1 = self.anthropic[1].call(&req, now);
        for t in [&mut openai, &mut a5, &mut a1] {
            t.output = output;
        }
        let prompt = req.tokens();
        let broke = self.last.is_some() && shared.rewrote;
        self.last = Some(req);
        Call {
            prompt,
            output,
            compacted: false,
            broke,
            over_window: prompt > self.window,
            tokens: [openai, a5, a1],
        }
    }

    /// A summary request: one on the agent's history goes through the
    /// caches (it is the previous request of the next call), a fresh one is
    /// all plain input.
    fn summary(&mut self, call: &SummaryCall) -> Call {
        match call {
            SummaryCall::OnHistory { request, output } => {
                let mut c = self.call(request, *output);
                c.broke = false;
                c
            }
            SummaryCall::Fresh { input, output } => {
                let t = CallTokens {
                    input: *input,
                    output: *output,
                    ..CallTokens::default()
                };
                Call {
                    prompt: *input,
                    output: *output,
                    tokens: [t; 3],
                    ..Call::default()
                }
            }
        }
    }
}

/// Output tokens of each call: the model output of the turn after it.
fn outputs(t: &Transcript, e: &Estimator) -> Vec<usize> {
    let model_output = |m: &Message| {
        m.role() == Role::Assistant
            || matches!(
                m.kind().item,
                compact_middleware::model::ItemType::Reasoning
                    | compact_middleware::model::ItemType::ToolCall
            )
    };
    (0..t.turns.len())
        .map(|k| {
            t.turns.get(k + 1).map_or(0, |next| {
                next.iter()
                    .filter(|m| model_output(m))
                    .map(|m| e.count_message(m))
                    .sum()
            })
        })
        .collect()
}

/// The configuration compact runs with at `window`.
fn config_at(base: &Config, window: usize) -> Config {
    Config {
        max_context_tokens: Some(window),
        ..base.clone()
    }
}

/// The model whose price the rows of `rule` bill.
pub fn model_of(opts: &Options, rule: Pricing) -> &str {
    match rule {
        Pricing::OpenAi => &opts.openai_model,
        Pricing::Anthropic5m | Pricing::Anthropic1h => &opts.anthropic_model,
    }
}

/// The configuration compact runs with at `window`: the base one, its model
/// the one whose price the rows of `rule` bill, so that the cost
/// model plans for the prices compact is judged by (the base model's, say
/// gpt-4o's cached input at half price, would plan for another provider's
/// cache). The model keeps the base model's counter, so that a window holds
/// the same tokens under every policy, and its breakpoints live as long as
/// those rows' entries (`policy.cache_ttl: 1h` for the 1-hour rule, whose
/// write price the cost model then weighs).
pub fn compact_config(opts: &Options, window: usize, rule: Pricing) -> Result<Config, String> {
    let base = config_at(&opts.config, window);
    let limits = compact_middleware::estimate::ModelLimits::from_config(&base)
        .map_err(|e| format!("window {window}: {e}"))?;
    let model = model_of(opts, rule);
    let planned = price(&opts.config, model)?;
    let counter = match limits.chars_per_token {
        Some(ratio) => ModelOverride {
            estimator: Some(EstimatorKind::Ratio),
            chars_per_token: Some(ratio),
            ..ModelOverride::price_only(planned)
        },
        None => ModelOverride {
            encoding: Some(limits.encoding),
            ..ModelOverride::price_only(planned)
        },
    };
    let mut config = base;
    config.model = model.to_string();
    config.policy.cache_ttl = rule.ttl().into();
    config.models.insert(
        model.to_string(),
        ModelOverride {
            context_window: Some(window),
            ..counter
        },
    );
    Ok(config)
}

/// The rules compact is replayed for: each one (`plan_for: None`), or the
/// one asked for.
pub fn plans(opts: &Options) -> Vec<Pricing> {
    match opts.plan_for {
        Some(rule) => vec![rule],
        None => Pricing::ALL.to_vec(),
    }
}

/// The rule whose replay gives compact's figures that do not depend on a
/// price (breaks, retention, tokens): the one asked for, else OpenAI's.
pub fn headline_plan(opts: &Options) -> Pricing {
    opts.plan_for.unwrap_or(Pricing::OpenAi)
}

/// Replays `t` at `window` under `policy`, compact planned for `plan`
/// (ignored for a peer).
#[allow(clippy::too_many_arguments)]
pub fn run_one(
    t: &Transcript,
    transcript: usize,
    window: usize,
    policy: Policy,
    plan: Pricing,
    opts: &Options,
    cache: Arc<CountCache>,
    rt: &tokio::runtime::Runtime,
) -> Result<Run, String> {
    let config = if policy.is_compact() {
        compact_config(opts, window, plan)?
    } else {
        config_at(&opts.config, window)
    };
    let manager = CompactManager::builder(config)
        .without_config_exporters()
        .without_storage()
        .count_cache(cache)
        .build()
        .map_err(|e| format!("window {window}: {e}"))?;
    let estimator = manager.estimator().clone();
    let outputs = outputs(t, &estimator);
    let mut meter = Meter::new(estimator.clone(), window, opts.gap_secs);
    meter.caller = opts.caller_breakpoints;
    if policy.is_compact() && manager.config().policy.cache_breakpoints == CacheBreakpoints::Auto {
        meter.ours = Some(manager.config().policy.clone());
    }
    let mut calls: Vec<Call> = Vec::new();
    let mut summaries: Vec<Call> = Vec::new();
    let mut own_summaries: Vec<(Call, Call)> = Vec::new();
    let prompts = (opts.summary_prompts
        && policy == Policy::Compact(CallingMode::FedBack)
        && plan == headline_plan(opts))
    .then(|| own_summary::Prompts::new(&estimator, manager.config()));
    let context = match policy {
        Policy::Compact(mode) => {
            let id = format!("{}-{window}-{}", t.name, mode.name());
            rt.block_on(replay(&manager, &id, t, mode, |sent, result| {
                // Priced before the call: the provider holds the previous
                // request when the summary request is made.
                if let (Some(prompts), Ok(o)) = (&prompts, result)
                    && o.report.summarized > 0
                    && let Some(pair) = own_summary::calls(
                        &meter,
                        sent,
                        &o.messages,
                        o.report.summary_tokens.unwrap_or(0),
                        prompts,
                    )
                {
                    own_summaries.push(pair);
                }
                let output = outputs.get(calls.len()).copied().unwrap_or(0);
                // Breakpoints compact put on an Anthropic request do not
                // change what the provider caches: the meter places them.
                let (messages, compacted) = match result {
                    Ok(o) if !o.report.cache_breakpoints.is_empty() => (
                        std::borrow::Cow::Owned(o.compacted_messages()),
                        o.report.triggered && !o.report.tiers.is_empty(),
                    ),
                    Ok(o) => (
                        std::borrow::Cow::Borrowed(&o.messages[..]),
                        o.report.triggered && !o.report.tiers.is_empty(),
                    ),
                    Err(_) => (std::borrow::Cow::Borrowed(sent), false),
                };
                let mut c = meter.call(&messages, output);
                c.compacted = compacted;
                calls.push(c);
            }))
        }
        Policy::Peer(peer) => {
            let settings = peers::Settings {
                window,
                summary_cap: (manager.config().policy.summary_max_pct * window as f64) as usize,
                estimator: estimator.clone(),
            };
            peers::replay(peer, t, &settings, |call| {
                if let Some(s) = &call.summary {
                    summaries.push(meter.summary(s));
                }
                let output = outputs.get(calls.len()).copied().unwrap_or(0);
                let mut c = meter.call(call.sent, output);
                c.compacted = call.compacted;
                calls.push(c);
            })
        }
    };
    let fits = meter.request(&context).tokens() <= window;
    let (mut retained, _) = check(&context, t);
    if !fits {
        retained.iter_mut().for_each(|k| *k = false);
    }
    Ok(Run {
        transcript,
        window,
        policy,
        plan: policy.is_compact().then_some(plan),
        calls,
        summaries,
        own_summaries,
        retained,
    })
}

/// The prices of `model` in `config`, or why there are none.
fn price(config: &Config, model: &str) -> Result<Price, String> {
    config.price_of(model).ok_or_else(|| {
        format!("no price for {model:?}: set models.{model}.price in the configuration")
    })
}

/// `compact bench cost` (`--quick`: [`Options::quick`]).
pub fn run(quick: bool) -> Value {
    run_with(&if quick {
        Options::quick()
    } else {
        Options::full()
    })
}

/// The suite with `opts`: the report of [`report::build`], the corpus and
/// the wall time.
pub fn run_with(opts: &Options) -> Value {
    let started = Instant::now();
    let prices = match (
        price(&opts.config, &opts.openai_model),
        price(&opts.config, &opts.anthropic_model),
    ) {
        (Ok(o), Ok(a)) => [o, a, a],
        (Err(e), _) | (_, Err(e)) => return json!({"error": e}),
    };
    let sessions = retention::sessions(&opts.sessions);
    let runs = match run_all(&sessions.transcripts, opts) {
        Ok(r) => r,
        Err(e) => return json!({"error": e}),
    };
    let mut doc = report::build(&sessions.transcripts, &runs, opts, &prices);
    doc["corpus"] = json!({
        "sessions": sessions.transcripts.len(),
        "trajectories": sessions.trajectories,
        "problems": sessions.problems,
    });
    doc["wall_secs"] = json!((started.elapsed().as_secs_f64() * 10.0).round() / 10.0);
    doc
}

/// Every (transcript, window, policy) run on `opts.threads` threads, each
/// with its own current-thread runtime; runs share one count cache.
pub fn run_all(transcripts: &[Transcript], opts: &Options) -> Result<Vec<Run>, String> {
    let plans = plans(opts);
    let headline = headline_plan(opts);
    let jobs: Vec<(usize, usize, Policy, Pricing)> = (0..transcripts.len())
        .flat_map(|t| {
            let plans = &plans;
            opts.windows.iter().flat_map(move |&w| {
                opts.policies.iter().flat_map(move |&p| {
                    // A peer does not plan: one replay serves every rule.
                    let for_policy: Vec<Pricing> = if p.is_compact() {
                        plans.clone()
                    } else {
                        vec![headline]
                    };
                    for_policy.into_iter().map(move |plan| (t, w, p, plan))
                })
            })
        })
        .collect();
    let cache = Arc::new(CountCache::new(400_000));
    let threads = opts.threads.clamp(1, jobs.len().max(1));
    let results = retention::on_threads(&jobs, threads, |rt, &(t, window, policy, plan)| {
        Some(run_one(
            &transcripts[t],
            t,
            window,
            policy,
            plan,
            opts,
            cache.clone(),
            rt,
        ))
    });
    if results.len() != jobs.len() {
        return Err("the runs' results were lost (a thread panicked)".into());
    }
    let mut runs = Vec::with_capacity(jobs.len());
    for r in results {
        match r {
            Some(Ok(run)) => runs.push(run),
            Some(Err(e)) => return Err(e),
            None => return Err("a run did not finish".into()),
        }
    }
    Ok(runs)
}
