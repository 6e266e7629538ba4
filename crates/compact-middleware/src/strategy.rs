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
use std::collections::HashMap;
use std::sync::RwLock;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::config::{Config, ConfigError};

/// A precedence level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
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

/// The per-agent and per-conversation levels over a base configuration.
#[derive(Debug)]
pub struct Strategies {
    defaults: Config,
    agents: RwLock<HashMap<String, Value>>,
    conversations: RwLock<HashMap<String, Value>>,
}

impl Strategies {
    /// Levels over `defaults` (the loaded file + environment).
    pub fn new(defaults: Config) -> Self {
        Self {
            defaults,
            agents: RwLock::new(HashMap::new()),
            conversations: RwLock::new(HashMap::new()),
        }
    }

    /// The base configuration.
    pub fn defaults(&self) -> &Config {
        &self.defaults
    }

    /// Sets (replaces) an agent's default strategy. Checked on its own
    /// against the defaults; the error names the field.
    pub fn set_agent(&self, agent: &str, layer: &Value) -> Result<(), ConfigError> {
        let layer = from_seed_fields(layer);
        self.defaults.overlay(&layer)?;
        self.agents
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(agent.to_owned(), layer);
        Ok(())
    }

    /// Updates a conversation's persisted strategy (PATCH: merged into what
    /// the conversation already had).
    pub fn patch_conversation(&self, conversation: &str, layer: &Value) -> Result<(), ConfigError> {
        let mut map = self
            .conversations
            .write()
            .unwrap_or_else(|p| p.into_inner());
        let mut merged = map.get(conversation).cloned().unwrap_or(Value::Null);
        deep_merge(&mut merged, from_seed_fields(layer));
        self.defaults.overlay(&merged)?;
        map.insert(conversation.to_owned(), merged);
        Ok(())
    }

    /// Forgets an agent's strategy.
    pub fn clear_agent(&self, agent: &str) {
        self.agents
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(agent);
    }

    /// Forgets a conversation's strategy.
    pub fn clear_conversation(&self, conversation: &str) {
        self.conversations
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(conversation);
    }

    /// The effective configuration for one call: request > conversation >
    /// agent > defaults.
    pub fn resolve(
        &self,
        agent: Option<&str>,
        conversation: Option<&str>,
        request: Option<&Value>,
    ) -> Result<Resolved, ConfigError> {
        let agent_layer = agent.and_then(|a| {
            self.agents
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .get(a)
                .cloned()
        });
        let conversation_layer = conversation.and_then(|c| {
            self.conversations
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .get(c)
                .cloned()
        });
        let request_layer = request.map(from_seed_fields);
        let mut merged = Value::Object(Map::new());
        let mut sources = Vec::new();
        for (level, layer) in [
            (Level::Agent, agent_layer),
            (Level::Conversation, conversation_layer),
            (Level::Request, request_layer),
        ] {
            if let Some(layer) = layer {
                let mut leaves = Vec::new();
                leaf_paths(&layer, "", &mut leaves);
                sources.extend(leaves.into_iter().map(|p| (p, level)));
                deep_merge(&mut merged, layer);
            }
        }
        let config = self.defaults.overlay(&merged)?;
        Ok(Resolved { config, sources })
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
