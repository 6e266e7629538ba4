//! The providers' wire, as far as the proxy reads it: which API a path is,
//! the error shape each provider answers in, a context-length refusal, and
//! the usage and first output of a response (whole or streamed).

use axum::Json;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use compact_middleware::model::Format;
use serde_json::{Value, json};

/// The API of a request, from its method and path (the prefix removed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Api {
    /// OpenAI `POST /v1/chat/completions`.
    Chat,
    /// OpenAI `POST /v1/responses`.
    Responses,
    /// Anthropic `POST /v1/messages`.
    Messages,
    /// Anything else under `/v1/`: forwarded as is.
    Other,
}

impl Api {
    pub(crate) fn of(method: &Method, path: &str) -> Self {
        if method != Method::POST {
            return Api::Other;
        }
        match path.trim_end_matches('/') {
            "/v1/chat/completions" => Api::Chat,
            "/v1/responses" => Api::Responses,
            "/v1/messages" => Api::Messages,
            _ => Api::Other,
        }
    }

    /// `ModelCall::api`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Api::Chat => "chat_completions",
            Api::Responses => "responses",
            Api::Messages => "messages",
            Api::Other => "other",
        }
    }

    /// The body's key holding the history.
    pub(crate) fn history_key(self) -> &'static str {
        match self {
            Api::Responses => "input",
            _ => "messages",
        }
    }

    /// The codec of the history.
    pub(crate) fn format(self) -> Format {
        match self {
            Api::Chat => Format::Chat,
            Api::Responses => Format::Responses,
            Api::Messages => Format::Anthropic,
            Api::Other => Format::Auto,
        }
    }
}

/// Which provider's error shape an answer of ours takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// `{"error": {"message", "type", "param", "code"}}`.
    OpenAi,
    /// `{"type": "error", "error": {"type", "message"}}`.
    Anthropic,
}

impl Shape {
    /// Anthropic for `/v1/messages…` or a request that carries
    /// `anthropic-version` or `x-api-key`, OpenAI otherwise.
    pub(crate) fn of(path: &str, headers: &HeaderMap) -> Self {
        if path.starts_with("/v1/messages")
            || headers.contains_key("anthropic-version")
            || headers.contains_key("x-api-key")
        {
            Shape::Anthropic
        } else {
            Shape::OpenAi
        }
    }
}

/// An answer of the proxy itself (not the upstream's), in `shape`.
/// `code` is OpenAI's `error.code`; Anthropic's `error.type` follows the
/// status, as the Anthropic API does.
pub(crate) fn error(shape: Shape, status: StatusCode, code: &str, message: &str) -> Response {
    let body = match shape {
        Shape::OpenAi => json!({"error": {
            "message": message,
            "type": if status.is_server_error() { "api_error" } else { "invalid_request_error" },
            "param": null,
            "code": code,
        }}),
        Shape::Anthropic => {
            let kind = match status {
                StatusCode::PAYLOAD_TOO_LARGE => "request_too_large",
                StatusCode::NOT_FOUND => "not_found_error",
                StatusCode::GATEWAY_TIMEOUT => "timeout_error",
                s if s.is_server_error() => "api_error",
                _ => "invalid_request_error",
            };
            json!({"type": "error", "error": {"type": kind, "message": message}})
        }
    };
    (status, Json(body)).into_response()
}

/// A provider's refusal of a request longer than the model's window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Overflow {
    pub(crate) message: String,
    /// The window the provider stated ("maximum context length is N
    /// tokens", "N tokens > M maximum"), when it did.
    pub(crate) window: Option<usize>,
}

/// Whether an upstream's error answer says the request is longer than the
/// model's context window (OpenAI `context_length_exceeded`, Anthropic
/// "prompt is too long").
pub(crate) fn context_overflow(status: StatusCode, body: &[u8]) -> Option<Overflow> {
    if !matches!(status.as_u16(), 400 | 413 | 422) {
        return None;
    }
    let v: Value = serde_json::from_slice(body).ok()?;
    let err = v.get("error")?;
    let message = err.get("message").and_then(Value::as_str).unwrap_or("");
    let code = err.get("code").and_then(Value::as_str).unwrap_or("");
    let lower = message.to_ascii_lowercase();
    let overflow = code == "context_length_exceeded"
        || lower.contains("prompt is too long")
        || lower.contains("maximum context length")
        || lower.contains("context window")
        || lower.contains("context_length_exceeded");
    overflow.then(|| Overflow {
        message: message.to_owned(),
        window: stated_window(&lower),
    })
}

