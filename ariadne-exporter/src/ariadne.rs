//! [`AriadneExporter`]: events to an Ariadne `/ingest` as `{"batch":[...]}`.

use std::time::Instant;

use compact_events::BoxFuture;
use compact_events::{Event, ExportError, Exporter};

use crate::BuildError;
use crate::http::{Counters, HttpOptions, SendStats, Sender};
use crate::truncate::fit;

const OPEN: &[u8] = br#"{"batch":["#;
const CLOSE: &[u8] = b"]}";

/// POSTs events to an Ariadne server's `/ingest` (`telemetry.ariadne_url`).
///
/// Each `export` call: every event is truncated with the server's rules
/// (and reduced further if one event alone would not fit a body), the
/// events are packed in order into `{"batch":[...]}` bodies of at most
/// [`HttpOptions::max_body_bytes`], and the bodies are POSTed one after the
/// other, each retried on 5xx, 408, 429, timeouts and connection errors
/// with doubling backoff, within [`HttpOptions::deadline`]. A failure is
/// returned to the dispatcher (which counts it and carries on) and logged
/// to stderr with the `[Ariadne]` prefix, at most once per 30 s.
#[derive(Debug)]
pub struct AriadneExporter {
    sender: Sender,
}

impl AriadneExporter {
    /// An exporter for `url` (e.g. `http://127.0.0.1:5175/ingest`).
    pub fn new(url: &str, opts: HttpOptions) -> Result<Self, BuildError> {
        Ok(AriadneExporter {
            sender: Sender::new(url, opts, "ariadne export failed")?,
        })
    }

    /// The URL events go to.
    pub fn url(&self) -> &str {
        self.sender.url().as_str()
    }

    /// Counters so far.
    pub fn stats(&self) -> SendStats {
        self.sender.counters.snapshot()
    }
}

/// Packs encoded events, in order, into `{"batch":[...]}` bodies of at
/// most `max_body` bytes each. Every event must already fit alone.
pub(crate) fn pack_bodies(events: Vec<Vec<u8>>, max_body: usize) -> Vec<(Vec<u8>, u64)> {
    let mut bodies = Vec::new();
    let mut cur: Vec<u8> = Vec::new();
    let mut count = 0u64;
    for ev in events {
        let extra = ev.len() + usize::from(count > 0);
        if count > 0 && cur.len() + extra + CLOSE.len() > max_body {
            cur.extend_from_slice(CLOSE);
            bodies.push((std::mem::take(&mut cur), count));
            count = 0;
        }
        if count == 0 {
            cur.extend_from_slice(OPEN);
        } else {
            cur.push(b',');
        }
        cur.extend_from_slice(&ev);
        count += 1;
    }
    if count > 0 {
        cur.extend_from_slice(CLOSE);
        bodies.push((cur, count));
    }
    bodies
}

impl Exporter for AriadneExporter {
    fn name(&self) -> &str {
        "ariadne"
    }

    fn export<'a>(&'a self, batch: &'a [Event]) -> BoxFuture<'a, Result<(), ExportError>> {
        Box::pin(async move {
            let deadline = Instant::now() + self.sender.opts.deadline;
            let max_body = self.sender.opts.max_body_bytes;
            let per_event = max_body.saturating_sub(OPEN.len() + CLOSE.len());
            let mut encoded = Vec::with_capacity(batch.len());
            let mut unencodable = 0u64;
            for ev in batch {
                match fit(ev, per_event) {
                    Some(f) => {
                        if f.reduced {
                            Counters::add(&self.sender.counters.events_truncated, 1);
                        }
                        encoded.push(f.bytes);
                    }
                    None => unencodable += 1,
                }
            }
            if unencodable > 0 {
                Counters::add(&self.sender.counters.events_failed, unencodable);
                self.sender.log.failure(
                    "ariadne export failed",
                    &format!("{unencodable} events could not be made to fit {max_body} bytes"),
                );
            }
            let mut result = Ok(());
            let mut bodies = pack_bodies(encoded, max_body).into_iter();
            for (body, n) in bodies.by_ref() {
                if let Err(e) = self.sender.post(&body, n, deadline).await {
                    result = Err(e);
                    break;
                }
            }
            // Bodies after a failure are not tried (the server is down or
            // refusing; the deadline is spent): count them as failed.
            for (_, n) in bodies {
                Counters::add(&self.sender.counters.bodies_failed, 1);
                Counters::add(&self.sender.counters.events_failed, n);
            }
            if result.is_ok() && unencodable > 0 {
                result = Err(ExportError::Other(format!(
                    "{unencodable} events too large to send"
                )));
            }
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_keeps_order_and_limits() {
        let evs: Vec<Vec<u8>> = (0..50)
            .map(|i| format!("{{\"i\":{i}}}").into_bytes())
            .collect();
        let bodies = pack_bodies(evs, 64);
        let mut seen = Vec::new();
        for (b, n) in &bodies {
            assert!(b.len() <= 64, "{}", b.len());
            let v: serde_json::Value = serde_json::from_slice(b).unwrap();
            let arr = v["batch"].as_array().unwrap();
            assert_eq!(arr.len() as u64, *n);
            seen.extend(arr.iter().map(|e| e["i"].as_i64().unwrap()));
        }
        assert_eq!(seen, (0..50).collect::<Vec<_>>());
        assert!(pack_bodies(Vec::new(), 64).is_empty());
    }
}
