//! Configuration: the default file, validation messages, unknown keys, types,
//! YAML syntax, environment overrides, provenance, flags, the examples.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use compact_middleware::config::{
    Config, ConfigError, ExporterKind, FieldError, Loaded, Mode, Role, Source, StorageAdapterKind,
    env_vars, load,
};
use compact_middleware::summarize::Strategy;
use compact_middleware::tokens::{Backend, Encoding};
use serde_json::{Value, json};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn default_yaml() -> PathBuf {
    workspace().join("config/default.yaml")
}

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn errors_of(result: Result<Config, ConfigError>) -> Vec<FieldError> {
    match result {
        Ok(config) => panic!("expected an error, got {config:?}"),
        Err(ConfigError::Invalid { errors }) => errors,
        Err(other) => panic!("expected field errors, got {other}"),
    }
}

fn load_errors(file: Option<&Path>, vars: &[(&str, &str)]) -> Vec<FieldError> {
    errors_of(load(file, &env(vars)).map(|loaded| loaded.config))
}

/// A temporary file that is removed on drop; no tempfile dependency.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, text: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("compact-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write temp file");
        Self(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn leaf_paths(value: &Value, path: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, child) in map {
                let child_path = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                leaf_paths(child, &child_path, out);
            }
        }
        _ => out.push(path.to_owned()),
    }
}

// ---------------------------------------------------------------- defaults

#[test]
fn default_yaml_is_exactly_the_defaults() {
    let loaded = load(Some(&default_yaml()), &[]).expect("default.yaml loads");
    assert_eq!(loaded.config, Config::default());
}

#[test]
fn default_yaml_spells_out_every_leaf() {
    let text = std::fs::read_to_string(default_yaml()).expect("read default.yaml");
    let file: Value = serde_saphyr::from_str(&text).expect("default.yaml is YAML");
    let defaults = serde_json::to_value(Config::default()).expect("serialize defaults");
    let mut want = Vec::new();
    leaf_paths(&defaults, "", &mut want);
    let mut have = Vec::new();
    leaf_paths(&file, "", &mut have);
    assert_eq!(
        have, want,
        "default.yaml must list every key, in schema order"
    );
}

#[test]
fn default_yaml_comments_every_key() {
    let text = std::fs::read_to_string(default_yaml()).expect("read default.yaml");
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.ends_with(':') {
            continue;
        }
        assert!(line.contains(" # "), "no comment on: {line}");
    }
}

#[test]
fn built_in_defaults_are_the_documented_ones() {
    let config = Config::default();
    assert_eq!(config.model, "gpt-4o");
    assert_eq!(config.max_context_tokens, None);
    assert_eq!(config.tokenizer, Backend::Bpe);
    assert_eq!(config.policy.mode, Mode::Auto);
    assert_eq!(config.policy.trigger_pct, 0.85);
    assert_eq!(config.policy.target_pct, 0.6);
    assert_eq!(
        config.policy.roles_never_prune,
        vec![Role::System, Role::Developer]
    );
    assert_eq!(config.policy.strategy, Strategy::TaskState);
    assert_eq!(config.policy.summary_role, Role::User);
    assert_eq!(config.telemetry.exporter, ExporterKind::None);
    assert_eq!(config.storage.adapter, StorageAdapterKind::Fs);
    assert_eq!(config.storage.s3.prefix, "compact");
    assert!(config.redaction.enabled);
    assert!(config.check().is_ok());
}

#[test]
fn empty_and_comment_only_files_are_the_defaults() {
    for text in [
        "",
        "# nothing\n",
        "policy:\n",
        "policy:\n  # trigger_pct: 0.9\n",
    ] {
        assert_eq!(
            Config::from_yaml_str(text).expect(text),
            Config::default(),
            "{text:?}"
        );
    }
}

#[test]
fn a_partial_file_keeps_the_other_defaults() {
    let config = Config::from_yaml_str(
        "model: gpt-4.1\npolicy:\n  trigger_pct: 0.9\n  roles_never_prune: [system]\nmodels:\n  my-model: {context_window: 32000, encoding: cl100k}\n",
    )
    .expect("valid");
    assert_eq!(config.model, "gpt-4.1");
    assert_eq!(config.policy.trigger_pct, 0.9);
    assert_eq!(config.policy.target_pct, 0.6);
    assert_eq!(config.policy.roles_never_prune, vec![Role::System]);
    let profile = &config.models["my-model"];
    assert_eq!(profile.context_window, Some(32000));
    assert_eq!(profile.encoding, Some(Encoding::Cl100k));
}

#[test]
fn serialized_config_round_trips() {
    let config = Config {
        max_context_tokens: Some(64_000),
        redaction: compact_middleware::config::Redaction {
            enabled: true,
            patterns: vec!["(?i)secret=\\S+".to_owned()],
        },
        ..Config::default()
    };
    let yaml = serde_json::to_string(&config).expect("serialize");
    // JSON is YAML.
    assert_eq!(Config::from_yaml_str(&yaml).expect("parse"), config);
}

// ---------------------------------------------------------------- rules

