//! Synthetic but realistic inputs: mixed text for the token counters and a
//! tool-heavy chat history for the estimator and the preflight path.

use compact_middleware::model::{Format, Message, Request};
use serde_json::{Value, json};

/// About `bytes` of mixed English prose, JSON and code.
pub(crate) fn mixed_text(bytes: usize) -> String {
    const PROSE: &str = "The refresh endpoint must not exceed 250 ms at p99; we decided to move the network call outside the lock because contention was the root cause. ";
    const CODE: &str = "fn refresh(&self, tenant: TenantId) -> Result<Token, Error> {\n    let guard = self.cache.read()?;\n    guard.get(&tenant).cloned().ok_or(Error::Missing)\n}\n";
    let mut s = String::with_capacity(bytes + 512);
    let mut i = 0u64;
    while s.len() < bytes {
        s.push_str(PROSE);
        s.push_str(
            &json!({"id": format!("req-{i:06}"), "status": "ok", "latency_ms": i % 997, "tags": ["auth", "session"]})
                .to_string(),
        );
        s.push('\n');
        s.push_str(CODE);
        i += 1;
    }
    s
}

/// A chat history of `turns` turns (4 messages each: user, assistant tool
/// call, tool result of about `output_chars`, assistant reply).
pub(crate) fn history(turns: usize, output_chars: usize) -> Vec<Message> {
    history_with_ids(turns, output_chars, "")
}

/// [`history`] with `tag` in every call id: the same texts, but what
/// compaction writes of them (placeholders name the call) is new, as in
/// every real session, whose provider-made call ids are its own.
pub(crate) fn history_with_ids(turns: usize, output_chars: usize, tag: &str) -> Vec<Message> {
    let mut items = vec![json!({"role": "system", "content": "You are a careful coding agent."})];
    for t in 0..turns {
        let id = format!("call_{tag}{t:04}");
        items.push(json!({"role": "user", "content": format!("Step {t}: check the logs of job J-{t} and fix ticket AUTH-{}.", 1000 + t)}));
        items.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "read_logs", "arguments": format!("{{\"job\":\"J-{t}\"}}")}}]}));
        let mut out = String::with_capacity(output_chars + 64);
        let mut i = 0;
        while out.len() < output_chars {
            out.push_str(&format!(
                "J-{t} line {i}: request req-{i:05} took {} ms, status=ok\n",
                (i * 37) % 900
            ));
            i += 1;
        }
        items.push(json!({"role": "tool", "tool_call_id": id, "content": out}));
        items.push(json!({"role": "assistant", "content": format!("Job J-{t} is healthy; p99 stayed under 250 ms.")}));
    }
    Request::from_value(Value::Array(items), Format::Chat)
        .map(|r| r.messages)
        .unwrap_or_default()
}

/// The history as a new request would carry it: decoded from JSON, never
/// hashed or counted before (a clone would carry memoised hashes).
pub(crate) fn received(msgs: &[Message]) -> Vec<Message> {
    msgs.iter()
        .filter_map(|m| serde_json::from_value(m.to_value()).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_has_four_valid_messages_a_turn() {
        let h = history(3, 200);
        assert_eq!(h.len(), 1 + 3 * 4);
        assert!(compact_middleware::model::validate(&h).is_empty());
        assert_eq!(received(&h).len(), h.len());
    }

    #[test]
    fn mixed_text_reaches_its_size() {
        assert!(mixed_text(10_000).len() >= 10_000);
    }
}
