//! `console`: one short human-readable line per event on stderr.

use std::fmt::Write as _;
use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;

use crate::exporter::{ExportError, Exporter};
use crate::payload::SummaryCreated;
use crate::span::{Event, parse_rfc3339_millis};

/// Most `key=value` pairs shown per line.
const MAX_FIELDS: usize = 6;
/// Longest value shown before it is cut with `…`.
const MAX_VALUE_CHARS: usize = 48;

type Sink = Arc<Mutex<Box<dyn Write + Send>>>;

/// Writes one line per event to stderr (or any writer), e.g.
///
/// ```text
/// 2026-01-01T00:00:00.042Z compact.trigger_decision ok 42ms session=s-1 triggered=true reason="usage_pct >= trigger_pct"
/// ```
///
/// Only scalar `data` fields are shown, a few of them, cut short: the line
/// is for a human glancing at a terminal, the JSONL exporter keeps it all.
pub struct ConsoleExporter {
    out: Sink,
}

impl std::fmt::Debug for ConsoleExporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleExporter").finish_non_exhaustive()
    }
}

impl Default for ConsoleExporter {
    fn default() -> Self {
        Self::new()
    }
}

impl ConsoleExporter {
    /// Writes to stderr.
    pub fn new() -> Self {
        Self::with_writer(Box::new(std::io::stderr()))
    }

    /// Writes to `out` instead (a file, a buffer in a test).
    pub fn with_writer(out: Box<dyn Write + Send>) -> Self {
        ConsoleExporter {
            out: Arc::new(Mutex::new(out)),
        }
    }

    /// The line (without newline) this exporter prints for `event`.
    pub fn format_line(event: &Event) -> String {
        let mut line = String::new();
        match event {
            Event::Span(span) => {
                let at = span.ended_at.as_deref().unwrap_or(&span.started_at);
                let name = span.name.as_deref().unwrap_or("span");
                let _ = write!(line, "{at} {name} {}", span.status.as_str());
                let duration = span
                    .ended_at
                    .as_deref()
                    .and_then(parse_rfc3339_millis)
                    .zip(parse_rfc3339_millis(&span.started_at))
                    .map(|(end, start)| end - start);
                if let Some(ms) = duration {
                    let _ = write!(line, " {ms}ms");
                }
                push_pair(&mut line, "session", &span.trace_id);
                let scalars = span.data.iter().filter(|(k, v)| {
                    // The summary text is long by nature; it has its own exporter.
                    k.as_str() != SummaryCreated::OUTPUT_TEXT && !(v.is_object() || v.is_array())
                });
                for (key, value) in scalars.take(MAX_FIELDS) {
                    let text = match value {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    push_pair(&mut line, key, &text);
                }
            }
            Event::Trace(trace) => {
                let at = trace
                    .ended_at
                    .as_deref()
                    .or(trace.started_at.as_deref())
                    .unwrap_or("-");
                let _ = write!(line, "{at} trace");
                push_pair(&mut line, "session", &trace.trace_id);
                if let Some(name) = &trace.name {
                    push_pair(&mut line, "name", name);
                }
                if let Some(metadata) = &trace.metadata {
                    for (key, value) in metadata.iter().take(MAX_FIELDS) {
                        push_pair(&mut line, key, value);
                    }
                }
            }
        }
        line
    }
}

// `key=value`, quoting values with spaces or quotes, cutting long ones, and
// escaping control characters so one event is always one line.
fn push_pair(line: &mut String, key: &str, value: &str) {
    let mut shown: String = value.chars().take(MAX_VALUE_CHARS).collect();
    if value.chars().nth(MAX_VALUE_CHARS).is_some() {
        shown.push('…');
    }
    let needs_quotes = shown.is_empty()
        || shown
            .chars()
            .any(|c| c.is_whitespace() || c == '"' || c == '=' || c.is_control());
    line.push(' ');
    line.push_str(key);
    line.push('=');
    if needs_quotes {
        line.push('"');
        for c in shown.chars() {
            match c {
                '"' => line.push_str("\\\""),
                '\\' => line.push_str("\\\\"),
                '\n' => line.push_str("\\n"),
                '\r' => line.push_str("\\r"),
                '\t' => line.push_str("\\t"),
                c if c.is_control() => {
                    let _ = write!(line, "\\u{{{:x}}}", c as u32);
                }
                c => line.push(c),
            }
        }
        line.push('"');
    } else {
        line.push_str(&shown);
    }
}

fn write_all(out: &Sink, text: &[u8]) -> Result<(), ExportError> {
    let mut out = out.lock().unwrap_or_else(PoisonError::into_inner);
    out.write_all(text)?;
    out.flush()?;
    Ok(())
}

impl Exporter for ConsoleExporter {
    fn name(&self) -> &str {
        "console"
    }

    fn export<'a>(&'a self, batch: &'a [Event]) -> crate::BoxFuture<'a, Result<(), ExportError>> {
        Box::pin(async move {
            let mut text = String::new();
            for event in batch {
                text.push_str(&Self::format_line(event));
                text.push('\n');
            }
            // stderr can block (a full pipe); keep that off the async thread.
            if tokio::runtime::Handle::try_current().is_ok() {
                let out = Arc::clone(&self.out);
                tokio::task::spawn_blocking(move || write_all(&out, text.as_bytes()))
                    .await
                    .map_err(|e| ExportError::Other(format!("console writer task: {e}")))?
            } else {
                write_all(&self.out, text.as_bytes())
            }
        })
    }
}
