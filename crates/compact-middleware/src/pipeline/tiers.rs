//! The cheap tiers (docs/design.md §5 step 6): capping oversized tool
//! results and clearing old tool I/O with placeholders. Both rewrite
//! messages in place and keep tool names and call ids, so pairing never
//! changes.

use std::collections::HashMap;

use crate::model::{ItemType, Message};

/// The placeholder for a cleared tool output.
pub(crate) fn output_placeholder(name: &str, call_id: &str) -> String {
    format!("⟦removed: tool output for {name} (call_id={call_id}); reason=context_compaction⟧")
}

/// The placeholder for a cleared tool output that can be recalled: the
/// plain one with the output's recall id before its end.
pub(crate) fn recallable_placeholder(name: &str, call_id: &str, rid: &str) -> String {
    format!(
        "⟦removed: tool output for {name} (call_id={call_id}); reason=context_compaction — recall {rid}⟧"
    )
}

/// The recall id of the output answering a call (its message's index,
/// the call id) as received, when recall is on.
pub(crate) type RecallIdOf<'a> = &'a dyn Fn(usize, &str) -> Option<String>;

/// The recall id of the output answering `call_id` in `messages[i]` as
/// received ([`crate::recall::RecallKey::received_output_id`]): what a cap
/// marker or a placeholder of it shows.
pub(crate) fn received_recall_id(
    messages: &[Message],
    key: &crate::recall::RecallKey,
    i: usize,
    call_id: &str,
) -> Option<String> {
    messages[i]
        .tool_outputs()
        .into_iter()
        .find(|(id, _)| *id == call_id)
        .map(|(_, text)| key.received_output_id(call_id, &text))
}

/// Whether `out` is already a placeholder of the output answering
/// `call_id` (with a recall id or without).
fn is_output_placeholder(out: &str, name: &str, call_id: &str) -> bool {
    out.strip_prefix("⟦removed: tool output for ")
        .and_then(|r| r.strip_prefix(name))
        .and_then(|r| r.strip_prefix(" (call_id="))
        .and_then(|r| r.strip_prefix(call_id))
        .is_some_and(|r| r.starts_with("); reason=context_compaction"))
}

/// The placeholder for an attachment (an Anthropic image or document block) cleared
/// from an old message; `what` names it (`image (image/png)`).
pub(crate) fn attachment_placeholder(what: &str) -> String {
    format!("⟦removed: {what}; reason=context_compaction⟧")
}

/// The placeholder for cleared tool arguments. It is a JSON string, so the
/// arguments stay valid JSON for providers that parse them.
pub(crate) fn input_placeholder(name: &str, call_id: &str) -> String {
    serde_json::Value::String(format!(
        "⟦removed: tool input for {name} (call_id={call_id}); reason=context_compaction⟧"
    ))
    .to_string()
}

/// Tool names by call id, from every call in the history.
pub(crate) fn call_names(messages: &[Message]) -> HashMap<String, String> {
    messages
        .iter()
        .flat_map(|m| m.kind().calls.iter())
        .map(|c| (c.call_id.clone(), c.name.clone()))
        .collect()
}

/// The tool name of the result answering `call_id`, falling back to `tool`.
fn name_of<'a>(m: &'a Message, call_id: &str, names: &'a HashMap<String, String>) -> &'a str {
    m.kind()
        .result_name
        .as_deref()
        .or_else(|| names.get(call_id).map(String::as_str))
        .unwrap_or("tool")
}

/// What every truncation marker starts with; the invariant checks look for it.
const MARKER_START: &str = "\n⟦truncated: ";
/// What the full marker says after the call it names.
const FULL_MARKER_REASON: &str = "; reason=tool_result_budget";
/// What comes before a marker's recall id.
const RECALL_SEP: &str = " — recall ";

/// The end of a marker: its recall id when it has one, then `⟧` and a
/// newline.
fn marker_end(rid: Option<&str>) -> String {
    match rid {
        Some(rid) => format!("{RECALL_SEP}{rid}⟧\n"),
        None => "⟧\n".to_owned(),
    }
}

/// The full marker: the counts, the call and, with recall on, the recall id
/// of the original output (whose middle the agent can get back).
fn full_marker(
    removed: usize,
    total: usize,
    name: &str,
    call_id: &str,
    rid: Option<&str>,
) -> String {
    format!(
        "{MARKER_START}{removed} of {total} chars removed from tool output for {name} (call_id={call_id}){FULL_MARKER_REASON}{}",
        marker_end(rid)
    )
}

