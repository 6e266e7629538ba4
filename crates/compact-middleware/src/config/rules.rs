//! Custom validation rules. garde's built-in messages ("lower than 1") do not
//! say what the value was, so every rule here writes the message the
//! configuration reference promises: the rule, then `(got VALUE)`. The rules
//! of one value alone are `compact_model::rules`, re-exported.

use std::collections::BTreeMap;

use garde::Error;

use super::FieldError;
use super::schema::{Config, ModelOverride, Role, StorageAdapterKind};

// The rules that read one value alone are shared with the sections defined
// in other crates (`summarizer:` in compact-summarize).
pub(super) use compact_model::rules::{
    at_least, at_least_u64, fraction, http_url, non_empty, opt_at_least, opt_fraction,
    opt_http_url, opt_non_empty,
};

/// `value < other`, where `other` is the field named `other_path`.
pub(super) fn below(other_path: &str, other: f64) -> impl FnOnce(&f64, &()) -> garde::Result + '_ {
    move |value, _| {
        if *value < other {
            Ok(())
        } else {
            Err(Error::new(format!(
                "must be less than {other_path} ({other}) (got {value})"
            )))
        }
    }
}

/// `value <= other`, where `other` is the field named `other_path`.
pub(super) fn at_most(
    other_path: &str,
    other: f64,
) -> impl FnOnce(&f64, &()) -> garde::Result + '_ {
    move |value, _| {
        if *value <= other {
            Ok(())
        } else {
            Err(Error::new(format!(
                "must be at most {other_path} ({other}) (got {value})"
            )))
        }
    }
}

/// A soft budget above the hard one could never fire first, which is its whole point.
pub(super) fn soft_budget(
    hard: Option<usize>,
) -> impl FnOnce(&Option<usize>, &()) -> garde::Result {
    move |soft, _| match (soft, hard) {
        (Some(soft), Some(hard)) if *soft > hard => Err(Error::new(format!(
            "must be at most policy.token_budget ({hard}) (got {soft})"
        ))),
        _ => Ok(()),
    }
}

/// The summary is sent to the model as a conversational message; a `tool`
/// message without a preceding call is rejected by the API.
pub(super) fn summary_role(value: &Role, _: &()) -> garde::Result {
    if matches!(value, Role::Tool | Role::Other) {
        Err(Error::new(format!(
            "must be one of user, assistant, system, developer (got {})",
            value.as_str()
        )))
    } else {
        Ok(())
    }
}

pub(super) fn model_names(value: &BTreeMap<String, ModelOverride>, _: &()) -> garde::Result {
    if value.keys().any(|name| name.trim().is_empty()) {
        Err(Error::new("model names must not be empty"))
    } else {
        Ok(())
    }
}

/// Compiles the pattern with the same crate the redactor uses, so a pattern
/// that passes here cannot fail later.
pub(super) fn regex(value: &str, _: &()) -> garde::Result {
    if value.is_empty() {
        return Err(Error::new("must not be empty"));
    }
    match regex::Regex::new(value) {
        // A pattern that matches nothing would still insert `<REDACTED>` at
        // every position of every exported string.
        Ok(re) if re.is_match("") => Err(Error::new(format!(
            "must not match the empty string (got {value:?})"
        ))),
        Ok(_) => Ok(()),
        Err(err) => Err(Error::new(format!(
            "invalid regex: {}",
            regex_error_line(&err)
        ))),
    }
}

/// `regex::Error` renders the pattern and a caret over several lines; the
/// error report is one line per problem, so keep only the reason.
fn regex_error_line(err: &regex::Error) -> String {
    let text = err.to_string();
    let reason = text
        .lines()
        .rev()
        .find_map(|line| line.trim().strip_prefix("error:"))
        .map(str::trim);
    match reason {
        Some(reason) => reason.to_owned(),
        None => text.split_whitespace().collect::<Vec<_>>().join(" "),
    }
}