#[test]
fn each_invalid_value_names_its_path_and_rule() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "policy: {trigger_pct: 1.5}",
            "policy.trigger_pct",
            "must be between 0.0 and 1.0 (got 1.5)",
        ),
        (
            "policy: {trigger_pct: -0.1}",
            "policy.trigger_pct",
            "must be between 0.0 and 1.0",
        ),
        (
            "policy: {target_pct: 1.2, trigger_pct: 0.9}",
            "policy.target_pct",
            "must be between 0.0 and 1.0",
        ),
        (
            "policy: {target_pct: 0.9}",
            "policy.target_pct",
            "must be less than policy.trigger_pct (0.85) (got 0.9)",
        ),
        (
            "policy: {target_pct: 0.85}",
            "policy.target_pct",
            "must be less than policy.trigger_pct",
        ),
        (
            "policy: {reactive_target_pct: 0.7}",
            "policy.reactive_target_pct",
            "must be at most policy.target_pct (0.6) (got 0.7)",
        ),
        (
            "policy: {summary_max_pct: 2}",
            "policy.summary_max_pct",
            "must be between 0.0 and 1.0 (got 2)",
        ),
        (
            "policy: {token_remaining_pct: 1.01}",
            "policy.token_remaining_pct",
            "must be between 0.0 and 1.0",
        ),
        (
            "policy: {keep_recent_turns: 0}",
            "policy.keep_recent_turns",
            "must be at least 1 (got 0)",
        ),
        (
            "policy: {tool_result_max_chars: 199}",
            "policy.tool_result_max_chars",
            "must be at least 200 (got 199)",
        ),
        (
            "policy: {max_compact_failures: 0}",
            "policy.max_compact_failures",
            "must be at least 1 (got 0)",
        ),
        (
            "policy: {protected_flag: ''}",
            "policy.protected_flag",
            "must not be empty",
        ),
        (
            "policy: {protected_flag: '  '}",
            "policy.protected_flag",
            "must not be empty",
        ),
        (
            "policy: {compact_trigger_turns: 0}",
            "policy.compact_trigger_turns",
            "must be at least 1 (got 0)",
        ),
        (
            "policy: {token_budget: 0}",
            "policy.token_budget",
            "must be at least 1",
        ),
        (
            "policy: {token_budget: 1000, token_soft_budget: 2000}",
            "policy.token_soft_budget",
            "must be at most policy.token_budget (1000) (got 2000)",
        ),
        (
            "policy: {summary_role: tool}",
            "policy.summary_role",
            "must be one of user, assistant, system, developer (got tool)",
        ),
        (
            "policy: {include_tools: [search, '']}",
            "policy.include_tools[1]",
            "must not be empty",
        ),
        (
            "policy: {exclude_tools: ['']}",
            "policy.exclude_tools[0]",
            "must not be empty",
        ),
        ("model: ''", "model", "must not be empty"),
        (
            "max_context_tokens: 0",
            "max_context_tokens",
            "must be at least 1 (got 0)",
        ),
        (
            "max_context_tokens: 1000",
            "policy.hard_cap_buffer",
            "must be less than max_context_tokens (1000) (got 1500)",
        ),
        (
            "models: {tiny: {context_window: 0, encoding: o200k}}",
            "models.tiny.context_window",
            "must be at least 1 (got 0)",
        ),
        (
            "telemetry: {ariadne_url: 'localhost:5175/ingest'}",
            "telemetry.ariadne_url",
            "must start with http:// or https://",
        ),
        (
            "telemetry: {otlp_endpoint: 'ftp://collector'}",
            "telemetry.otlp_endpoint",
            "must start with http:// or https://",
        ),
        (
            "telemetry: {ariadne_url: 'http://'}",
            "telemetry.ariadne_url",
            "must name a host",
        ),
        (
            "telemetry: {queue_capacity: 0}",
            "telemetry.queue_capacity",
            "must be at least 1 (got 0)",
        ),
        (
            "telemetry: {batch_size: 0}",
            "telemetry.batch_size",
            "must be at least 1 (got 0)",
        ),
        (
            "telemetry: {flush_interval_ms: 0}",
            "telemetry.flush_interval_ms",
            "must be at least 1 (got 0)",
        ),
        (
            "telemetry: {agent_name: ''}",
            "telemetry.agent_name",
            "must not be empty",
        ),
        (
            "telemetry: {jsonl_path: ''}",
            "telemetry.jsonl_path",
            "must not be empty",
        ),
        ("storage: {path: ''}", "storage.path", "must not be empty"),
        (
            "storage: {spool_path: ''}",
            "storage.spool_path",
            "must not be empty",
        ),
        (
            "storage: {adapter: s3}",
            "storage.s3.bucket",
            "is required when storage.adapter is s3",
        ),
        (
            "storage: {s3: {bucket: ''}}",
            "storage.s3.bucket",
            "must not be empty",
        ),
        (
            "storage: {s3: {endpoint_url: 'minio:9000'}}",
            "storage.s3.endpoint_url",
            "must start with http:// or https://",
        ),
        (
            "redaction: {patterns: ['ok', 'fine', '(unclosed']}",
            "redaction.patterns[2]",
            "invalid regex: unclosed group",
        ),
        (
            "redaction: {patterns: ['']}",
            "redaction.patterns[0]",
            "must not be empty",
        ),
        (
            "redaction: {patterns: ['a*']}",
            "redaction.patterns[0]",
            "must not match the empty string",
        ),
    ];
    for (yaml, path, rule) in cases {
        let errors = errors_of(Config::from_yaml_str(yaml));
        assert!(
            errors
                .iter()
                .any(|e| e.path == *path && e.message.contains(rule)),
            "{yaml}: expected `{path}: ...{rule}...`, got {errors:?}"
        );
        let display = ConfigError::Invalid { errors }.to_string();
        assert!(display.contains(&format!("{path}: ")), "{display}");
    }
}

#[test]
fn boundary_values_are_accepted() {
    let yaml = "policy:\n  trigger_pct: 1.0\n  target_pct: 0.0\n  reactive_target_pct: 0.0\n  keep_recent_turns: 1\n  keep_tool_io_pairs: 0\n  tool_result_max_chars: 200\n  max_compact_failures: 1\n  summary_max_pct: 1\n  token_budget: 10\n  token_soft_budget: 10\ntelemetry:\n  queue_capacity: 1\n  batch_size: 1\n  ariadne_url: https://ariadne.example.com/ingest\nstorage:\n  adapter: s3\n  s3: {bucket: archive}\n";
    let config = Config::from_yaml_str(yaml).expect("boundaries are valid");
    assert_eq!(config.policy.trigger_pct, 1.0);
    assert_eq!(config.storage.s3.bucket.as_deref(), Some("archive"));
}

#[test]
fn several_problems_are_reported_at_once() {
    let errors = errors_of(Config::from_yaml_str(
        "policy:\n  trigger_pct: 1.5\n  keep_recent_turns: 0\n  bogus: 1\ntelemetry:\n  batch_size: lots\n  queue_capacity: 0\n",
    ));
    let paths: BTreeSet<&str> = errors.iter().map(|e| e.path.as_str()).collect();
    for path in [
        "policy.trigger_pct",
        "policy.keep_recent_turns",
        "policy.bogus",
        "telemetry.batch_size",
        "telemetry.queue_capacity",
    ] {
        assert!(paths.contains(path), "{path} missing from {errors:?}");
    }
    let text = ConfigError::Invalid {
        errors: errors.clone(),
    }
    .to_string();
    assert_eq!(
        text.lines().count(),
        errors.len(),
        "one line per problem: {text}"
    );
}

// ---------------------------------------------------------------- structure

