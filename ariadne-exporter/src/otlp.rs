//! [`OtlpExporter`]: events as OTLP/HTTP (JSON, or protobuf through
//! `protobuf`) to an OpenTelemetry collector or any OTLP receiver.
//!
//! Written by hand rather than with `opentelemetry-otlp`: our spans are
//! already finished records with their own ids and times, while the
//! OpenTelemetry SDK wants to create spans itself (and would pull in its
//! whole SDK, `prost` and a second HTTP stack). The OTLP JSON encoding is
//! small, stable and checked here by a round trip through the server's own
//! OTLP mapping.

use std::collections::BTreeMap;
use std::time::Instant;

use compact_events::BoxFuture;
use compact_events::{Event, ExportError, Exporter, SpanStatus, parse_rfc3339_millis};
use serde_json::{Map, Value, json};

use crate::BuildError;
use crate::http::{Counters, HttpOptions, SendStats, Sender};
use crate::truncate::truncate_event;

/// The span attribute that carries the Ariadne `kind` (the server's OTLP
/// mapping reads it back).
pub(crate) const KIND_ATTRIBUTE: &str = "ariadne.kind";
/// The resource attribute that carries the session (trace) id.
pub(crate) const SESSION_ATTRIBUTE: &str = "session.id";

/// Ships events to an OpenTelemetry collector's OTLP/HTTP traces endpoint
/// (`telemetry.otlp_endpoint`, e.g. `http://localhost:4318/v1/traces`) as
/// JSON, or as protobuf ([`OtlpExporter::with_protocol`]).
///
/// Mapping: one `ResourceSpans` per session with `service.name` (the
/// exporter's), `session.id` and, when the batch has the session's trace
/// event, its metadata as resource attributes; `traceId` = a 16-byte hash
/// of the session id; `spanId` = our span id (16 hex digits; other ids are
/// hashed to 8 bytes); `name`, times in Unix nanoseconds, `kind` INTERNAL,
/// `data` as attributes (objects → `kvlistValue`, arrays → `arrayValue`),
/// `ariadne.kind`, `session.id`, the OpenTelemetry GenAI semantic
/// conventions where they apply ([`genai_attributes`]), and status OK or
/// ERROR. Retries as the Ariadne exporter.
#[derive(Debug)]
pub struct OtlpExporter {
    sender: Sender,
    service_name: String,
    protocol: OtlpProtocol,
}

/// How OTLP/HTTP bodies are encoded (OpenTelemetry's
/// `OTEL_EXPORTER_OTLP_PROTOCOL` values).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OtlpProtocol {
    /// `http/json`: `application/json` (this exporter's first form).
    #[default]
    HttpJson,
    /// `http/protobuf`: `application/x-protobuf`, OTLP's default, and the
    /// only form some receivers (Arize Phoenix) take.
    HttpProtobuf,
}

impl OtlpProtocol {
    /// The protocol's name in OpenTelemetry's configuration: `http/json`
    /// or `http/protobuf`.
    pub fn as_str(self) -> &'static str {
        match self {
            OtlpProtocol::HttpJson => "http/json",
            OtlpProtocol::HttpProtobuf => "http/protobuf",
        }
    }
}

impl std::str::FromStr for OtlpProtocol {
    type Err = BuildError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "http/json" => Ok(OtlpProtocol::HttpJson),
            "http/protobuf" => Ok(OtlpProtocol::HttpProtobuf),
            other => Err(BuildError::Client(format!(
                "unknown OTLP protocol {other:?} (http/json or http/protobuf)"
            ))),
        }
    }
}

impl OtlpExporter {
    /// An exporter for `endpoint`, naming itself `service_name`.
    pub fn new(
        endpoint: &str,
        service_name: &str,
        mut opts: HttpOptions,
    ) -> Result<Self, BuildError> {
        // Collectors take far more than Ariadne's 256 KiB; one body per batch.
        opts.max_body_bytes = opts.max_body_bytes.max(4 * 1024 * 1024);
        Ok(OtlpExporter {
            sender: Sender::new(endpoint, opts, "otlp export failed")?,
            service_name: service_name.to_owned(),
            protocol: OtlpProtocol::HttpJson,
        })
    }

    /// The same exporter sending `protocol`'s encoding.
    pub fn with_protocol(mut self, protocol: OtlpProtocol) -> Self {
        self.protocol = protocol;
        self.sender.content_type = match protocol {
            OtlpProtocol::HttpJson => "application/json",
            OtlpProtocol::HttpProtobuf => "application/x-protobuf",
        };
        self
    }

    /// The encoding it sends.
    pub fn protocol(&self) -> OtlpProtocol {
        self.protocol
    }

    /// Counters so far.
    pub fn stats(&self) -> SendStats {
        self.sender.counters.snapshot()
    }
}

