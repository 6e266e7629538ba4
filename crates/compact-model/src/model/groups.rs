//! Atomic groups and turns: the units compaction evicts.

use std::collections::HashMap;
use std::ops::Range;

use super::message::{ItemType, Message, Shape};

/// Splits `messages` into atomic groups, in order, covering every index once.
///
/// A group is what must be kept, cleared or summarized as a whole:
/// - an item that makes tool calls, with every result answering them and
///   everything in between (parallel calls included, and Responses call items
///   that follow one another before their outputs);
/// - a `reasoning` item, or a standalone provider `compaction` item, together with the
///   group that follows it;
/// - any other item on its own.
pub fn groups(messages: &[Message]) -> Vec<Range<usize>> {
    // Index of the last result answering each call id that comes after a call.
    let mut last_result: HashMap<&str, usize> = HashMap::new();
    for (i, m) in messages.iter().enumerate() {
        for id in &m.kind().results {
            last_result.insert(id.as_str(), i);
        }
    }
    let reach = |i: usize| -> usize {
        messages[i]
            .kind()
            .calls
            .iter()
            .filter_map(|c| last_result.get(c.call_id.as_str()).copied())
            .filter(|&r| r > i)
            .max()
            .unwrap_or(i)
    };

    let mut base: Vec<Range<usize>> = Vec::new();
    let mut i = 0;
    while i < messages.len() {
        let mut end = reach(i);
        let mut j = i + 1;
        while j <= end {
            end = end.max(reach(j));
            j += 1;
        }
        base.push(i..end + 1);
        i = end + 1;
    }

    // A reasoning item (or a provider compaction item) binds to the group after it.
    let mut out: Vec<Range<usize>> = Vec::with_capacity(base.len());
    let mut pending: Option<usize> = None;
    for g in base {
        let only_reasoning = messages[g.clone()].iter().all(binds_forward);
        let start = pending.take().unwrap_or(g.start);
        if only_reasoning {
            pending = Some(start);
        } else {
            out.push(start..g.end);
        }
    }
    if let Some(start) = pending {
        out.push(start..messages.len());
    }
    out
}

/// Splits `groups` into turns: a turn starts at each group whose first
/// message opens a turn (a user message that is not a tool result) and runs
/// to the next one. Groups before the first user message form a leading turn.
/// Returns, for each turn, the range of group indices it spans.
pub fn turn_of_groups(messages: &[Message], groups: &[Range<usize>]) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    for (gi, g) in groups.iter().enumerate() {
        if gi > start && messages[g.start].starts_turn() {
            out.push(start..gi);
            start = gi;
        }
    }
    if start < groups.len() {
        out.push(start..groups.len());
    }
    out
}

/// Turns as message ranges: a user message and everything up to the next
/// user message (snapped to group boundaries, so a turn never splits a group).
pub fn turns(messages: &[Message]) -> Vec<Range<usize>> {
    let gs = groups(messages);
    turn_of_groups(messages, &gs)
        .into_iter()
        .map(|t| gs[t.start].start..gs[t.end - 1].end)
        .collect()
}

/// Items that belong with whatever follows them: a reasoning item explains the call or
/// message after it, and a standalone provider compaction item stands for the history
/// before the items that continue from it.
fn binds_forward(m: &Message) -> bool {
    let k = m.kind();
    k.item == ItemType::Reasoning || (k.compaction && k.shape == Shape::ResponsesOther)
}
