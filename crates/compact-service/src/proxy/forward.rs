//! One call through the proxy: read the body (413 past the limit), find
//! the session, compact through the core, forward, and hand the response
//! back as it comes; a context-length refusal is compacted on the reactive
//! path and sent once more. Failures of ours take the provider's error
//! shape: 404 (no upstream), 413, 502 (upstream unreachable), 504.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use compact_middleware::events::payload::ModelCall;
use compact_middleware::events::{SpanBuilder, names};
use compact_middleware::model::Item;
use futures_util::StreamExt;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::Inner;
use super::compact::{Call, Plan};
use super::identity::{Identity, SESSION_HEADER, identify};
use super::tap::{Observed, Tap};
use super::wire::{self, Api, Reader, Shape};

/// The header that tells the caller what compaction did.
const COMPACTION_HEADER: &str = "x-compact-compaction";
/// Error bodies read to look for a context-length refusal, at most.
const MAX_ERROR_BODY: usize = 1024 * 1024;

/// Headers never forwarded either way: hop-by-hop ones (RFC 9110 §7.6.1),
/// and the ones the proxy sets itself.
fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "proxy-connection"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "host"
            | "content-length"
    )
}

pub(crate) async fn handle(State(p): State<Arc<Inner>>, req: Request) -> Response {
    let arrived = Instant::now();
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_owned();
    let Some((upstream, rest)) = p.upstreams.route(&path) else {
        let shape = Shape::of(&path, &parts.headers);
        return wire::error(
            shape,
            StatusCode::NOT_FOUND,
            "not_found",
            &format!("compact proxy: no upstream for {path}"),
        );
    };
    let shape = Shape::of(rest, &parts.headers);
    if rest != "/v1" && !rest.starts_with("/v1/") {
        return wire::error(
            shape,
            StatusCode::NOT_FOUND,
            "not_found",
            &format!("compact proxy: only /v1/ paths are forwarded (got {path})"),
        );
    }
    let api = Api::of(&parts.method, rest);
    let limit = p.settings.max_body_bytes;
    let bytes = match read_body_or_answer(body, &parts.headers, limit, shape).await {
        Ok(bytes) => bytes,
        Err(answer) => return answer,
    };
    let compressed = parts
        .headers
        .get(header::CONTENT_ENCODING)
        .is_some_and(|v| v.as_bytes() != b"identity");
    let compacting = p.settings.compaction && api != Api::Other && !compressed;
    let Read {
        doc,
        split,
        identity,
    } = match read_request(&p, &parts, &bytes, api, compacting) {
        Ok(read) => read,
        Err(message) => {
            return wire::error(
                shape,
                StatusCode::BAD_REQUEST,
                "invalid_session",
                &format!("compact proxy: {message}"),
            );
        }
    };
    let stream = doc
        .as_ref()
        .and_then(|d| d.get("stream"))
        .and_then(Value::as_bool)
        == Some(true);
    let model = doc
        .as_ref()
        .and_then(|d| d.get("model"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let usage = p.take_usage(&identity.id);
    let plan = plan(&p, doc, split, api, compressed, &identity.id, usage, &bytes).await;
    let overhead = arrived.elapsed();
    let url = upstream.url(rest, parts.uri.query());
    let record = Record {
        p: p.clone(),
        arrived,
        overhead,
        identity,
        api,
        path,
        upstream: upstream.label.clone(),
        model,
        stream,
        observe: parts.method != Method::GET && parts.method != Method::HEAD,
    };
    let first = send(
        &p,
        &parts.method,
        &parts.headers,
        url.clone(),
        plan.body.clone(),
    )
    .await;
    let (response, plan) = match first {
        Ok(response) => {
            reactive(
                &p,
                &record,
                &parts.method,
                &parts.headers,
                url,
                response,
                plan,
                &bytes,
            )
            .await
        }
        Err(failure) => {
            let answer = failure.answer(shape, &record.upstream);
            let error = Some(failure.message(&record.upstream));
            record.finish(
                &plan,
                answer.status(),
                Observed {
                    usage: Default::default(),
                    reported: None,
                    first_output: None,
                    error,
                },
            );
            return answer;
        }
    };
    respond(record, plan, response)
}

/// The request body, or the answer that refuses it (too large, unreadable)
/// in the agent's API's shape.
async fn read_body_or_answer(
    body: Body,
    headers: &HeaderMap,
    limit: usize,
    shape: Shape,
) -> Result<Bytes, Response> {
    match read_body(body, headers, limit).await {
        Ok(bytes) => Ok(bytes),
        Err(BodyError::TooLarge) => Err(wire::error(
            shape,
            StatusCode::PAYLOAD_TOO_LARGE,
            "request_too_large",
            &format!(
                "compact proxy: the request body is larger than proxy.max_body_bytes ({limit} bytes)"
            ),
        )),
        Err(BodyError::Read(e)) => Err(wire::error(
            shape,
            StatusCode::BAD_REQUEST,
            "invalid_body",
            &format!("compact proxy: the request body could not be read: {e}"),
        )),
    }
}

/// What goes upstream: the body as the agent sent it (compaction off,
/// another endpoint, a compressed body or one that is no JSON object), or
/// the session's preflight of it, whose decoded history is kept for the
/// next call.
#[allow(clippy::too_many_arguments)]
async fn plan(
    p: &Inner,
    doc: Option<Map<String, Value>>,
    split: Option<(Vec<&RawValue>, Vec<Item>)>,
    api: Api,
    compressed: bool,
    session: &str,
    usage: Option<Value>,
    bytes: &Bytes,
) -> Plan {
    match doc {
        _ if !p.settings.compaction => Plan::unchanged("off", bytes.clone(), None),
        _ if api == Api::Other => Plan::unchanged("none", bytes.clone(), None),
        _ if compressed => Plan::unchanged(
            "skipped",
            bytes.clone(),
            Some("the body is compressed (content-encoding)".into()),
        ),
        None => Plan::unchanged(
            "skipped",
            bytes.clone(),
            Some("the body is not a JSON object".into()),
        ),
        Some(doc) => {
            let call = Call {
                manager: &p.manager,
                api,
                session,
                usage,
                overflow: None,
            };
            let (raw, items) = split.unzip();
            let ran = call.run(doc, items, bytes).await;
            if let (Some(raw), Some(decoded)) = (raw, ran.decoded) {
                p.histories.keep(session, api.format(), &raw, decoded);
            }
            ran.plan
        }
    }
}

/// The request as the proxy reads it: a body-less method only names its
/// session; any other's body is read for compaction (`compacting`).
fn read_request<'b>(
    p: &Inner,
    parts: &axum::http::request::Parts,
    bytes: &'b Bytes,
    api: Api,
    compacting: bool,
) -> Result<Read<'b>, String> {
    match parts.method {
        Method::GET | Method::HEAD | Method::DELETE | Method::OPTIONS => {
            identify(&parts.headers, None, None, api).map(|identity| Read {
                doc: None,
                split: None,
                identity,
            })
        }
        _ => read(p, &parts.headers, bytes, api, compacting),
    }
}