#[test]
fn unknown_keys_are_errors_with_their_path() {
    let cases = [
        ("modle: gpt-4o", "modle", "did you mean model?"),
        (
            "policy: {trigger_pcnt: 0.9}",
            "policy.trigger_pcnt",
            "did you mean trigger_pct?",
        ),
        (
            "telemetry: {exporters: console}",
            "telemetry.exporters",
            "did you mean exporter?",
        ),
        (
            "storage: {s3: {buckett: b}}",
            "storage.s3.buckett",
            "did you mean bucket?",
        ),
        (
            "redaction: {enable: false}",
            "redaction.enable",
            "did you mean enabled?",
        ),
        ("compaction: {}", "compaction", "unknown key"),
    ];
    for (yaml, path, hint) in cases {
        let errors = errors_of(Config::from_yaml_str(yaml));
        let error = errors
            .iter()
            .find(|e| e.path == path)
            .unwrap_or_else(|| panic!("{yaml}: no error at {path}: {errors:?}"));
        assert!(error.message.starts_with("unknown key"), "{error}");
        assert!(error.message.contains(hint), "{error}");
        assert!(error.message.contains("expected one of"), "{error}");
    }
    let errors = errors_of(Config::from_yaml_str("policy: {trigger_pcnt: 0.9}"));
    assert!(
        errors[0]
            .to_string()
            .contains("policy.trigger_pcnt: unknown key")
            && errors[0].message.contains("trigger_pct, target_pct"),
        "{}",
        errors[0]
    );
}

#[test]
fn unknown_and_missing_model_profile_fields_are_errors() {
    let errors = errors_of(Config::from_yaml_str(
        "models: {m: {context_window: 1000, encoding: o200k, window: 5}}",
    ));
    assert!(
        errors
            .iter()
            .any(|e| e.path.starts_with("models.m") && e.message.contains("window")),
        "{errors:?}"
    );
    let errors = errors_of(Config::from_yaml_str("models: {m: {context_window: 1000}}"));
    assert!(
        errors
            .iter()
            .any(|e| e.path == "models.m" && e.message.contains("encoding")),
        "{errors:?}"
    );
    let errors = errors_of(Config::from_yaml_str(
        "models: {m: {context_window: 1000, encoding: p50k}}",
    ));
    assert!(
        errors
            .iter()
            .any(|e| e.path == "models.m.encoding" && e.message.contains("o200k")),
        "{errors:?}"
    );
}

#[test]
fn a_price_entry_prices_a_known_model_and_keeps_its_profile() {
    let config = Config::from_yaml_str(
        "models:\n  gpt-4o: {price: {input: 2.0, cached_input: 0.2, output: 8}}\n",
    )
    .expect("a price alone is a valid entry");
    let price = config.price().expect("priced");
    assert_eq!(
        (price.input, price.cached_input(), price.output),
        (2.0, 0.2, 8.0)
    );
    // Unset prices: no cache discount or surcharge.
    assert_eq!(
        price.cache_write(compact_middleware::price::Ttl::OneHour),
        2.0
    );
    // The built-in profile still counts the window.
    let limits = compact_middleware::estimate::ModelLimits::from_config(&config).expect("limits");
    assert_eq!(limits.max_tokens, 128_000);
    // Without an entry, the built-in price; an unknown model has none.
    let builtin = Config::default()
        .price()
        .expect("gpt-4o has a built-in price");
    assert_eq!((builtin.input, builtin.cached_input()), (2.5, 1.25));
    assert!(Config::default().price_of("my-model").is_none());
    // A profile and a price in one entry.
    let config = Config::from_yaml_str(
        "model: my-model\nmodels:\n  my-model: {context_window: 32000, encoding: o200k, price: {input: 1, output: 2}}\n",
    )
    .expect("valid");
    assert_eq!(config.price().map(|p| p.output), Some(2.0));
    let limits = compact_middleware::estimate::ModelLimits::from_config(&config).expect("limits");
    assert_eq!(limits.max_tokens, 32_000);
}

#[test]
fn bad_prices_name_their_field() {
    let cases = [
        (
            "models: {m: {price: {input: -1, output: 2}}}",
            "models.m.price.input",
            "must be a number >= 0",
        ),
        (
            "models: {m: {price: {input: 1, output: 2, cache_write_1h: -0.5}}}",
            "models.m.price.cache_write_1h",
            "(got -0.5)",
        ),
        (
            "models: {m: {price: {input: 1}}}",
            "models.m.price",
            "output",
        ),
        (
            "models: {m: {price: {input: 1, output: 2, cached: 0.1}}}",
            "models.m.price",
            "cached",
        ),
        (
            "models: {m: {price: {input: '1$', output: 2}}}",
            "models.m.price.input",
            "",
        ),
        (
            "models: {m: {encoding: o200k, price: {input: 1, output: 2}}}",
            "models.m.context_window",
            "is required with `encoding`",
        ),
        ("models: {m: {}}", "models.m", "or `price`"),
    ];
    for (yaml, path, message) in cases {
        let errors = errors_of(Config::from_yaml_str(yaml));
        assert!(
            errors
                .iter()
                .any(|e| e.path.starts_with(path) && e.message.contains(message)),
            "{yaml}: {errors:?}"
        );
    }
}

#[test]
fn flags_can_set_a_price_and_config_print_lists_it() {
    let mut loaded = load(None, &[]).expect("defaults");
    loaded
        .set_str(
            "models.gpt-4.1.price.input",
            "2.5",
            Source::Flag("--price".into()),
        )
        .expect_err("a price needs its output price too");
    loaded
        .set(
            "models.gpt-4.1.price",
            json!({"input": 2.0, "output": 8.0}),
            Source::Flag("--price".into()),
        )
        .expect("a whole price");
    loaded
        .set_str(
            "models.gpt-4.1.price.cached_input",
            "0.5",
            Source::Flag("--cached".into()),
        )
        .expect("one price field");
    let price = loaded.config.price_of("gpt-4.1").expect("priced");
    assert_eq!((price.input, price.cached_input()), (2.0, 0.5));
    assert!(
        loaded.config.models.contains_key("gpt-4.1"),
        "not `gpt-4.1.price`"
    );
    let sources = loaded.sources();
    let find = |path: &str| {
        sources
            .iter()
            .find(|(p, _, _)| p == path)
            .unwrap_or_else(|| panic!("{path} not listed: {sources:?}"))
            .clone()
    };
    assert_eq!(
        find("models.gpt-4.1.price.cached_input"),
        (
            "models.gpt-4.1.price.cached_input".into(),
            json!(0.5),
            Source::Flag("--cached".into())
        )
    );
    assert_eq!(
        find("models.gpt-4.1.price.output").2,
        Source::Flag("--price".into())
    );
}

