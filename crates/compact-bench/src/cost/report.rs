//! The cost report: per split (held out first), per corpus, window and
//! policy, what the calls cost under each [`Pricing`], how much the cache
//! served, how often the prefix broke, and what the final context retained;
//! and [`table`], the same for a human.

use std::collections::BTreeMap;

use compact_middleware::price::{PRICES_READ_ON, Price};
use serde_json::{Map, Value, json};

use super::{Options, Policy, Pricing, Run};
use crate::corpus::{Split, Transcript};

#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    kept: usize,
    total: usize,
}

impl Tally {
    fn add(&mut self, kept: bool) {
        self.total += 1;
        self.kept += usize::from(kept);
    }

    fn pct(&self) -> Option<f64> {
        (self.total > 0).then(|| round1(self.kept as f64 / self.total as f64 * 100.0))
    }
}

/// Sums under one pricing. The prompt, the breaks and what was kept are
/// the replay's that this pricing's rows come from (compact is replayed
/// once per rule it plans for).
#[derive(Debug, Clone, Copy, Default)]
struct Priced {
    prompt: usize,
    breaks: usize,
    compactions: usize,
    user_assistant: Tally,
    tool: Tally,
    read: usize,
    write: usize,
    input: usize,
    cost: f64,
    input_cost: f64,
    summary_cost: f64,
    /// compact's own summary requests under `fresh` and `agent_prefix`.
    own_cost: [f64; 2],
    /// The same, input only (the completion is the same under both).
    own_input_cost: [f64; 2],
    /// Their input tokens, and those read from the cache (`agent_prefix`).
    own_prompt: [usize; 2],
    own_read: usize,
}

/// The figures of a set of runs.
#[derive(Debug, Clone, Default)]
struct Cell {
    sessions: usize,
    calls: usize,
    summary_calls: usize,
    compactions: usize,
    breaks: usize,
    breaks_not_compacting: usize,
    over_window: usize,
    sessions_over_window: usize,
    prompt: usize,
    output: usize,
    priced: [Priced; 3],
    /// compact's own summary requests priced (`Options::summary_prompts`).
    own_calls: usize,
    facts: Tally,
    user_assistant: Tally,
    tool: Tally,
}

impl Cell {
    /// Adds `run`: its figures that depend on no price when it is the
    /// headline replay (a peer's, or compact's planned for
    /// [`super::headline_plan`]), its priced figures under each rule it
    /// stands for (every rule for a peer or a single plan, else its own).
    fn add(&mut self, run: &Run, t: &Transcript, prices: &[Price; 3], opts: &Options) {
        let headline = run.plan.is_none_or(|p| p == super::headline_plan(opts));
        let rules: Vec<Pricing> = Pricing::ALL
            .into_iter()
            .filter(|&p| opts.plan_for.is_some() || run.plan.is_none_or(|x| x == p))
            .collect();
        let kept: Vec<(bool, bool)> = t
            .facts
            .iter()
            .enumerate()
            .map(|(i, f)| {
                (
                    run.retained.get(i).copied().unwrap_or(false),
                    f.location.is_tool(),
                )
            })
            .collect();
        for &p in &rules {
            let i = p.index();
            let price = &prices[i];
            let s = &mut self.priced[i];
            for c in &run.calls {
                let tokens = &c.tokens[i];
                s.prompt += c.prompt;
                s.breaks += usize::from(c.broke);
                s.compactions += usize::from(c.compacted);
                s.read += tokens.cache_read;
                s.write += tokens.cache_write;
                s.input += tokens.input;
                let cost = price.cost(tokens, p.ttl());
                s.cost += cost;
                s.input_cost += cost - tokens.output as f64 * price.output / 1e6;
            }
            for c in &run.summaries {
                s.summary_cost += price.cost(&c.tokens[i], p.ttl());
            }
            for &(k, tool) in &kept {
                if tool {
                    s.tool.add(k);
                } else {
                    s.user_assistant.add(k);
                }
            }
        }
        if !headline {
            return;
        }
        self.sessions += 1;
        self.calls += run.calls.len();
        self.summary_calls += run.summaries.len();
        let over = run.calls.iter().filter(|c| c.over_window).count();
        self.over_window += over;
        self.sessions_over_window += usize::from(over > 0);
        for c in &run.calls {
            self.compactions += usize::from(c.compacted);
            self.breaks += usize::from(c.broke);
            self.breaks_not_compacting += usize::from(c.broke && !c.compacted);
            self.prompt += c.prompt;
            self.output += c.output;
        }
        self.own_calls += run.own_summaries.len();
        for (fresh, prefixed) in &run.own_summaries {
            for p in Pricing::ALL {
                let i = p.index();
                let s = &mut self.priced[i];
                for (k, c) in [fresh, prefixed].into_iter().enumerate() {
                    let cost = prices[i].cost(&c.tokens[i], p.ttl());
                    s.own_cost[k] += cost;
                    s.own_input_cost[k] +=
                        cost - c.tokens[i].output as f64 * prices[i].output / 1e6;
                    s.own_prompt[k] += c.tokens[i].prompt();
                }
                s.own_read += prefixed.tokens[i].cache_read;
            }
        }
        for &(k, tool) in &kept {
            self.facts.add(k);
            if tool {
                self.tool.add(k);
            } else {
                self.user_assistant.add(k);
            }
        }
    }

