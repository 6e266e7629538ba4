//! Strategy overlays, applied in the manager once per call whatever the
//! entry point (Rust, the wheel, HTTP, the CLI): docs/design.md §5's
//! precedence, request > conversation > agent > defaults. A call names its
//! agent and brings its own overlay ([`Overlays`]); the conversation's
//! overlay is part of the session record, read by the call's one session
//! load. The effective configuration runs on a manager built for it once
//! and kept ([`Overlaid`]), sharing this manager's sessions, archive,
//! dispatcher and count cache, so a session moves freely between calls
//! with and without overlays.

use std::collections::HashMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::persist::release_quietly;
use super::session::Session;
use super::{CompactError, CompactManager, Engine, PreflightOutcome};
use crate::config::{Config, ConfigError};
use crate::state::SessionGuard;
use crate::strategy::{Level, check_layer, from_seed_fields, resolve_layers};

/// Managers kept for distinct effective configurations; past this the
/// cache starts over (sessions are shared, so nothing is lost but warm-up).
const MAX_OVERLAID: usize = 64;

/// The strategy overlays one call brings (the conversation's own is in the
/// session record). Each is a partial configuration of
/// [`crate::strategy::LAYER_KEYS`], in the schema's names or the flat
/// names of [`from_seed_fields`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overlays {
    /// An agent of the configuration's `agents:`, whose overlay applies.
    pub agent: Option<String>,
    /// The call's own overlay (`null` is none).
    pub request: Option<Value>,
}

impl Overlays {
    fn is_empty(&self) -> bool {
        self.agent.is_none() && self.request.as_ref().is_none_or(Value::is_null)
    }
}

/// Which level set one overridden configuration key: the report's
/// `config_sources`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigSource {
    /// The dotted key (`policy.keep_recent_turns`).
    pub key: String,
    /// The level whose value won.
    pub level: Level,
}

/// The managers of the effective configurations calls asked for, by their
/// configuration's JSON.
#[derive(Default)]
pub(super) struct Overlaid(Mutex<HashMap<String, CompactManager>>);

impl CompactManager {
    /// The manager that runs a call with `overlays` on `session` (this one
    /// when nothing overrides the configuration), and which level set each
    /// overridden key. On an error the session's store guard is released.
    pub(super) async fn overlaid(
        &self,
        session: &Session,
        overlays: &Overlays,
        guard: Option<Box<dyn SessionGuard>>,
    ) -> Result<
        (
            CompactManager,
            Vec<ConfigSource>,
            Option<Box<dyn SessionGuard>>,
        ),
        CompactError,
    > {
        if overlays.is_empty() && session.conversation.is_none() {
            return Ok((self.clone(), Vec::new(), guard));
        }
        match self.resolve(session, overlays) {
            Ok((manager, sources)) => Ok((manager, sources, guard)),
            Err(e) => {
                release_quietly(guard).await;
                Err(e)
            }
        }
    }

    fn resolve(
        &self,
        session: &Session,
        overlays: &Overlays,
    ) -> Result<(CompactManager, Vec<ConfigSource>), CompactError> {
        let config = &self.inner.config;
        let agent = match &overlays.agent {
            None => None,
            Some(name) => Some(
                config
                    .agents
                    .get(name)
                    .ok_or_else(|| CompactError::Overlay {
                        field: "agent".into(),
                        message: format!("no agent {name:?} in the configuration's agents"),
                    })?,
            ),
        };
        let request = match &overlays.request {
            None | Some(Value::Null) => None,
            Some(layer) => {
                check_layer(&from_seed_fields(layer)).map_err(|e| overlay_error("config", &e))?;
                Some(layer)
            }
        };
        let resolved = resolve_layers(config, agent, session.conversation.as_ref(), request)
            .map_err(|e| overlay_error("config", &e))?;
        // Each overridden key once, with the level that won it.
        let mut seen = std::collections::HashSet::new();
        let sources = resolved
            .sources
            .iter()
            .filter(|(key, _)| seen.insert(key.as_str()))
            .map(|(key, _)| ConfigSource {
                key: key.clone(),
                level: resolved.source_of(key),
            })
            .collect::<Vec<_>>();
        if sources.is_empty() {
            return Ok((self.clone(), sources));
        }
        Ok((self.for_config(resolved.config)?, sources))
    }

    /// Merges `layer` into the conversation overlay of a session (a JSON
    /// merge patch of configuration keys; `null` removes the overlay) and
    /// returns the overlay now stored. Checked against this manager's
    /// configuration first; an error names the field in the layer's terms.
    pub async fn patch_conversation_overlay(
        &self,
        session_id: &str,
        layer: Value,
    ) -> Result<Option<Value>, CompactError> {
        let id = crate::archive::SessionId::parse(session_id)
            .map_err(|e| CompactError::InvalidSession(e.to_string()))?;
        let handle = self.session_handle(id.clone());
        let mut session = handle.lock().await;
        let guard = self.load_session(&id, &mut session).await?;
        let merged = match layer {
            Value::Null => None,
            layer => {
                let mut current = session
                    .conversation
                    .as_ref()
                    .map(from_seed_fields)
                    .unwrap_or_else(|| Value::Object(serde_json::Map::new()));
                crate::strategy::deep_merge(&mut current, from_seed_fields(&layer));
                let checked = check_layer(&current)
                    .and_then(|()| resolve_layers(&self.inner.config, None, Some(&current), None));
                if let Err(e) = checked {
                    release_quietly(guard).await;
                    return Err(overlay_error("", &e));
                }
                Some(current)
            }
        };
        session.conversation = merged.clone();
        if let Some(guard) = guard {
            self.save_session(guard, &mut session).await?;
        }
        Ok(merged)
    }

    /// The manager of `config`, built on first use.
    fn for_config(&self, config: Config) -> Result<CompactManager, CompactError> {
        let key = serde_json::to_string(&config).unwrap_or_default();
        let mut map = self
            .inner
            .overlaid
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(m) = map.get(&key) {
            return Ok(m.clone());
        }
        if map.len() >= MAX_OVERLAID {
            map.clear();
        }
        let engine = Engine::build(&config, &self.inner.shared, self.inner.memory.store.clone())?;
        let m = CompactManager::assemble(config, engine, self.inner.shared.clone());
        map.insert(key, m.clone());
        Ok(m)
    }
}

impl PreflightOutcome {
    /// The outcome with the overlays' sources in its report.
    pub(super) fn with_sources(mut self, sources: Vec<ConfigSource>) -> Self {
        self.report.config_sources = sources;
        self
    }
}

/// An overlay the configuration refuses, at its field in the caller's
/// terms: under `prefix` (`config.policy.trigger_pct`), or the bare key
/// when the whole body is the overlay.
fn overlay_error(prefix: &str, e: &ConfigError) -> CompactError {
    let (field, message) = match e.field_errors().first() {
        Some(fe) if prefix.is_empty() => (fe.path.clone(), fe.message.clone()),
        Some(fe) => (
            format!("{prefix}.{}", fe.path)
                .trim_end_matches('.')
                .to_owned(),
            fe.message.clone(),
        ),
        None => (prefix.to_owned(), e.to_string()),
    };
    CompactError::Overlay { field, message }
}
