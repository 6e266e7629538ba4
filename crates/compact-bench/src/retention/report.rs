//! The retention report: facts retained per window, calling mode, fact
//! kind and location, the bars they are held to, and what each run did.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::drive::{CallingMode, RunOutcome};
use crate::corpus::{Fact, FactKind, Location, Split, Transcript};

/// A window class and the share of facts it must retain.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Target {
    /// The class's name in the report.
    pub class: &'static str,
    /// Smallest window of the class (inclusive).
    pub min_window: usize,
    /// Largest window of the class (exclusive); `None` for no bound.
    pub below_window: Option<usize>,
    /// Least share (%) of user, assistant and reasoning facts retained.
    pub user_assistant_pct: f64,
    /// Least share (%) of tool-output facts retained.
    pub tool_pct: f64,
}

/// The bars, at default settings, in both calling modes.
pub const TARGETS: [Target; 2] = [
    Target {
        class: "8k_12k",
        min_window: 8_000,
        below_window: Some(16_000),
        user_assistant_pct: 90.0,
        tool_pct: 70.0,
    },
    Target {
        class: "16k_plus",
        min_window: 16_000,
        below_window: None,
        user_assistant_pct: 95.0,
        tool_pct: 85.0,
    },
];

/// The class `window` belongs to, if any.
pub fn target_for(window: usize) -> Option<&'static Target> {
    TARGETS
        .iter()
        .find(|t| window >= t.min_window && t.below_window.is_none_or(|b| window < b))
}

/// One finished run.
#[derive(Debug, Clone)]
pub struct Run {
    /// Index into the transcripts.
    pub transcript: usize,
    /// The context window, in tokens.
    pub window: usize,
    /// How the agent sent its history.
    pub mode: CallingMode,
    /// What happened.
    pub outcome: RunOutcome,
}

#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    retained: usize,
    total: usize,
}

impl Tally {
    fn add(&mut self, kept: bool) {
        self.total += 1;
        self.retained += usize::from(kept);
    }

    fn pct(&self) -> Option<f64> {
        (self.total > 0).then(|| (self.retained as f64 / self.total as f64 * 1000.0).round() / 10.0)
    }

    fn json(&self) -> Value {
        json!({"retained": self.retained, "total": self.total, "pct": self.pct()})
    }
}

/// The figures of a set of runs.
#[derive(Debug, Default)]
struct Cell {
    all: Tally,
    user_assistant: Tally,
    tool: Tally,
    left_all: Tally,
    left_user_assistant: Tally,
    left_tool: Tally,
    by_kind: BTreeMap<FactKind, Tally>,
    by_location: BTreeMap<Location, Tally>,
    by_source: BTreeMap<&'static str, Tally>,
    stale: usize,
    runs: usize,
    preflights: usize,
    compactions: usize,
    summaries: usize,
    insufficient_budget: usize,
    other_errors: usize,
    nested_summaries: usize,
    max_summary_tokens: usize,
    summary_cap: usize,
    runs_over_summary_cap: usize,
    /// Runs whose last call failed, leaving a context over the window (the
    /// model cannot be called: nothing counts as retained).
    ending_over: usize,
    continuations: BTreeMap<String, usize>,
}