    fn per_call(&self, v: f64) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            v / self.calls as f64
        }
    }

    fn per_session(&self, v: f64) -> f64 {
        if self.sessions == 0 {
            0.0
        } else {
            v / self.sessions as f64
        }
    }

    fn json(&self) -> Value {
        let pricing: Map<String, Value> = Pricing::ALL
            .iter()
            .map(|p| {
                let s = &self.priced[p.index()];
                (
                    p.name().to_string(),
                    json!({
                        "cost_per_session": round6(self.per_session(s.cost)),
                        "cost_per_call": round6(self.per_call(s.cost)),
                        "cost_per_call_with_summaries": round6(self.per_call(s.cost + s.summary_cost)),
                        "input_cost_per_call": round6(self.per_call(s.input_cost)),
                        "summary_cost_per_session": round6(self.per_session(s.summary_cost)),
                        "cache_hit_pct": pct(s.read, s.prompt),
                        "prefix_breaks": s.breaks,
                        "compactions": s.compactions,
                        "retention": {
                            "user_assistant_pct": s.user_assistant.pct(),
                            "tool_pct": s.tool.pct(),
                        },
                        "cache_read_tokens": s.read,
                        "cache_write_tokens": s.write,
                        "uncached_input_tokens": s.input,
                    }),
                )
            })
            .collect();
        let own: Map<String, Value> = Pricing::ALL
            .iter()
            .map(|p| {
                let s = &self.priced[p.index()];
                let [fresh, prefixed] = s.own_cost;
                let [fresh_in, prefixed_in] = s.own_input_cost;
                (
                    p.name().to_string(),
                    json!({
                        "fresh_cost_per_session": round6(self.per_session(fresh)),
                        "agent_prefix_cost_per_session": round6(self.per_session(prefixed)),
                        "saving_pct": (fresh > 0.0).then(|| round1((1.0 - prefixed / fresh) * 100.0)),
                        "fresh_input_cost_per_session": round6(self.per_session(fresh_in)),
                        "agent_prefix_input_cost_per_session": round6(self.per_session(prefixed_in)),
                        "input_saving_pct": (fresh_in > 0.0).then(|| round1((1.0 - prefixed_in / fresh_in) * 100.0)),
                        "fresh_prompt_tokens": s.own_prompt[0],
                        "agent_prefix_prompt_tokens": s.own_prompt[1],
                        "agent_prefix_cache_hit_pct": pct(s.own_read, s.own_prompt[1]),
                    }),
                )
            })
            .collect();
        let mut v = json!({
            "sessions": self.sessions,
            "calls": self.calls,
            "compactions": self.compactions,
            "prefix_breaks": self.breaks,
            "prefix_breaks_without_compaction": self.breaks_not_compacting,
            "calls_per_break": (self.breaks > 0).then(|| round1(self.calls as f64 / self.breaks as f64)),
            "summary_calls": self.summary_calls,
            "calls_over_window": self.over_window,
            "sessions_over_window": self.sessions_over_window,
            "prompt_tokens_per_call": self.per_call(self.prompt as f64).round(),
            "output_tokens_per_call": self.per_call(self.output as f64).round(),
            "pricing": pricing,
            "retention": {
                "facts_pct": self.facts.pct(),
                "user_assistant_pct": self.user_assistant.pct(),
                "tool_pct": self.tool.pct(),
                "facts": self.facts.total,
            },
        });
        if self.own_calls > 0 {
            v["own_summary"] = json!({"calls": self.own_calls, "pricing": own});
        }
        v
    }
}

fn round1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

fn round6(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
}

fn pct(part: usize, whole: usize) -> Option<f64> {
    (whole > 0).then(|| round1(part as f64 / whole as f64 * 100.0))
}