/// The number after "maximum context length is" or before " maximum".
fn stated_window(message: &str) -> Option<usize> {
    let number = |s: &str| {
        let digits: String = s
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == ',')
            .filter(char::is_ascii_digit)
            .collect();
        digits.parse::<usize>().ok().filter(|n| *n > 0)
    };
    if let Some(at) = message.find("maximum context length is") {
        return number(&message[at + "maximum context length is".len()..]);
    }
    let at = message.find(" maximum")?;
    let before = &message[..at];
    let start = before
        .rfind(|c: char| !(c.is_ascii_digit() || c == ','))
        .map_or(0, |i| i + 1);
    number(&before[start..])
}

/// The usage a provider reported, in one shape.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Usage {
    /// Every input token, cached ones included.
    pub(crate) input: Option<u64>,
    /// Input tokens the prompt cache served.
    pub(crate) cached: Option<u64>,
    pub(crate) output: Option<u64>,
}

impl Usage {
    /// A usage object of any of the three APIs: Chat's `prompt_tokens`,
    /// Responses' `input_tokens` with `input_tokens_details`, Anthropic's
    /// `input_tokens` plus its cache counts. Later reports of one stream
    /// (Anthropic's `message_delta`) fill in what earlier ones lacked.
    pub(crate) fn merge(&mut self, u: &Value) {
        let n = |k: &str| u.get(k).and_then(Value::as_u64);
        let creation = n("cache_creation_input_tokens");
        let read = n("cache_read_input_tokens");
        let base = n("input_tokens").or_else(|| n("prompt_tokens"));
        if let Some(base) = base {
            self.input = Some(base + creation.unwrap_or(0) + read.unwrap_or(0));
        }
        let details = u
            .get("input_tokens_details")
            .or_else(|| u.get("prompt_tokens_details"))
            .and_then(|d| d.get("cached_tokens"))
            .and_then(Value::as_u64);
        if let Some(cached) = details.or(read) {
            self.cached = Some(cached);
        }
        if let Some(out) = n("output_tokens").or_else(|| n("completion_tokens")) {
            self.output = Some(out);
        }
    }
}

/// Reads a response as it passes: its usage, and for a stream the moment
/// of its first output event. Never changes a byte.
#[derive(Debug)]
pub(crate) struct Reader {
    api: Api,
    stream: bool,
    /// The current line of a stream; a whole body otherwise (bounded).
    buf: Vec<u8>,
    overflowed: bool,
    pub(crate) usage: Usage,
    /// The provider's usage object as reported (a stream's reports merged
    /// key by key): what the session's next preflight gets, whole.
    pub(crate) reported: Option<Value>,
    pub(crate) first_output: bool,
}

/// A whole (non-streamed) body is read for its usage up to this size.
const MAX_BODY_READ: usize = 8 * 1024 * 1024;
/// A stream line longer than this is not read (its bytes still pass).
const MAX_LINE: usize = 4 * 1024 * 1024;

impl Reader {
    pub(crate) fn new(api: Api, stream: bool) -> Self {
        Self {
            api,
            stream,
            buf: Vec::new(),
            overflowed: false,
            usage: Usage::default(),
            reported: None,
            first_output: false,
        }
    }

    /// Reads one chunk; true when it held the first output event.
    pub(crate) fn chunk(&mut self, bytes: &[u8]) -> bool {
        if !self.stream {
            if self.buf.len() + bytes.len() <= MAX_BODY_READ {
                self.buf.extend_from_slice(bytes);
            } else {
                self.overflowed = true;
            }
            return false;
        }
        let before = self.first_output;
        let mut rest = bytes;
        while let Some(at) = rest.iter().position(|b| *b == b'\n') {
            let (line, tail) = rest.split_at(at);
            if self.overflowed {
                self.overflowed = false;
            } else if self.buf.is_empty() {
                self.line(line);
            } else {
                self.buf.extend_from_slice(line);
                let line = std::mem::take(&mut self.buf);
                self.line(&line);
            }
            rest = &tail[1..];
        }
        if !rest.is_empty() && !self.overflowed {
            if self.buf.len() + rest.len() <= MAX_LINE {
                self.buf.extend_from_slice(rest);
            } else {
                self.buf.clear();
                self.overflowed = true;
            }
        }
        !before && self.first_output
    }

    /// The body is complete: a whole body is read now.
    pub(crate) fn finish(&mut self) {
        if !self.stream && !self.overflowed {
            if let Ok(v) = serde_json::from_slice::<Value>(&self.buf)
                && let Some(u) = v.get("usage")
            {
                self.report(u);
            }
            self.buf = Vec::new();
        }
    }

