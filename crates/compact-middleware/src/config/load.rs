//! Loading: defaults, then the file, then the environment, then CLI flags,
//! merged as JSON trees so that every leaf keeps its dotted path and the
//! layer it came from.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use garde::Validate;
use serde_json::{Map, Value};
use serde_path_to_error::Segment;

use super::env::{self, Kind};
use super::error::{ConfigError, FieldError};
use super::rules;
use super::schema::Config;

/// The free-form map of model profiles: its keys are model names, not schema keys.
const MODELS: &str = "models";
/// The free-form map of agent layers: its keys are agent names.
const AGENTS: &str = "agents";
/// The keys of one `models` entry, for `set`.
const MODEL_FIELDS: &[(&str, Kind)] = &[
    ("context_window", Kind::UInt),
    ("encoding", Kind::Str),
    ("estimator", Kind::Str),
];
/// The keys of a `models.NAME.price` entry, for `set`.
const PRICE_FIELDS: &[&str] = &[
    "input",
    "cached_input",
    "cache_write",
    "cache_write_1h",
    "output",
];
/// Deserialization is retried after resetting each bad value so that several
/// type errors are reported at once; this bounds the retries.
const MAX_TYPE_ERRORS: usize = 64;

/// Where an effective value came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// The built-in default.
    Default,
    /// A configuration file (empty path for text given without a file).
    File(PathBuf),
    /// An environment variable, by name.
    Env(String),
    /// A CLI flag, by name, applied with [`Loaded::set`].
    Flag(String),
}

impl Source {
    /// The variable or flag name, which error messages show next to the path.
    fn origin(&self) -> Option<&str> {
        match self {
            Self::Env(name) | Self::Flag(name) => Some(name),
            Self::Default | Self::File(_) => None,
        }
    }
}

/// How `compact config print` shows a source: `default`, `file PATH`,
/// `env VARIABLE`, `flag NAME`.
impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Default => f.write_str("default"),
            Self::File(path) if path.as_os_str().is_empty() => f.write_str("file"),
            Self::File(path) => write!(f, "file {}", path.display()),
            Self::Env(name) => write!(f, "env {name}"),
            Self::Flag(name) => write!(f, "flag {name}"),
        }
    }
}

/// A loaded, validated configuration and the provenance of each value.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The effective configuration.
    pub config: Config,
    /// The merged input, kept so that `set` re-runs the same checks.
    tree: Value,
    sources: HashMap<String, Source>,
    ignored_env: Vec<String>,
}

/// Loads the configuration: built-in defaults, overlaid by `file` when given,
/// overlaid by the `COMPACT_*` variables in `env`.
///
/// Every problem found is reported, each with its dotted path; see
/// `docs/configuration.md` for the keys, rules and variables.
pub fn load(file: Option<&Path>, env: &[(String, String)]) -> Result<Loaded, ConfigError> {
    let text = match file {
        Some(path) => Some(
            std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
                path: path.to_owned(),
                source,
            })?,
        ),
        None => None,
    };
    build(text.as_deref().zip(file.map(Some)), env)
}

impl Loaded {
    /// [`load`] with the variables of this process.
    pub fn from_process_env(file: Option<&Path>) -> Result<Self, ConfigError> {
        // `std::env::vars` panics on a non-UTF-8 variable anywhere in the
        // environment; such a variable cannot be one of ours unless mistyped,
        // and then the replacement characters make the error visible.
        let env: Vec<(String, String)> = std::env::vars_os()
            .map(|(name, value)| {
                (
                    name.to_string_lossy().into_owned(),
                    value.to_string_lossy().into_owned(),
                )
            })
            .filter(|(name, _)| name.starts_with("COMPACT_"))
            .collect();
        load(file, &env)
    }

    /// Every effective leaf in schema order with its value and source, for
    /// `compact config print`. Lists are one leaf; an empty `models` map is one
    /// leaf, a non-empty one lists `models.NAME.context_window` and the other keys
    /// the entry sets.
    pub fn sources(&self) -> Vec<(String, Value, Source)> {
        let effective = serde_json::to_value(&self.config).unwrap_or_else(|_| self.tree.clone());
        let mut out = Vec::new();
        collect_leaves(&effective, "", &mut out);
        out.into_iter()
            .map(|(path, value)| {
                let source = self.sources.get(&path).cloned().unwrap_or(Source::Default);
                (path, value, source)
            })
            .collect()
    }

