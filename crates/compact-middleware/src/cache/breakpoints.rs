//! Where compact puts Anthropic `cache_control` breakpoints
//! (`policy.cache_breakpoints: auto`, docs/design.md §5).
//!
//! Anthropic serves a request from its cache up to a breakpoint that an
//! earlier request wrote (`super`'s rule), so a breakpoint belongs where the
//! request stops changing: after the layers that stay the same from call to
//! call, and at the end of the history, which the next call extends. In
//! order of what each saves:
//!
//! 1. [`Layer::End`], the last message: the next call reads this whole
//!    request.
//! 2. [`Layer::Head`], the end of the stable head (the pinned messages, the
//!    task, the rolling summary and the bridge after it): unchanged until
//!    the next summary, so a compaction that only clears tool output still
//!    reads it.
//! 3. [`Layer::Instructions`], the end of the leading system and developer
//!    messages: tools and system prompt, the same for every session of an
//!    agent and across summaries.
//! 4. [`Layer::PreviousEnd`], the end of the previous request when this one
//!    continues it: read even when more than 20 blocks were added since
//!    (parallel tool calls), beyond the reach of Anthropic's lookback.
//!
//! The caller's own breakpoints stay and count: with them, ours fill the
//! provider's limit of four and no more; none goes where the caller has
//! one, nor before a 1-hour breakpoint of the caller's (Anthropic wants
//! longer lifetimes first), nor on a message that cannot carry one
//! ([`Message::can_carry_cache_breakpoint`]: never a thinking block, never an
//! empty text). Placement is a function of the messages alone, so two calls
//! that share a head mark it the same bytes.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::Policy;
use crate::model::{BreakpointMark, Message, Role, cache_control_ttl};
use crate::price::Ttl;

/// Anthropic refuses a request with more `cache_control` breakpoints than this.
pub const ANTHROPIC_MAX_BREAKPOINTS: usize = 4;

/// Which layer of the request a breakpoint of ours closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// The last message.
    End,
    /// The last message of the stable head: pinned messages, the task, the
    /// rolling summary.
    Head,
    /// The last of the leading system and developer messages.
    Instructions,
    /// The last message of the previous request, which this one continues.
    PreviousEnd,
}

/// The layers in the order breakpoints go to them.
const PRIORITY: [Layer; 4] = [
    Layer::End,
    Layer::Head,
    Layer::Instructions,
    Layer::PreviousEnd,
];

/// The breakpoints a request already carries: the caller's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Existing {
    /// Every marker: in the tool definitions, at the top level, on messages.
    pub count: usize,
    /// The messages that carry one.
    pub at: Vec<usize>,
    /// Ours go at or after this message: the last one whose marker asks for
    /// the 1-hour lifetime (0 when none does).
    pub floor: usize,
    /// Ours may ask for the 1-hour lifetime only on messages before this
    /// one: the first that carries a 5-minute marker of the caller's (0 when
    /// a tool definition carries one, `usize::MAX` when none does).
    pub long_before: usize,
}

impl Default for Existing {
    fn default() -> Self {
        Self {
            count: 0,
            at: Vec::new(),
            floor: 0,
            long_before: usize::MAX,
        }
    }
}

impl Existing {
    /// The markers of `messages` and `tools` (a top-level `cache_control`
    /// is the caller's to add: [`Existing::count`]).
    pub fn of(messages: &[Message], tools: &[Value]) -> Self {
        let marked: Vec<&Value> = tools
            .iter()
            .filter_map(|t| t.get("cache_control").filter(|c| !c.is_null()))
            .collect();
        let mut e = Existing {
            count: marked.len(),
            ..Existing::default()
        };
        if marked
            .iter()
            .any(|c| cache_control_ttl(c) == Ttl::FiveMinutes)
        {
            e.long_before = 0;
        }
        for (i, m) in messages.iter().enumerate() {
            let markers = m.cache_markers();
            if markers.count > 0 {
                e.count += markers.count;
                e.at.push(i);
            }
            if markers.one_hour {
                e.floor = i;
            }
            if markers.five_minutes {
                e.long_before = e.long_before.min(i);
            }
        }
        e
    }
}