    /// One line of an SSE stream.
    fn line(&mut self, line: &[u8]) {
        let Some(data) = line.strip_prefix(b"data:") else {
            return;
        };
        let data = data.trim_ascii();
        let has = |needle: &[u8]| data.windows(needle.len()).any(|w| w == needle);
        if !self.first_output && self.is_output(data, &has) {
            self.first_output = true;
        }
        if !has(b"\"usage\"") {
            return;
        }
        let Ok(v) = serde_json::from_slice::<Value>(data) else {
            return;
        };
        let usage = match self.api {
            // `response.completed` (and `.incomplete`, `.failed`).
            Api::Responses => v.get("response").and_then(|r| r.get("usage")),
            // `message_start` holds the input, `message_delta` the output.
            Api::Messages => v
                .get("message")
                .and_then(|m| m.get("usage"))
                .or_else(|| v.get("usage")),
            _ => v.get("usage"),
        };
        if let Some(u) = usage.filter(|u| u.is_object()) {
            self.report(u);
        }
    }

    /// One usage report: read, and merged into what was reported.
    fn report(&mut self, u: &Value) {
        self.usage.merge(u);
        match (&mut self.reported, u) {
            (Some(Value::Object(all)), Value::Object(more)) => {
                for (k, v) in more {
                    all.insert(k.clone(), v.clone());
                }
            }
            (slot, u) => *slot = Some(u.clone()),
        }
    }

    /// Whether a stream's `data:` carries output (text, a tool call,
    /// reasoning): what the time to first token is measured to.
    fn is_output(&self, data: &[u8], has: &dyn Fn(&[u8]) -> bool) -> bool {
        match self.api {
            Api::Responses => has(b".delta\"") || has(b"\"response.output_item.done\""),
            Api::Messages => has(b"\"content_block_delta\"") || has(b"\"content_block_start\""),
            Api::Chat => {
                (has(b"\"content\":\"") && !has(b"\"content\":\"\""))
                    || has(b"\"tool_calls\"")
                    || has(b"\"reasoning")
            }
            Api::Other => !data.is_empty(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apis_by_method_and_path() {
        assert_eq!(Api::of(&Method::POST, "/v1/chat/completions"), Api::Chat);
        assert_eq!(Api::of(&Method::POST, "/v1/responses"), Api::Responses);
        assert_eq!(Api::of(&Method::POST, "/v1/messages"), Api::Messages);
        assert_eq!(Api::of(&Method::GET, "/v1/responses"), Api::Other);
        assert_eq!(Api::of(&Method::POST, "/v1/responses/compact"), Api::Other);
        assert_eq!(
            Api::of(&Method::POST, "/v1/messages/count_tokens"),
            Api::Other
        );
    }

    #[test]
    fn usage_in_every_shape() {
        let mut u = Usage::default();
        u.merge(&json!({"prompt_tokens": 100, "completion_tokens": 7,
            "prompt_tokens_details": {"cached_tokens": 64}}));
        assert_eq!(
            u,
            Usage {
                input: Some(100),
                cached: Some(64),
                output: Some(7)
            }
        );
        let mut u = Usage::default();
        u.merge(
            &json!({"input_tokens": 10, "cache_creation_input_tokens": 5,
            "cache_read_input_tokens": 80, "output_tokens": 1}),
        );
        u.merge(&json!({"output_tokens": 42}));
        assert_eq!(
            u,
            Usage {
                input: Some(95),
                cached: Some(80),
                output: Some(42)
            }
        );
    }

    #[test]
    fn streams_are_read_across_chunk_boundaries() {
        let stream = concat!(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":12,\"cache_read_input_tokens\":3}}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"hi\"}}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":9}}\n\n",
        );
        for cut in [1, 7, 50, 100, stream.len() - 1] {
            let mut r = Reader::new(Api::Messages, true);
            let (a, b) = stream.as_bytes().split_at(cut);
            let first = r.chunk(a) | r.chunk(b);
            r.finish();
            assert!(first && r.first_output, "cut at {cut}");
            assert_eq!(
                r.usage,
                Usage {
                    input: Some(15),
                    cached: Some(3),
                    output: Some(9)
                },
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn overflow_errors_of_both_providers() {
        let openai = br#"{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
        let o = context_overflow(StatusCode::BAD_REQUEST, openai).unwrap();
        assert_eq!(o.window, Some(128_000));
        let anthropic = br#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#;
        assert_eq!(
            context_overflow(StatusCode::BAD_REQUEST, anthropic)
                .unwrap()
                .window,
            Some(200_000)
        );
        let other = br#"{"error":{"message":"bad model","code":"model_not_found"}}"#;
        assert!(context_overflow(StatusCode::BAD_REQUEST, other).is_none());
        assert!(context_overflow(StatusCode::INTERNAL_SERVER_ERROR, openai).is_none());
    }
}