/// The OTLP trace id of a session: 32 hex digits of a 128-bit hash.
pub fn trace_id_for(session_id: &str) -> String {
    format!(
        "{:032x}",
        xxhash_rust::xxh3::xxh3_128(session_id.as_bytes())
    )
}

/// The OTLP span id of one of our span ids: unchanged when it already is
/// 16 lowercase hex digits (ours are), else 16 hex digits of a hash.
pub fn span_id_for(span_id: &str) -> String {
    if span_id.len() == 16
        && span_id
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        span_id.to_owned()
    } else {
        format!("{:016x}", xxhash_rust::xxh3::xxh3_64(span_id.as_bytes()))
    }
}

/// A JSON value as an OTLP `AnyValue`.
pub(crate) fn any_value(v: &Value) -> Value {
    match v {
        Value::Null => json!({}),
        Value::Bool(b) => json!({"boolValue": b}),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => json!({"intValue": i.to_string()}),
            (None, Some(f)) if n.is_f64() => json!({"doubleValue": f}),
            // u64 beyond i64: exact as text.
            _ => json!({"stringValue": n.to_string()}),
        },
        Value::String(s) => json!({"stringValue": s}),
        Value::Array(items) => {
            json!({"arrayValue": {"values": items.iter().map(any_value).collect::<Vec<_>>()}})
        }
        Value::Object(m) => json!({"kvlistValue": {"values": key_values(m)}}),
    }
}

fn key_values(m: &Map<String, Value>) -> Vec<Value> {
    m.iter()
        .map(|(k, v)| json!({"key": k, "value": any_value(v)}))
        .collect()
}

/// OpenTelemetry GenAI semantic-convention attributes (`gen_ai.*`) for one
/// of compact's spans, from its `data`: where a span describes a model
/// call or its input, the attribute an SRE's backend already knows.
///
/// - `compact.token_estimate`: the chat request the agent is about to send:
///   `gen_ai.operation.name` `chat`, `gen_ai.request.model`, and
///   `gen_ai.usage.input_tokens` (the estimate, `t_est`).
/// - `compact.preflight`: `gen_ai.usage.input_tokens` = `tokens_after`, what
///   the compacted request will cost.
/// - `compact.summary_created` by a model (`model` set):
///   `gen_ai.operation.name` `chat`, `gen_ai.provider.name` `openai` (the
///   summarizer speaks the OpenAI API), `gen_ai.request.model`,
///   `gen_ai.usage.input_tokens` / `output_tokens` as the model reported
///   them, and `gen_ai.output.type` `text`.
///
/// Every span also gets `session.id` (OpenInference's and Phoenix's session
/// grouping) and `openinference.span.kind` (`LLM` for a model's summary,
/// `CHAIN` otherwise), so Phoenix lays our spans out like its own.
pub fn genai_attributes(name: &str, data: &Map<String, Value>) -> Vec<(&'static str, Value)> {
    let mut out = Vec::new();
    let get = |k: &str| data.get(k).filter(|v| !v.is_null()).cloned();
    match name {
        "compact.token_estimate" => {
            out.push(("gen_ai.operation.name", json!("chat")));
            if let Some(m) = get("model") {
                out.push(("gen_ai.request.model", m));
            }
            if let Some(t) = get("t_est") {
                out.push(("gen_ai.usage.input_tokens", t));
            }
        }
        "compact.preflight" => {
            if let Some(t) = get("tokens_after") {
                out.push(("gen_ai.usage.input_tokens", t));
            }
        }
        "compact.summary_created" => {
            if let Some(m) = get("model") {
                out.push(("gen_ai.operation.name", json!("chat")));
                out.push(("gen_ai.provider.name", json!("openai")));
                out.push(("gen_ai.request.model", m));
                if let Some(t) = get("prompt_tokens").or_else(|| get("input_tokens")) {
                    out.push(("gen_ai.usage.input_tokens", t));
                }
                if let Some(t) = get("completion_tokens").or_else(|| get("summary_tokens")) {
                    out.push(("gen_ai.usage.output_tokens", t));
                }
                out.push(("gen_ai.output.type", json!("text")));
            }
        }
        _ => {}
    }
    let llm = name == "compact.summary_created" && data.get("model").is_some_and(|m| !m.is_null());
    out.push((
        "openinference.span.kind",
        json!(if llm { "LLM" } else { "CHAIN" }),
    ));
    out
}

fn nanos(ts: &str) -> Option<String> {
    let ms = parse_rfc3339_millis(ts)?;
    Some((i128::from(ms) * 1_000_000).max(0).to_string())
}