    /// Where the value at `path` came from, `None` for a path that is not a leaf.
    pub fn source_of(&self, path: &str) -> Option<Source> {
        self.sources()
            .into_iter()
            .find(|(leaf, _, _)| leaf == path)
            .map(|(_, _, source)| source)
    }

    /// `COMPACT_*` variables that matched no key and were ignored (other
    /// tools share the prefix), so `compact config print` can point at typos.
    /// The product's own other variables (`COMPACT_LOG`, `COMPACT_TAIL_URL`,
    /// the benchmarks' and the test harness's) are never listed.
    pub fn ignored_env(&self) -> &[String] {
        &self.ignored_env
    }

    /// Sets one value on top of everything loaded so far (a CLI flag) and
    /// re-validates. `path` is a leaf (`policy.trigger_pct`), `models.NAME`,
    /// `models.NAME.context_window` / `.encoding` / `.estimator` / `.price`, or
    /// `models.NAME.price.input` (and the other price keys). On error nothing
    /// changes.
    pub fn set(&mut self, path: &str, value: Value, source: Source) -> Result<(), ConfigError> {
        let mut tree = self.tree.clone();
        let mut sources = self.sources.clone();
        let with_origin = |message: String| {
            let mut error = FieldError::new(path, message);
            error.origin = source.origin().map(str::to_owned);
            ConfigError::Invalid {
                errors: vec![error],
            }
        };
        if env::find_leaf(path).is_some() {
            set_at(&mut tree, path, value);
            sources.insert(path.to_owned(), source.clone());
        } else if let Some(name) = path.strip_prefix("models.") {
            set_model(&mut tree, name, value, &source, &mut sources).map_err(&with_origin)?;
        } else {
            return Err(with_origin(unknown_leaf_message(path)));
        }
        let config = finish(&tree, &sources, Vec::new())?;
        self.config = config;
        self.tree = tree;
        self.sources = sources;
        Ok(())
    }

    /// [`Loaded::set`] with the value given as text, parsed as the leaf's type
    /// the way environment variables are.
    pub fn set_str(&mut self, path: &str, raw: &str, source: Source) -> Result<(), ConfigError> {
        let kind = match env::find_leaf(path) {
            Some(leaf) => Some(leaf.kind),
            None => path.strip_prefix("models.").and_then(|rest| {
                if price_field(rest).is_some_and(|(_, field)| field.is_some()) {
                    return Some(Kind::Float);
                }
                let (_, field) = rest.rsplit_once('.')?;
                MODEL_FIELDS
                    .iter()
                    .find(|(name, _)| *name == field)
                    .map(|(_, kind)| *kind)
            }),
        };
        let parsed = match kind {
            Some(kind) => env::parse(kind, raw),
            None => Err(unknown_leaf_message(path)),
        };
        match parsed {
            Ok(value) => self.set(path, value, source),
            Err(message) => {
                let mut error = FieldError::new(path, message);
                error.origin = source.origin().map(str::to_owned);
                Err(ConfigError::Invalid {
                    errors: vec![error],
                })
            }
        }
    }
}

impl Config {
    /// Parses and validates YAML text on top of the defaults, without the
    /// environment.
    pub fn from_yaml_str(text: &str) -> Result<Self, ConfigError> {
        build(Some((text, None)), &[]).map(|loaded| loaded.config)
    }

    /// Overlays a partial configuration (a per-agent, per-conversation or
    /// per-request layer, docs/design.md §5) and validates the result with the same
    /// rules and messages as a file.
    pub fn overlay(&self, patch: &Value) -> Result<Self, ConfigError> {
        let mut tree = serde_json::to_value(self).map_err(|err| ConfigError::Invalid {
            errors: vec![FieldError::new("", err.to_string())],
        })?;
        let mut sources = HashMap::new();
        let mut errors = Vec::new();
        merge_document(
            &mut tree,
            patch.clone(),
            &Source::Default,
            &mut sources,
            &mut errors,
        );
        finish(&tree, &sources, errors)
    }