/// A group's cells by window and policy.
type Cells = BTreeMap<(usize, Policy), Cell>;

fn split_order(s: Split) -> usize {
    usize::from(s != Split::HeldOut)
}

/// The cells of one group, per window and policy, with each compact row's
/// cost per call against the cheapest peer that kept every call within the
/// window: the agent's calls alone, and with the summary requests.
fn windows_json(cells: &Cells) -> Value {
    let mut out = Map::new();
    let windows: Vec<usize> = {
        let mut w: Vec<usize> = cells.keys().map(|(w, _)| *w).collect();
        w.dedup();
        w
    };
    for w in windows {
        let mut row = Map::new();
        let cheapest = |cost: &dyn Fn(&Cell) -> f64| -> Option<(Policy, f64)> {
            cells
                .iter()
                .filter(|((cw, pol), c)| *cw == w && !pol.is_compact() && c.over_window == 0)
                .map(|((_, pol), c)| (*pol, cost(c)))
                .min_by(|a, b| a.1.total_cmp(&b.1))
        };
        for ((_, policy), cell) in cells.iter().filter(|((cw, _), _)| *cw == w) {
            let mut v = cell.json();
            if policy.is_compact() {
                let ratio = |ours: f64, theirs: f64| {
                    (theirs > 0.0).then(|| (ours / theirs * 1000.0).round() / 1000.0)
                };
                let vs: Map<String, Value> = Pricing::ALL
                    .iter()
                    .filter_map(|p| {
                        let i = p.index();
                        let calls = |c: &Cell| c.per_call(c.priced[i].cost);
                        let all =
                            |c: &Cell| c.per_call(c.priced[i].cost + c.priced[i].summary_cost);
                        let (peer, cost) = cheapest(&calls)?;
                        let (peer_all, cost_all) = cheapest(&all)?;
                        Some((
                            p.name().to_string(),
                            json!({
                                "peer": peer.name(),
                                "ratio": ratio(calls(cell), cost),
                                "peer_with_summaries": peer_all.name(),
                                "ratio_with_summaries": ratio(all(cell), cost_all),
                            }),
                        ))
                    })
                    .collect();
                v["vs_cheapest_peer"] = Value::Object(vs);
            }
            row.insert(policy.name().to_string(), v);
        }
        out.insert(w.to_string(), Value::Object(row));
    }
    Value::Object(out)
}

/// The report of `runs` over `transcripts`.
pub fn build(
    transcripts: &[Transcript],
    runs: &[Run],
    opts: &Options,
    prices: &[Price; 3],
) -> Value {
    let mut by_split: BTreeMap<(usize, Split), Cells> = BTreeMap::new();
    let mut by_corpus: BTreeMap<(usize, Split, String), Cells> = BTreeMap::new();
    let mut all = Cells::new();
    for r in runs {
        let t = &transcripts[r.transcript];
        let key = (r.window, r.policy);
        by_split
            .entry((split_order(t.split), t.split))
            .or_default()
            .entry(key)
            .or_default()
            .add(r, t, prices, opts);
        by_corpus
            .entry((split_order(t.split), t.split, t.source.clone()))
            .or_default()
            .entry(key)
            .or_default()
            .add(r, t, prices, opts);
        all.entry(key).or_default().add(r, t, prices, opts);
    }
    let splits: Vec<Value> = by_split
        .iter()
        .map(|((_, split), cells)| json!({"split": split.name(), "by_window": windows_json(cells)}))
        .collect();
    let corpora: Vec<Value> = by_corpus
        .iter()
        .map(|((_, split, source), cells)| {
            json!({"corpus": source, "split": split.name(), "by_window": windows_json(cells)})
        })
        .collect();
    let price_json = |model: &str, p: &Price| {
        json!({
            "model": model,
            "input": p.input,
            "cached_input": p.cached_input(),
            "cache_write_5m": p.cache_write(compact_middleware::price::Ttl::FiveMinutes),
            "cache_write_1h": p.cache_write(compact_middleware::price::Ttl::OneHour),
            "output": p.output,
        })
    };
    let rules: Map<String, Value> = super::plans(opts)
        .into_iter()
        .map(|rule| {
            let price = &prices[rule.index()];
            (
                rule.name().to_string(),
                json!({
                    "model": super::model_of(opts, rule),
                    "write_over_cached": round1(price.cache_write(rule.ttl()) / price.cached_input()),
                }),
            )
        })
        .collect();
    let plans_for = json!({
        "rule": opts.plan_for.map_or("each", Pricing::name),
        "rules": rules,
    });
    json!({
        "compact_plans_for": plans_for,
        "by_split": splits,
        "by_corpus": corpora,
        "all": windows_json(&all),
        "windows": opts.windows,
        "policies": opts.policies.iter().map(|p| p.name()).collect::<Vec<_>>(),
        "prices": {
            "per": "US dollars per million tokens",
            "read_on": PRICES_READ_ON,
            "openai": price_json(&opts.openai_model, &prices[0]),
            "anthropic": price_json(&opts.anthropic_model, &prices[1]),
        },
        "model": {
            "openai": "cached = identical leading tokens of this request and the previous one of the session (messages compared as the codec sends them, tokens counted with the configured model's counter), 0 below 1,024, else 1,024 + whole steps of 128",
            "anthropic": "breakpoints after the leading system/developer messages and on the last message; read = longest prefix ending at a breakpoint an earlier call wrote (or up to 20 messages before one of this call's breakpoints) whose entry is alive; write = from there to the last breakpoint when that prefix has at least 1,024 tokens; entries live 5 minutes or 1 hour from their last use",
            "calls": format!("one call per turn, {} s apart (within both cache lifetimes unless set above 300 s)", opts.gap_secs),
            "output": "the model output of the next turn, the same for every policy",
            "prefix_break": "a call whose request does not start with the whole previous request of its session",
            "peers": "simulated with the same counter; their summary text is compact's extractive summary of what they fold, within compact's summary cap (policy.summary_max_pct of the window); their summary requests are priced in summary_cost_per_session (LangChain-like: a fresh prompt of at most 4,000 tokens plus its instructions; Codex-like: the agent's own request plus an instruction, through the cache)",
        },
    })
}