#[test]
fn wrong_types_name_path_and_expected_type() {
    let cases = [
        (
            "policy: {trigger_pct: high}",
            "policy.trigger_pct",
            "expected a number",
        ),
        (
            "policy: {keep_recent_turns: -1}",
            "policy.keep_recent_turns",
            "expected a non-negative integer",
        ),
        (
            "policy: {keep_recent_turns: 2.5}",
            "policy.keep_recent_turns",
            "expected a non-negative integer",
        ),
        (
            "policy: {clear_tool_inputs: maybe}",
            "policy.clear_tool_inputs",
            "boolean",
        ),
        (
            "policy: {roles_never_prune: system}",
            "policy.roles_never_prune",
            "sequence",
        ),
        (
            "policy: {roles_never_prune: [system, admin]}",
            "policy.roles_never_prune[1]",
            "unknown value",
        ),
        (
            "policy: {mode: aggressive}",
            "policy.mode",
            "expected one of",
        ),
        ("policy: {strategy: haiku}", "policy.strategy", "task_state"),
        ("policy: 0.85", "policy", "expected a mapping"),
        ("tokenizer: sentencepiece", "tokenizer", "bpe"),
        (
            "telemetry: {exporter: kafka}",
            "telemetry.exporter",
            "ariadne",
        ),
        ("storage: {adapter: gcs}", "storage.adapter", "s3"),
        ("model: [gpt-4o]", "model", "string"),
        ("max_context_tokens: lots", "max_context_tokens", "expected"),
        ("models: [gpt-4o]", "models", "expected a mapping"),
        (
            "redaction: {patterns: 'a+'}",
            "redaction.patterns",
            "sequence",
        ),
    ];
    for (yaml, path, expected) in cases {
        let errors = errors_of(Config::from_yaml_str(yaml));
        assert!(
            errors
                .iter()
                .any(|e| e.path == path && e.message.contains(expected)),
            "{yaml}: expected `{path}: ...{expected}...`, got {errors:?}"
        );
    }
}

#[test]
fn a_non_mapping_document_is_an_error() {
    let errors = errors_of(Config::from_yaml_str("- model\n- policy\n"));
    assert_eq!(errors[0].path, "");
    assert!(
        errors[0]
            .to_string()
            .starts_with("(root): expected a mapping"),
        "{}",
        errors[0]
    );
}

#[test]
fn yaml_syntax_error_has_a_line_number() {
    let file = TempFile::new(
        "broken.yaml",
        "model: gpt-4o\npolicy:\n  trigger_pct: [0.85\n  target_pct: 0.6\n",
    );
    match load(Some(&file.0), &[]) {
        Err(ConfigError::Yaml {
            file: Some(path),
            line: Some(line),
            message,
            ..
        }) => {
            assert_eq!(path, file.0);
            assert!(line >= 3, "line {line}: {message}");
        }
        other => panic!("expected a YAML error, got {other:?}"),
    }
    let err = Config::from_yaml_str("policy:\n  trigger_pct: 0.9\n   target_pct: 0.5\n")
        .expect_err("bad indentation");
    let ConfigError::Yaml { line, .. } = &err else {
        panic!("expected a YAML error, got {err}");
    };
    assert!(line.is_some(), "{err}");
    assert!(!err.to_string().contains('\n'), "one line: {err}");
}

#[test]
fn duplicate_keys_are_errors() {
    let err = Config::from_yaml_str("model: a\nmodel: b\n").expect_err("duplicate");
    assert!(matches!(err, ConfigError::Yaml { .. }), "{err}");
}

#[test]
fn missing_file_is_an_io_error_naming_the_file() {
    let path = workspace().join("config/does-not-exist.yaml");
    match load(Some(&path), &[]) {
        Err(err @ ConfigError::Io { .. }) => {
            assert!(err.to_string().contains("does-not-exist.yaml"))
        }
        other => panic!("expected an io error, got {other:?}"),
    }
}

#[test]
fn hostile_input_never_panics() {
    let inputs = [
        "policy: {trigger_pct: .nan}",
        "policy: {trigger_pct: .inf}",
        "max_context_tokens: 99999999999999999999999999",
        "a: &a [*a]",
        "? [complex, key]\n: value\n",
        "1: 2",
        "policy: {1: 2}",
        "models: {'': {context_window: 1, encoding: o200k}}",
        "models: {m: null}",
        "storage: {s3: null}",
        "redaction: {patterns: ['(?x) a{99999999999}']}",
        "\u{0}",
        "---\nmodel: a\n---\nmodel: b\n",
        "!!binary aGVsbG8=",
    ];
    for input in inputs {
        let _ = Config::from_yaml_str(input);
    }
    let deep = format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000));
    let _ = Config::from_yaml_str(&deep);
}

// ---------------------------------------------------------------- environment

#[test]
fn env_overrides_win_over_the_file() {
    let file = TempFile::new(
        "env-over-file.yaml",
        "model: gpt-4.1\npolicy:\n  trigger_pct: 0.8\n  target_pct: 0.5\n",
    );
    let loaded = load(
        Some(&file.0),
        &env(&[
            ("COMPACT_POLICY_TRIGGER_PCT", "0.9"),
            ("COMPACT_MODEL", "gpt-5"),
            ("COMPACT_MAX_CONTEXT_TOKENS", "200000"),
            ("COMPACT_POLICY_ROLES_NEVER_PRUNE", "system, developer,user"),
            ("COMPACT_POLICY_CLEAR_TOOL_INPUTS", "true"),
            ("COMPACT_STORAGE_S3_BUCKET", "audit"),
            ("COMPACT_STORAGE_ADAPTER", "s3"),
            ("HOME", "/root"),
        ]),
    )
    .expect("valid");
    let config = &loaded.config;
    assert_eq!(config.policy.trigger_pct, 0.9);
    assert_eq!(config.policy.target_pct, 0.5, "file value kept");
    assert_eq!(config.model, "gpt-5");
    assert_eq!(config.max_context_tokens, Some(200_000));
    assert_eq!(
        config.policy.roles_never_prune,
        vec![Role::System, Role::Developer, Role::User]
    );
    assert!(config.policy.clear_tool_inputs);
    assert_eq!(config.storage.adapter, StorageAdapterKind::S3);
    assert_eq!(config.storage.s3.bucket.as_deref(), Some("audit"));
}

