use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::price::Ttl;

/// Our per-message metadata key. Stripped from provider-facing output.
pub(super) const META_KEY: &str = "meta";
/// Our "this message was rewritten by compaction" flag. Stripped from provider-facing output.
pub(super) const COMPACTED_KEY: &str = "compacted";

/// The whole text of a *bridge*: a message compaction inserts where removing messages
/// would put two user (or two assistant) messages next to each other in an Anthropic
/// history, whose roles must alternate. A bridge carries nothing: it never opens a
/// turn, is never pinned, and the next compaction drops it and bridges anew.
pub const BRIDGE_TEXT: &str = "⟦removed: earlier messages; reason=context_compaction⟧";

/// Who speaks, format-neutral.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// System instructions.
    System,
    /// Developer instructions (the newer name for system-level ones).
    Developer,
    /// The end user, or a tool result carried in a user message.
    User,
    /// The model's replies and tool calls.
    Assistant,
    /// A tool result (chat `tool`/`function` messages, Responses `*_output` items).
    Tool,
    /// Items with no conversational role (Responses `compaction`, `item_reference`, …).
    Other,
}

impl Role {
    /// The wire name of the role.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::Developer => "developer",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::Other => "other",
        }
    }
}

/// What an item is, independent of its wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ItemType {
    /// A conversational message (it may also carry tool calls, as chat assistants do).
    Message,
    /// A standalone tool call item (Responses `function_call` and other `*_call` items).
    ToolCall,
    /// A tool result.
    ToolResult,
    /// A reasoning item: it belongs with the item that follows it.
    Reasoning,
    /// Anything else we pass through untouched.
    Other,
}

/// The concrete wire shape, which decides how text and tool payloads are read and rewritten.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Shape {
    /// Chat Completions message (`role`, `content`, `tool_calls`, `tool_call_id`).
    ChatMessage,
    /// Responses message item (`{"role","content"}` or `{"type":"message",...}`).
    ResponsesMessage,
    /// Responses call item: `function_call` or any `*_call` with a `call_id`.
    ResponsesCall,
    /// Responses call output item: `function_call_output` or any `*_call_output`.
    ResponsesCallOutput,
    /// Responses `reasoning` item.
    ResponsesReasoning,
    /// Any other Responses item.
    ResponsesOther,
    /// Anthropic Messages message: `role` and `content`, a string or content blocks
    /// (`text`, `image`, `document`, `tool_use`, `tool_result`, `thinking`, …).
    AnthropicMessage,
    /// The top-level `system` of an Anthropic request (a string or text blocks), carried
    /// as the first message so that it is counted and pinned like a system message; it is
    /// written back to `system`, never into `messages`.
    AnthropicSystem,
}

impl Shape {
    /// True for the Anthropic Messages shapes.
    pub fn is_anthropic(self) -> bool {
        matches!(self, Shape::AnthropicMessage | Shape::AnthropicSystem)
    }
}

/// Where [`Message::add_cache_breakpoint`] put its marker: enough to take
/// it away again, byte for byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BreakpointMark {
    /// The content block that carries it.
    pub block: usize,
    /// The content was a string, made one text block to carry it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_string: bool,
}

/// The Anthropic `cache_control` markers of one item
/// ([`Message::cache_markers`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Markers {
    /// How many.
    pub count: usize,
    /// One of them asks for the 1-hour lifetime.
    pub one_hour: bool,
    /// One of them has the default 5-minute lifetime.
    pub five_minutes: bool,
}

/// A tool call made by an item.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CallRef {
    /// The id that pairs the call with its result (`legacy-function:NAME`
    /// for a legacy chat `function_call`, which has none).
    pub call_id: String,
    /// The tool's name; for a built-in `*_call` item without one, its type.
    pub name: String,
}

/// The format-neutral view of an item that the pipeline works with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kind {
    /// Who speaks.
    pub role: Role,
    /// What the item is.
    pub item: ItemType,
    /// The wire shape it was decoded from.
    pub shape: Shape,
    /// Tool calls this item makes (parallel calls: several).
    pub calls: Vec<CallRef>,
    /// Call ids this item answers.
    pub results: Vec<String>,
    /// Tool name of a result, when the wire format carries it.
    pub result_name: Option<String>,
    /// The item is (or carries) a provider-native compaction: a Responses `compaction`
    /// item or an Anthropic `compaction` block. Opaque to us: always pinned, never
    /// summarized, and a standalone item stays with the group after it.
    pub compaction: bool,
}

