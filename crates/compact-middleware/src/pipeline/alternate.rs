//! Role alternation in Anthropic histories (`docs/design.md §3`): the first message is
//! the user's and user and assistant messages alternate. Removing messages can put two
//! messages of one role side by side (a kept tool exchange before a kept turn, our user
//! summary before a user message); a *bridge* ([`BRIDGE_TEXT`]) of the other role goes
//! between them. Bridges carry nothing, so the pipeline drops the ones it receives and
//! bridges its own output anew.

use crate::model::{BRIDGE_TEXT, Message, Role, Shape};

/// A bridge in `role`'s voice (user or assistant).
pub(crate) fn bridge(role: Role) -> Message {
    let mut m = Message::text(role, BRIDGE_TEXT).with_meta("label", "COMPACT bridge");
    m.set_compacted();
    m
}

/// The role a message has on the wire (`user`, `assistant`); `None` for the system
/// prompt, which is no message on Anthropic's wire.
fn wire_role(m: &Message) -> Option<&str> {
    if m.kind().shape == Shape::AnthropicSystem || m.role() == Role::System {
        return None;
    }
    m.raw().get("role")?.as_str()
}

/// True when the first message on the wire is the user's.
pub(super) fn starts_with_user(messages: &[Message]) -> bool {
    messages.iter().find_map(wire_role) == Some("user")
}

/// `messages` without bridges, and the index in `messages` of each message kept.
pub(super) fn strip(messages: Vec<Message>) -> (Vec<Message>, Vec<usize>) {
    let mut kept = Vec::with_capacity(messages.len());
    let mut index = Vec::with_capacity(messages.len());
    for (i, m) in messages.into_iter().enumerate() {
        if !m.is_bridge() {
            kept.push(m);
            index.push(i);
        }
    }
    (kept, index)
}

/// Inserts bridges where `out` puts two messages of one role side by side that were
/// not neighbours in the input (`Some(i)`: the message's index in the input; `None`:
/// ours, the summary), and a user bridge first when the input opened with a user
/// message and `out` does not. A provider compaction may open the list: that is how
/// Anthropic's API itself continues after compacting. Two messages of one role that
/// were already neighbours in the input stay as they were.
pub(super) fn alternate(
    out: Vec<(Message, Option<usize>)>,
    input_starts_with_user: bool,
) -> Vec<Message> {
    let mut result = Vec::with_capacity(out.len() + 2);
    let mut prev: Option<(String, Option<usize>)> = None;
    for (m, index) in out {
        let Some(role) = wire_role(&m).map(str::to_owned) else {
            result.push(m);
            continue;
        };
        match &prev {
            None => {
                if role == "assistant" && input_starts_with_user && !m.kind().compaction {
                    result.push(bridge(Role::User));
                }
            }
            Some((p, p_index)) if *p == role => {
                let neighbours = matches!((p_index, index), (Some(a), Some(b)) if a + 1 == b);
                if !neighbours {
                    result.push(bridge(if role == "user" {
                        Role::Assistant
                    } else {
                        Role::User
                    }));
                }
            }
            Some(_) => {}
        }
        prev = Some((role, index));
        result.push(m);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roles(ms: &[Message]) -> Vec<&str> {
        ms.iter().filter_map(wire_role).collect()
    }

    #[test]
    fn bridges_only_new_neighbours() {
        let u = |t: &str| Message::user(t);
        let a = |t: &str| Message::assistant(t);
        // Kept 0 and 3 (both user): a bridge; 3 and 4 were neighbours: none.
        let out = vec![
            (u("s"), None),
            (u("r0"), Some(0)),
            (u("r3"), Some(3)),
            (u("r4"), Some(4)),
            (a("a5"), Some(5)),
        ];
        let got = alternate(out, true);
        assert_eq!(
            roles(&got),
            [
                "user",
                "assistant",
                "user",
                "assistant",
                "user",
                "user",
                "assistant"
            ]
        );
        assert!(got[1].is_bridge() && got[3].is_bridge());
        // An assistant first after a user-first input gets a user bridge.
        let got = alternate(vec![(a("a2"), Some(2)), (u("u3"), Some(3))], true);
        assert_eq!(roles(&got), ["user", "assistant", "user"]);
        assert!(got[0].is_bridge() && !got[0].starts_turn());
        // Not when the input itself opened with the assistant.
        assert_eq!(alternate(vec![(a("a2"), Some(2))], false).len(), 1);
        // Stripping bridges keeps the input indices.
        let (kept, index) = strip(got);
        assert_eq!(index, [1, 2]);
        assert_eq!(roles(&kept), ["assistant", "user"]);
    }
}