#[test]
fn seed_aliases_work() {
    let loaded = load(
        None,
        &env(&[
            ("COMPACT_TRIGGER_PCT", "0.9"),
            ("COMPACT_TARGET_PCT", "0.5"),
            ("COMPACT_ARIADNE_URL", "http://ariadne:5175/ingest"),
            ("COMPACT_EXPORTER", "ariadne"),
            ("COMPACT_MODE", "compact"),
            ("COMPACT_STRATEGY", "code_delta"),
            ("COMPACT_S3_BUCKET", "b"),
        ]),
    )
    .expect("valid");
    let config = &loaded.config;
    assert_eq!(config.policy.trigger_pct, 0.9);
    assert_eq!(config.policy.target_pct, 0.5);
    assert_eq!(config.telemetry.ariadne_url, "http://ariadne:5175/ingest");
    assert_eq!(config.telemetry.exporter, ExporterKind::Ariadne);
    assert_eq!(config.policy.mode, Mode::Compact);
    assert_eq!(config.policy.strategy, Strategy::CodeDelta);
    assert_eq!(config.storage.s3.bucket.as_deref(), Some("b"));
    assert_eq!(
        loaded.source_of("policy.trigger_pct"),
        Some(Source::Env("COMPACT_TRIGGER_PCT".to_owned()))
    );
}

#[test]
fn the_generic_name_wins_over_an_alias_in_any_order() {
    for vars in [
        [
            ("COMPACT_TRIGGER_PCT", "0.7"),
            ("COMPACT_POLICY_TRIGGER_PCT", "0.9"),
        ],
        [
            ("COMPACT_POLICY_TRIGGER_PCT", "0.9"),
            ("COMPACT_TRIGGER_PCT", "0.7"),
        ],
    ] {
        let loaded = load(None, &env(&vars)).expect("valid");
        assert_eq!(loaded.config.policy.trigger_pct, 0.9);
        assert_eq!(
            loaded.source_of("policy.trigger_pct"),
            Some(Source::Env("COMPACT_POLICY_TRIGGER_PCT".to_owned()))
        );
    }
}

#[test]
fn bad_env_values_name_the_variable_and_the_path() {
    let cases = [
        (
            "COMPACT_TRIGGER_PCT",
            "abc",
            "COMPACT_TRIGGER_PCT (policy.trigger_pct): expected a number, got \"abc\"",
        ),
        (
            "COMPACT_POLICY_TRIGGER_PCT",
            "NaN",
            "COMPACT_POLICY_TRIGGER_PCT (policy.trigger_pct): expected a number",
        ),
        (
            "COMPACT_POLICY_KEEP_RECENT_TURNS",
            "-2",
            "COMPACT_POLICY_KEEP_RECENT_TURNS (policy.keep_recent_turns): expected a non-negative integer",
        ),
        (
            "COMPACT_REDACTION_ENABLED",
            "nope",
            "COMPACT_REDACTION_ENABLED (redaction.enabled): expected true or false",
        ),
        (
            "COMPACT_MODE",
            "aggressive",
            "COMPACT_MODE (policy.mode): unknown value",
        ),
        (
            "COMPACT_TRIGGER_PCT",
            "1.5",
            "COMPACT_TRIGGER_PCT (policy.trigger_pct): must be between 0.0 and 1.0 (got 1.5)",
        ),
        (
            "COMPACT_TELEMETRY_ARIADNE_URL",
            "ariadne:5175",
            "COMPACT_TELEMETRY_ARIADNE_URL (telemetry.ariadne_url): must start with http://",
        ),
        (
            "COMPACT_POLICY_ROLES_NEVER_PRUNE",
            "system,root",
            "COMPACT_POLICY_ROLES_NEVER_PRUNE (policy.roles_never_prune[1]): unknown value",
        ),
        (
            "COMPACT_REDACTION_PATTERNS",
            "[\"ok\", \"(bad\"]",
            "COMPACT_REDACTION_PATTERNS (redaction.patterns[1]): invalid regex",
        ),
        (
            "COMPACT_REDACTION_PATTERNS",
            "[\"unterminated",
            "COMPACT_REDACTION_PATTERNS (redaction.patterns): expected a JSON array of strings",
        ),
    ];
    for (var, value, expected) in cases {
        let errors = load_errors(None, &[(var, value)]);
        let text = ConfigError::Invalid { errors }.to_string();
        assert!(
            text.contains(expected),
            "{var}={value}: expected `{expected}` in `{text}`"
        );
    }
}

#[test]
fn env_lists_and_optional_values() {
    let loaded = load(
        None,
        &env(&[
            (
                "COMPACT_POLICY_INCLUDE_TOOLS",
                "code_interpreter,file_search,",
            ),
            ("COMPACT_POLICY_EXCLUDE_TOOLS", ""),
            (
                "COMPACT_REDACTION_PATTERNS",
                r#"["token=\\S{8,}", "(?i)secret"]"#,
            ),
        ]),
    )
    .expect("valid");
    let policy = &loaded.config.policy;
    assert_eq!(
        policy.include_tools,
        vec!["code_interpreter", "file_search"]
    );
    assert!(policy.exclude_tools.is_empty());
    assert_eq!(
        loaded.config.redaction.patterns,
        vec!["token=\\S{8,}", "(?i)secret"]
    );

    // An empty value unsets an optional key the file set.
    let file = TempFile::new(
        "unset.yaml",
        "max_context_tokens: 64000\nstorage: {s3: {region: eu-west-1}}\n",
    );
    let loaded = load(
        Some(&file.0),
        &env(&[
            ("COMPACT_MAX_CONTEXT_TOKENS", ""),
            ("COMPACT_STORAGE_S3_REGION", "null"),
        ]),
    )
    .expect("valid");
    assert_eq!(loaded.config.max_context_tokens, None);
    assert_eq!(loaded.config.storage.s3.region, None);
}

#[test]
fn unrelated_compact_variables_are_ignored_and_listed() {
    let loaded = load(
        None,
        &env(&[
            ("COMPACT_LOG", "debug"),
            ("COMPACT_TAIL_URL", "http://127.0.0.1:5175"),
            ("COMPACT_BENCH_POSTGRES_URL", "postgres://localhost/bench"),
            ("COMPACT_TRIGER_PCT", "0.9"),
            ("COMPACT_SERVER_TOKEN", "x"),
            ("PATH", "/bin"),
        ]),
    )
    .expect("unknown COMPACT_ variables are not errors");
    assert_eq!(loaded.config, Config::default());
    assert_eq!(
        loaded.ignored_env(),
        ["COMPACT_TRIGER_PCT", "COMPACT_SERVER_TOKEN"]
    );
}