fn money(v: &Value) -> String {
    v.as_f64().map_or("-".into(), |x| {
        if x >= 1.0 {
            format!("{x:.2}")
        } else {
            format!("{x:.4}")
        }
    })
}

fn num(v: &Value) -> String {
    v.as_f64().map_or("-".into(), |x| format!("{x:.1}"))
}

/// The report as text: for each pricing, a table per split (held out
/// first) of every window and policy, then the corpora under the OpenAI
/// pricing.
pub fn table(doc: &Value) -> String {
    let mut out = String::new();
    if let Some(e) = doc.get("error") {
        return format!("error: {e}\n");
    }
    let prices = &doc["prices"];
    let header = format!(
        "{:<9} {:>7} {:<19} {:>9} {:>8} {:>8} {:>9} {:>6} {:>12} {:>6} {:>6} {:>11} {:>9}\n",
        "split",
        "window",
        "policy",
        "$/session",
        "$/call",
        "in$/call",
        "+summ$/s",
        "hit%",
        "breaks/calls",
        "vs.min",
        "+summ",
        "kept u+a/tl",
        "over/sess"
    );
    out.push_str(&plans_line(&doc["compact_plans_for"]));
    for p in Pricing::ALL {
        let which = if p == Pricing::OpenAi {
            &prices["openai"]
        } else {
            &prices["anthropic"]
        };
        out.push_str(&format!(
            "\n== {} rule, priced as {} (input {} / cached {} / write {} / output {} $ per MTok, read {}) ==\n",
            p.name(),
            which["model"].as_str().unwrap_or("?"),
            which["input"],
            which["cached_input"],
            if p == Pricing::Anthropic1h {
                &which["cache_write_1h"]
            } else {
                &which["cache_write_5m"]
            },
            which["output"],
            prices["read_on"].as_str().unwrap_or("?"),
        ));
        out.push_str(&header);
        for split in doc["by_split"].as_array().into_iter().flatten() {
            rows(
                &mut out,
                split["split"].as_str().unwrap_or(""),
                &split["by_window"],
                p,
            );
        }
    }
    own_rows(&mut out, doc);
    out.push_str("\n== per corpus, openai rule ==\n");
    let corpora: Vec<(String, &Value)> = doc["by_corpus"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let label = format!(
                "{}/{}",
                c["split"].as_str().unwrap_or(""),
                c["corpus"].as_str().unwrap_or("")
            );
            (label, &c["by_window"])
        })
        .collect();
    let width = corpora.iter().map(|(l, _)| l.len()).max().unwrap_or(9);
    out.push_str(&format!("{:<width$}", "split/corpus"));
    out.push_str(&header[9..]);
    for (label, by_window) in corpora {
        let mut lines = String::new();
        rows(&mut lines, "", by_window, Pricing::OpenAi);
        for line in lines.lines() {
            out.push_str(&format!("{label:<width$}{}\n", &line[9..]));
        }
    }
    out.push_str(&format!(
        "\nsessions: {}  trajectories: {}  wall: {} s\n",
        doc["corpus"]["sessions"], doc["corpus"]["trajectories"], doc["wall_secs"]
    ));
    out
}