    /// Checks every rule; for a `Config` built in code rather than loaded.
    pub fn check(&self) -> Result<(), ConfigError> {
        let errors = rule_errors(self);
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid { errors })
        }
    }
}

fn build(
    file: Option<(&str, Option<&Path>)>,
    env: &[(String, String)],
) -> Result<Loaded, ConfigError> {
    let mut tree = default_tree();
    let mut sources = HashMap::new();
    let mut errors = Vec::new();

    if let Some((text, path)) = file {
        let document = parse_yaml(text, path)?;
        let origin = Source::File(path.map(Path::to_owned).unwrap_or_default());
        merge_document(&mut tree, document, &origin, &mut sources, &mut errors);
    }

    let (assignments, ignored_env) = env::recognise(env);
    for assignment in assignments {
        let Some(leaf) = env::LEAVES.get(assignment.leaf_index) else {
            continue;
        };
        match env::parse(leaf.kind, assignment.raw) {
            Ok(value) => {
                set_at(&mut tree, leaf.path, value);
                sources.insert(leaf.path.to_owned(), Source::Env(assignment.var.to_owned()));
            }
            Err(message) => errors.push(FieldError {
                path: leaf.path.to_owned(),
                message,
                origin: Some(assignment.var.to_owned()),
            }),
        }
    }

    let config = finish(&tree, &sources, errors)?;
    Ok(Loaded {
        config,
        tree,
        sources,
        ignored_env,
    })
}

fn default_tree() -> Value {
    // Serializing plain structs with string keys cannot fail; the fallback only
    // keeps this path free of panics.
    serde_json::to_value(Config::default()).unwrap_or_else(|_| Value::Object(Map::new()))
}

fn parse_yaml(text: &str, file: Option<&Path>) -> Result<Value, ConfigError> {
    serde_saphyr::from_str::<Value>(text).map_err(|err| {
        let location = err.location();
        let err = err.without_snippet();
        ConfigError::Yaml {
            file: file.map(Path::to_owned),
            line: location.map(|l| l.line() as usize),
            column: location.map(|l| l.column() as usize),
            message: yaml_message(&err.to_string()),
        }
    })
}

/// The parser's message on one line, without the position (the error carries
/// it) and without advice addressed to Rust callers of the parser.
fn yaml_message(text: &str) -> String {
    let mut message = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if let Some(cut) = message.rfind(" at line ") {
        message.truncate(cut);
    }
    for advice in [
        ", set DuplicateKeyPolicy in Options if acceptable",
        "; use from_str_multiple or from_str_multiple_with_options",
        " by the configured policy",
    ] {
        message = message.replace(advice, "");
    }
    message
}

fn merge_document(
    tree: &mut Value,
    document: Value,
    origin: &Source,
    sources: &mut HashMap<String, Source>,
    errors: &mut Vec<FieldError>,
) {
    match document {
        // An empty file, or one with only comments, is the defaults.
        Value::Null => {}
        document @ Value::Object(_) => merge(tree, document, "", origin, sources, errors),
        other => errors.push(FieldError::new(
            "",
            format!("expected a mapping of keys, got {}", type_name(&other)),
        )),
    }
}

/// Overlays `incoming` on `target`, which holds the defaults (or earlier
/// layers). Keys `target` does not have are unknown: all of them are reported,
/// not only the first.
fn merge(
    target: &mut Value,
    incoming: Value,
    path: &str,
    origin: &Source,
    sources: &mut HashMap<String, Source>,
    errors: &mut Vec<FieldError>,
) {
    if path == MODELS {
        merge_models(target, incoming, origin, sources, errors);
        return;
    }
    if path == AGENTS {
        merge_agents(target, incoming, origin, sources, errors);
        return;
    }
    let Value::Object(existing) = target else {
        record_leaves(&incoming, path, origin, sources);
        *target = incoming;
        return;
    };
    // `server.store: clickhouse` names the backend and keeps the defaults.
    let incoming = match incoming {
        Value::String(backend) if path == "server.store" => {
            serde_json::json!({ "backend": backend })
        }
        other => other,
    };
    match incoming {
        // `policy:` with every child commented out.
        Value::Null => {}
        Value::Object(entries) => {
            for (key, value) in entries {
                let child = join(path, &key);
                match existing.get_mut(&key) {
                    Some(slot) => merge(slot, value, &child, origin, sources, errors),
                    None => {
                        let expected: Vec<&str> = existing.keys().map(String::as_str).collect();
                        errors.push(FieldError::new(child, unknown_key_message(&key, &expected)));
                    }
                }
            }
        }
        other => errors.push(FieldError::new(
            path,
            format!("expected a mapping, got {}", type_name(&other)),
        )),
    }
}