#[test]
fn env_var_table_matches_the_schema() {
    let vars = env_vars();
    let names: Vec<&str> = vars.iter().map(|v| v.name.as_str()).collect();
    let unique: BTreeSet<&str> = names.iter().copied().collect();
    assert_eq!(
        unique.len(),
        names.len(),
        "variable names collide: {names:?}"
    );

    let from_table: BTreeSet<&str> = vars
        .iter()
        .filter(|v| !v.alias)
        .map(|v| v.path.as_str())
        .collect();
    let defaults = serde_json::to_value(Config::default()).expect("serialize");
    let mut leaves = Vec::new();
    leaf_paths(&defaults, "", &mut leaves);
    let from_schema: BTreeSet<&str> = leaves
        .iter()
        .map(String::as_str)
        .filter(|p| *p != "models" && *p != "agents")
        .collect();
    assert_eq!(from_table, from_schema);

    for var in vars.iter().filter(|v| !v.alias) {
        assert_eq!(
            var.name,
            format!("COMPACT_{}", var.path.replace('.', "_").to_uppercase())
        );
    }
    for alias in [
        "COMPACT_TRIGGER_PCT",
        "COMPACT_ARIADNE_URL",
        "COMPACT_TARGET_PCT",
        "COMPACT_EXPORTER",
        "COMPACT_MODE",
    ] {
        assert!(names.contains(&alias), "{alias}");
    }
}

#[test]
fn every_leaf_can_be_set_from_the_environment_with_its_default() {
    // Round trip: each leaf's default, rendered as env text, loads unchanged.
    let loaded = load(None, &[]).expect("defaults");
    let mut vars = Vec::new();
    for (path, value, _) in loaded.sources() {
        if path == "models" || path == "agents" {
            continue;
        }
        let text = match &value {
            Value::Null => String::new(),
            Value::String(s) => s.clone(),
            Value::Array(items) => items
                .iter()
                .map(|i| i.as_str().unwrap_or_default().to_owned())
                .collect::<Vec<_>>()
                .join(","),
            other => other.to_string(),
        };
        let var = env_vars()
            .into_iter()
            .find(|v| v.path == path && !v.alias)
            .unwrap_or_else(|| panic!("no variable for {path}"));
        vars.push((var.name, text));
    }
    let reloaded = load(None, &vars).expect("defaults through env");
    assert_eq!(reloaded.config, Config::default());
    assert!(
        reloaded
            .sources()
            .iter()
            .all(|(path, _, source)| path == "models"
                || path == "agents"
                || matches!(source, Source::Env(_)))
    );
}

// ---------------------------------------------------------------- provenance

#[test]
fn provenance_reports_default_file_and_env() {
    let file = TempFile::new(
        "provenance.yaml",
        "policy:\n  trigger_pct: 0.8\n  roles_never_prune: [system]\nmodels:\n  gpt-4.1: {context_window: 1000000, encoding: o200k}\n",
    );
    let loaded = load(
        Some(&file.0),
        &env(&[("COMPACT_ARIADNE_URL", "http://a:1/ingest")]),
    )
    .expect("valid");
    let sources = loaded.sources();
    let find = |path: &str| {
        sources
            .iter()
            .find(|(p, _, _)| p == path)
            .unwrap_or_else(|| panic!("{path} not listed"))
            .clone()
    };
    assert_eq!(
        find("policy.trigger_pct"),
        (
            "policy.trigger_pct".into(),
            json!(0.8),
            Source::File(file.0.clone())
        )
    );
    assert_eq!(
        find("policy.roles_never_prune").2,
        Source::File(file.0.clone())
    );
    assert_eq!(find("models.gpt-4.1.context_window").1, json!(1_000_000));
    assert_eq!(
        find("models.gpt-4.1.encoding").2,
        Source::File(file.0.clone())
    );
    assert_eq!(
        find("policy.target_pct"),
        ("policy.target_pct".into(), json!(0.6), Source::Default)
    );
    assert_eq!(
        find("telemetry.ariadne_url").2,
        Source::Env("COMPACT_ARIADNE_URL".into())
    );
    assert_eq!(
        find("storage.s3.bucket"),
        ("storage.s3.bucket".into(), Value::Null, Source::Default)
    );
}

#[test]
fn sources_display_for_config_print() {
    assert_eq!(Source::Default.to_string(), "default");
    assert_eq!(Source::File("a.yaml".into()).to_string(), "file a.yaml");
    assert_eq!(
        Source::Env("COMPACT_MODEL".into()).to_string(),
        "env COMPACT_MODEL"
    );
    assert_eq!(Source::Flag("--model".into()).to_string(), "flag --model");
}

#[test]
fn sources_list_every_leaf_in_schema_order() {
    let loaded = load(None, &[]).expect("defaults");
    let paths: Vec<String> = loaded.sources().into_iter().map(|(p, _, _)| p).collect();
    let mut want = Vec::new();
    leaf_paths(
        &serde_json::to_value(Config::default()).expect("serialize"),
        "",
        &mut want,
    );
    assert_eq!(paths, want);
    assert_eq!(paths.first().map(String::as_str), Some("model"));
    assert_eq!(
        paths.last().map(String::as_str),
        Some("proxy.idle_timeout_ms")
    );
    assert!(
        loaded
            .sources()
            .iter()
            .all(|(_, _, s)| *s == Source::Default)
    );
}

// ---------------------------------------------------------------- flags

#[test]
fn flags_win_over_env_and_file() {
    let file = TempFile::new("flags.yaml", "model: gpt-4.1\n");
    let mut loaded = load(Some(&file.0), &env(&[("COMPACT_MODEL", "gpt-5")])).expect("valid");
    assert_eq!(
        loaded.source_of("model"),
        Some(Source::Env("COMPACT_MODEL".into()))
    );
    loaded
        .set("model", json!("o3"), Source::Flag("--model".into()))
        .expect("valid flag");
    loaded
        .set_str(
            "max_context_tokens",
            "64000",
            Source::Flag("--max-context-tokens".into()),
        )
        .expect("valid flag");
    assert_eq!(loaded.config.model, "o3");
    assert_eq!(loaded.config.max_context_tokens, Some(64_000));
    assert_eq!(
        loaded.source_of("model"),
        Some(Source::Flag("--model".into()))
    );
    assert_eq!(
        loaded.source_of("max_context_tokens"),
        Some(Source::Flag("--max-context-tokens".into()))
    );
}

