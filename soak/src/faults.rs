//! Injected faults. Summarizer faults for now; exporter and storage faults
//! join as those adapters do.

use std::sync::Mutex;
use std::time::Duration;

use compact_middleware::BoxFuture;
use compact_middleware::summarize::{
    ExtractiveSummarizer, SummarizeError, Summarizer, Summary, SummaryRequest,
};

use crate::rng::Rng;

/// A summarizer standing in for an LLM that fails in every way an LLM
/// endpoint does: errors, timeouts, refusals, empty, over-long summaries.
/// When it succeeds it answers like the extractive one.
#[derive(Debug)]
pub struct FlakySummarizer {
    rng: Mutex<Rng>,
    failure_rate: f64,
}

impl FlakySummarizer {
    pub fn new(seed: u64, failure_rate: f64) -> Self {
        Self {
            rng: Mutex::new(Rng::new(seed)),
            failure_rate,
        }
    }

    fn draw(&self) -> u64 {
        let mut r = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        if r.chance(self.failure_rate) {
            1 + r.below(5)
        } else {
            0
        }
    }
}

impl Summarizer for FlakySummarizer {
    fn name(&self) -> &str {
        "flaky-llm"
    }

    fn summarize<'a>(
        &'a self,
        req: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<Summary, SummarizeError>> {
        let fault = self.draw();
        Box::pin(async move {
            match fault {
                1 => Err(SummarizeError::Transport("connection reset by peer".into())),
                2 => {
                    // A slow endpoint that then times out (kept short: simulated).
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    Err(SummarizeError::Timeout)
                }
                3 => Err(SummarizeError::Refusal("I can't help with that.".into())),
                4 => Ok(Summary {
                    text: String::new(),
                    tokens: 0,
                    model: Some("flaky".into()),
                    prompt_tokens: None,
                    completion_tokens: None,
                }),
                5 => {
                    // Ignores the budget.
                    let text = "too long ".repeat(req.max_tokens + 50);
                    Ok(Summary {
                        tokens: (req.count_tokens)(&text),
                        text,
                        model: Some("flaky".into()),
                        prompt_tokens: None,
                        completion_tokens: None,
                    })
                }
                _ => Ok(ExtractiveSummarizer.summarize_sync(req)),
            }
        })
    }
}