/// `models` entries replace whole profiles: a profile is only meaningful with
/// both of its fields, which deserialization then checks.
fn merge_models(
    target: &mut Value,
    incoming: Value,
    origin: &Source,
    sources: &mut HashMap<String, Source>,
    errors: &mut Vec<FieldError>,
) {
    match incoming {
        Value::Null => {}
        Value::Object(entries) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            if let Value::Object(existing) = target {
                for (name, entry) in entries {
                    record_leaves(&entry, &join(MODELS, &name), origin, sources);
                    existing.insert(name, entry);
                }
            }
        }
        other => errors.push(FieldError::new(
            MODELS,
            format!(
                "expected a mapping of model names, got {}",
                type_name(&other)
            ),
        )),
    }
}

/// `agents` entries are partial configurations, checked as a whole by the
/// cross-section rules; each replaces any earlier layer of the same name.
fn merge_agents(
    target: &mut Value,
    incoming: Value,
    origin: &Source,
    sources: &mut HashMap<String, Source>,
    errors: &mut Vec<FieldError>,
) {
    match incoming {
        Value::Null => {}
        Value::Object(entries) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            if let Value::Object(existing) = target {
                for (name, entry) in entries {
                    if !entry.is_object() && !entry.is_null() {
                        errors.push(FieldError::new(
                            join(AGENTS, &name),
                            format!("expected a mapping, got {}", type_name(&entry)),
                        ));
                        continue;
                    }
                    record_leaves(&entry, &join(AGENTS, &name), origin, sources);
                    existing.insert(name, entry);
                }
            }
        }
        other => errors.push(FieldError::new(
            AGENTS,
            format!(
                "expected a mapping of agent names, got {}",
                type_name(&other)
            ),
        )),
    }
}