#[test]
fn an_invalid_flag_is_rejected_and_changes_nothing() {
    let mut loaded = load(None, &[]).expect("defaults");
    let before = loaded.config.clone();

    let err = loaded
        .set(
            "policy.trigger_pct",
            json!(0.5),
            Source::Flag("--trigger-pct".into()),
        )
        .expect_err("target_pct 0.6 is not below 0.5");
    assert!(
        err.to_string()
            .contains("policy.target_pct: must be less than policy.trigger_pct (0.5)"),
        "{err}"
    );
    let err = loaded
        .set_str(
            "policy.trigger_pct",
            "lots",
            Source::Flag("--trigger-pct".into()),
        )
        .expect_err("not a number");
    assert_eq!(
        err.to_string(),
        "--trigger-pct (policy.trigger_pct): expected a number, got \"lots\""
    );
    let err = loaded
        .set_str(
            "max_context_tokens",
            "0",
            Source::Flag("--max-context-tokens".into()),
        )
        .expect_err("zero window");
    assert!(
        err.to_string()
            .starts_with("--max-context-tokens (max_context_tokens): must be at least 1"),
        "{err}"
    );
    let err = loaded
        .set(
            "policy.trigger_pcnt",
            json!(0.9),
            Source::Flag("--x".into()),
        )
        .expect_err("unknown key");
    assert!(
        err.to_string().contains("did you mean policy.trigger_pct?"),
        "{err}"
    );
    assert_eq!(loaded.config, before);
    assert_eq!(
        loaded.source_of("policy.trigger_pct"),
        Some(Source::Default)
    );
}

#[test]
fn flags_can_add_model_profiles() {
    let mut loaded = load(None, &[]).expect("defaults");
    loaded
        .set(
            "models.my-llm",
            json!({"context_window": 8192, "encoding": "cl100k"}),
            Source::Flag("--model-profile".into()),
        )
        .expect("valid profile");
    loaded
        .set_str(
            "models.gpt-4.1.context_window",
            "1047576",
            Source::Flag("--window".into()),
        )
        .expect_err("a new profile needs an encoding too");
    loaded
        .set_str(
            "models.my-llm.context_window",
            "16384",
            Source::Flag("--window".into()),
        )
        .expect("update one field");
    assert_eq!(loaded.config.models["my-llm"].context_window, Some(16384));
    assert_eq!(
        loaded.source_of("models.my-llm.context_window"),
        Some(Source::Flag("--window".into()))
    );
    assert_eq!(
        loaded.source_of("models.my-llm.encoding"),
        Some(Source::Flag("--model-profile".into()))
    );
}

// ---------------------------------------------------------------- layering

#[test]
fn overlay_applies_a_partial_layer_with_the_same_checks() {
    let agent =
        Config::from_yaml_str("policy: {mode: compact, token_budget: 12000}").expect("valid");
    let request = agent
        .overlay(&json!({"policy": {"keep_recent_turns": 4, "clear_tool_inputs": true}}))
        .expect("valid overlay");
    assert_eq!(request.policy.mode, Mode::Compact);
    assert_eq!(request.policy.token_budget, Some(12000));
    assert_eq!(request.policy.keep_recent_turns, 4);
    assert!(request.policy.clear_tool_inputs);

    let err = agent
        .overlay(&json!({"policy": {"compact_keep": 4, "trigger_pct": 3}}))
        .expect_err("invalid overlay");
    let text = err.to_string();
    assert!(text.contains("policy.compact_keep: unknown key"), "{text}");
    assert!(
        text.contains("policy.trigger_pct: must be between 0.0 and 1.0 (got 3"),
        "{text}"
    );
}

// ---------------------------------------------------------------- examples and docs

#[test]
fn the_examples_all_validate() {
    let dir = workspace().join("config/examples");
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).expect("config/examples exists") {
        let path = entry.expect("dir entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let loaded = load(Some(&path), &[]);
        assert!(
            loaded.is_ok(),
            "{}: {}",
            path.display(),
            loaded.err().map(|e| e.to_string()).unwrap_or_default()
        );
        count += 1;
    }
    assert!(count >= 2, "expected at least two examples, found {count}");
}

#[test]
fn the_reference_documents_every_key_and_variable() {
    let text = std::fs::read_to_string(workspace().join("docs/configuration.md"))
        .expect("docs/configuration.md");
    let loaded = load(None, &[]).expect("defaults");
    for (path, _, _) in loaded.sources() {
        assert!(
            text.contains(&format!("`{path}`")),
            "docs/configuration.md lacks `{path}`"
        );
    }
    for var in env_vars() {
        assert!(
            text.contains(&var.name),
            "docs/configuration.md lacks {}",
            var.name
        );
    }
    assert!(text.contains("COMPACT_LOG"));
}

#[test]
fn from_process_env_reads_this_process() {
    // No COMPACT_ variables are set by the test harness; this only checks the
    // entry point works and does not panic on whatever the environment holds.
    let loaded = Loaded::from_process_env(Some(&default_yaml()));
    if std::env::vars_os().all(|(name, _)| !name.to_string_lossy().starts_with("COMPACT_")) {
        assert_eq!(loaded.expect("defaults").config, Config::default());
    }
}

// ---------------------------------------------------------------- robustness

mod never_panics {
    use super::*;
    use proptest::prelude::*;
    // `super::Strategy` (the summary style) shadows the prelude's trait.
    use proptest::strategy::Strategy as _;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn on_any_env_value(index in 0usize..64, value in ".{0,40}") {
            let vars = env_vars();
            let var = &vars[index % vars.len()];
            match load(None, &[(var.name.clone(), value.clone())]) {
                Ok(_) => {}
                Err(ConfigError::Invalid { errors }) => {
                    // Cross-field rules (`storage.adapter: s3` needs a bucket)
                    // may fail on another key; the variable's own key names it.
                    for error in errors.iter().filter(|e| e.path.starts_with(&var.path)) {
                        prop_assert_eq!(error.origin.as_deref(), Some(var.name.as_str()), "{}", error);
                    }
                }
                Err(other) => prop_assert!(false, "unexpected error kind: {}", other),
            }
        }

        #[test]
        fn on_any_yaml_text(text in "[a-z_:{}\\[\\], .0-9'\"\\n-]{0,120}") {
            let _ = Config::from_yaml_str(&text);
        }

        #[test]
        fn on_any_policy_values(key in "[a-z_]{1,25}", value in prop_oneof![
            any::<i64>().prop_map(|n| n.to_string()),
            any::<f64>().prop_map(|n| n.to_string()),
            "[a-z]{0,8}".prop_map(|s| s),
        ]) {
            let _ = Config::from_yaml_str(&format!("policy:\n  {key}: {value}\n"));
        }
    }
}

