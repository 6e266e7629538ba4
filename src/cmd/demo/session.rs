//! A scripted, realistic coding-agent session: a protected policy, big JSON
//! and log tool outputs, parallel tool calls, requirements planted early that
//! must survive compaction. Deterministic for a given seed.

use compact_fixtures::Rng;
use serde_json::{Value, json};

const FILES: &[&str] = &[
    "src/auth/session.rs",
    "src/auth/token.rs",
    "src/api/handlers.rs",
    "src/db/migrations/0007_sessions.sql",
    "config/prod.yaml",
    "tests/auth_flow.rs",
];

const ASKS: &[&str] = &[
    "Refactor the session refresh so it never holds the DB lock across the network call.",
    "Run the auth test suite and tell me what fails.",
    "Find every caller of issue_token and check they pass the tenant id.",
    "Add a metric for refresh latency; p99 must stay under 250 ms.",
    "Read the migration and check it is reversible.",
    "Search the codebase for hard-coded timeouts.",
    "Fix the flaky test in tests/auth_flow.rs.",
    "Summarise what changed so far for the PR description.",
];

/// The opening: a system prompt and a protected security policy.
pub(super) fn opening() -> Vec<Value> {
    vec![
        json!({"role": "system", "content": "You are a senior Rust engineer working in the acme/auth-service repository. Use the tools to read, search and test; explain decisions briefly."}),
        json!({"role": "developer", "content": "Security policy: never log bearer tokens or passwords; all new endpoints must require mTLS; do not change the public API of src/api/handlers.rs without approval from SEC-4471.", "meta": {"protected": true, "label": "Security policy"}}),
    ]
}

/// Tool schemas sent with every call (counted in the estimate).
pub(super) fn tools() -> Vec<Value> {
    let tool = |name: &str, desc: &str, param: &str| {
        json!({"type": "function", "function": {"name": name, "description": desc,
            "parameters": {"type": "object", "properties": {param: {"type": "string", "description": format!("the {param}")}}, "required": [param]}}})
    };
    vec![
        tool("read_file", "Read a file of the repository.", "path"),
        tool(
            "run_tests",
            "Run a cargo test filter and return the log.",
            "filter",
        ),
        tool(
            "search",
            "Search the repository; returns JSON matches.",
            "query",
        ),
    ]
}

/// Turn `t` (1-based): the user message, the tool calls and outputs, the reply.
pub(super) fn turn(t: usize, rng: &mut Rng) -> Vec<Value> {
    let mut out = Vec::new();
    let ask = rng.pick(ASKS);
    let ticket = format!("AUTH-{}", 1000 + t * 7);
    let user = if t == 1 {
        format!(
            "Goal: make token refresh safe under load for ticket {ticket}. Constraint: the refresh endpoint must not exceed 250 ms p99, and we must stay compatible with clients on v2.3.1. {ask}"
        )
    } else {
        format!("({ticket}) {ask}")
    };
    out.push(json!({"role": "user", "content": user}));

    let calls = 1 + rng.below(3) as usize;
    let mut tool_calls = Vec::new();
    let mut results = Vec::new();
    for c in 0..calls {
        let id = format!("call_{t:03}_{c}");
        let (name, args, output) = match rng.below(3) {
            0 => {
                let path = rng.pick(FILES);
                ("read_file", json!({"path": path}), file_body(path, rng))
            }
            1 => {
                let filter = rng.pick(&["auth", "session", "token::refresh", "api"]);
                (
                    "run_tests",
                    json!({"filter": filter}),
                    test_log(filter, rng),
                )
            }
            _ => {
                let q = rng.pick(&["issue_token(", "Duration::from_secs", "tenant_id", "lock()"]);
                ("search", json!({"query": q}), search_json(q, rng))
            }
        };
        tool_calls.push(json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}}));
        results.push(json!({"role": "tool", "tool_call_id": id, "content": output}));
    }
    out.push(json!({"role": "assistant", "content": null, "tool_calls": tool_calls}));
    out.extend(results);
    let decision = match rng.below(4) {
        0 => format!("Decision: we will use a read-through cache for sessions because the DB lock was held for 180 ms; tracked in {ticket}."),
        1 => "The failure is a timeout in token::refresh; next step: move the network call outside the lock.".to_string(),
        2 => format!("I updated {} and kept the public API unchanged.", rng.pick(FILES)),
        _ => "All auth tests pass except auth_flow::concurrent_refresh (flaky, 1 in 20 runs).".to_string(),
    };
    out.push(json!({"role": "assistant", "content": decision}));
    out
}

fn file_body(path: &str, rng: &mut Rng) -> String {
    let lines = 120 + rng.below(400);
    let mut s = format!("// {path}\n");
    for i in 0..lines {
        s.push_str(&format!(
            "    let v{i} = session.refresh(tenant_id, Duration::from_millis({}))?; // step {i}\n",
            50 + rng.below(400)
        ));
    }
    s
}

fn test_log(filter: &str, rng: &mut Rng) -> String {
    let n = 80 + rng.below(300);
    let mut s = format!("running {n} tests matching {filter}\n");
    for i in 0..n {
        let ok = rng.below(25) != 0;
        s.push_str(&format!(
            "test {filter}::case_{i} ... {} ({} ms)\n",
            if ok { "ok" } else { "FAILED" },
            rng.below(900)
        ));
    }
    s.push_str("error: test failed, to rerun pass `--lib`\nthread 'auth_flow::concurrent_refresh' panicked at src/auth/session.rs:212:9: lock poisoned\n");
    s
}

fn search_json(q: &str, rng: &mut Rng) -> String {
    let n = 20 + rng.below(120);
    let hits: Vec<Value> = (0..n)
        .map(|i| json!({"path": FILES[(i as usize) % FILES.len()], "line": 10 + i * 3, "text": format!("{q} // match {i}"), "score": (rng.below(1000) as f64) / 1000.0}))
        .collect();
    json!({"query": q, "total": n, "matches": hits}).to_string()
}