/// A request as the planner sees it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The messages, the system prompt first when there is one.
    pub messages: &'a [Message],
    /// The caller's breakpoints.
    pub existing: &'a Existing,
    /// Where our rolling summary is.
    pub summary_index: Option<usize>,
    /// The last message of the previous request, when this request starts
    /// with that whole request.
    pub previous_end: Option<usize>,
}

/// The last message of the stable head: the leading run of pinned messages,
/// the task (with `policy.keep_task`), the summary and bridges.
fn head_end(r: &Request<'_>, policy: &Policy) -> Option<usize> {
    let mut end = None;
    let mut task_seen = false;
    for (i, m) in r.messages.iter().enumerate() {
        let stable = if Some(i) == r.summary_index || m.is_bridge() || policy.pins(m) {
            true
        } else if policy.keep_task && !task_seen && m.starts_turn() {
            task_seen = true;
            true
        } else {
            false
        };
        if !stable {
            break;
        }
        end = Some(i);
    }
    end
}

/// The last of the leading system and developer messages.
fn instructions_end(messages: &[Message]) -> Option<usize> {
    messages
        .iter()
        .take_while(|m| matches!(m.role(), Role::System | Role::Developer))
        .count()
        .checked_sub(1)
}

/// A breakpoint [`plan`] chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Planned {
    /// The message.
    pub index: usize,
    /// The layer it closes.
    pub layer: Layer,
    /// Its lifetime: `policy.cache_ttl`, but 5 minutes at or after a
    /// 5-minute marker of the caller's ([`Existing::long_before`]).
    pub ttl: Ttl,
}

/// Where compact adds breakpoints to `r`, by message. `eligible` says which
/// messages can carry one (for Anthropic messages,
/// [`Message::can_carry_cache_breakpoint`]); a layer whose last message
/// cannot carry one takes the nearest one before it that can.
pub fn plan(r: &Request<'_>, policy: &Policy, eligible: &dyn Fn(&Message) -> bool) -> Vec<Planned> {
    let ttl = policy.cache_ttl.ttl();
    plan_layers(r, policy, eligible)
        .into_iter()
        .map(|(index, layer)| Planned {
            index,
            layer,
            ttl: if index < r.existing.long_before {
                ttl
            } else {
                Ttl::FiveMinutes
            },
        })
        .collect()
}

fn plan_layers(
    r: &Request<'_>,
    policy: &Policy,
    eligible: &dyn Fn(&Message) -> bool,
) -> Vec<(usize, Layer)> {
    let room = ANTHROPIC_MAX_BREAKPOINTS.saturating_sub(r.existing.count);
    let n = r.messages.len();
    if room == 0 || n == 0 {
        return Vec::new();
    }
    let floor = r.existing.floor;
    let carrier = |from: usize| {
        (floor..=from.min(n - 1))
            .rev()
            .find(|&i| eligible(&r.messages[i]))
    };
    let mut out: Vec<(usize, Layer)> = Vec::with_capacity(room);
    for layer in PRIORITY {
        if out.len() == room {
            break;
        }
        let end = match layer {
            Layer::End => Some(n - 1),
            Layer::Head => head_end(r, policy),
            Layer::Instructions => instructions_end(r.messages),
            Layer::PreviousEnd => r.previous_end.filter(|&p| p + 1 < n),
        };
        // The layer's own last message has the caller's breakpoint: theirs
        // serves it.
        let Some(end) = end.filter(|e| !r.existing.at.contains(e)) else {
            continue;
        };
        if let Some(i) = carrier(end)
            && !r.existing.at.contains(&i)
            && !out.iter().any(|&(j, _)| j == i)
        {
            out.push((i, layer));
        }
    }
    out.sort_unstable_by_key(|&(i, _)| i);
    out
}

