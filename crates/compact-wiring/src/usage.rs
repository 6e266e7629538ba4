use compact_middleware::cache::ReportedUsage;
use compact_middleware::model::InputError;
use serde_json::{Map, Value};

/// The input tokens the provider reported for the last response, from the
/// `usage` a caller passes: a number, or the provider's usage object,
/// OpenAI's `input_tokens` (Responses) or `prompt_tokens` (Chat
/// Completions) plus Anthropic's cache fields, which its `input_tokens`
/// leaves out. `None` (or null) is no usage. Errors name the path under
/// `$.usage`.
pub fn usage_tokens(usage: Option<&Value>) -> Result<Option<usize>, InputError> {
    Ok(usage_figures(usage)?.0)
}

/// [`usage_tokens`], and for a usage object the whole figures: the cache
/// reads (OpenAI's `prompt_tokens_details.cached_tokens` or
/// `input_tokens_details.cached_tokens`, Anthropic's
/// `cache_read_input_tokens`), the cache writes (Anthropic's
/// `cache_creation_input_tokens`, its 1-hour part from
/// `cache_creation.ephemeral_1h_input_tokens`) and the output tokens
/// (`completion_tokens` or `output_tokens`). A bare number has no figures.
pub fn usage_figures(
    usage: Option<&Value>,
) -> Result<(Option<usize>, Option<ReportedUsage>), InputError> {
    let invalid = |path: &str, message: &str| InputError {
        path: path.to_owned(),
        message: message.to_owned(),
    };
    let o = match usage {
        None | Some(Value::Null) => return Ok((None, None)),
        Some(n @ Value::Number(_)) => {
            return count(n)
                .map(|n| (Some(n), None))
                .ok_or_else(|| invalid("$.usage", "expected a non-negative integer"));
        }
        Some(Value::Object(o)) => o,
        Some(_) => {
            return Err(invalid(
                "$.usage",
                "expected an object such as {\"input_tokens\": N}",
            ));
        }
    };
    let base = match (
        field(o, "input_tokens", "$.usage")?,
        field(o, "prompt_tokens", "$.usage")?,
    ) {
        (Some(n), _) | (None, Some(n)) => n,
        (None, None) => {
            return Err(invalid(
                "$.usage.input_tokens",
                "missing: the input tokens the provider reported for the last response",
            ));
        }
    };
    // Anthropic's `input_tokens` leaves out what was read from or written to
    // the cache; OpenAI's includes its cached tokens.
    let anthropic_read = field(o, "cache_read_input_tokens", "$.usage")?;
    let anthropic_write = field(o, "cache_creation_input_tokens", "$.usage")?;
    let details = |key: &str| -> Result<Option<usize>, InputError> {
        match o.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(d)) => field(d, "cached_tokens", &format!("$.usage.{key}")),
            Some(_) => Err(invalid(&format!("$.usage.{key}"), "expected an object")),
        }
    };
    let openai_read = match details("prompt_tokens_details")? {
        Some(n) => Some(n),
        None => details("input_tokens_details")?,
    };
    let write_1h = match o.get("cache_creation") {
        None | Some(Value::Null) => 0,
        Some(Value::Object(c)) => {
            field(c, "ephemeral_1h_input_tokens", "$.usage.cache_creation")?.unwrap_or(0)
        }
        Some(_) => return Err(invalid("$.usage.cache_creation", "expected an object")),
    };
    let read = anthropic_read.or(openai_read).unwrap_or(0);
    let write = anthropic_write.unwrap_or(0);
    let input_tokens = base + anthropic_read.unwrap_or(0) + write;
    let output_tokens = match field(o, "output_tokens", "$.usage")? {
        Some(n) => Some(n),
        None => field(o, "completion_tokens", "$.usage")?,
    };
    if read + write > input_tokens {
        return Err(invalid(
            "$.usage",
            "cache reads and writes exceed the input tokens",
        ));
    }
    Ok((
        Some(input_tokens),
        Some(ReportedUsage {
            input_tokens,
            cache_read: read,
            cache_write: write.saturating_sub(write_1h),
            cache_write_1h: write_1h.min(write),
            output_tokens,
        }),
    ))
}