impl Kind {
    /// A kind with no calls, results or compaction.
    pub(crate) fn new(role: Role, item: ItemType, shape: Shape) -> Self {
        Kind {
            role,
            item,
            shape,
            calls: Vec::new(),
            results: Vec::new(),
            result_name: None,
            compaction: false,
        }
    }
}

/// One message or input item, kept exactly as received.
///
/// The JSON object is stored as-is: a message that nothing changed serializes
/// back to the same JSON value, unknown fields and key order included.
#[derive(Debug, Clone)]
pub struct Message {
    /// Shared until written: agents, the pipeline and the session state all
    /// hold copies of long histories, and a clone must not copy megabytes.
    raw: Arc<Map<String, Value>>,
    /// Derived from `raw` once and never changed: shared too, so cloning a
    /// message allocates nothing.
    kind: Arc<Kind>,
    /// Content hash, memoised: a preflight re-estimates several times and a
    /// 128k-token history should be hashed once.
    hash: OnceLock<u128>,
}

impl PartialEq for Message {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw
    }
}

impl Message {
    /// A message of `raw` described by `kind`, as is: the caller vouches that
    /// `kind` is what the codec would read from `raw` (the middleware builds
    /// instruction blocks this way from a message it already decoded).
    #[doc(hidden)]
    pub fn from_parts(raw: Map<String, Value>, kind: Kind) -> Self {
        Self {
            raw: Arc::new(raw),
            kind: Arc::new(kind),
            hash: OnceLock::new(),
        }
    }

    /// A plain chat-style text message. The same shape is a valid Responses
    /// input message, so it fits either format.
    pub fn text(role: Role, text: impl Into<String>) -> Self {
        let mut raw = Map::new();
        raw.insert("role".into(), Value::String(role.as_str().into()));
        raw.insert("content".into(), Value::String(text.into()));
        Self::from_parts(raw, Kind::new(role, ItemType::Message, Shape::ChatMessage))
    }

    /// The top-level `system` of an Anthropic request (a string or text blocks) as a
    /// message; `path` names it in errors.
    pub(crate) fn anthropic_system(content: Value, path: &str) -> Result<Self, super::InputError> {
        let kind = super::anthropic::system_kind(&content, path)?;
        let mut raw = Map::new();
        raw.insert("role".into(), Value::String("system".into()));
        raw.insert("content".into(), content);
        Ok(Self::from_parts(raw, kind))
    }

    /// The top-level `system` of an Anthropic request holding the plain
    /// string `text` (it cannot be malformed), as a message.
    pub fn anthropic_system_text(text: String) -> Self {
        let mut raw = Map::new();
        raw.insert("role".into(), Value::String("system".into()));
        raw.insert("content".into(), Value::String(text));
        Self::from_parts(
            raw,
            Kind::new(Role::System, ItemType::Message, Shape::AnthropicSystem),
        )
    }