/// A breakpoint compact placed (`Report::cache_breakpoints`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placed {
    /// The message, in the returned history (the system prompt first).
    pub index: usize,
    /// The layer it closes.
    pub layer: Layer,
    /// Where on the message, to take it away again.
    #[serde(flatten)]
    pub mark: BreakpointMark,
    /// It asks for the 1-hour lifetime (`"ttl": "1h"`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub one_hour: bool,
}

/// Marks `messages` where [`plan`] says; returns what was placed.
pub fn place(messages: &mut [Message], planned: &[Planned]) -> Vec<Placed> {
    planned
        .iter()
        .filter_map(|p| {
            let mark = messages.get_mut(p.index)?.add_cache_breakpoint_for(p.ttl)?;
            Some(Placed {
                index: p.index,
                layer: p.layer,
                mark,
                one_hour: p.ttl == Ttl::OneHour,
            })
        })
        .collect()
}

/// Takes ours away, the least useful first, until the request has at most
/// [`ANTHROPIC_MAX_BREAKPOINTS`] with `outside` more that compact did not see
/// (a top-level `cache_control`, which Anthropic counts as one). `total` is
/// every marker the request carries now, ours included. Returns how many
/// were taken away.
pub fn make_room(
    messages: &mut [Message],
    placed: &mut Vec<Placed>,
    total: usize,
    outside: usize,
) -> usize {
    let mut over = (total + outside).saturating_sub(ANTHROPIC_MAX_BREAKPOINTS);
    let mut removed = 0;
    for layer in PRIORITY.iter().rev() {
        while over > 0 {
            let Some(k) = placed.iter().position(|p| p.layer == *layer) else {
                break;
            };
            let p = placed.remove(k);
            if let Some(m) = messages.get_mut(p.index) {
                m.remove_cache_breakpoint(p.mark);
            }
            over -= 1;
            removed += 1;
        }
    }
    removed
}

/// [`make_room`] for the request as the caller sent it (`request`, whose
/// envelope the core did not see): its tool definitions' breakpoints (which
/// count only when the tools were passed to the preflight) and a top-level
/// `cache_control` (Anthropic's automatic caching, which takes one of the
/// four) are counted, and ours on `messages` give way until the whole
/// request has at most four. Returns how many were taken away.
pub fn fit_request(
    request: &crate::model::Request,
    messages: &mut [Message],
    placed: &mut Vec<Placed>,
) -> usize {
    if placed.is_empty() {
        return 0;
    }
    let top_level = request
        .envelope_field("cache_control")
        .filter(|c| !c.is_null());
    let tools = match request.envelope_field("tools") {
        Some(Value::Array(t)) => t.as_slice(),
        _ => &[],
    };
    let existing = Existing::of(messages, tools);
    // A top-level 5-minute marker lands on the last block: a 1-hour one of
    // ours there would come after it.
    let long_before = match top_level {
        Some(c) if cache_control_ttl(c) == Ttl::FiveMinutes => {
            existing.long_before.min(messages.len().saturating_sub(1))
        }
        _ => existing.long_before,
    };
    shorten_after(messages, placed, long_before);
    make_room(
        messages,
        placed,
        existing.count,
        usize::from(top_level.is_some()),
    )
}

/// Ours that ask for an hour at or after `long_before` become 5-minute
/// ones, on the same block.
fn shorten_after(messages: &mut [Message], placed: &mut Vec<Placed>, long_before: usize) {
    placed.retain_mut(|p| {
        if !p.one_hour || p.index < long_before {
            return true;
        }
        let Some(m) = messages.get_mut(p.index) else {
            return false;
        };
        if !m.remove_cache_breakpoint(p.mark) {
            // Not ours any more: nothing of ours to shorten.
            return false;
        }
        match m.add_cache_breakpoint_for(Ttl::FiveMinutes) {
            Some(mark) => {
                p.mark = mark;
                p.one_hour = false;
                true
            }
            None => false,
        }
    });
}

