//! A response body on its way to the caller: every chunk passes as it
//! came, when the caller reads it (back-pressure: nothing is read from the
//! upstream ahead of the caller), while a [`Reader`] notes the usage and
//! the first output. A body silent for longer than the idle timeout is
//! cut off. When the body ends, fails or the caller goes away, the
//! observations go to one callback, once.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use futures_util::Stream;

use super::wire::{Reader, Usage};

/// What was seen of one response body.
#[derive(Debug, Clone)]
pub(crate) struct Observed {
    pub(crate) usage: Usage,
    /// The provider's usage object, as reported.
    pub(crate) reported: Option<serde_json::Value>,
    /// When the first output event passed (streams).
    pub(crate) first_output: Option<Instant>,
    /// Why the body did not end normally (the caller went away, the
    /// upstream failed or fell silent).
    pub(crate) error: Option<String>,
}

type Upstream = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;
type Done = Box<dyn FnOnce(Observed) + Send>;

pub(crate) struct Tap {
    inner: Upstream,
    idle: Duration,
    timer: Pin<Box<tokio::time::Sleep>>,
    reader: Option<Reader>,
    first_output: Option<Instant>,
    done: Option<Done>,
    ended: bool,
    /// Bytes still to come of a body of known length: the caller stops
    /// reading after the last of them, so that is where the body ends.
    remaining: Option<u64>,
}

impl Tap {
    /// `reader` is `None` for a body nobody reads (not JSON, not SSE).
    pub(crate) fn new(
        inner: Upstream,
        idle: Duration,
        reader: Option<Reader>,
        length: Option<u64>,
        done: Done,
    ) -> Self {
        let mut tap = Self {
            inner,
            idle,
            timer: Box::pin(tokio::time::sleep(idle)),
            reader,
            first_output: None,
            done: Some(done),
            ended: false,
            remaining: length,
        };
        if length == Some(0) {
            // Nothing to read: the caller may never poll an empty body.
            tap.end(None);
        }
        tap
    }

    fn end(&mut self, error: Option<String>) {
        self.ended = true;
        let Some(done) = self.done.take() else { return };
        let (usage, reported) = match &mut self.reader {
            Some(reader) => {
                if error.is_none() {
                    reader.finish();
                }
                (reader.usage, reader.reported.take())
            }
            None => (Usage::default(), None),
        };
        done(Observed {
            usage,
            reported,
            first_output: self.first_output,
            error,
        });
    }
}

impl Stream for Tap {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.ended {
            return Poll::Ready(None);
        }
        match self.inner.as_mut().poll_next(cx) {
            Poll::Ready(Some(Ok(bytes))) => {
                let deadline = tokio::time::Instant::now() + self.idle;
                self.timer.as_mut().reset(deadline);
                if let Some(reader) = &mut self.reader
                    && reader.chunk(&bytes)
                {
                    self.first_output = Some(Instant::now());
                }
                if let Some(left) = &mut self.remaining {
                    *left = left.saturating_sub(bytes.len() as u64);
                    if *left == 0 {
                        self.end(None);
                    }
                }
                Poll::Ready(Some(Ok(bytes)))
            }
            Poll::Ready(Some(Err(e))) => {
                let message = format!("the upstream's body failed: {}", e.without_url());
                self.end(Some(message.clone()));
                Poll::Ready(Some(Err(std::io::Error::other(message))))
            }
            Poll::Ready(None) => {
                self.end(None);
                Poll::Ready(None)
            }
            Poll::Pending => match self.timer.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    let message = format!(
                        "the upstream's body was silent for {} ms (proxy.idle_timeout_ms)",
                        self.idle.as_millis()
                    );
                    self.end(Some(message.clone()));
                    Poll::Ready(Some(Err(std::io::Error::other(message))))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        if self.done.is_some() {
            self.end(Some("the caller closed the connection first".into()));
        }
    }
}