    /// `Message::text(Role::System, ..)`.
    pub fn system(text: impl Into<String>) -> Self {
        Self::text(Role::System, text)
    }
    /// `Message::text(Role::Developer, ..)`.
    pub fn developer(text: impl Into<String>) -> Self {
        Self::text(Role::Developer, text)
    }
    /// `Message::text(Role::User, ..)`.
    pub fn user(text: impl Into<String>) -> Self {
        Self::text(Role::User, text)
    }
    /// `Message::text(Role::Assistant, ..)`.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::text(Role::Assistant, text)
    }

    /// Sets one `meta` field (e.g. `protected`, `label`), creating `meta` if needed.
    pub fn with_meta(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.set_meta(key, value.into());
        self
    }

    /// Sets one `meta` field. `meta` is ours: providers never see it.
    pub fn set_meta(&mut self, key: &str, value: Value) {
        let meta = Arc::make_mut(&mut self.raw)
            .entry(META_KEY)
            .or_insert_with(|| Value::Object(Map::new()));
        if !meta.is_object() {
            *meta = Value::Object(Map::new());
        }
        if let Value::Object(m) = meta {
            m.insert(key.to_string(), value);
        }
        self.touch();
    }

    /// The JSON object as received (or as compaction rewrote it), `meta` included.
    pub fn raw(&self) -> &Map<String, Value> {
        &self.raw
    }

    /// The format-neutral view.
    pub fn kind(&self) -> &Kind {
        &self.kind
    }

    /// Who speaks (shorthand for `kind().role`).
    pub fn role(&self) -> Role {
        self.kind.role
    }

    /// True for a user message that opens a turn (not a tool result carried in a user
    /// message, not a bridge).
    pub fn starts_turn(&self) -> bool {
        self.kind.role == Role::User
            && self.kind.item == ItemType::Message
            && self.kind.results.is_empty()
            && !self.is_bridge()
    }

    /// True for a bridge compaction inserted ([`BRIDGE_TEXT`]), as emitted or as its
    /// provider copy: a user or assistant message whose content is exactly that text and
    /// whose other fields are ours.
    pub fn is_bridge(&self) -> bool {
        matches!(self.kind.role, Role::User | Role::Assistant)
            && self.raw.get("content").and_then(Value::as_str) == Some(BRIDGE_TEXT)
            && self
                .raw
                .keys()
                .all(|k| matches!(k.as_str(), "role" | "content" | META_KEY | COMPACTED_KEY))
    }

    /// Our `meta` object, if any.
    pub fn meta(&self) -> Option<&Map<String, Value>> {
        self.raw.get(META_KEY).and_then(Value::as_object)
    }

    /// `meta.label`, if it is a string.
    pub fn label(&self) -> Option<&str> {
        self.meta()?.get("label")?.as_str()
    }

    /// True when `meta[flag] == true`.
    pub fn is_protected(&self, flag: &str) -> bool {
        self.meta()
            .and_then(|m| m.get(flag))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// True when compaction rewrote this message (our `compacted` flag).
    pub fn is_compacted(&self) -> bool {
        self.raw
            .get(COMPACTED_KEY)
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// Marks the message as rewritten by compaction.
    pub fn set_compacted(&mut self) {
        Arc::make_mut(&mut self.raw).insert(COMPACTED_KEY.into(), Value::Bool(true));
        self.touch();
    }

    /// The library view: the JSON object, `meta` and `compacted` included.
    pub fn to_value(&self) -> Value {
        Value::Object(Map::clone(&self.raw))
    }

    /// The provider view: `meta` and `compacted` removed (the OpenAI API rejects
    /// unknown message fields). Everything else is untouched.
    pub fn to_provider_value(&self) -> Value {
        let mut m = Map::clone(&self.raw);
        m.remove(META_KEY);
        m.remove(COMPACTED_KEY);
        Value::Object(m)
    }

    /// A copy without `meta` and `compacted`: the message as a provider (and
    /// an agent that keeps the provider-facing output) sees it.
    pub fn provider_copy(&self) -> Message {
        if !self.has_our_fields() {
            return self.clone();
        }
        let mut raw = Map::clone(&self.raw);
        raw.remove(META_KEY);
        raw.remove(COMPACTED_KEY);
        Self {
            raw: Arc::new(raw),
            kind: self.kind.clone(),
            hash: OnceLock::new(),
        }
    }

    /// True when the item carries `meta` or `compacted`, i.e. its provider
    /// view differs from it.
    pub fn has_our_fields(&self) -> bool {
        self.raw.contains_key(META_KEY) || self.raw.contains_key(COMPACTED_KEY)
    }

    /// Content hash of the provider view (equal to [`Message::content_hash`]
    /// when there is nothing of ours to strip).
    pub fn provider_hash(&self) -> u128 {
        if self.has_our_fields() {
            self.provider_copy().content_hash()
        } else {
            self.content_hash()
        }
    }

    /// Content hash of the whole item, memoised until the next mutation.
    pub fn content_hash(&self) -> u128 {
        *self
            .hash
            .get_or_init(|| crate::tokens::item_hash(&self.raw))
    }

    fn touch(&mut self) {
        self.hash = OnceLock::new();
    }

    /// The item's text as a reader would see it: message text, tool call
    /// names and arguments, tool output, reasoning summaries. Used by
    /// summarizers; never sent to a provider.
    pub fn plain_text(&self) -> String {
        let mut out = String::new();
        match self.kind.shape {
            Shape::ChatMessage | Shape::ResponsesMessage => {
                if let Some(c) = self.raw.get("content") {
                    push_content_text(c, &mut out);
                }
                if let Some(Value::Array(calls)) = self.raw.get("tool_calls") {
                    for call in calls {
                        let f = call.get("function");
                        let name = f.and_then(|f| f.get("name")).and_then(Value::as_str);
                        let args = f.and_then(|f| f.get("arguments")).and_then(Value::as_str);
                        push_line(
                            &mut out,
                            &format!("{}({})", name.unwrap_or("tool"), args.unwrap_or("")),
                        );
                    }
                }
            }
            Shape::ResponsesCall => {
                let name = self.kind.calls.first().map(|c| c.name.as_str());
                let args = self
                    .raw
                    .get("arguments")
                    .or_else(|| self.raw.get("input"))
                    .map(value_text)
                    .unwrap_or_default();
                push_line(&mut out, &format!("{}({})", name.unwrap_or("tool"), args));
            }
            Shape::ResponsesCallOutput => {
                if let Some(o) = self.raw.get("output") {
                    push_content_text(o, &mut out);
                }
            }
            Shape::ResponsesReasoning => {
                if let Some(s) = self.raw.get("summary") {
                    push_content_text(s, &mut out);
                }
            }
            Shape::ResponsesOther => {}
            Shape::AnthropicMessage => super::anthropic::plain_text(&self.raw, &mut out),
            Shape::AnthropicSystem => {
                if let Some(c) = self.raw.get("content") {
                    push_content_text(c, &mut out);
                }
            }
        }
        out
    }

    /// The text of a tool result, if this is one. An Anthropic message that answers
    /// several calls gives the first result's text; [`Message::tool_outputs`] gives each.
    pub fn tool_output(&self) -> Option<Cow<'_, str>> {
        if self.kind.shape == Shape::AnthropicMessage {
            return super::anthropic::tool_outputs(&self.raw)
                .into_iter()
                .next()
                .map(|(_, text)| text);
        }
        let field = self.output_field()?;
        Some(match self.raw.get(field)? {
            Value::String(s) => Cow::Borrowed(s.as_str()),
            other => {
                let mut s = String::new();
                push_content_text(other, &mut s);
                Cow::Owned(s)
            }
        })
    }

    /// `(call id, output text)` of every tool result this item carries, in order: one
    /// for a Chat `tool` message or a Responses `*_output` item, one per `tool_result`
    /// block for an Anthropic user message.
    pub fn tool_outputs(&self) -> Vec<(&str, Cow<'_, str>)> {
        if self.kind.shape == Shape::AnthropicMessage {
            return super::anthropic::tool_outputs(&self.raw);
        }
        match self.kind.results.first() {
            Some(id) if self.output_field().is_some() => {
                vec![(id.as_str(), self.tool_output().unwrap_or_default())]
            }
            _ => Vec::new(),
        }
    }

    /// The field a single-result item keeps its output in.
    fn output_field(&self) -> Option<&'static str> {
        match self.kind.shape {
            Shape::ChatMessage if self.kind.item == ItemType::ToolResult => Some("content"),
            Shape::ResponsesCallOutput => Some("output"),
            _ => None,
        }
    }

    /// Replaces the output of a tool result with `text`. Returns false when this is not
    /// a tool result, or when it answers several calls (then use
    /// [`Message::set_tool_output_for`]).
    pub fn set_tool_output(&mut self, text: String) -> bool {
        if self.kind.shape == Shape::AnthropicMessage {
            return match self.kind.results.as_slice() {
                [only] => {
                    let id = only.clone();
                    self.set_tool_output_for(&id, text)
                }
                _ => false,
            };
        }
        let Some(field) = self.output_field() else {
            return false;
        };
        Arc::make_mut(&mut self.raw).insert(field.into(), Value::String(text));
        self.touch();
        true
    }

    /// Replaces the output of the result answering `call_id` with `text` (an Anthropic
    /// `tool_result` keeps its `tool_use_id`, `is_error` and `cache_control`). Returns
    /// false when this item does not answer `call_id`.
    pub fn set_tool_output_for(&mut self, call_id: &str, text: String) -> bool {
        if !self.kind.results.iter().any(|r| r == call_id) {
            return false;
        }
        let done = if self.kind.shape == Shape::AnthropicMessage {
            super::anthropic::set_tool_output(Arc::make_mut(&mut self.raw), call_id, text)
        } else {
            match self.output_field() {
                Some(field) => {
                    Arc::make_mut(&mut self.raw).insert(field.into(), Value::String(text));
                    true
                }
                None => false,
            }
        };
        if done {
            self.touch();
        }
        done
    }

    /// True when the item carries blocks the provider signed (Anthropic `thinking`,
    /// `redacted_thinking`): compaction never edits such an item.
    pub fn has_signed_blocks(&self) -> bool {
        self.kind.shape == Shape::AnthropicMessage && super::anthropic::has_signed_blocks(&self.raw)
    }

    /// The Anthropic `cache_control` markers the item carries (on it, its
    /// content blocks and the blocks of its tool results), by lifetime.
    pub fn cache_markers(&self) -> Markers {
        super::anthropic::breakpoints(&self.raw)
    }

    /// Whether the item may carry an Anthropic breakpoint: an Anthropic
    /// message or system prompt, or a plain text message of ours that fits
    /// the Anthropic wire as it is (a summary, a bridge).
    fn markable(&self) -> bool {
        match self.kind.shape {
            Shape::AnthropicMessage | Shape::AnthropicSystem => true,
            Shape::ChatMessage => {
                matches!(self.kind.role, Role::User | Role::Assistant)
                    && self.raw.keys().all(|k| {
                        matches!(k.as_str(), "role" | "content" | META_KEY | COMPACTED_KEY)
                    })
            }
            _ => false,
        }
    }

    /// Whether [`Message::add_cache_breakpoint`] would mark this item: an
    /// Anthropic message (or system prompt, or a plain text message of ours)
    /// whose last content block is one Anthropic accepts a `cache_control`
    /// on (non-empty text, image, document, tool use or result), not marked
    /// yet, with no signed block.
    pub fn can_carry_cache_breakpoint(&self) -> bool {
        self.markable() && super::anthropic::can_carry_breakpoint(&self.raw)
    }

    /// Puts `cache_control: {"type": "ephemeral"}` on the item's last content
    /// block (a string content becomes one text block first), so Anthropic
    /// caches the request up to the end of this item. `None`, and nothing
    /// changed, when it cannot carry one.
    pub fn add_cache_breakpoint(&mut self) -> Option<BreakpointMark> {
        self.add_cache_breakpoint_for(Ttl::FiveMinutes)
    }

    /// [`Message::add_cache_breakpoint`] with the lifetime `ttl`: 1 hour
    /// adds `"ttl": "1h"`.
    pub fn add_cache_breakpoint_for(&mut self, ttl: Ttl) -> Option<BreakpointMark> {
        if !self.can_carry_cache_breakpoint() {
            return None;
        }
        let (block, from_string) =
            super::anthropic::add_breakpoint(Arc::make_mut(&mut self.raw), ttl)?;
        self.touch();
        Some(BreakpointMark { block, from_string })
    }

    /// Undoes [`Message::add_cache_breakpoint`] byte for byte. False, and
    /// nothing changed, when the item does not carry that marker.
    pub fn remove_cache_breakpoint(&mut self, mark: BreakpointMark) -> bool {
        if !self.markable() {
            return false;
        }
        let removed = super::anthropic::remove_breakpoint(
            Arc::make_mut(&mut self.raw),
            mark.block,
            mark.from_string,
        );
        if removed {
            self.touch();
        }
        removed
    }

    /// Replaces the image and document blocks of an Anthropic message with text blocks
    /// `placeholder(what)` (`what` names the attachment: `image (image/png)`,
    /// `document "title"`). Attachments inside tool results go with the result's output
    /// instead. Returns how many were replaced (0 for other shapes and for a message with
    /// signed blocks).
    pub fn clear_attachments(&mut self, placeholder: impl Fn(&str) -> String) -> usize {
        if self.kind.shape != Shape::AnthropicMessage {
            return 0;
        }
        let n = super::anthropic::clear_attachments(Arc::make_mut(&mut self.raw), placeholder);
        if n > 0 {
            self.touch();
        }
        n
    }

    /// The arguments of each tool call this item makes, by call id, as JSON
    /// text (an Anthropic `tool_use` input or a built-in call's `action`
    /// object serialized; a Responses custom tool's free-form `input` as
    /// it is).
    pub fn tool_arguments(&self) -> Vec<(&str, String)> {
        let text = |v: &Value| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        match self.kind.shape {
            Shape::ChatMessage => match self.raw.get("tool_calls") {
                Some(Value::Array(calls)) => calls
                    .iter()
                    .zip(self.kind.calls.iter())
                    .filter_map(|(call, r)| {
                        let args = call.get("function")?.get("arguments")?;
                        Some((r.call_id.as_str(), text(args)))
                    })
                    .collect(),
                _ => Vec::new(),
            },
            Shape::ResponsesCall => self
                .kind
                .calls
                .first()
                .and_then(|r| {
                    let args = ["arguments", "input", "action"]
                        .iter()
                        .find_map(|k| self.raw.get(*k))?;
                    Some(vec![(r.call_id.as_str(), text(args))])
                })
                .unwrap_or_default(),
            Shape::AnthropicMessage => match self.raw.get("content") {
                Some(Value::Array(parts)) => parts
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
                    .filter_map(|b| {
                        let id = b.get("id").and_then(Value::as_str)?;
                        let r = self.kind.calls.iter().find(|c| c.call_id == id)?;
                        Some((r.call_id.as_str(), text(b.get("input")?)))
                    })
                    .collect(),
                _ => Vec::new(),
            },
            _ => Vec::new(),
        }
    }

    /// Replaces the arguments of each tool call this item makes with
    /// `text(call)`; `None` leaves that call as it is. Returns how many were replaced.
    /// An Anthropic `tool_use` input must stay an object: `text` is used when it is a
    /// JSON object and wrapped as `{"removed": ...}` otherwise; a message with signed
    /// blocks ([`Message::has_signed_blocks`]) is never changed.
    pub fn set_tool_arguments(
        &mut self,
        mut text: impl FnMut(&CallRef) -> Option<String>,
    ) -> usize {
        let mut n = 0;
        match self.kind.shape {
            Shape::ChatMessage => {
                if let Some(Value::Array(calls)) =
                    Arc::make_mut(&mut self.raw).get_mut("tool_calls")
                {
                    for (call, r) in calls.iter_mut().zip(self.kind.calls.iter()) {
                        if let (Some(Value::Object(f)), Some(t)) =
                            (call.get_mut("function"), text(r))
                            && f.get("arguments").and_then(Value::as_str) != Some(t.as_str())
                        {
                            f.insert("arguments".into(), Value::String(t));
                            n += 1;
                        }
                    }
                }
            }
            Shape::ResponsesCall => {
                if let Some(r) = self.kind.calls.first() {
                    let field = if self.raw.contains_key("arguments") {
                        "arguments"
                    } else if self.raw.contains_key("input") {
                        "input"
                    } else {
                        return 0;
                    };
                    if let Some(t) = text(r)
                        && self.raw.get(field).and_then(Value::as_str) != Some(t.as_str())
                    {
                        Arc::make_mut(&mut self.raw).insert(field.into(), Value::String(t));
                        n = 1;
                    }
                }
            }
            Shape::AnthropicMessage => {
                let kind = Arc::clone(&self.kind);
                n = super::anthropic::set_tool_inputs(
                    Arc::make_mut(&mut self.raw),
                    &kind.calls,
                    text,
                );
            }
            _ => {}
        }
        if n > 0 {
            self.touch();
        }
        n
    }
}

impl Serialize for Message {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Map::serialize(&self.raw, s)
    }
}

impl<'de> Deserialize<'de> for Message {
    /// Decodes one item in `auto` format: the format its fields allow (a chat message
    /// when several do, see [`super::detect_format`]).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        super::codec::decode_item(v, super::Format::Auto, "$").map_err(serde::de::Error::custom)
    }
}

/// Appends `s` to `out` as a line of its own (nothing for an empty `s`).
pub(super) fn push_line(out: &mut String, s: &str) {
    if s.is_empty() {
        return;
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(s);
}

/// Text of a content value: a string, or the text of each part of an array.
fn push_content_text(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => push_line(out, s),
        Value::Array(parts) => {
            for p in parts {
                match p {
                    Value::String(s) => push_line(out, s),
                    Value::Object(o) => {
                        for key in ["text", "refusal", "output"] {
                            if let Some(Value::String(s)) = o.get(key) {
                                push_line(out, s);
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        Value::Null => {}
        other => push_line(out, &other.to_string()),
    }
}

fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