impl Cell {
    fn add(&mut self, run: &Run, t: &Transcript, keep_recent_turns: usize) {
        let o = &run.outcome;
        self.runs += 1;
        self.preflights += o.preflights;
        self.compactions += o.compactions;
        self.summaries += o.summaries;
        self.insufficient_budget += o.insufficient_budget;
        self.other_errors += o.other_errors;
        self.nested_summaries += o.nested_summaries;
        self.max_summary_tokens = self.max_summary_tokens.max(o.max_summary_tokens);
        self.summary_cap = self.summary_cap.max(o.summary_cap);
        self.runs_over_summary_cap += usize::from(o.max_summary_tokens > o.summary_cap);
        self.ending_over += usize::from(!o.final_fits);
        for (k, n) in &o.continuations {
            *self.continuations.entry(k.clone()).or_default() += n;
        }
        let source = if t.source == "fixture" {
            "fixtures"
        } else {
            "generated"
        };
        for (i, f) in t.facts.iter().enumerate() {
            let kept = o.retained.get(i).copied().unwrap_or(false);
            self.stale += usize::from(o.stale.get(i).copied().unwrap_or(false));
            self.all.add(kept);
            let left = left_recent_window(f, t.turns.len(), keep_recent_turns);
            if left {
                self.left_all.add(kept);
            }
            if f.location.is_tool() {
                self.tool.add(kept);
                if left {
                    self.left_tool.add(kept);
                }
            } else {
                self.user_assistant.add(kept);
                if left {
                    self.left_user_assistant.add(kept);
                }
            }
            self.by_kind.entry(f.kind).or_default().add(kept);
            self.by_location.entry(f.location).or_default().add(kept);
            self.by_source.entry(source).or_default().add(kept);
        }
    }

    fn meets(&self, target: &Target) -> bool {
        let at_least = |t: &Tally, bar: f64| t.pct().is_none_or(|p| p >= bar);
        at_least(&self.user_assistant, target.user_assistant_pct)
            && at_least(&self.tool, target.tool_pct)
            && self.nested_summaries == 0
    }

    /// The figures a corpus table needs: kept by location and kind, and
    /// what went wrong.
    fn brief_json(&self) -> Value {
        let kinds: Map<String, Value> = FactKind::ALL
            .iter()
            .filter_map(|k| Some((k.name().to_string(), json!(self.by_kind.get(k)?.pct()))))
            .collect();
        json!({
            "user_assistant_pct": self.user_assistant.pct(),
            "tool_pct": self.tool.pct(),
            "facts": self.all.json(),
            "by_kind_pct": kinds,
            "runs": self.runs,
            "insufficient_budget": self.insufficient_budget,
            "runs_ending_over_the_window": self.ending_over,
            "nested_summary_headers": self.nested_summaries,
        })
    }

    fn json(&self) -> Value {
        let map = |m: Vec<(&str, Tally)>| -> Value {
            Value::Object(
                m.into_iter()
                    .map(|(k, t)| (k.to_string(), t.json()))
                    .collect(),
            )
        };
        json!({
            "facts": self.all.json(),
            "user_assistant": self.user_assistant.json(),
            "tool": self.tool.json(),
            "left_recent_window": {
                "facts": self.left_all.json(),
                "user_assistant": self.left_user_assistant.json(),
                "tool": self.left_tool.json(),
            },
            "by_kind": map(FactKind::ALL.iter().filter_map(|k| Some((k.name(), *self.by_kind.get(k)?))).collect()),
            "by_location": map(Location::ALL.iter().filter_map(|l| Some((l.name(), *self.by_location.get(l)?))).collect()),
            "by_source": map(self.by_source.iter().map(|(k, t)| (*k, *t)).collect()),
            "stale_superseded": self.stale,
            "runs": self.runs,
            "preflights": self.preflights,
            "compactions": self.compactions,
            "summaries": self.summaries,
            "insufficient_budget": self.insufficient_budget,
            "other_errors": self.other_errors,
            "nested_summary_headers": self.nested_summaries,
            "max_summary_tokens": self.max_summary_tokens,
            "summary_cap": self.summary_cap,
            "runs_over_summary_cap": self.runs_over_summary_cap,
            "runs_ending_over_the_window": self.ending_over,
            "continuations": self.continuations,
        })
    }
}

/// A fact planted before the last `keep_recent_turns` turns: keeping it is
/// the summary's job, not the recent window's.
pub fn left_recent_window(f: &Fact, turns: usize, keep_recent_turns: usize) -> bool {
    f.turn + keep_recent_turns <= turns
}

/// How many missing facts the report lists per window.
const MISSING_EXAMPLES: usize = 8;