/// A request body as the proxy reads it.
struct Read<'a> {
    /// Its fields; `None` when it is not a JSON object (or has no body).
    doc: Option<Map<String, Value>>,
    /// Its history's items, read apart from `doc` (whose history field is
    /// then an empty array): their text, and what the core takes of them.
    split: Option<(Vec<&'a RawValue>, Vec<Item>)>,
    identity: Identity,
}

/// Reads `bytes` once. A body to compact is read with its history apart
/// and the items the session sent before reused decoded
/// ([`super::history`]); any body that read does not take, or whose new
/// items would not parse, is parsed whole (and identified again), as every
/// other body is. Only a bad session header is an error.
fn read<'a>(
    p: &Inner,
    headers: &HeaderMap,
    bytes: &'a [u8],
    api: Api,
    compacting: bool,
) -> Result<Read<'a>, String> {
    if compacting && let Some(body) = super::body::split(bytes, api.history_key()) {
        let identity = identify(headers, Some(&body.doc), Some(&body.items), api)?;
        if let Some(items) = p.histories.items(&identity.id, api.format(), &body.items) {
            return Ok(Read {
                doc: Some(body.doc),
                split: Some((body.items, items)),
                identity,
            });
        }
    }
    let doc = serde_json::from_slice::<Map<String, Value>>(bytes).ok();
    let identity = identify(headers, doc.as_ref(), None, api)?;
    Ok(Read {
        doc,
        split: None,
        identity,
    })
}

