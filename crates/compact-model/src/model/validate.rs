//! The pairing validator: the check every compaction output must pass.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::message::Message;

/// A pairing problem, with the index of the offending item.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum Problem {
    /// A tool result whose call does not precede it.
    OrphanResult {
        /// Index of the result.
        index: usize,
        /// The call id the result answers.
        call_id: String,
    },
    /// A tool call with no result after it.
    UnansweredCall {
        /// Index of the first item that makes the call.
        index: usize,
        /// The call's id.
        call_id: String,
    },
    /// A second result for the same call.
    DuplicateResult {
        /// Index of the second result.
        index: usize,
        /// The call id both results answer.
        call_id: String,
    },
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::OrphanResult { index, call_id } => write!(
                f,
                "$[{index}]: tool result for call_id {call_id:?} has no preceding tool call"
            ),
            Problem::UnansweredCall { index, call_id } => {
                write!(
                    f,
                    "$[{index}]: tool call {call_id:?} has no result after it"
                )
            }
            Problem::DuplicateResult { index, call_id } => {
                write!(f, "$[{index}]: second result for tool call {call_id:?}")
            }
        }
    }
}

impl Problem {
    /// What the problem is about, without where: the same problem found in
    /// an input and in the compacted output has the same key, whatever its index.
    pub fn key(&self) -> (u8, &str) {
        match self {
            Problem::OrphanResult { call_id, .. } => (0, call_id),
            Problem::UnansweredCall { call_id, .. } => (1, call_id),
            Problem::DuplicateResult { call_id, .. } => (2, call_id),
        }
    }
}

/// Every pairing problem in `messages`, in index order.
pub fn validate(messages: &[Message]) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut called: HashMap<&str, usize> = HashMap::new();
    let mut answered: HashSet<&str> = HashSet::new();
    for (index, m) in messages.iter().enumerate() {
        for id in &m.kind().results {
            if !called.contains_key(id.as_str()) {
                problems.push(Problem::OrphanResult {
                    index,
                    call_id: id.clone(),
                });
            } else if !answered.insert(id.as_str()) {
                problems.push(Problem::DuplicateResult {
                    index,
                    call_id: id.clone(),
                });
            }
        }
        for c in &m.kind().calls {
            called.entry(c.call_id.as_str()).or_insert(index);
        }
    }
    let mut unanswered: Vec<Problem> = called
        .into_iter()
        .filter(|(id, _)| !answered.contains(id))
        .map(|(id, index)| Problem::UnansweredCall {
            index,
            call_id: id.to_string(),
        })
        .collect();
    problems.append(&mut unanswered);
    problems.sort_by_key(|p| match p {
        Problem::OrphanResult { index, .. }
        | Problem::UnansweredCall { index, .. }
        | Problem::DuplicateResult { index, .. } => *index,
    });
    problems
}

/// Call ids that had a result in `before` and are still called in `after`
/// but no longer answered there: the "call that lost its result" bug.
pub fn lost_results(before: &[Message], after: &[Message]) -> Vec<String> {
    let answered = |ms: &[Message]| -> HashSet<String> {
        let mut called = HashSet::new();
        let mut out = HashSet::new();
        for m in ms {
            for id in &m.kind().results {
                if called.contains(id) {
                    out.insert(id.clone());
                }
            }
            for c in &m.kind().calls {
                called.insert(c.call_id.clone());
            }
        }
        out
    };
    let had = answered(before);
    let has = answered(after);
    let mut lost: Vec<String> = after
        .iter()
        .flat_map(|m| m.kind().calls.iter())
        .filter(|c| had.contains(&c.call_id) && !has.contains(&c.call_id))
        .map(|c| c.call_id.clone())
        .collect();
    lost.dedup();
    lost
}
