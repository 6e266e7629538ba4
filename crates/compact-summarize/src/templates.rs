//! Prompt templates of the model-backed summarizer (docs/design.md §6): a system
//! prompt and one few-shot user template per [`Strategy`], built in with
//! `include_str!` and overridable by name from a YAML file.
//!
//! Placeholders, substituted in one pass (substituted text is never
//! re-scanned): `{max_tokens}`, `{previous_summary}`, `{conversation}`; the
//! `repair` template (a summary that left out facts, asked to fold them in)
//! has `{max_tokens}`, `{summary}` and `{missing_facts}`.
use std::collections::BTreeMap;
use std::path::Path;

use super::Strategy;

const SYSTEM: &str = include_str!("templates/system.txt");
const TASK_STATE: &str = include_str!("templates/task_state.txt");
const BRIEF: &str = include_str!("templates/brief.txt");
const DECISION_LOG: &str = include_str!("templates/decision_log.txt");
const CODE_DELTA: &str = include_str!("templates/code_delta.txt");
const REPAIR: &str = include_str!("templates/repair.txt");

/// Shown in place of `{previous_summary}` when there is none.
pub(crate) const NO_PREVIOUS: &str = "(none)";

/// The template names a templates file may set.
pub(crate) const NAMES: [&str; 6] = [
    "system",
    "task_state",
    "brief",
    "decision_log",
    "code_delta",
    "repair",
];

/// A templates file could not be used.
#[derive(thiserror::Error, Debug)]
pub enum TemplateError {
    /// The file could not be read.
    #[error("cannot read templates file {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a YAML map of names to text.
    #[error("templates file {path} is not a map of template names to text: {message}")]
    Parse {
        /// The file.
        path: String,
        /// The parser's message.
        message: String,
    },
    /// A name that is not a template.
    #[error("templates file {path}: unknown template {name:?} (expected one of {expected})")]
    UnknownName {
        /// The file.
        path: String,
        /// The offending key.
        name: String,
        /// The accepted names.
        expected: String,
    },
    /// A strategy template without the conversation placeholder would
    /// summarize nothing.
    #[error("templates file {path}: template {name:?} lacks the {{conversation}} placeholder")]
    MissingConversation {
        /// The file.
        path: String,
        /// The template.
        name: String,
    },
    /// A template without a placeholder it cannot do without (`repair`
    /// without `{missing_facts}` would ask for nothing).
    #[error("templates file {path}: template {name:?} lacks the {{{placeholder}}} placeholder")]
    MissingPlaceholder {
        /// The file.
        path: String,
        /// The template.
        name: String,
        /// The placeholder, without its braces.
        placeholder: &'static str,
    },
}

/// The system prompt, the four strategy templates and the repair request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Templates {
    /// The system message of every request.
    pub system: String,
    /// `task_state`.
    pub task_state: String,
    /// `brief`.
    pub brief: String,
    /// `decision_log`.
    pub decision_log: String,
    /// `code_delta`.
    pub code_delta: String,
    /// `repair`: the user message asking the model to fold the facts its
    /// summary left out into it.
    pub repair: String,
}

impl Default for Templates {
    fn default() -> Self {
        Self::builtin()
    }
}

impl Templates {
    /// The built-in templates.
    pub fn builtin() -> Self {
        Self {
            system: SYSTEM.to_owned(),
            task_state: TASK_STATE.to_owned(),
            brief: BRIEF.to_owned(),
            decision_log: DECISION_LOG.to_owned(),
            code_delta: CODE_DELTA.to_owned(),
            repair: REPAIR.to_owned(),
        }
    }

    /// The built-in templates with those named in the YAML file `path`
    /// replaced.
    pub fn from_file(path: &Path) -> Result<Self, TemplateError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| TemplateError::Io {
            path: shown.clone(),
            source,
        })?;
        Self::builtin().with_overrides(&text, &shown)
    }

    /// Applies the overrides in `yaml` (a map of template names to text).
    /// `origin` names the source in errors.
    pub fn with_overrides(mut self, yaml: &str, origin: &str) -> Result<Self, TemplateError> {
        let map: BTreeMap<String, String> =
            serde_saphyr::from_str(yaml).map_err(|e| TemplateError::Parse {
                path: origin.to_owned(),
                message: e.to_string().lines().next().unwrap_or_default().to_owned(),
            })?;
        for (name, text) in map {
            if name == "repair" && !text.contains("{missing_facts}") {
                return Err(TemplateError::MissingPlaceholder {
                    path: origin.to_owned(),
                    name,
                    placeholder: "missing_facts",
                });
            }
            if !matches!(name.as_str(), "system" | "repair")
                && NAMES.contains(&name.as_str())
                && !text.contains("{conversation}")
            {
                return Err(TemplateError::MissingConversation {
                    path: origin.to_owned(),
                    name,
                });
            }
            let slot = match name.as_str() {
                "system" => &mut self.system,
                "task_state" => &mut self.task_state,
                "brief" => &mut self.brief,
                "decision_log" => &mut self.decision_log,
                "code_delta" => &mut self.code_delta,
                "repair" => &mut self.repair,
                _ => {
                    return Err(TemplateError::UnknownName {
                        path: origin.to_owned(),
                        name,
                        expected: NAMES.join(", "),
                    });
                }
            };
            *slot = text;
        }
        Ok(self)
    }

    /// The user template of `strategy`.
    pub fn for_strategy(&self, strategy: Strategy) -> &str {
        match strategy {
            Strategy::TaskState => &self.task_state,
            Strategy::Brief => &self.brief,
            Strategy::DecisionLog => &self.decision_log,
            Strategy::CodeDelta => &self.code_delta,
        }
    }

    /// The user message for `strategy`.
    pub fn render(
        &self,
        strategy: Strategy,
        max_tokens: usize,
        previous: Option<&str>,
        conversation: &str,
    ) -> String {
        let max = max_tokens.to_string();
        let previous = previous
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .unwrap_or(NO_PREVIOUS);
        substitute(
            self.for_strategy(strategy),
            &[
                ("max_tokens", &max),
                ("previous_summary", previous),
                ("conversation", conversation),
            ],
        )
    }

    /// The user message of a repair request: `summary` and the facts it
    /// left out, one `- fact` line each in `missing_facts`.
    pub fn render_repair(&self, max_tokens: usize, summary: &str, missing_facts: &str) -> String {
        let max = max_tokens.to_string();
        substitute(
            &self.repair,
            &[
                ("max_tokens", &max),
                ("summary", summary.trim()),
                ("missing_facts", missing_facts),
            ],
        )
    }
}

/// Replaces each `{name}` of `vars` in `template`, in one left-to-right pass.
/// Braces that do not form a known placeholder are kept as they are.
pub(crate) fn substitute(template: &str, vars: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len() + 256);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let hit = after.find('}').and_then(|close| {
            let name = &after[..close];
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (close, *v))
        });
        match hit {
            Some((close, value)) => {
                out.push_str(value);
                rest = &after[close + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}