/// The response, or, when the provider refused the request as longer than
/// its window, the response to the request compacted on the reactive path
/// (`Forced::ContextOverflow`) and sent once more.
#[allow(clippy::too_many_arguments)]
async fn reactive(
    p: &Arc<Inner>,
    record: &Record,
    method: &Method,
    headers: &HeaderMap,
    url: reqwest::Url,
    response: Upstream,
    plan: Plan,
    original: &Bytes,
) -> (Upstream, Plan) {
    let refusable = matches!(response.status.as_u16(), 400 | 413 | 422)
        && p.settings.compaction
        && record.api != Api::Other
        && matches!(plan.label, "none" | "applied");
    if !refusable {
        return (response, plan);
    }
    let Upstream {
        status,
        headers: response_headers,
        body,
    } = response;
    let bytes = match body {
        UpstreamBody::Stream(s) => collect(s, MAX_ERROR_BODY).await,
        UpstreamBody::Bytes(b) => b,
    };
    let buffered = |bytes: Bytes| Upstream {
        status,
        headers: response_headers.clone(),
        body: UpstreamBody::Bytes(bytes),
    };
    let Some(overflow) = wire::context_overflow(status, &bytes) else {
        return (buffered(bytes), plan);
    };
    if let Some(window) = overflow.window {
        // The provider's window is smaller than the one budgeted for: the
        // session budgets with the provider's from now on (its
        // conversation overlay, kept in the session record).
        let layer = serde_json::json!({ "max_context_tokens": window });
        if let Err(e) = p
            .manager
            .patch_conversation_overlay(&record.identity.id, layer)
            .await
        {
            tracing::warn!(error = %e, "the provider's stated window could not be kept for the session");
        }
    }
    let message = overflow.message;
    let Ok(doc) = serde_json::from_slice::<Map<String, Value>>(original) else {
        return (buffered(bytes), plan);
    };
    let call = Call {
        manager: &p.manager,
        api: record.api,
        session: &record.identity.id,
        usage: None,
        overflow: Some(message),
    };
    let retry = call.run(doc, None, original).await.plan;
    if retry.label != "reactive" {
        // Nothing smaller to send: the provider's refusal stands.
        let plan = Plan {
            error: retry.error.or(Some(
                "the provider refused the request as too long; nothing smaller to send".into(),
            )),
            ..plan
        };
        return (buffered(bytes), plan);
    }
    match send(p, method, headers, url, retry.body.clone()).await {
        Ok(second) => (second, retry),
        Err(failure) => {
            let message = failure.message(&record.upstream);
            (
                buffered(bytes),
                Plan {
                    error: Some(message),
                    ..retry
                },
            )
        }
    }
}

/// The response as the caller gets it: status and headers as the upstream
/// sent them (hop-by-hop ones aside), the body through a [`Tap`].
fn respond(record: Record, plan: Plan, response: Upstream) -> Response {
    let Upstream {
        status,
        headers,
        body,
    } = response;
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let sse = content_type.starts_with("text/event-stream");
    let reader = (sse || content_type.contains("json")).then(|| Reader::new(record.api, sse));
    let mut builder = Response::builder().status(status);
    for (name, value) in headers.iter() {
        if !hop_by_hop(name)
            || (name == header::CONTENT_LENGTH && matches!(body, UpstreamBody::Stream(_)))
        {
            builder = builder.header(name, value);
        }
    }
    if let Ok(v) = HeaderValue::from_str(&record.identity.id) {
        builder = builder.header(SESSION_HEADER, v);
    }
    builder = builder.header(COMPACTION_HEADER, plan.label);
    let idle = Duration::from_millis(record.p.settings.idle_timeout_ms);
    let (stream, length) = match body {
        UpstreamBody::Stream(s) => {
            let length = headers
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok());
            (s, length)
        }
        UpstreamBody::Bytes(b) => {
            let length = Some(b.len() as u64);
            (
                futures_util::stream::once(async move { Ok(b) }).boxed(),
                length,
            )
        }
    };
    let done = Box::new(move |observed| record.finish(&plan, status, observed));
    let tap = Tap::new(stream, idle, reader, length, done);
    builder.body(Body::from_stream(tap)).unwrap_or_else(|e| {
        let mut r = Response::new(Body::from(format!("compact proxy: {e}")));
        *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
        r
    })
}

/// What a call's span is made of, besides what its response shows.
struct Record {
    p: Arc<Inner>,
    arrived: Instant,
    overhead: Duration,
    identity: Identity,
    api: Api,
    path: String,
    upstream: String,
    model: Option<String>,
    stream: bool,
    /// Whether the call is a model call worth a span (not a `GET`).
    observe: bool,
}

