//! `COMPACT_*` environment variables: the table of scalar leaves, their
//! variable names and how a variable's text becomes a value of the leaf's type.

use serde_json::Value;

/// How a leaf's text (an environment variable or a CLI flag) is parsed.
/// Enums are `Str`: serde then names the accepted values in its error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Str,
    OptStr,
    UInt,
    OptUInt,
    Float,
    OptFloat,
    Bool,
    List,
}

/// One settable leaf of the schema.
pub(super) struct Leaf {
    pub(super) path: &'static str,
    pub(super) kind: Kind,
    /// Short names (`COMPACT_TRIGGER_PCT`, `COMPACT_ARIADNE_URL`, …),
    /// besides the generic `COMPACT_<PATH>` name.
    pub(super) aliases: &'static [&'static str],
}

const fn leaf(path: &'static str, kind: Kind) -> Leaf {
    Leaf {
        path,
        kind,
        aliases: &[],
    }
}

const fn aliased(path: &'static str, kind: Kind, aliases: &'static [&'static str]) -> Leaf {
    Leaf {
        path,
        kind,
        aliases,
    }
}

/// Every scalar or list leaf, in schema order. `models` is a map with
/// user-chosen keys and has no variables. A test checks this table against
/// the leaves of `Config::default()`.
pub(super) const LEAVES: &[Leaf] = &[
    leaf("model", Kind::Str),
    leaf("max_context_tokens", Kind::OptUInt),
    leaf("tokenizer", Kind::Str),
    aliased("policy.mode", Kind::Str, &["COMPACT_MODE"]),
    aliased("policy.trigger_pct", Kind::Float, &["COMPACT_TRIGGER_PCT"]),
    aliased("policy.target_pct", Kind::Float, &["COMPACT_TARGET_PCT"]),
    leaf("policy.hard_cap_buffer", Kind::UInt),
    leaf("policy.keep_recent_turns", Kind::UInt),
    leaf("policy.keep_tool_io_pairs", Kind::UInt),
    leaf("policy.keep_recent_rounds", Kind::UInt),
    leaf("policy.keep_task", Kind::Bool),
    leaf("policy.roles_never_prune", Kind::List),
    leaf("policy.protected_flag", Kind::Str),
    aliased("policy.strategy", Kind::Str, &["COMPACT_STRATEGY"]),
    leaf("policy.compact_trigger_turns", Kind::OptUInt),
    leaf("policy.token_budget", Kind::OptUInt),
    leaf("policy.token_soft_budget", Kind::OptUInt),
    leaf("policy.token_remaining_pct", Kind::OptFloat),
    leaf("policy.clear_tool_inputs", Kind::Bool),
    leaf("policy.include_tools", Kind::List),
    leaf("policy.exclude_tools", Kind::List),
    leaf("policy.tool_result_max_chars", Kind::UInt),
    leaf("policy.max_compact_failures", Kind::UInt),
    leaf("policy.summary_role", Kind::Str),
    leaf("policy.summary_max_pct", Kind::Float),
    leaf("policy.reactive_target_pct", Kind::Float),
    leaf("policy.repair", Kind::Str),
    leaf("policy.cache_breakpoints", Kind::Str),
    leaf("policy.cache", Kind::Str),
    leaf("policy.cache_min_tokens", Kind::UInt),
    leaf("policy.cache_ttl", Kind::Str),
    aliased("summarizer.kind", Kind::Str, &["COMPACT_SUMMARIZER"]),
    aliased(
        "summarizer.base_url",
        Kind::Str,
        &["COMPACT_SUMMARIZER_URL"],
    ),
    leaf("summarizer.model", Kind::Str),
    leaf("summarizer.api_key_env", Kind::OptStr),
    leaf("summarizer.seed", Kind::OptUInt),
    leaf("summarizer.temperature", Kind::Float),
    leaf("summarizer.max_tokens", Kind::UInt),
    leaf("summarizer.timeout_ms", Kind::UInt),
    leaf("summarizer.retries", Kind::UInt),
    leaf("summarizer.retry_backoff_ms", Kind::UInt),
    leaf("summarizer.fallback_model", Kind::OptStr),
    leaf("summarizer.templates_file", Kind::OptStr),
    leaf("summarizer.context_window", Kind::UInt),
    leaf("summarizer.tool_output_max_chars", Kind::UInt),
    leaf("summarizer.breaker_cooldown_secs", Kind::UInt),
    leaf("summarizer.repair", Kind::Bool),
    leaf("summarizer.max_repairs", Kind::UInt),
    leaf("summarizer.repair_missing_pct", Kind::Float),
    leaf("summarizer.prompt", Kind::Str),
    leaf("memory.injection", Kind::Bool),
    leaf("memory.store_path", Kind::Str),
    leaf("memory.files_dirs", Kind::List),
    leaf("memory.summarize_after_seq", Kind::UInt),
    leaf("memory.rolling_window_size", Kind::UInt),
    leaf("memory.processing_timeout_secs", Kind::UInt),
    leaf("recall.enabled", Kind::Bool),
    leaf("recall.path", Kind::OptStr),
    leaf("recall.advertise", Kind::Bool),
    aliased("telemetry.exporter", Kind::Str, &["COMPACT_EXPORTER"]),
    aliased("telemetry.ariadne_url", Kind::Str, &["COMPACT_ARIADNE_URL"]),
    leaf("telemetry.jsonl_path", Kind::Str),
    aliased(
        "telemetry.otlp_endpoint",
        Kind::Str,
        &["COMPACT_OTLP_ENDPOINT"],
    ),
    leaf("telemetry.otlp_protocol", Kind::Str),
    aliased("telemetry.agent_name", Kind::Str, &["COMPACT_AGENT_NAME"]),
    leaf("telemetry.queue_capacity", Kind::UInt),
    leaf("telemetry.batch_size", Kind::UInt),
    leaf("telemetry.flush_interval_ms", Kind::UInt),
    leaf("storage.adapter", Kind::Str),
    leaf("storage.path", Kind::Str),
    leaf("storage.spool_path", Kind::Str),
    aliased("storage.s3.bucket", Kind::OptStr, &["COMPACT_S3_BUCKET"]),
    leaf("storage.s3.prefix", Kind::Str),
    leaf("storage.s3.region", Kind::OptStr),
    leaf("storage.s3.endpoint_url", Kind::OptStr),
    leaf("storage.s3.kms_key_id", Kind::OptStr),
    leaf("redaction.enabled", Kind::Bool),
    leaf("redaction.patterns", Kind::List),
    leaf("state.store", Kind::Str),
    leaf("state.path", Kind::Str),
    leaf("state.url", Kind::OptStr),
    leaf("state.ssl_mode", Kind::OptStr),
    leaf("state.ssl_root_cert", Kind::OptStr),
    leaf("state.wait_ms", Kind::UInt),
    leaf("server.addr", Kind::Str),
    leaf("server.data_dir", Kind::Str),
    aliased(
        "server.ingest_token",
        Kind::OptStr,
        &["COMPACT_INGEST_TOKEN"],
    ),
    aliased("server.read_token", Kind::OptStr, &["COMPACT_READ_TOKEN"]),
    leaf("server.cors_origins", Kind::List),
    leaf("server.insecure", Kind::Bool),
    leaf("server.limits.ingest_body_bytes", Kind::UInt),
    leaf("server.limits.otel_body_bytes", Kind::UInt),
    leaf("server.limits.preflight_body_bytes", Kind::UInt),
    leaf("server.limits.max_connections", Kind::UInt),
    leaf("server.limits.max_sse_clients", Kind::UInt),
    leaf("server.limits.sse_queue", Kind::UInt),
    leaf("server.limits.heartbeat_secs", Kind::UInt),
    leaf("server.retention.max_events", Kind::UInt),
    leaf("server.retention.max_age_secs", Kind::UInt),
    leaf("server.store.backend", Kind::Str),
    leaf("server.store.clickhouse_url", Kind::OptStr),
    leaf("server.store.clickhouse_database", Kind::Str),
    leaf("server.store.clickhouse_table", Kind::Str),
    leaf("server.store.replica", Kind::OptStr),
    leaf("server.store.segment_bytes", Kind::UInt),
    leaf("proxy.addr", Kind::Str),
    leaf("proxy.upstream", Kind::OptStr),
    leaf("proxy.upstreams", Kind::List),
    leaf("proxy.compaction", Kind::Bool),
    leaf("proxy.max_body_bytes", Kind::UInt),
    leaf("proxy.history_cache_bytes", Kind::UInt),
    leaf("proxy.connect_timeout_ms", Kind::UInt),
    leaf("proxy.response_timeout_ms", Kind::UInt),
    leaf("proxy.idle_timeout_ms", Kind::UInt),
];

/// Variables with the `COMPACT_` prefix that belong to other parts of the
/// product (logging, `compact tail`, the benchmarks, the test harness) and
/// are therefore not reported as unrecognised.
const RESERVED: &[&str] = &[
    "COMPACT_LOG",
    "COMPACT_TAIL_URL",
    "COMPACT_BIN",
    "COMPACT_BENCH_SERVER",
    "COMPACT_BENCH_REFERENCE",
    "COMPACT_BENCH_POSTGRES_URL",
    "COMPACT_TEST_POSTGRES_URL",
];

/// The generic variable name of a leaf: `policy.trigger_pct` → `COMPACT_POLICY_TRIGGER_PCT`.
pub(super) fn generic_name(path: &str) -> String {
    format!("COMPACT_{}", path.replace('.', "_").to_ascii_uppercase())
}

/// An environment variable this module reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvVar {
    /// The variable name.
    pub name: String,
    /// The dotted path it sets.
    pub path: String,
    /// True for the short names (`COMPACT_TRIGGER_PCT`); when both a short
    /// name and the generic one are set, the generic one wins.
    pub alias: bool,
}