fn set_model(
    tree: &mut Value,
    rest: &str,
    value: Value,
    source: &Source,
    sources: &mut HashMap<String, Source>,
) -> Result<(), String> {
    let Some(Value::Object(models)) = tree.get_mut(MODELS) else {
        return Err("models is not a mapping".to_owned());
    };
    if let Some((name, field)) = price_field(rest) {
        let entry = models
            .entry(name.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        if let Value::Object(entry) = entry {
            match field {
                None => {
                    record_leaves(&value, &format!("{MODELS}.{rest}"), source, sources);
                    entry.insert("price".to_owned(), value);
                }
                Some(field) => {
                    let price = entry
                        .entry("price")
                        .or_insert_with(|| Value::Object(Map::new()));
                    if !price.is_object() {
                        *price = Value::Object(Map::new());
                    }
                    if let Value::Object(price) = price {
                        price.insert(field.to_owned(), value);
                    }
                    sources.insert(format!("{MODELS}.{rest}"), source.clone());
                }
            }
        }
        return Ok(());
    }
    // Model names may contain dots (`gpt-4.1`), so a known field name is
    // split off the end rather than splitting on every dot.
    let field = rest
        .rsplit_once('.')
        .filter(|(_, field)| MODEL_FIELDS.iter().any(|(name, _)| name == field));
    match field {
        Some((name, field)) => {
            let entry = models
                .entry(name.to_owned())
                .or_insert_with(|| Value::Object(Map::new()));
            match entry {
                Value::Object(entry) => {
                    entry.insert(field.to_owned(), value);
                }
                other => *other = Value::Object(Map::from_iter([(field.to_owned(), value)])),
            }
            sources.insert(format!("{MODELS}.{rest}"), source.clone());
        }
        None => {
            record_leaves(&value, &join(MODELS, rest), source, sources);
            models.insert(rest.to_owned(), value);
        }
    }
    Ok(())
}

/// `NAME.price` → `(NAME, None)`, `NAME.price.FIELD` → `(NAME, Some(FIELD))` for
/// a key of [`PRICE_FIELDS`]; `None` for any other path below `models.`.
fn price_field(rest: &str) -> Option<(&str, Option<&str>)> {
    if let Some(name) = rest.strip_suffix(".price") {
        return Some((name, None));
    }
    let (head, field) = rest.rsplit_once('.')?;
    let name = head.strip_suffix(".price")?;
    PRICE_FIELDS.contains(&field).then_some((name, Some(field)))
}

/// Records `origin` for `value` at `path` and for every leaf below it, so that
/// provenance is exact whichever level a layer replaced.
fn record_leaves(
    value: &Value,
    path: &str,
    origin: &Source,
    sources: &mut HashMap<String, Source>,
) {
    sources.insert(path.to_owned(), origin.clone());
    if let Value::Object(entries) = value {
        for (key, child) in entries {
            record_leaves(child, &join(path, key), origin, sources);
        }
    }
}

/// Sets a schema leaf. Schema keys contain no dots, so the split is exact.
fn set_at(tree: &mut Value, path: &str, value: Value) {
    let mut node = tree;
    let mut keys = path.split('.').peekable();
    while let Some(key) = keys.next() {
        if !node.is_object() {
            *node = Value::Object(Map::new());
        }
        let Value::Object(map) = node else {
            return;
        };
        if keys.peek().is_none() {
            map.insert(key.to_owned(), value);
            return;
        }
        node = map
            .entry(key.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
    }
}

/// Deserializes and validates the merged tree, adding every problem found to
/// `errors` (which holds those of the merge).
fn finish(
    tree: &Value,
    sources: &HashMap<String, Source>,
    mut errors: Vec<FieldError>,
) -> Result<Config, ConfigError> {
    let defaults = default_tree();
    let mut work = tree.clone();
    let mut reset_paths: HashSet<String> = HashSet::new();
    let mut config = None;
    for _ in 0..MAX_TYPE_ERRORS {
        match serde_path_to_error::deserialize::<_, Config>(&work) {
            Ok(parsed) => {
                config = Some(parsed);
                break;
            }
            Err(err) => {
                let segments: Vec<Segment> = err.path().iter().cloned().collect();
                let path = display_path(&segments);
                errors.push(FieldError::new(&path, humanize(&err.inner().to_string())));
                // Put the default back (or drop a models entry) and try again,
                // so the next bad value is reported too.
                if !reset_paths.insert(path) || !reset(&mut work, &defaults, &segments) {
                    break;
                }
            }
        }
    }

    if let Some(config) = &config {
        // A reset value is a default, not the user's; a rule failing on it
        // would report something the user did not write.
        errors.extend(rule_errors(config).into_iter().filter(|error| {
            !reset_paths
                .iter()
                .any(|reset| is_same_or_below(&error.path, reset))
        }));
    }

    for error in &mut errors {
        if error.origin.is_none() {
            error.origin = origin_for(&error.path, sources);
        }
    }
    dedup(&mut errors);

    match config {
        Some(config) if errors.is_empty() => Ok(config),
        _ => Err(ConfigError::Invalid { errors }),
    }
}

/// garde's rules, then the rules that span sections.
fn rule_errors(config: &Config) -> Vec<FieldError> {
    let mut errors: Vec<FieldError> = match config.validate() {
        Ok(()) => Vec::new(),
        Err(report) => report
            .iter()
            .map(|(path, error)| FieldError::new(path.to_string(), error.message()))
            .collect(),
    };
    errors.extend(rules::cross_section(config));
    errors
}

fn dedup(errors: &mut Vec<FieldError>) {
    let mut seen = HashSet::new();
    errors.retain(|error| seen.insert((error.path.clone(), error.message.clone())));
}

/// The variable or flag that set `path` or the nearest enclosing value.
fn origin_for(path: &str, sources: &HashMap<String, Source>) -> Option<String> {
    let mut current = path;
    loop {
        if let Some(origin) = sources.get(current).and_then(Source::origin) {
            return Some(origin.to_owned());
        }
        let cut = current.rfind(['.', '['])?;
        current = &current[..cut];
    }
}

fn is_same_or_below(path: &str, ancestor: &str) -> bool {
    ancestor.is_empty()
        || path == ancestor
        || path
            .strip_prefix(ancestor)
            .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
}

/// Replaces the value at `segments` with its default, or removes it when it
/// has none (a `models` entry). A bad list item resets the whole list: its
/// siblings' indices would shift otherwise. Returns false when nothing could
/// be changed, which ends the retries.
fn reset(work: &mut Value, defaults: &Value, segments: &[Segment]) -> bool {
    let mut keys: Vec<&str> = Vec::new();
    for segment in segments {
        match segment {
            Segment::Map { key } => keys.push(key),
            Segment::Seq { .. } => break,
            Segment::Enum { .. } | Segment::Unknown => return false,
        }
    }
    let Some((last, parents)) = keys.split_last() else {
        return false;
    };
    let default = parents
        .iter()
        .chain(std::iter::once(last))
        .try_fold(defaults, |node, key| node.get(key));
    let parent = parents.iter().try_fold(work, |node, key| node.get_mut(key));
    let Some(Value::Object(parent)) = parent else {
        return false;
    };
    match default {
        Some(default) => {
            parent.insert((*last).to_owned(), default.clone());
            true
        }
        None => parent.remove(*last).is_some(),
    }
}

fn display_path(segments: &[Segment]) -> String {
    let mut out = String::new();
    for segment in segments {
        match segment {
            Segment::Map { key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Enum { variant } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(variant);
            }
            Segment::Unknown => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push('?');
            }
        }
    }
    out
}

/// serde speaks Rust types ("expected usize"); the reader wrote YAML.
fn humanize(message: &str) -> String {
    let mut text = message
        .replacen("unknown variant", "unknown value", 1)
        .replacen("unknown field", "unknown key", 1)
        .replacen("missing field", "missing key", 1);
    for (rust, plain) in [
        ("expected usize", "expected a non-negative integer"),
        ("expected u64", "expected a non-negative integer"),
        ("expected f64", "expected a number"),
        ("expected a borrowed string", "expected a string"),
    ] {
        text = text.replace(rust, plain);
    }
    text
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

fn unknown_key_message(key: &str, expected: &[&str]) -> String {
    let suggestion = expected
        .iter()
        .map(|candidate| (edit_distance(key, candidate), *candidate))
        .filter(|(distance, candidate)| *distance <= (candidate.len() / 3).max(1))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| format!("; did you mean {candidate}?"))
        .unwrap_or_default();
    format!(
        "unknown key{suggestion} (expected one of {})",
        expected.join(", ")
    )
}

fn unknown_leaf_message(path: &str) -> String {
    let known: Vec<&str> = env::LEAVES.iter().map(|leaf| leaf.path).collect();
    let suggestion = known
        .iter()
        .map(|candidate| (edit_distance(path, candidate), *candidate))
        .filter(|(distance, candidate)| *distance <= (candidate.len() / 3).max(1))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| format!("; did you mean {candidate}?"))
        .unwrap_or_default();
    format!("unknown key{suggestion}")
}

/// Edit distance counting an adjacent transposition as one edit (`modle` is
/// one typo away from `model`), for "did you mean" hints.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let width = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * width];
    for i in 0..=a.len() {
        d[i * width] = i;
    }
    for (j, cell) in d.iter_mut().enumerate().take(width) {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[(i - 1) * width + j] + 1)
                .min(d[i * width + j - 1] + 1)
                .min(d[(i - 1) * width + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[(i - 2) * width + j - 2] + 1);
            }
            d[i * width + j] = best;
        }
    }
    d[a.len() * width + b.len()]
}

/// Leaves of a serialized config: scalars, lists and empty mappings.
fn collect_leaves(value: &Value, path: &str, out: &mut Vec<(String, Value)>) {
    match value {
        Value::Object(entries) if !entries.is_empty() => {
            for (key, child) in entries {
                collect_leaves(child, &join(path, key), out);
            }
        }
        leaf => out.push((path.to_owned(), leaf.clone())),
    }
}
