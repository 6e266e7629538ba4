//! The `cache_control` breakpoints of an Anthropic body, as the
//! middleware's Anthropic tests and the proxy's tests read them
//! (`compact-service/tests/proxy.rs` includes this file by path).

use serde_json::Value;

/// Every `cache_control` in a body: the type of the block that carries it
/// (`empty text` for an empty text block), in body order.
pub(crate) fn body_markers(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    markers(v, "request", &mut out);
    out
}

/// Every `cache_control` in a body, with the type of the block that carries it.
fn markers(v: &Value, owner: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            let ty = o.get("type").and_then(Value::as_str).unwrap_or(owner);
            for (k, x) in o {
                if k == "cache_control" {
                    let empty = ty == "text" && o.get("text").and_then(Value::as_str) == Some("");
                    out.push(if empty {
                        "empty text".into()
                    } else {
                        ty.into()
                    });
                } else {
                    markers(x, ty, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| markers(x, owner, out)),
        _ => {}
    }
}