/// The minimal marker, for caps too small for the full one: the counts
/// (and the recall id when it fits).
fn short_marker(removed: usize, total: usize, rid: Option<&str>) -> String {
    format!(
        "{MARKER_START}{removed} of {total} chars{}",
        marker_end(rid)
    )
}

/// An output `cap_text` already cut: the original's head and tail it kept,
/// the original's size in characters and the recall id its marker carries.
struct Capped<'a> {
    head: &'a str,
    tail: &'a str,
    total: usize,
    rid: Option<&'a str>,
}

/// The end of a marker at the start of `rest`: the recall id it carries
/// and the text after it.
fn parse_marker_end(rest: &str) -> Option<(Option<&str>, &str)> {
    if let Some(tail) = rest.strip_prefix("⟧\n") {
        return Some((None, tail));
    }
    let rest = rest.strip_prefix(RECALL_SEP)?;
    let (rid, tail) = rest.split_once("⟧\n")?;
    crate::recall::is_recall_id(rid).then_some((Some(rid), tail))
}

/// Finds our marker in `text`. Only a marker whose counts agree with the
/// text around it is ours (tool output may contain look-alikes):
/// `removed + head + tail == total`.
fn parse_capped(text: &str) -> Option<Capped<'_>> {
    text.match_indices(MARKER_START).find_map(|(at, _)| {
        let rest = &text[at + MARKER_START.len()..];
        let digits = |s: &str| s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let n = digits(rest);
        let removed: usize = rest[..n].parse().ok()?;
        let rest = rest[n..].strip_prefix(" of ")?;
        let n = digits(rest);
        let total: usize = rest[..n].parse().ok()?;
        let rest = rest[n..].strip_prefix(" chars")?;
        let (rid, tail) = match parse_marker_end(rest) {
            Some(end) => end,
            None => {
                // The name and call id are free text: the first reason
                // followed by a well-formed end is the marker's.
                let rest = rest.strip_prefix(" removed from tool output for ")?;
                rest.match_indices(FULL_MARKER_REASON)
                    .find_map(|(i, r)| parse_marker_end(&rest[i + r.len()..]))?
            }
        };
        let head = &text[..at];
        let kept = head.chars().count() + tail.chars().count();
        (kept.checked_add(removed)? == total).then_some(Capped {
            head,
            tail,
            total,
            rid,
        })
    })
}

/// The recall id the cap marker in `text` carries: `text` is an output
/// capped at an earlier compaction (with recall on), and the id is the
/// original's, which was indexed then.
pub(crate) fn capped_recall_id(text: &str) -> Option<&str> {
    parse_capped(text).and_then(|c| c.rid)
}

/// The first `n` characters of `s`.
fn first_chars(s: &str, n: usize) -> &str {
    &s[..s.char_indices().nth(n).map_or(s.len(), |(i, _)| i)]
}

/// The last `n` characters of `s`.
fn last_chars(s: &str, n: usize) -> &str {
    let len = s.chars().count();
    &s[s.char_indices()
        .nth(len.saturating_sub(n))
        .map_or(s.len(), |(i, _)| i)..]
}

/// Cuts `text` to about `max_chars` characters, keeping the head and the tail
/// (errors and totals tend to sit at the end of logs) and marking the cut
/// with the original size. Returns `None` when the text already fits, or
/// when no cut would make it shorter.
///
/// The result is shorter than `text` and at most `max_chars` characters,
/// or, when `max_chars` cannot hold even the minimal marker, exactly that
/// marker. An output this function cut before is cut again from the head
/// and tail it kept, and its marker keeps the original size; capping twice
/// at the same size is a no-op.
pub fn cap_text(text: &str, max_chars: usize, name: &str, call_id: &str) -> Option<String> {
    cap_text_with_recall(text, max_chars, name, call_id, None)
}