/// The `server:` section's rules, then those that span sections, which
/// garde's per-struct derive cannot see.
pub(super) fn cross_section(config: &Config) -> Vec<FieldError> {
    // `server:` is the trace server's own type (compact-events, which has no
    // garde): its rules, worded as these, come with it.
    let mut errors: Vec<FieldError> = (config.server.problems().into_iter())
        .map(|p| FieldError::new(format!("server.{}", p.path), p.message))
        .collect();
    if config.storage.adapter == StorageAdapterKind::S3 && config.storage.s3.bucket.is_none() {
        errors.push(FieldError::new(
            "storage.s3.bucket",
            "is required when storage.adapter is s3",
        ));
    }
    for (name, m) in &config.models {
        model_rules(name, m, &mut errors);
    }
    if config.state.store == super::StateStoreKind::Postgres && config.state.url.is_none() {
        errors.push(FieldError::new(
            "state.url",
            "is required when state.store is postgres (or set COMPACT_STATE_URL)",
        ));
    }
    errors.extend(agent_layers(config));
    if let Some(window) = config.max_context_tokens
        && config.policy.hard_cap_buffer >= window
    {
        errors.push(FieldError::new(
            "policy.hard_cap_buffer",
            format!(
                "must be less than max_context_tokens ({window}) (got {})",
                config.policy.hard_cap_buffer
            ),
        ));
    }
    errors
}

/// How a `models` entry counts must be said once, and consistently.
fn model_rules(name: &str, m: &ModelOverride, errors: &mut Vec<FieldError>) {
    use crate::tokens::{Encoding, EstimatorKind};
    let path = format!("models.{name}");
    if m.context_window.is_none() {
        // An entry without a window is a price for a model whose profile
        // comes from elsewhere: a counting rule alone would be ignored.
        if m.encoding.is_some() || m.estimator.is_some() || m.chars_per_token.is_some() {
            errors.push(FieldError::new(
                format!("{path}.context_window"),
                "is required with `encoding`, `estimator` or `chars_per_token` (a model profile)",
            ));
        } else if m.price.is_none() {
            errors.push(FieldError::new(
                &path,
                "missing key `context_window` (with `encoding` or `estimator`: a model profile) or `price`",
            ));
        }
        return;
    }
    match (m.estimator, m.encoding) {
        (None, None) => errors.push(FieldError::new(
            &path,
            "missing key `encoding` (o200k or cl100k) or `estimator` (bpe-o200k, bpe-cl100k or ratio)",
        )),
        (Some(EstimatorKind::BpeO200k), Some(Encoding::Cl100k))
        | (Some(EstimatorKind::BpeCl100k), Some(Encoding::O200k)) => errors.push(FieldError::new(
            format!("{path}.encoding"),
            "contradicts `estimator`; give one of them",
        )),
        _ => {}
    }
    if let Some(cpt) = &m.chars_per_token {
        if m.estimator != Some(EstimatorKind::Ratio) {
            errors.push(FieldError::new(
                format!("{path}.chars_per_token"),
                "is only used with `estimator: ratio`",
            ));
        }
        if let Some((script, value)) = cpt.invalid() {
            errors.push(FieldError::new(
                format!("{path}.chars_per_token.{script}"),
                format!("must be a number above 0 (got {value})"),
            ));
        }
    }
}

/// Each `agents.NAME` layer applied on its own to the rest of the
/// configuration, with the same checks as a request layer; errors are
/// reported under `agents.NAME`.
fn agent_layers(config: &Config) -> Vec<FieldError> {
    if config.agents.is_empty() {
        return Vec::new();
    }
    let mut base = config.clone();
    base.agents.clear();
    let mut errors = Vec::new();
    for (name, layer) in &config.agents {
        let layer = crate::strategy::from_seed_fields(layer);
        let found =
            crate::strategy::check_layer(&layer).and_then(|()| base.overlay(&layer).map(|_| ()));
        if let Err(e) = found {
            for fe in e.field_errors() {
                errors.push(FieldError::new(
                    format!("agents.{name}.{}", fe.path).trim_end_matches('.'),
                    fe.message.clone(),
                ));
            }
        }
    }
    errors
}
