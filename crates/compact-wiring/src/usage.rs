use compact_middleware::model::InputError;
use serde_json::Value;

/// The input tokens the provider reported for the last response, from the
/// `usage` a caller passes: a number, or the provider's usage object,
/// OpenAI's `input_tokens` (Responses) or `prompt_tokens` (Chat
/// Completions) plus Anthropic's cache fields, which its `input_tokens`
/// leaves out. `None` (or null) is no usage. Errors name the path under
/// `$.usage`.
pub fn usage_tokens(usage: Option<&Value>) -> Result<Option<usize>, InputError> {
    let invalid = |path: &str, message: &str| InputError {
        path: path.to_owned(),
        message: message.to_owned(),
    };
    let count = |v: &Value| v.as_u64().and_then(|n| usize::try_from(n).ok());
    let o = match usage {
        None | Some(Value::Null) => return Ok(None),
        Some(n @ Value::Number(_)) => {
            return count(n)
                .map(Some)
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
    let field = |name: &str| -> Result<Option<usize>, InputError> {
        match o.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => count(v).map(Some).ok_or_else(|| {
                invalid(
                    &format!("$.usage.{name}"),
                    "expected a non-negative integer",
                )
            }),
        }
    };
    let base = match (field("input_tokens")?, field("prompt_tokens")?) {
        (Some(n), _) | (None, Some(n)) => n,
        (None, None) => {
            return Err(invalid(
                "$.usage.input_tokens",
                "missing: the input tokens the provider reported for the last response",
            ));
        }
    };
    let cached = field("cache_creation_input_tokens")?.unwrap_or(0)
        + field("cache_read_input_tokens")?.unwrap_or(0);
    Ok(Some(base + cached))
}

#[cfg(test)]
mod tests {
    use super::usage_tokens;
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
    }
}