#[test]
fn server_store_names_its_backend_alone_or_in_its_section() {
    use compact_middleware::config::ServerStoreBackend;
    let short = Config::from_yaml_str("server:\n  store: clickhouse\n").expect("shorthand");
    assert_eq!(short.server.store.backend, ServerStoreBackend::Clickhouse);
    assert_eq!(short.server.store.segment_bytes, 16 * 1024 * 1024);
    let long = Config::from_yaml_str(
        "server:\n  store:\n    backend: clickhouse\n    clickhouse_url: http://u:pw@127.0.0.1:8123\n    clickhouse_database: traces\n",
    )
    .expect("section");
    assert_eq!(long.server.store.backend, ServerStoreBackend::Clickhouse);
    assert_eq!(long.server.store.clickhouse_database, "traces");
    assert!(
        !format!("{:?}", long.server.store).contains("pw"),
        "the password is never printed"
    );
    let bad = Config::from_yaml_str("server:\n  store:\n    clickhouse_table: \"x; DROP\"\n")
        .expect_err("not an identifier");
    assert!(
        bad.to_string().contains("server.store.clickhouse_table"),
        "{bad}"
    );
}

#[test]
fn proxy_upstreams_are_prefix_url_pairs() {
    let config = Config::from_yaml_str(
        "proxy:\n  upstream: https://api.openai.com\n  upstreams: [/anthropic=https://api.anthropic.com]\n",
    )
    .expect("a valid proxy section");
    assert_eq!(
        config.proxy.prefixed_upstreams(),
        vec![(
            "/anthropic".to_owned(),
            "https://api.anthropic.com".to_owned()
        )]
    );
    for (yaml, path) in [
        (
            "proxy: {upstreams: [anthropic=https://x]}",
            "proxy.upstreams[0]",
        ),
        ("proxy: {upstreams: [/a=ftp://x]}", "proxy.upstreams[0]"),
        ("proxy: {upstream: api.openai.com}", "proxy.upstream"),
        ("proxy: {idle_timeout_ms: 0}", "proxy.idle_timeout_ms"),
    ] {
        let errors = errors_of(Config::from_yaml_str(yaml));
        assert!(errors.iter().any(|e| e.path == path), "{yaml}: {errors:?}");
    }
}

#[test]
fn cache_breakpoints_take_yamls_bare_off_and_on() {
    use compact_middleware::config::CacheBreakpoints;
    for (yaml, want) in [
        ("policy: {cache_breakpoints: off}", CacheBreakpoints::Off),
        ("policy: {cache_breakpoints: 'off'}", CacheBreakpoints::Off),
        ("policy: {cache_breakpoints: auto}", CacheBreakpoints::Auto),
        ("policy: {cache_breakpoints: on}", CacheBreakpoints::Auto),
        ("policy: {}", CacheBreakpoints::Auto),
    ] {
        let c = Config::from_yaml_str(yaml).unwrap_or_else(|e| panic!("{yaml}: {e}"));
        assert_eq!(c.policy.cache_breakpoints, want, "{yaml}");
    }
    let errors = errors_of(Config::from_yaml_str("policy: {cache_breakpoints: always}"));
    assert_eq!(errors[0].path, "policy.cache_breakpoints");
    assert!(errors[0].message.contains("auto"), "{}", errors[0].message);
    // The environment and flags spell it as text.
    let loaded = load(None, &env(&[("COMPACT_POLICY_CACHE_BREAKPOINTS", "off")])).expect("loads");
    assert_eq!(
        loaded.config.policy.cache_breakpoints,
        CacheBreakpoints::Off
    );
    // Printed as its name.
    let v = serde_json::to_value(&loaded.config.policy).expect("json");
    assert_eq!(v["cache_breakpoints"], "off");
}

#[test]
fn cache_ttl_is_5m_or_1h() {
    use compact_middleware::config::CacheTtl;
    for (yaml, want) in [
        ("policy: {cache_ttl: 5m}", CacheTtl::FiveMinutes),
        ("policy: {cache_ttl: 1h}", CacheTtl::OneHour),
        ("policy: {}", CacheTtl::FiveMinutes),
    ] {
        let c = Config::from_yaml_str(yaml).unwrap_or_else(|e| panic!("{yaml}: {e}"));
        assert_eq!(c.policy.cache_ttl, want, "{yaml}");
    }
    let errors = errors_of(Config::from_yaml_str("policy: {cache_ttl: 2h}"));
    assert_eq!(errors[0].path, "policy.cache_ttl");
    assert!(errors[0].message.contains("1h"), "{}", errors[0].message);
    let loaded = load(None, &env(&[("COMPACT_POLICY_CACHE_TTL", "1h")])).expect("loads");
    assert_eq!(loaded.config.policy.cache_ttl, CacheTtl::OneHour);
    let v = serde_json::to_value(&loaded.config.policy).expect("json");
    assert_eq!(v["cache_ttl"], "1h");
}

#[test]
fn summarizer_prompt_is_fresh_or_agent_prefix() {
    use compact_middleware::config::SummaryPrompt;
    for (yaml, want) in [
        ("summarizer: {prompt: fresh}", SummaryPrompt::Fresh),
        (
            "summarizer: {prompt: agent_prefix}",
            SummaryPrompt::AgentPrefix,
        ),
        ("summarizer: {}", SummaryPrompt::Fresh),
    ] {
        let c = Config::from_yaml_str(yaml).unwrap_or_else(|e| panic!("{yaml}: {e}"));
        assert_eq!(c.summarizer.prompt, want, "{yaml}");
    }
    let errors = errors_of(Config::from_yaml_str("summarizer: {prompt: cached}"));
    assert_eq!(errors[0].path, "summarizer.prompt");
    assert!(
        errors[0].message.contains("agent_prefix") && errors[0].message.contains("cached"),
        "{}",
        errors[0].message
    );
    let loaded = load(None, &env(&[("COMPACT_SUMMARIZER_PROMPT", "agent_prefix")])).expect("loads");
    assert_eq!(loaded.config.summarizer.prompt, SummaryPrompt::AgentPrefix);
    let errors = load_errors(None, &[("COMPACT_SUMMARIZER_PROMPT", "warm")]);
    assert_eq!(errors[0].path, "summarizer.prompt");
    let v = serde_json::to_value(&loaded.config.summarizer).expect("json");
    assert_eq!(v["prompt"], "agent_prefix");
}