/// The report of `runs` over `transcripts` at `windows`.
pub fn build(
    transcripts: &[Transcript],
    windows: &[usize],
    keep_recent_turns: usize,
    runs: &[Run],
) -> Value {
    let mut by_window = Map::new();
    let mut class_meets: BTreeMap<&str, bool> = TARGETS.iter().map(|t| (t.class, true)).collect();
    let mut class_cells: BTreeMap<&str, Cell> = BTreeMap::new();
    let mut overall = Cell::default();
    for &w in windows {
        let target = target_for(w);
        let mut entry = Map::new();
        entry.insert(
            "class".into(),
            target.map_or(Value::Null, |t| json!(t.class)),
        );
        let mut both = Cell::default();
        for mode in CallingMode::ALL {
            let mut cell = Cell::default();
            for r in runs.iter().filter(|r| r.window == w && r.mode == mode) {
                let t = &transcripts[r.transcript];
                cell.add(r, t, keep_recent_turns);
                both.add(r, t, keep_recent_turns);
                overall.add(r, t, keep_recent_turns);
                if let Some(target) = target {
                    class_cells
                        .entry(target.class)
                        .or_default()
                        .add(r, t, keep_recent_turns);
                }
            }
            let mut v = cell.json();
            if let Some(target) = target {
                let meets = cell.meets(target);
                v["meets_targets"] = json!(meets);
                if let Some(m) = class_meets.get_mut(target.class) {
                    *m &= meets;
                }
            }
            entry.insert(mode.name().into(), v);
        }
        entry.insert("both_modes".into(), both.json());
        entry.insert(
            "missing_examples".into(),
            missing(transcripts, runs, w, keep_recent_turns),
        );
        by_window.insert(w.to_string(), Value::Object(entry));
    }
    let classes: Map<String, Value> = TARGETS
        .iter()
        .filter(|t| class_cells.contains_key(t.class))
        .map(|t| {
            let mut v = class_cells
                .get(t.class)
                .map(Cell::json)
                .unwrap_or(Value::Null);
            v["meets_targets"] = json!(class_meets.get(t.class).copied().unwrap_or(false));
            (t.class.to_string(), v)
        })
        .collect();
    let meets: Map<String, Value> = TARGETS
        .iter()
        .filter(|t| class_cells.contains_key(t.class))
        .map(|t| {
            (
                t.class.to_string(),
                json!(class_meets.get(t.class).copied().unwrap_or(false)),
            )
        })
        .collect();
    let (corpus_json, split_json) = by_corpus_and_split(transcripts, runs, keep_recent_turns);
    json!({
        "by_corpus": corpus_json,
        "by_split": split_json,
        "windows": windows,
        "calling_modes": CallingMode::ALL.iter().map(|m| m.name()).collect::<Vec<_>>(),
        "keep_recent_turns": keep_recent_turns,
        "targets": targets_json(),
        "meets_targets": meets,
        "overall": overall.json(),
        "window_classes": classes,
        "by_window": by_window,
        "sessions": transcripts.iter().map(session_json).collect::<Vec<_>>(),
        "runs": runs.iter().map(|r| run_json(r, transcripts)).collect::<Vec<_>>(),
    })
}

/// Per corpus and split (held out first: those are the figures to
/// quote), per window, both modes: a corpus unlike the one the engine was
/// tuned on must be read on its own, not inside an average.
fn by_corpus_and_split(
    transcripts: &[Transcript],
    runs: &[Run],
    keep_recent_turns: usize,
) -> (Vec<Value>, Map<String, Value>) {
    let mut by_corpus: BTreeMap<(Split, String), BTreeMap<usize, Cell>> = BTreeMap::new();
    let mut by_split: BTreeMap<Split, BTreeMap<usize, Cell>> = BTreeMap::new();
    for r in runs {
        let t = &transcripts[r.transcript];
        let split = t.split;
        by_corpus
            .entry((split, t.source.clone()))
            .or_default()
            .entry(r.window)
            .or_default()
            .add(r, t, keep_recent_turns);
        by_split
            .entry(split)
            .or_default()
            .entry(r.window)
            .or_default()
            .add(r, t, keep_recent_turns);
    }
    let split_order = |s: Split| usize::from(s != Split::HeldOut);
    let mut corpus_rows: Vec<(Split, String, Value)> = by_corpus
        .into_iter()
        .map(|((split, source), cells)| {
            let windows: Map<String, Value> = cells
                .iter()
                .map(|(w, c)| (w.to_string(), c.brief_json()))
                .collect();
            (split, source, Value::Object(windows))
        })
        .collect();
    corpus_rows.sort_by_key(|(split, source, _)| (split_order(*split), source.clone()));
    let corpus_json: Vec<Value> = corpus_rows
        .into_iter()
        .map(|(split, source, windows)| {
            json!({"corpus": source, "split": split.name(), "by_window": windows})
        })
        .collect();
    let mut split_rows: Vec<(Split, Value)> = by_split
        .into_iter()
        .map(|(split, cells)| {
            let windows: Map<String, Value> = cells
                .iter()
                .map(|(w, c)| (w.to_string(), c.brief_json()))
                .collect();
            (split, Value::Object(windows))
        })
        .collect();
    split_rows.sort_by_key(|(split, _)| split_order(*split));
    let split_json: Map<String, Value> = split_rows
        .into_iter()
        .map(|(split, v)| (split.name().to_string(), v))
        .collect();
    (corpus_json, split_json)
}