fn count(v: &Value) -> Option<usize> {
    v.as_u64().and_then(|n| usize::try_from(n).ok())
}

fn field(o: &Map<String, Value>, name: &str, at: &str) -> Result<Option<usize>, InputError> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => count(v).map(Some).ok_or_else(|| InputError {
            path: format!("{at}.{name}"),
            message: "expected a non-negative integer".to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::{usage_figures, usage_tokens};
    use compact_middleware::cache::ReportedUsage;
    use serde_json::json;

    #[test]
    fn reads_every_provider_shape() {
        let n = |v| usage_tokens(Some(&v)).map_err(|e| e.to_string());
        assert_eq!(n(json!(1200)), Ok(Some(1200)));
        assert_eq!(n(json!({"input_tokens": 10})), Ok(Some(10)));
        assert_eq!(n(json!({"prompt_tokens": 7})), Ok(Some(7)));
        assert_eq!(
            n(json!({"input_tokens": 10, "cache_read_input_tokens": 5,
                     "cache_creation_input_tokens": 2})),
            Ok(Some(17))
        );
        assert_eq!(usage_tokens(None), Ok(None));
        assert_eq!(n(json!(null)), Ok(None));
    }

    #[test]
    fn reads_each_providers_cache_figures() {
        let f = |v| {
            usage_figures(Some(&v))
                .map(|(_, d)| d)
                .map_err(|e| e.to_string())
        };
        // OpenAI Chat Completions: prompt_tokens includes the cached ones.
        assert_eq!(
            f(json!({"prompt_tokens": 2006, "completion_tokens": 300,
                     "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0}})),
            Ok(Some(ReportedUsage {
                input_tokens: 2006,
                cache_read: 1920,
                cache_write: 0,
                cache_write_1h: 0,
                output_tokens: Some(300),
            }))
        );
        // OpenAI Responses.
        assert_eq!(
            f(json!({"input_tokens": 5000, "output_tokens": 20,
                     "input_tokens_details": {"cached_tokens": 4096}}))
            .map(|d| d.map(|d| (d.input_tokens, d.cache_read))),
            Ok(Some((5000, 4096)))
        );
        // Anthropic: input_tokens leaves the cache out; 1-hour writes apart.
        assert_eq!(
            f(json!({"input_tokens": 50, "cache_read_input_tokens": 9000,
                     "cache_creation_input_tokens": 1200, "output_tokens": 80,
                     "cache_creation": {"ephemeral_5m_input_tokens": 200,
                                        "ephemeral_1h_input_tokens": 1000}})),
            Ok(Some(ReportedUsage {
                input_tokens: 10_250,
                cache_read: 9000,
                cache_write: 200,
                cache_write_1h: 1000,
                output_tokens: Some(80),
            }))
        );
        // A number anchors, and says nothing of the cache.
        assert_eq!(f(json!(1200)), Ok(None));
    }

    #[test]
    fn names_the_path_of_a_bad_value() {
        let path = |v| usage_tokens(Some(&v)).map(|_| ()).unwrap_err().path;
        assert_eq!(path(json!(-1)), "$.usage");
        assert_eq!(path(json!("many")), "$.usage");
        assert_eq!(path(json!({"output_tokens": 3})), "$.usage.input_tokens");
        assert_eq!(path(json!({"input_tokens": 1.5})), "$.usage.input_tokens");
        assert_eq!(
            path(json!({"input_tokens": 1, "cache_read_input_tokens": "x"})),
            "$.usage.cache_read_input_tokens"
        );
        assert_eq!(
            path(json!({"prompt_tokens": 1, "prompt_tokens_details": {"cached_tokens": -2}})),
            "$.usage.prompt_tokens_details.cached_tokens"
        );
        assert_eq!(
            path(json!({"prompt_tokens": 1, "prompt_tokens_details": 3})),
            "$.usage.prompt_tokens_details"
        );
        assert_eq!(
            path(json!({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 11}})),
            "$.usage"
        );
    }
}