impl Record {
    /// The call is over: its usage anchors the session's next estimate,
    /// and its span and figures go out.
    fn finish(self, plan: &Plan, status: StatusCode, observed: Observed) {
        if !self.observe {
            return;
        }
        let u = observed.usage;
        if status.is_success()
            && self.api != Api::Other
            && let Some(reported) = observed.reported
        {
            self.p.keep_usage(&self.identity.id, reported);
        }
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let latency = self.arrived.elapsed();
        let error = plan.error.clone().or(observed.error);
        let call = ModelCall {
            session_id: self.identity.id.clone(),
            session_source: self.identity.source.to_owned(),
            api: self.api.name().to_owned(),
            path: self.path,
            upstream: self.upstream,
            model: self.model,
            stream: self.stream,
            status: status.as_u16(),
            latency_ms: ms(latency),
            ttft_ms: if self.stream {
                observed
                    .first_output
                    .map(|t| ms(t.duration_since(self.arrived)))
            } else {
                None
            },
            input_tokens: u.input,
            cached_tokens: u.cached,
            output_tokens: u.output,
            compaction: plan.label.to_owned(),
            tokens_before: plan.tokens_before,
            tokens_after: plan.tokens_after,
            overhead_us: u64::try_from(self.overhead.as_micros()).unwrap_or(u64::MAX),
            error,
        };
        tracing::debug!(path = %call.path, status = call.status, compaction = %call.compaction, "proxied");
        self.p.metrics.record(&call);
        let span = SpanBuilder::started_ago(self.identity.id, names::MODEL_CALL, ms(latency))
            .kind(names::KIND_LLM)
            .finish_payload(&call);
        self.p.manager.dispatcher().emit(span);
    }
}

/// A response from the upstream: its body still streaming, or already read.
pub(crate) struct Upstream {
    status: StatusCode,
    headers: HeaderMap,
    body: UpstreamBody,
}

enum UpstreamBody {
    Stream(futures_util::stream::BoxStream<'static, reqwest::Result<Bytes>>),
    Bytes(Bytes),
}

/// Why the upstream gave no response.
enum Failure {
    Unreachable(String),
    Timeout(u64),
}

impl Failure {
    fn message(&self, upstream: &str) -> String {
        match self {
            Failure::Unreachable(e) => {
                format!("compact proxy: the upstream {upstream} is unreachable: {e}")
            }
            Failure::Timeout(ms) => format!(
                "compact proxy: the upstream {upstream} did not answer within {ms} ms (proxy.response_timeout_ms)"
            ),
        }
    }

    fn answer(&self, shape: Shape, upstream: &str) -> Response {
        let (status, code) = match self {
            Failure::Unreachable(_) => (StatusCode::BAD_GATEWAY, "upstream_unreachable"),
            Failure::Timeout(_) => (StatusCode::GATEWAY_TIMEOUT, "upstream_timeout"),
        };
        wire::error(shape, status, code, &self.message(upstream))
    }
}

/// Sends the request upstream: the caller's headers (its `Authorization`
/// or `x-api-key` among them) but hop-by-hop ones and ours, the body
/// uncompressed both ways so the proxy can read it.
async fn send(
    p: &Inner,
    method: &Method,
    headers: &HeaderMap,
    url: reqwest::Url,
    body: Bytes,
) -> Result<Upstream, Failure> {
    let mut out = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers.iter() {
        if !hop_by_hop(name) && name != header::ACCEPT_ENCODING && name.as_str() != SESSION_HEADER {
            out.append(name, value.clone());
        }
    }
    out.insert(
        header::ACCEPT_ENCODING,
        HeaderValue::from_static("identity"),
    );
    let request = p
        .client
        .request(method.clone(), url)
        .headers(out)
        .body(body);
    let wait = p.settings.response_timeout_ms;
    match tokio::time::timeout(Duration::from_millis(wait), request.send()).await {
        Err(_) => Err(Failure::Timeout(wait)),
        Ok(Err(e)) => Err(Failure::Unreachable(source_chain(&e.without_url()))),
        Ok(Ok(r)) => Ok(Upstream {
            status: r.status(),
            headers: r.headers().clone(),
            body: UpstreamBody::Stream(r.bytes_stream().boxed()),
        }),
    }
}

/// An error with its causes (`error sending request: … Connection refused`).
fn source_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// Up to `limit` bytes of a body (an error answer).
async fn collect(
    mut s: futures_util::stream::BoxStream<'static, reqwest::Result<Bytes>>,
    limit: usize,
) -> Bytes {
    let mut out = Vec::new();
    while let Some(Ok(chunk)) = s.next().await {
        out.extend_from_slice(&chunk);
        if out.len() > limit {
            break;
        }
    }
    Bytes::from(out)
}

enum BodyError {
    TooLarge,
    Read(String),
}

/// The request body, at most `limit` bytes (a declared length past it is
/// refused before reading).
async fn read_body(body: Body, headers: &HeaderMap, limit: usize) -> Result<Bytes, BodyError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(BodyError::TooLarge);
    }
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err(BodyError::TooLarge),
        Err(e) => Err(BodyError::Read(e.to_string())),
    }
}
