//! Drives a session turn by turn through a manager, the way an agent that
//! keeps the middleware's output does, and tabulates what happened. Shared
//! by `demo` and `replay`.

use compact_middleware::model::{Message, turns};
use compact_middleware::{CompactManager, PreflightRequest};
use serde_json::Value;

use crate::exit::CliResult;
use crate::out::outln;

/// Totals over a driven session.
#[derive(Debug, Default)]
pub(super) struct Totals {
    pub turns: usize,
    pub compactions: usize,
    /// Tokens an agent without compaction would have sent (may exceed the window).
    pub raw_tokens: usize,
    pub sent_tokens: usize,
    pub final_messages: usize,
    /// The context after the last turn (what the agent would send next).
    pub context: Vec<Message>,
}

/// Prints the table header.
pub(super) fn header() -> CliResult {
    outln!(
        "{:>4}  {:>8} → {:>8}  {:>6}  tiers",
        "turn",
        "before",
        "after",
        "usage"
    )
}

/// Feeds `turn_messages` (one batch per turn) to `manager`, appending each
/// batch to the compacted context of the previous call. `pace` is the model
/// call each preflight stands in front of: it is waited for after each
/// turn, so a timeline fills at the speed of a real agent.
pub(super) async fn drive(
    manager: &CompactManager,
    session: &str,
    opening: Vec<Message>,
    turn_messages: impl IntoIterator<Item = Vec<Message>>,
    tools: &[Value],
    pace: std::time::Duration,
) -> CliResult<Totals> {
    let mut totals = Totals::default();
    let mut context = opening.clone();
    let mut raw = opening;
    for (i, new) in turn_messages.into_iter().enumerate() {
        raw.extend(new.iter().cloned());
        context.extend(new);
        let outcome = manager
            .preflight_with(
                session,
                PreflightRequest {
                    messages: context,
                    tools: tools.to_vec(),
                    ..Default::default()
                },
            )
            .await?;
        let r = &outcome.report;
        totals.turns += 1;
        totals.raw_tokens += manager.estimate(&raw, tools).t_est;
        totals.sent_tokens += r.tokens_after;
        if r.triggered {
            totals.compactions += 1;
        }
        let tiers: Vec<String> = r
            .tiers
            .iter()
            .filter_map(|t| serde_json::to_value(t).ok()?.as_str().map(str::to_string))
            .collect();
        outln!(
            "{:>4}  {:>8} → {:>8}  {:>5.1}%  {}",
            i + 1,
            r.tokens_before,
            r.tokens_after,
            r.usage_after * 100.0,
            if tiers.is_empty() {
                "-".to_string()
            } else {
                tiers.join(", ")
            }
        )?;
        context = outcome.messages;
        if !pace.is_zero() {
            tokio::time::sleep(pace).await;
        }
    }
    totals.final_messages = context.len();
    totals.context = context;
    Ok(totals)
}

/// Prints the savings table.
pub(super) fn summary(t: &Totals) -> CliResult {
    outln!()?;
    outln!("{:<40} {:>12}", "turns", t.turns)?;
    outln!("{:<40} {:>12}", "compactions", t.compactions)?;
    outln!(
        "{:<40} {:>12}",
        "tokens sent without compaction",
        t.raw_tokens
    )?;
    outln!(
        "{:<40} {:>12}",
        "tokens sent with compaction",
        t.sent_tokens
    )?;
    outln!(
        "{:<40} {:>11.1}%",
        "saved",
        100.0 * (1.0 - t.sent_tokens as f64 / t.raw_tokens.max(1) as f64)
    )?;
    outln!("{:<40} {:>12}", "final context messages", t.final_messages)
}

/// Splits a recorded history into the messages before the first turn and
/// one batch per turn.
pub(super) fn split_turns(messages: Vec<Message>) -> (Vec<Message>, Vec<Vec<Message>>) {
    let ranges = turns(&messages);
    let mut opening = Vec::new();
    let mut batches = Vec::new();
    let mut slots: Vec<Option<Message>> = messages.into_iter().map(Some).collect();
    for (i, r) in ranges.iter().enumerate() {
        let batch: Vec<Message> = r.clone().filter_map(|j| slots[j].take()).collect();
        let first_is_user = batch.first().is_some_and(Message::starts_turn);
        if i == 0 && !first_is_user {
            opening = batch;
        } else {
            batches.push(batch);
        }
    }
    (opening, batches)
}