/// The `ExportTraceServiceRequest` for a batch.
pub(crate) fn to_otlp_request(batch: &[Event], service_name: &str) -> Value {
    // Per session, in first-seen order: resource attributes and spans.
    let mut order: Vec<String> = Vec::new();
    let mut resources: BTreeMap<String, (Map<String, Value>, Vec<Value>)> = BTreeMap::new();
    for ev in batch {
        let sid = ev.trace_id().to_owned();
        let entry = resources.entry(sid.clone()).or_insert_with(|| {
            order.push(sid.clone());
            let mut attrs = Map::new();
            attrs.insert(
                "service.name".to_owned(),
                Value::String(service_name.to_owned()),
            );
            attrs.insert(SESSION_ATTRIBUTE.to_owned(), Value::String(sid.clone()));
            (attrs, Vec::new())
        });
        let mut ev = ev.clone();
        truncate_event(&mut ev);
        match ev {
            Event::Trace(t) => {
                if let Some(name) = t.name {
                    entry
                        .0
                        .insert("compact.trace.name".to_owned(), Value::String(name));
                }
                for (k, v) in t.metadata.unwrap_or_default() {
                    if k != "service.name" && k != SESSION_ATTRIBUTE {
                        entry.0.insert(k, Value::String(v));
                    }
                }
            }
            Event::Span(s) => {
                let Some(start) = nanos(&s.started_at) else {
                    continue;
                };
                let end = s
                    .ended_at
                    .as_deref()
                    .and_then(nanos)
                    .unwrap_or_else(|| start.clone());
                let mut attrs = s.data.clone();
                if let Some(kind) = &s.kind {
                    attrs.insert(KIND_ATTRIBUTE.to_owned(), Value::String(kind.clone()));
                }
                // Conventions never hide our own keys (none of ours has a dot).
                for (k, v) in genai_attributes(s.name.as_deref().unwrap_or(""), &s.data) {
                    attrs.entry(k.to_owned()).or_insert(v);
                }
                attrs
                    .entry(SESSION_ATTRIBUTE.to_owned())
                    .or_insert_with(|| Value::String(s.trace_id.clone()));
                let status = match s.status {
                    SpanStatus::Ok => json!({"code": 1}),
                    SpanStatus::Error => {
                        let msg = s
                            .data
                            .get("error")
                            .and_then(|e| e.get("message").and_then(Value::as_str).or(e.as_str()))
                            .unwrap_or("");
                        json!({"code": 2, "message": msg})
                    }
                };
                let mut span = json!({
                    "traceId": trace_id_for(&s.trace_id),
                    "spanId": span_id_for(&s.span_id),
                    "name": s.name.clone().or(s.kind.clone()).unwrap_or_else(|| "span".to_owned()),
                    "kind": 1,
                    "startTimeUnixNano": start,
                    "endTimeUnixNano": end,
                    "attributes": key_values(&attrs),
                    "status": status,
                });
                if let (Some(p), Some(obj)) = (&s.parent_id, span.as_object_mut()) {
                    obj.insert("parentSpanId".to_owned(), Value::String(span_id_for(p)));
                }
                entry.1.push(span);
            }
        }
    }
    let resource_spans: Vec<Value> = order
        .iter()
        .filter_map(|sid| resources.remove(sid))
        .filter(|(_, spans)| !spans.is_empty())
        .map(|(attrs, spans)| {
            json!({
                "resource": {"attributes": key_values(&attrs)},
                "scopeSpans": [{
                    "scope": {"name": "compact", "version": env!("CARGO_PKG_VERSION")},
                    "spans": spans,
                }],
            })
        })
        .collect();
    json!({"resourceSpans": resource_spans})
}

impl Exporter for OtlpExporter {
    fn name(&self) -> &str {
        "otlp"
    }

    fn export<'a>(&'a self, batch: &'a [Event]) -> BoxFuture<'a, Result<(), ExportError>> {
        Box::pin(async move {
            let deadline = Instant::now() + self.sender.opts.deadline;
            let spans = batch.iter().filter(|e| e.as_span().is_some()).count() as u64;
            if spans == 0 {
                // Trace events alone have no OTLP form; they ride along
                // with their session's next spans.
                return Ok(());
            }
            let request = to_otlp_request(batch, &self.service_name);
            let body = match self.protocol {
                OtlpProtocol::HttpJson => serde_json::to_vec(&request)?,
                OtlpProtocol::HttpProtobuf => crate::protobuf::encode_request(&request),
            };
            if body.len() > self.sender.opts.max_body_bytes {
                Counters::add(&self.sender.counters.events_failed, spans);
                let msg = format!("batch of {} bytes exceeds the body limit", body.len());
                self.sender.log.failure("otlp export failed", &msg);
                return Err(ExportError::Other(msg));
            }
            self.sender.post(&body, spans, deadline).await
        })
    }
}