/// `messages` without the breakpoints of `placed`: the history as
/// compaction left it (what the invariants of docs/design.md §12 are about).
pub fn without(messages: &[Message], placed: &[Placed]) -> Vec<Message> {
    let mut out = messages.to_vec();
    for p in placed {
        if let Some(m) = out.get_mut(p.index) {
            m.remove_cache_breakpoint(p.mark);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Format, Request as Wire};
    use serde_json::json;

    fn decode(v: Value) -> Wire {
        match Wire::from_value(v, Format::Anthropic) {
            Ok(r) => r,
            Err(e) => panic!("a valid request: {e}"),
        }
    }

    /// The body as sent: the request with `messages` planned and marked.
    fn send(wire: &Wire, previous_end: Option<usize>) -> (Value, Vec<Placed>) {
        send_with(wire, previous_end, &Policy::default())
    }

    fn send_with(
        wire: &Wire,
        previous_end: Option<usize>,
        policy: &Policy,
    ) -> (Value, Vec<Placed>) {
        let existing = Existing::of(&wire.messages, &wire.tools);
        let r = Request {
            messages: &wire.messages,
            existing: &existing,
            summary_index: None,
            previous_end,
        };
        let planned = plan(&r, policy, &Message::can_carry_cache_breakpoint);
        let mut sent = wire.messages.clone();
        let mut placed = place(&mut sent, &planned);
        fit_request(wire, &mut sent, &mut placed);
        (wire.to_value(&sent, true), placed)
    }

    /// What one breakpoint of the default lifetime reads as.
    const FIVE_MINUTE_MARKER: crate::model::Markers = crate::model::Markers {
        count: 1,
        one_hour: false,
        five_minutes: true,
    };

    fn one_hour() -> Policy {
        Policy {
            cache_ttl: crate::config::CacheTtl::OneHour,
            ..Policy::default()
        }
    }

    /// The lifetimes of a body's markers, in the order Anthropic reads
    /// them (tools, system, messages).
    fn lifetimes(body: &Value) -> Vec<&'static str> {
        all_markers(body)
            .iter()
            .map(|(_, c)| match c.get("ttl").and_then(Value::as_str) {
                Some("1h") => "1h",
                _ => "5m",
            })
            .collect()
    }

    #[test]
    fn with_cache_ttl_1h_ours_ask_for_an_hour_and_never_follow_a_shorter_one() {
        let hour = json!({"type": "ephemeral", "ttl": "1h"});
        // None of the caller's: all of ours live an hour.
        let wire = decode(agent_loop(3));
        let (body, placed) = send_with(&wire, None, &one_hour());
        assert_eq!(placed.len(), 3);
        assert!(placed.iter().all(|p| p.one_hour), "{placed:?}");
        assert_eq!(body["messages"][6]["content"][0]["cache_control"], hour);
        assert_eq!(lifetimes(&body), ["1h", "1h", "1h"]);
        // Taken away, the body is the caller's again, byte for byte.
        let mut sent = wire.messages.clone();
        let placed = place(
            &mut sent,
            &plan(
                &Request {
                    messages: &wire.messages,
                    existing: &Existing::of(&wire.messages, &wire.tools),
                    summary_index: None,
                    previous_end: None,
                },
                &one_hour(),
                &Message::can_carry_cache_breakpoint,
            ),
        );
        assert_eq!(wire.to_value(&without(&sent, &placed), true), agent_loop(3));
        // A 5-minute one of the caller's in the middle: ours before it live
        // an hour, ours after it five minutes.
        let mut v = agent_loop(3);
        v["messages"][2]["content"][0]["cache_control"] = json!({"type": "ephemeral"});
        let (body, placed) = send_with(&decode(v), None, &one_hour());
        let by_index: Vec<(usize, bool)> = placed.iter().map(|p| (p.index, p.one_hour)).collect();
        assert_eq!(by_index, vec![(0, true), (1, true), (7, false)]);
        assert_eq!(lifetimes(&body), ["1h", "1h", "5m", "5m"]);
        // A 5-minute one on a tool definition comes before every message:
        // all of ours are 5-minute ones.
        let mut v = agent_loop(3);
        v["tools"][0]["cache_control"] = json!({"type": "ephemeral"});
        let (body, placed) = send_with(&decode(v), None, &one_hour());
        assert!(placed.iter().all(|p| !p.one_hour), "{placed:?}");
        assert_eq!(lifetimes(&body), ["5m", "5m", "5m", "5m"]);
        // The caller's own 1-hour ones do not hold ours back.
        let mut v = agent_loop(3);
        v["tools"][0]["cache_control"] = hour.clone();
        let (body, _) = send_with(&decode(v), None, &one_hour());
        assert_eq!(lifetimes(&body), ["1h", "1h", "1h", "1h"]);
    }

    #[test]
    fn a_top_level_five_minute_marker_shortens_ours_on_the_last_message() {
        let mut v = agent_loop(3);
        v["cache_control"] = json!({"type": "ephemeral"});
        let (body, placed) = send_with(&decode(v.clone()), None, &one_hour());
        let by_index: Vec<(usize, bool)> = placed.iter().map(|p| (p.index, p.one_hour)).collect();
        assert_eq!(by_index, vec![(0, true), (1, true), (7, false)]);
        assert_eq!(
            body["messages"][6]["content"][0]["cache_control"],
            json!({"type": "ephemeral"})
        );
        // A top-level 1-hour one does not.
        v["cache_control"] = json!({"type": "ephemeral", "ttl": "1h"});
        let (_, placed) = send_with(&decode(v), None, &one_hour());
        assert!(placed.iter().all(|p| p.one_hour), "{placed:?}");
    }

    /// Every `cache_control` of a body: (path, value).
    fn markers(v: &Value, path: &str, out: &mut Vec<(String, Value)>) {
        match v {
            Value::Object(o) => {
                for (k, x) in o {
                    if k == "cache_control" {
                        out.push((path.to_string(), x.clone()));
                    } else {
                        markers(x, &format!("{path}.{k}"), out);
                    }
                }
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    markers(x, &format!("{path}[{i}]"), out);
                }
            }
            _ => {}
        }
    }

    fn all_markers(v: &Value) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        markers(v, "$", &mut out);
        out
    }

    fn agent_loop(rounds: usize) -> Value {
        let mut messages =
            vec![json!({"role": "user", "content": "Fix the failing test in parser.rs."})];
        for i in 0..rounds {
            messages.push(json!({"role": "assistant", "content": [
                {"type": "text", "text": format!("Step {i}.")},
                {"type": "tool_use", "id": format!("t{i}"), "name": "shell", "input": {"cmd": format!("cargo test {i}")}}]}));
            messages.push(json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": format!("t{i}"), "content": format!("output {i}")}]}));
        }
        json!({"model": "claude-sonnet-4-5", "max_tokens": 512,
            "system": "You are a careful coding agent.",
            "tools": [{"name": "shell", "input_schema": {"type": "object"}}],
            "messages": messages})
    }

    #[test]
    fn breakpoints_close_the_instructions_the_head_and_the_end() {
        let wire = decode(agent_loop(3));
        let (body, placed) = send(&wire, None);
        let layers: Vec<(usize, Layer)> = placed.iter().map(|p| (p.index, p.layer)).collect();
        // The system prompt, the task (kept like a pinned message), the last message.
        assert_eq!(
            layers,
            vec![(0, Layer::Instructions), (1, Layer::Head), (7, Layer::End)]
        );
        let eph = json!({"type": "ephemeral"});
        assert_eq!(
            body["system"],
            json!([{"type": "text", "text": "You are a careful coding agent.", "cache_control": eph}])
        );
        assert_eq!(
            body["messages"][0]["content"],
            json!([{"type": "text", "text": "Fix the failing test in parser.rs.", "cache_control": eph}])
        );
        assert_eq!(body["messages"][6]["content"][0]["cache_control"], eph);
        assert_eq!(all_markers(&body).len(), 3);
        // The rest went out as it came.
        let mut plain = body.clone();
        plain["system"] = json!("You are a careful coding agent.");
        plain["messages"][0]["content"] = json!("Fix the failing test in parser.rs.");
        if let Some(b) = plain["messages"][6]["content"][0].as_object_mut() {
            b.remove("cache_control");
        }
        assert_eq!(plain, agent_loop(3));
    }

    #[test]
    fn the_callers_breakpoints_stay_and_the_total_is_at_most_four() {
        let eph = json!({"type": "ephemeral"});
        // Three of the caller's: a tool, the system prompt, a middle message.
        let mut v = agent_loop(3);
        v["tools"][0]["cache_control"] = eph.clone();
        v["system"] = json!([{"type": "text", "text": "Be careful.", "cache_control": {"type": "ephemeral"}}]);
        v["messages"][2]["content"][0]["cache_control"] = eph.clone();
        let caller = all_markers(&v);
        let (body, placed) = send(&decode(v), None);
        assert_eq!(placed.len(), 1, "{placed:?}");
        assert_eq!(placed[0].layer, Layer::End);
        let after = all_markers(&body);
        assert_eq!(after.len(), 4);
        for m in &caller {
            assert!(after.contains(m), "the caller's {m:?} went away");
        }
        // Four already: nothing is added, not a byte changes.
        let mut v = agent_loop(3);
        for i in [2, 4, 6] {
            v["messages"][i]["content"][0]["cache_control"] = eph.clone();
        }
        v["tools"][0]["cache_control"] = eph;
        let (body, placed) = send(&decode(v.clone()), None);
        assert!(placed.is_empty());
        assert_eq!(body, v);
        // A breakpoint of the caller's where ours would go serves for ours.
        let mut v = agent_loop(3);
        v["messages"][6]["content"][0]["cache_control"] = json!({"type": "ephemeral"});
        let (body, placed) = send(&decode(v), None);
        assert!(placed.iter().all(|p| p.layer != Layer::End), "{placed:?}");
        assert_eq!(all_markers(&body).len(), 3);
    }

    #[test]
    fn never_on_a_thinking_block_nor_an_empty_text() {
        let v = json!({"system": "S", "messages": [
            {"role": "user", "content": "Task."},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "tool_use", "id": "t1", "name": "shell", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
                {"type": "text", "text": ""}]},
            {"role": "assistant", "content": [{"type": "redacted_thinking", "data": "x"}]},
            {"role": "user", "content": ""}]});
        let wire = decode(v.clone());
        let (body, placed) = send(&wire, None);
        // The end falls back past the empty message, the signed one, the one
        // ending in an empty text and the other signed one, to the task.
        assert_eq!(
            placed
                .iter()
                .map(|p| (p.index, p.layer))
                .collect::<Vec<_>>(),
            vec![(0, Layer::Instructions), (1, Layer::End)]
        );
        for i in 1..4 {
            assert_eq!(body["messages"][i], v["messages"][i], "message {i} changed");
        }
        assert_eq!(body["messages"][4], v["messages"][4]);
        for m in &wire.messages[1..] {
            let mut m = m.clone();
            let signed = m.has_signed_blocks();
            if signed || m.raw()["content"].as_str() == Some("") {
                assert!(m.add_cache_breakpoint().is_none());
            }
        }
    }

    #[test]
    fn a_marker_comes_off_byte_for_byte() {
        let wire = decode(agent_loop(1));
        for m in &wire.messages {
            let mut marked = m.clone();
            let Some(mark) = marked.add_cache_breakpoint() else {
                panic!("every message here can carry one")
            };
            assert_ne!(marked.content_hash(), m.content_hash());
            assert_eq!(marked.cache_markers(), FIVE_MINUTE_MARKER);
            // A second one does not go on the same block.
            assert!(marked.clone().add_cache_breakpoint().is_none());
            assert!(marked.remove_cache_breakpoint(mark));
            assert_eq!(marked.to_value().to_string(), m.to_value().to_string());
            assert_eq!(marked.content_hash(), m.content_hash());
            assert!(!marked.remove_cache_breakpoint(mark), "already off");
        }
        // A plain text message of ours (a summary, a bridge) can, as it
        // fits the Anthropic wire; other chat messages and items cannot.
        let mut ours = Message::user("COMPACT-SUMMARY v1");
        let Some(mark) = ours.add_cache_breakpoint() else {
            panic!("a plain text message can carry one")
        };
        assert_eq!(ours.cache_markers(), FIVE_MINUTE_MARKER);
        assert!(ours.remove_cache_breakpoint(mark));
        assert_eq!(ours, Message::user("COMPACT-SUMMARY v1"));
        let mut system = Message::system("Be brief.");
        assert!(system.add_cache_breakpoint().is_none());
    }

    #[test]
    fn a_one_hour_breakpoint_of_the_callers_comes_before_ours() {
        let mut v = agent_loop(3);
        v["messages"][4]["content"][0]["cache_control"] = json!({"type": "ephemeral", "ttl": "1h"});
        let (_, placed) = send(&decode(v), None);
        // Not on the system prompt nor the task, which come before it.
        assert!(placed.iter().all(|p| p.index >= 5), "{placed:?}");
        assert!(placed.iter().any(|p| p.layer == Layer::End));
    }

    #[test]
    fn two_consecutive_calls_share_their_bytes_up_to_the_first_ones_end() {
        let first = decode(agent_loop(3));
        let second = decode(agent_loop(4));
        let (a, _) = send(&first, None);
        let (b, placed) = send(&second, Some(first.messages.len() - 1));
        assert_eq!(placed.len(), 4, "{placed:?}");
        // The second request starts with the first, byte for byte, its
        // breakpoints included: the system prompt, then every message.
        assert_eq!(a["system"].to_string(), b["system"].to_string());
        let (am, bm) = (a["messages"].as_array(), b["messages"].as_array());
        let (Some(am), Some(bm)) = (am, bm) else {
            panic!("messages")
        };
        for (i, m) in am.iter().enumerate() {
            assert_eq!(m.to_string(), bm[i].to_string(), "message {i}");
        }
        assert_eq!(bm.len(), am.len() + 2);
        assert!(
            bm[bm.len() - 1]["content"][0]
                .get("cache_control")
                .is_some()
        );
    }

    #[test]
    fn a_top_level_cache_control_takes_the_place_of_our_least_useful() {
        let mut v = agent_loop(3);
        v["cache_control"] = json!({"type": "ephemeral"});
        let wire = decode(v);
        let existing = Existing::of(&wire.messages, &wire.tools);
        let planned = plan(
            &Request {
                messages: &wire.messages,
                existing: &existing,
                summary_index: None,
                previous_end: Some(5),
            },
            &Policy::default(),
            &Message::can_carry_cache_breakpoint,
        );
        let mut sent = wire.messages.clone();
        let mut placed = place(&mut sent, &planned);
        assert_eq!(placed.len(), 4);
        assert_eq!(fit_request(&wire, &mut sent, &mut placed), 1);
        assert!(placed.iter().all(|p| p.layer != Layer::PreviousEnd));
        let body = wire.to_value(&sent, true);
        // Three on messages, and the top-level one: four.
        assert_eq!(all_markers(&body).len(), 4);
        // The message that lost its breakpoint is as it came.
        assert_eq!(body["messages"][4], agent_loop(3)["messages"][4]);
    }
}
