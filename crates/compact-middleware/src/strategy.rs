//! The precedence of the memory strategy (docs/design.md §5): per request >
//! per conversation > per agent > defaults.
//!
//! Each level is a *partial* configuration, either in this crate's schema
//! (`{"policy": {"mode": "compact"}}`) or with the flat field names of
//! docs/design.md §10 (`{"mode": "compact", "compact_keep": 4,
//! "token_budget": 8000}`, see
//! [`from_seed_fields`]). Levels are deep-merged lowest first, then applied
//! to the defaults with [`Config::overlay`], which checks unknown keys, types
//! and rules exactly like a file does. Only the combination is validated, so
//! a request may lower `policy.target_pct` and `policy.trigger_pct` together.
//!
//! The levels have one owner each: the agents' overlays are the
//! configuration's `agents:`, a conversation's overlay is part of its session
//! record, a request's comes with the call; the manager resolves them once
//! per call (`CompactManager::preflight_with`, `PreflightRequest::overlays`).
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::config::{Config, ConfigError, FieldError};

/// A precedence level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// The base configuration.
    Default,
    /// `AgentSpec.memory_strategy` (code level).
    Agent,
    /// Persisted on a conversation (`PATCH /conversations/{id}/memory`).
    Conversation,
    /// `memory_strategy` of one request.
    Request,
}

/// A resolved configuration and where each overridden leaf came from.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The effective, validated configuration.
    pub config: Config,
    /// Dotted path → the level that set it (leaves not listed are defaults).
    pub sources: Vec<(String, Level)>,
}

impl Resolved {
    /// The level that set `path` (`Default` when none did).
    pub fn source_of(&self, path: &str) -> Level {
        self.sources
            .iter()
            .rev()
            .find(|(p, _)| p == path)
            .map_or(Level::Default, |(_, l)| *l)
    }
}

/// The effective configuration of `defaults` under the layers given
/// (request over conversation over agent over defaults), with the level
/// that set each leaf.
/// Layers may use the flat field names ([`from_seed_fields`]).
pub fn resolve_layers(
    defaults: &Config,
    agent: Option<&Value>,
    conversation: Option<&Value>,
    request: Option<&Value>,
) -> Result<Resolved, ConfigError> {
    let mut merged = Value::Object(Map::new());
    let mut sources = Vec::new();
    for (level, layer) in [
        (Level::Agent, agent),
        (Level::Conversation, conversation),
        (Level::Request, request),
    ] {
        if let Some(layer) = layer {
            let layer = from_seed_fields(layer);
            let mut leaves = Vec::new();
            leaf_paths(&layer, "", &mut leaves);
            sources.extend(leaves.into_iter().map(|p| (p, level)));
            deep_merge(&mut merged, layer);
        }
    }
    let config = defaults.overlay(&merged)?;
    Ok(Resolved { config, sources })
}

/// The top-level keys a layer may set: what changes one call's compaction.
/// Where state, events, archives and the server go is the process's business.
pub const LAYER_KEYS: [&str; 4] = ["model", "max_context_tokens", "policy", "summarizer"];

/// Checks that a layer (after [`from_seed_fields`]) only sets [`LAYER_KEYS`]
/// and is a mapping.
pub fn check_layer(layer: &Value) -> Result<(), ConfigError> {
    let obj = match layer {
        Value::Null => return Ok(()),
        Value::Object(o) => o,
        other => {
            return Err(ConfigError::Invalid {
                errors: vec![FieldError::new(
                    "",
                    format!("expected a mapping of configuration keys, got {other}"),
                )],
            });
        }
    };
    let errors: Vec<FieldError> = obj
        .keys()
        .filter(|k| !LAYER_KEYS.contains(&k.as_str()))
        .map(|k| {
            FieldError::new(
                k.as_str(),
                format!(
                    "cannot be set per request, conversation or agent (only {} can)",
                    LAYER_KEYS.join(", ")
                ),
            )
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ConfigError::Invalid { errors })
    }
}

/// Translates the flat field names of a memory-strategy request (`mode`,
/// `compact_keep`, `token_budget`, …, `memory_injection`, and the strategy
/// names `trimming` and `summarization`) to schema paths. Keys that are
/// already schema sections pass through; unknown flat keys also pass
/// through, so [`Config::overlay`] reports them.
pub fn from_seed_fields(layer: &Value) -> Value {
    let Value::Object(obj) = layer else {
        return layer.clone();
    };
    let mut out = Value::Object(Map::new());
    for (key, value) in obj {
        let (path, value) = match key.as_str() {
            "mode" => ("policy.mode", seed_mode(value)),
            "strategy" => ("policy.strategy", value.clone()),
            "compact_keep" => ("policy.keep_recent_turns", value.clone()),
            "compact_trigger_turns" => ("policy.compact_trigger_turns", value.clone()),
            "token_budget" => ("policy.token_budget", value.clone()),
            "token_soft_budget" => ("policy.token_soft_budget", value.clone()),
            "token_remaining_pct" => ("policy.token_remaining_pct", value.clone()),
            "context_window_tokens" => ("max_context_tokens", value.clone()),
            "compact_clear_tool_inputs" => ("policy.clear_tool_inputs", value.clone()),
            "compact_exclude_tools" => ("policy.exclude_tools", value.clone()),
            "compact_include_tools" => ("policy.include_tools", value.clone()),
            "memory_injection" => ("memory.injection", value.clone()),
            _ => {
                deep_merge(
                    &mut out,
                    Value::Object(Map::from_iter([(key.clone(), value.clone())])),
                );
                continue;
            }
        };
        deep_merge(&mut out, nest(path, value));
    }
    out
}

/// The strategy names (`trimming`, `summarization`, …) map to the modes.
fn seed_mode(v: &Value) -> Value {
    match v.as_str() {
        Some("trimming") => Value::from("trim"),
        Some("summarization" | "summarizing") => Value::from("summarize"),
        Some("compacting") => Value::from("compact"),
        _ => v.clone(),
    }
}

fn nest(path: &str, value: Value) -> Value {
    path.rsplit('.').fold(value, |acc, key| {
        Value::Object(Map::from_iter([(key.to_owned(), acc)]))
    })
}

/// Objects merge key by key; anything else replaces.
pub fn deep_merge(base: &mut Value, top: Value) {
    match (base, top) {
        (Value::Object(b), Value::Object(t)) => {
            for (k, v) in t {
                match b.get_mut(&k) {
                    Some(slot) if slot.is_object() && v.is_object() => deep_merge(slot, v),
                    _ => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (slot, top) => *slot = top,
    }
}

fn leaf_paths(v: &Value, prefix: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, v) in m {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaf_paths(v, &p, out);
            }
        }
        _ if !prefix.is_empty() => out.push(prefix.to_owned()),
        _ => {}
    }
}
