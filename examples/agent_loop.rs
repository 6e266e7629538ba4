//! A 10-line agent loop with the `before_model_call` hook.
//!
//! `cargo run --example agent_loop` — the "model" here is a stand-in that
//! answers with a tool call and a large tool output each turn, so the history
//! grows fast and the hook compacts it in place.

use compact_middleware::config::Config;
use compact_middleware::{BeforeModelCall, CompactManager, Message, ModelCallContext};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = Config {
        max_context_tokens: Some(8_000),
        ..Config::default()
    };
    let hook = BeforeModelCall::new(CompactManager::new(config)?);
    let mut ctx =
        ModelCallContext::new("example", vec![Message::system("You are a helpful agent.")]);

    for turn in 1..=30 {
        ctx.messages.push(Message::user(format!(
            "Step {turn}: inspect the logs of job J-{turn}."
        )));
        let report = hook.call(&mut ctx).await?; // compacts ctx.messages in place when needed
        let reply = fake_model(turn); // send ctx.provider_messages() to your model here
        ctx.messages.extend(reply);
        println!(
            "turn {turn:>2}: {:>5} → {:>5} tokens {:?}",
            report.tokens_before, report.tokens_after, report.tiers
        );
    }
    Ok(())
}

/// Stands in for a model call plus tool execution.
fn fake_model(turn: usize) -> Vec<Message> {
    let id = format!("call_{turn}");
    let log: String = (0..200)
        .map(|i| format!("J-{turn} line {i}: ok\n"))
        .collect();
    [
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "read_logs", "arguments": format!("{{\"job\":\"J-{turn}\"}}")}}]}),
        json!({"role": "tool", "tool_call_id": id, "content": log}),
        json!({"role": "assistant", "content": format!("Job J-{turn} is healthy.")}),
    ]
    .into_iter()
    .map(|v| serde_json::from_value(v).expect("static example messages are valid"))
    .collect()
}