/// [`cap_text`] whose marker ends with `rid`, the recall id of the original
/// output (`… reason=tool_result_budget — recall r7kq2m4x⟧`), so the agent
/// can get the middle back. An output capped before keeps the id its marker
/// carries when `rid` is `None`. The id goes in the short marker only when
/// the full one does not fit and the short one with the id does; below
/// that, the marker has no id.
pub fn cap_text_with_recall(
    text: &str,
    max_chars: usize,
    name: &str,
    call_id: &str,
    rid: Option<&str>,
) -> Option<String> {
    let len = text.chars().count();
    if len <= max_chars {
        return None;
    }
    let (
        Capped {
            head,
            tail,
            total,
            rid: had,
        },
        fresh,
    ) = match parse_capped(text) {
        Some(capped) => (capped, false),
        None => (
            Capped {
                head: text,
                tail: text,
                total: len,
                rid: None,
            },
            true,
        ),
    };
    let rid = rid.or(had);
    // Sized for `removed == total`, the most digits it can have, so the
    // marker actually written is never longer. The largest that fits:
    // full, short with the id, short.
    let full = full_marker(total, total, name, call_id, rid)
        .chars()
        .count();
    let short_rid = short_marker(total, total, rid).chars().count();
    let (marker_len, use_full, rid) = if full <= max_chars {
        (full, true, rid)
    } else if short_rid <= max_chars {
        (short_rid, false, rid)
    } else {
        (
            short_marker(total, total, None).chars().count(),
            false,
            None,
        )
    };
    let keep = max_chars.saturating_sub(marker_len);
    let (head_avail, tail_avail) = if fresh {
        (len, len)
    } else {
        (head.chars().count(), tail.chars().count())
    };
    // Three fifths to the head, as far as what is available allows.
    let mut head_chars = (keep * 3 / 5).min(head_avail);
    let tail_chars = (keep - head_chars).min(tail_avail);
    head_chars = (keep - tail_chars).min(head_avail);
    if fresh {
        // One text: head and tail must not overlap, and something must go.
        head_chars = head_chars.min(len.saturating_sub(tail_chars + 1));
    }
    let removed = total - head_chars - tail_chars;
    let marker = if use_full {
        full_marker(removed, total, name, call_id, rid)
    } else {
        short_marker(removed, total, rid)
    };
    let out = format!(
        "{}{marker}{}",
        first_chars(head, head_chars),
        last_chars(tail, tail_chars)
    );
    (out.chars().count() < len).then_some(out)
}

/// Tier 1: caps every tool output in `indices` longer than `max_chars` (each result of
/// a message that answers several calls on its own). Returns the indices it changed.
///
/// `recall_id(i, call_id)` is the recall id of the output as received, when
/// recall is on: the marker then carries it (the id the placeholder that
/// clears the output later shows too).
pub(crate) fn cap_tool_results(
    messages: &mut [Message],
    indices: impl IntoIterator<Item = usize>,
    max_chars: usize,
    names: &HashMap<String, String>,
    recall_id: Option<RecallIdOf<'_>>,
) -> Vec<usize> {
    let mut changed = Vec::new();
    for i in indices {
        let m = &messages[i];
        if m.kind().item != ItemType::ToolResult {
            continue;
        }
        let capped: Vec<(String, String)> = m
            .tool_outputs()
            .into_iter()
            .filter_map(|(id, out)| {
                // Hashed only for an output that may be cut (bytes bound
                // characters).
                let rid = recall_id
                    .filter(|_| out.len() > max_chars)
                    .and_then(|f| f(i, id));
                cap_text_with_recall(&out, max_chars, name_of(m, id, names), id, rid.as_deref())
                    .map(|c| (id.to_string(), c))
            })
            .collect();
        if capped.is_empty() {
            continue;
        }
        let m = &mut messages[i];
        for (id, text) in capped {
            m.set_tool_output_for(&id, text);
        }
        m.set_compacted();
        changed.push(i);
    }
    changed
}

/// Which tools tier 2 may clear: `include_tools` wins when non-empty.
#[derive(Debug, Clone, Default)]
pub(crate) struct ToolFilter {
    /// `include_tools`: if non-empty, only these tools are cleared.
    pub include: Vec<String>,
    /// `exclude_tools`: tools never cleared (ignored when `include` is set).
    pub exclude: Vec<String>,
}

impl ToolFilter {
    /// Whether tier 2 may clear the I/O of tool `name`.
    pub(crate) fn allows(&self, name: &str) -> bool {
        if !self.include.is_empty() {
            self.include.iter().any(|t| t == name)
        } else {
            !self.exclude.iter().any(|t| t == name)
        }
    }
}