/// What compact planned for, in one line: each rule for its own rows, or
/// one rule for all of them.
fn plans_line(plans: &Value) -> String {
    let rules: Vec<String> = plans["rules"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(rule, r)| {
            format!(
                "{rule}: {}, a re-sent token at {}x a cached one",
                r["model"].as_str().unwrap_or("?"),
                r["write_over_cached"]
            )
        })
        .collect();
    match plans["rule"].as_str() {
        Some("each") => format!(
            "compact plans for each rule's prices, one replay each ({})\n",
            rules.join("; ")
        ),
        rule => format!(
            "compact plans for the {} rule ({}); the other rules price the same calls\n",
            rule.unwrap_or("?"),
            rules.join("; ")
        ),
    }
}

fn rows(out: &mut String, label: &str, by_window: &Value, p: Pricing) {
    for (w, cells) in by_window.as_object().into_iter().flatten() {
        for (policy, c) in cells.as_object().into_iter().flatten() {
            let pr = &c["pricing"][p.name()];
            let vs = |key: &str| {
                c["vs_cheapest_peer"][p.name()][key]
                    .as_f64()
                    .map_or(String::new(), |r| format!("{r:.2}"))
            };
            out.push_str(&format!(
                "{:<9} {:>7} {:<19} {:>9} {:>8} {:>8} {:>9} {:>6} {:>12} {:>6} {:>6} {:>11} {:>9}\n",
                label,
                w,
                policy,
                money(&pr["cost_per_session"]),
                money(&pr["cost_per_call"]),
                money(&pr["input_cost_per_call"]),
                money(&pr["summary_cost_per_session"]),
                num(&pr["cache_hit_pct"]),
                format!("{}/{}", pr["prefix_breaks"], c["calls"]),
                vs("ratio"),
                vs("ratio_with_summaries"),
                format!(
                    "{}/{}",
                    num(&pr["retention"]["user_assistant_pct"]),
                    num(&pr["retention"]["tool_pct"])
                ),
                format!("{}/{}", c["sessions_over_window"], c["sessions"]),
            ));
        }
    }
}

/// compact's own summary requests as a model summarizer would make them
/// (`Options::summary_prompts`), per split, window and pricing: nothing
/// when they were not priced.
fn own_rows(out: &mut String, doc: &Value) {
    let mut lines = String::new();
    for split in doc["by_split"].as_array().into_iter().flatten() {
        let label = split["split"].as_str().unwrap_or("");
        for (w, cells) in split["by_window"].as_object().into_iter().flatten() {
            for (policy, c) in cells.as_object().into_iter().flatten() {
                let own = &c["own_summary"];
                if own.is_null() {
                    continue;
                }
                for p in Pricing::ALL {
                    let pr = &own["pricing"][p.name()];
                    lines.push_str(&format!(
                        "{:<9} {:>7} {:<19} {:<13} {:>6} {:>10} {:>10} {:>8} {:>10} {:>10} {:>8} {:>6}\n",
                        label,
                        w,
                        policy,
                        p.name(),
                        own["calls"],
                        money(&pr["fresh_cost_per_session"]),
                        money(&pr["agent_prefix_cost_per_session"]),
                        num(&pr["saving_pct"]),
                        money(&pr["fresh_input_cost_per_session"]),
                        money(&pr["agent_prefix_input_cost_per_session"]),
                        num(&pr["input_saving_pct"]),
                        num(&pr["agent_prefix_cache_hit_pct"]),
                    ));
                }
            }
        }
    }
    if lines.is_empty() {
        return;
    }
    out.push_str("\n== compact's own summary requests, were the summarizer a model (summarizer.kind: openai): summarizer.prompt fresh vs agent_prefix ==\n");
    out.push_str(&format!(
        "{:<9} {:>7} {:<19} {:<13} {:>6} {:>10} {:>10} {:>8} {:>10} {:>10} {:>8} {:>6}\n",
        "split",
        "window",
        "policy",
        "rule",
        "calls",
        "fresh$/s",
        "prefix$/s",
        "saving%",
        "fr.in$/s",
        "pf.in$/s",
        "in.sav%",
        "hit%"
    ));
    out.push_str(&lines);
}