/// Every environment variable the loader reads, generic names and aliases, in
/// schema order.
pub fn env_vars() -> Vec<EnvVar> {
    LEAVES
        .iter()
        .flat_map(|leaf| {
            std::iter::once(EnvVar {
                name: generic_name(leaf.path),
                path: leaf.path.to_owned(),
                alias: false,
            })
            .chain(leaf.aliases.iter().map(|alias| EnvVar {
                name: (*alias).to_owned(),
                path: leaf.path.to_owned(),
                alias: true,
            }))
        })
        .collect()
}

/// The leaf with this dotted path.
pub(super) fn find_leaf(path: &str) -> Option<&'static Leaf> {
    LEAVES.iter().find(|leaf| leaf.path == path)
}

/// A recognised variable: which leaf, and whether it was an alias.
pub(super) struct Assignment<'a> {
    pub(super) leaf_index: usize,
    pub(super) alias: bool,
    pub(super) var: &'a str,
    pub(super) raw: &'a str,
}

/// Splits the environment into assignments, ordered so that applying them in
/// sequence makes the generic name win over an alias whatever the input
/// order, and the names of `COMPACT_` variables that match nothing.
pub(super) fn recognise(env: &[(String, String)]) -> (Vec<Assignment<'_>>, Vec<String>) {
    let mut assignments = Vec::new();
    let mut ignored = Vec::new();
    for (position, (name, raw)) in env.iter().enumerate() {
        if !name.starts_with("COMPACT_") {
            continue;
        }
        let found = LEAVES.iter().enumerate().find_map(|(index, leaf)| {
            if generic_name(leaf.path) == *name {
                Some((index, false))
            } else if leaf.aliases.contains(&name.as_str()) {
                Some((index, true))
            } else {
                None
            }
        });
        match found {
            Some((leaf_index, alias)) => assignments.push((
                position,
                Assignment {
                    leaf_index,
                    alias,
                    var: name,
                    raw,
                },
            )),
            None if RESERVED.contains(&name.as_str()) => {}
            None => ignored.push(name.clone()),
        }
    }
    // Stable sort: for the same variable given twice, the later one wins.
    assignments.sort_by_key(|(position, a)| (a.leaf_index, !a.alias, *position));
    (assignments.into_iter().map(|(_, a)| a).collect(), ignored)
}

