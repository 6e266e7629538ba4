//! The single rolling summary message: how it is written and what the
//! summarizer is given.

use crate::model::{ItemType, Message, Role};
use crate::summarize::SummaryEntry;

/// First line of every summary message. The manager recognises its own
/// summaries by content hash, never by this text.
pub const SUMMARY_HEADER: &str = "COMPACT-SUMMARY";

/// The summary message `COMPACT-SUMMARY vN` followed by the body.
pub fn summary_message(role: Role, version: u32, body: &str) -> Message {
    summary_message_with(role, version, body, None)
}

/// The summary message with `footer` as its last line (`recall.advertise`:
/// the recall line), which is not part of the body the summarizer sees.
pub(crate) fn summary_message_with(
    role: Role,
    version: u32,
    body: &str,
    footer: Option<&str>,
) -> Message {
    let mut text = format!("{SUMMARY_HEADER} v{version}");
    for part in [Some(body), footer].into_iter().flatten() {
        if !part.is_empty() {
            text.push('\n');
            text.push_str(part);
        }
    }
    let mut m = Message::text(role, text)
        .with_meta("label", format!("{SUMMARY_HEADER} v{version}"))
        .with_meta("compact_summary_version", version);
    m.set_compacted();
    m
}

/// The summarizer's view of a message: role, tool name, text.
pub(crate) fn entry(m: &Message, tool_name: Option<&str>) -> SummaryEntry {
    let role = match m.kind().item {
        ItemType::Reasoning => "reasoning",
        _ => m.role().as_str(),
    };
    SummaryEntry {
        role: role.to_string(),
        name: tool_name.map(str::to_string),
        text: m.plain_text(),
        input: None,
        part: false,
        step: None,
    }
}