/// Tier 2: replaces the outputs (and with `clear_inputs`, the arguments) of
/// the tool I/O in `indices` with placeholders, and the attachments (Anthropic image
/// and document blocks) of the messages there. Returns the indices changed.
///
/// `recall_id(i, call_id)` is the recall id of the output answering
/// `call_id` in message `i` as received, when recall is on: the placeholder
/// then carries it, and an output that already is a placeholder of that
/// call stays as it is (its id was computed from the original).
pub(crate) fn clear_tool_io(
    messages: &mut [Message],
    indices: impl IntoIterator<Item = usize>,
    clear_inputs: bool,
    filter: &ToolFilter,
    names: &HashMap<String, String>,
    recall_id: Option<RecallIdOf<'_>>,
) -> Vec<usize> {
    let mut changed = Vec::new();
    for i in indices {
        let m = &messages[i];
        let mut did = false;
        if m.kind().item == ItemType::ToolResult {
            let cleared: Vec<(String, String)> = m
                .tool_outputs()
                .into_iter()
                .filter_map(|(id, out)| {
                    let name = name_of(m, id, names);
                    if !filter.allows(name) {
                        return None;
                    }
                    let placeholder = match recall_id {
                        None => output_placeholder(name, id),
                        Some(_) if is_output_placeholder(&out, name, id) => return None,
                        Some(rid) => match rid(i, id) {
                            Some(rid) => recallable_placeholder(name, id, &rid),
                            None => output_placeholder(name, id),
                        },
                    };
                    (out != placeholder).then(|| (id.to_string(), placeholder))
                })
                .collect();
            for (id, text) in cleared {
                did |= messages[i].set_tool_output_for(&id, text);
            }
        }
        if clear_inputs {
            let cleared = messages[i].set_tool_arguments(|c| {
                filter
                    .allows(&c.name)
                    .then(|| input_placeholder(&c.name, &c.call_id))
            });
            did |= cleared > 0;
        }
        did |= messages[i].clear_attachments(attachment_placeholder) > 0;
        if did {
            messages[i].set_compacted();
            changed.push(i);
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    const RID: &str = "rabcdefgh";

    fn text(n: usize) -> String {
        (0..n).map(|i| format!("line {i}\n")).collect()
    }

    #[test]
    fn the_marker_carries_the_recall_id_and_a_recap_keeps_it() {
        let t = text(2_000);
        let once = cap_text_with_recall(&t, 2_000, "read_file", "c1", Some(RID)).unwrap();
        assert!(
            once.contains("reason=tool_result_budget — recall rabcdefgh⟧\n"),
            "{once}"
        );
        assert!(once.chars().count() <= 2_000);
        assert_eq!(capped_recall_id(&once), Some(RID));
        // Capped again (smaller), with or without the id given: the same id.
        for rid in [None, Some(RID)] {
            let twice = cap_text_with_recall(&once, 500, "read_file", "c1", rid).unwrap();
            assert_eq!(capped_recall_id(&twice), Some(RID), "{twice}");
            assert!(twice.starts_with("line 0\n") && twice.ends_with("line 1999\n"));
            // Idempotent at the same size.
            assert_eq!(
                cap_text_with_recall(&twice, 500, "read_file", "c1", rid),
                None
            );
        }
        // Without recall the marker is as before, and holds no id.
        let plain = cap_text(&t, 2_000, "read_file", "c1").unwrap();
        assert!(plain.contains("reason=tool_result_budget⟧\n"));
        assert_eq!(capped_recall_id(&plain), None);
    }

    #[test]
    fn a_small_cap_keeps_the_id_in_the_short_marker_until_it_no_longer_fits() {
        let t = text(400);
        let full_len = full_marker(
            t.chars().count(),
            t.chars().count(),
            "read_file",
            "c1",
            Some(RID),
        )
        .chars()
        .count();
        let short = cap_text_with_recall(&t, full_len - 1, "read_file", "c1", Some(RID)).unwrap();
        assert!(short.contains(" chars — recall rabcdefgh⟧\n"), "{short}");
        assert_eq!(capped_recall_id(&short), Some(RID));
        let tiny = cap_text_with_recall(&t, 30, "read_file", "c1", Some(RID)).unwrap();
        assert!(!tiny.contains("recall"), "{tiny}");
    }

    #[test]
    fn look_alike_markers_carry_no_id() {
        // Counts that do not add up, or an id of the wrong shape.
        assert_eq!(
            capped_recall_id("a\n⟦truncated: 5 of 9 chars — recall rabcdefgh⟧\nb"),
            None
        );
        assert_eq!(
            capped_recall_id("a\n⟦truncated: 7 of 9 chars — recall r1234567l⟧\nb"),
            None
        );
        assert_eq!(
            capped_recall_id("a\n⟦truncated: 7 of 9 chars — recall rabcdefgh⟧\nb"),
            Some(RID)
        );
        // A name that holds the reason text: the first well-formed end wins.
        let m = "a\n⟦truncated: 7 of 9 chars removed from tool output for x; reason=tool_result_budget y (call_id=c); reason=tool_result_budget — recall rabcdefgh⟧\nb";
        assert_eq!(capped_recall_id(m), Some(RID));
    }
}