/// Parses a variable's (or flag's) text as a value of the leaf's kind.
pub(super) fn parse(kind: Kind, raw: &str) -> Result<Value, String> {
    let trimmed = raw.trim();
    // An empty or `null` value unsets an optional leaf: an environment cannot
    // otherwise express "no value" for a key whose file value is set.
    let unset = trimmed.is_empty() || trimmed == "null" || trimmed == "~";
    match kind {
        Kind::Str => Ok(Value::String(raw.to_owned())),
        Kind::OptStr if unset => Ok(Value::Null),
        Kind::OptStr => Ok(Value::String(raw.to_owned())),
        Kind::OptUInt if unset => Ok(Value::Null),
        Kind::UInt | Kind::OptUInt => trimmed
            .parse::<u64>()
            .map(Value::from)
            .map_err(|_| format!("expected a non-negative integer, got {raw:?}")),
        Kind::OptFloat if unset => Ok(Value::Null),
        Kind::Float | Kind::OptFloat => match trimmed.parse::<f64>() {
            Ok(number) if number.is_finite() => Ok(Value::from(number)),
            _ => Err(format!("expected a number, got {raw:?}")),
        },
        Kind::Bool => match trimmed.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Ok(Value::Bool(true)),
            "false" | "0" | "no" | "off" => Ok(Value::Bool(false)),
            _ => Err(format!("expected true or false, got {raw:?}")),
        },
        Kind::List => parse_list(trimmed),
    }
}

/// Comma-separated, or a JSON array of strings when an item needs a comma
/// (a regex quantifier such as `{8,}`).
fn parse_list(trimmed: &str) -> Result<Value, String> {
    if trimmed.starts_with('[') {
        return match serde_json::from_str::<Vec<String>>(trimmed) {
            Ok(items) => Ok(Value::from(items)),
            Err(err) => Err(format!("expected a JSON array of strings: {err}")),
        };
    }
    Ok(Value::from(
        trimmed
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(str::to_owned)
            .collect::<Vec<_>>(),
    ))
}