fn targets_json() -> Value {
    let mut m = Map::new();
    for t in &TARGETS {
        m.insert(
            t.class.into(),
            json!({
                "min_window": t.min_window,
                "below_window": t.below_window,
                "user_assistant_pct": t.user_assistant_pct,
                "tool_pct": t.tool_pct,
            }),
        );
    }
    m.insert(
        "rule".into(),
        json!("a class meets its targets when, at every window of the class and in each calling mode, the user+assistant(+reasoning) and the tool-output facts retained reach its bars, and no summary nests a previous summary's header"),
    );
    Value::Object(m)
}

fn session_json(t: &Transcript) -> Value {
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    for f in &t.facts {
        *kinds.entry(f.location.name()).or_default() += 1;
    }
    json!({
        "name": t.name,
        "source": t.source,
        "wire": t.wire,
        "turns": t.turns.len(),
        "messages": t.opening.len() + t.turns.iter().map(Vec::len).sum::<usize>(),
        "facts": t.facts.len(),
        "facts_by_location": kinds,
    })
}

fn run_json(r: &Run, transcripts: &[Transcript]) -> Value {
    let o = &r.outcome;
    let t = &transcripts[r.transcript];
    json!({
        "session": t.name,
        "window": r.window,
        "mode": r.mode,
        "facts": t.facts.len(),
        "retained": o.retained.iter().filter(|&&k| k).count(),
        "preflights": o.preflights,
        "compactions": o.compactions,
        "summaries": o.summaries,
        "insufficient_budget": o.insufficient_budget,
        "other_errors": o.other_errors,
        "nested_summary_headers": o.nested_summaries,
        "final_summary_tokens": o.final_summary_tokens,
        "max_summary_tokens": o.max_summary_tokens,
        "summary_cap": o.summary_cap,
        "final_tokens": o.final_tokens,
        "continuations": o.continuations,
    })
}

/// A few facts that left the recent window and were lost at window `w`.
fn missing(transcripts: &[Transcript], runs: &[Run], w: usize, keep_recent_turns: usize) -> Value {
    let mut out = Vec::new();
    for r in runs.iter().filter(|r| r.window == w) {
        let t = &transcripts[r.transcript];
        // A couple per run, so one bad session does not fill the list.
        let mut from_run = 0;
        for (i, f) in t.facts.iter().enumerate() {
            if out.len() >= MISSING_EXAMPLES {
                return Value::Array(out);
            }
            if from_run == 2 {
                break;
            }
            let kept = r.outcome.retained.get(i).copied().unwrap_or(false);
            if !kept && left_recent_window(f, t.turns.len(), keep_recent_turns) {
                from_run += 1;
                out.push(json!({
                    "session": t.name,
                    "mode": r.mode,
                    "turn": f.turn,
                    "kind": f.kind,
                    "location": f.location,
                    "probes": f.probes,
                    "text": f.text,
                }));
            }
        }
    }
    Value::Array(out)
}
