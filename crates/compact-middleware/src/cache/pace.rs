//! The cost model behind `policy.cache: auto` (docs/design.md §5 step 5,
//! docs/performance.md "What compaction costs").
//!
//! With a prompt cache, a call pays the full input price only for what is
//! new since the previous call and about a tenth of it for the prefix the
//! provider serves. A compaction rewrites the prefix after the pinned
//! messages, so the call after it pays the full price (or the cache-write
//! price) for everything it kept. Between two compactions the context grows
//! from the depth `D` a compaction left to the point `T` where the next one
//! fires, `g` tokens a call; per call that costs, in units of the cached
//! price,
//!
//! ```text
//!   g·r  +  (D + T) / 2  +  (r − 1)·D·g / (T − D)
//!   new     cached prefix    the break, spread over the (T − D)/g calls
//! ```
//!
//! with `r` = (full or cache-write price) / cached price (10 for OpenAI's
//! listed models, 12.5 for Anthropic's 5-minute writes). It is the economic
//! order quantity: for a given depth the cheapest run length is
//! `T − D = √(2(r − 1)·D·g)`, and a shallower depth is always cheaper. So
//! `auto` (1) compacts once the context has grown that far past the depth
//! the last compaction reached, even well below the window (never below
//! `policy.cache_min_tokens`: what the agent sees matters more than a
//! tenth of a price), and (2) compacts deep enough that the next compaction
//! is that run length away, never aiming below the lower of
//! `reactive_target_pct` of the window and a third of `cache_min_tokens`. A run
//! is never shorter than [`MIN_CALLS_PER_BREAK`] calls of the observed
//! growth.

use serde::{Deserialize, Serialize};

use crate::cache::CacheRule;
use crate::price::{Price, Ttl};

/// Calls observed before the model decides anything: the first calls of an
/// agent run (the task, the first reads) say little about its pace.
pub const MIN_OBSERVED: u32 = 3;
/// The shortest run between two compactions the model plans, in calls of
/// the observed growth.
pub const MIN_CALLS_PER_BREAK: f64 = 10.0;
/// A compaction never aims below `policy.cache_min_tokens` over this: a
/// third. Deeper is cheaper (the cost above falls with `D`), and what a
/// compaction folds stays in the summary. A third is the deepest floor
/// whose tuning split kept its synthetic tool facts within half a point of
/// a half's, with every real-trajectory bar held (docs/performance.md,
/// "How deep").
const DEPTH_FLOOR_DIVISOR: usize = 3;
/// Weight of the latest call in the growth average: about the last seven
/// calls count.
const GROWTH_WEIGHT: f64 = 0.25;
/// Full price over cached price when the model's prices are unknown (the
/// listed ratio of OpenAI's and Anthropic's current models).
const DEFAULT_PRICE_RATIO: f64 = 10.0;

/// What a session's calls say about its pace: how many tokens a call adds
/// and how deep the last compaction went. Kept with the session state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Pace {
    /// Tokens a call adds to the context: a moving average over the calls
    /// that continued the previous output.
    pub growth: f64,
    /// Calls averaged into `growth`.
    pub observed: u32,
    /// Tokens of the request the last compaction returned.
    pub depth: Option<usize>,
}

impl Pace {
    /// Records a call whose request holds `tokens`, `previous` being what
    /// the session's previous call returned (`None` when this call does not
    /// continue it: a new session or a rewritten history).
    pub fn observe(&mut self, tokens: usize, previous: Option<usize>) {
        let Some(previous) = previous else {
            return;
        };
        let added = tokens.saturating_sub(previous) as f64;
        self.growth = if self.observed == 0 {
            added
        } else {
            self.growth + GROWTH_WEIGHT * (added - self.growth)
        };
        self.observed = self.observed.saturating_add(1);
    }

    /// Records a compaction that returned `tokens`.
    pub fn compacted(&mut self, tokens: usize) {
        self.depth = Some(tokens);
    }

    /// The plan for this call, `None` until [`MIN_OBSERVED`] calls were seen
    /// or while the context does not grow.
    pub fn plan(&self, costs: &Costs, floors: Floors) -> Option<Plan> {
        if self.observed < MIN_OBSERVED || self.growth < 1.0 {
            return None;
        }
        let g = self.growth;
        let aim_floor = floors.aim_floor();
        let depth = self.depth.unwrap_or(aim_floor).max(aim_floor) as f64;
        let run = (2.0 * (costs.ratio - 1.0) * depth * g)
            .sqrt()
            .max(MIN_CALLS_PER_BREAK * g);
        let trigger = (depth + run).max(floors.min_tokens as f64);
        Some(Plan {
            trigger: trigger.round() as usize,
            run: run.round() as usize,
            aim_floor,
            growth: g.round() as usize,
        })
    }
}

/// What the cost model must not go below.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Floors {
    /// `policy.cache_min_tokens`.
    pub min_tokens: usize,
    /// `reactive_target_pct` of the window, in tokens.
    pub reactive_target: usize,
}

impl Floors {
    /// The lowest depth the model aims at.
    pub fn aim_floor(self) -> usize {
        self.reactive_target
            .min(self.min_tokens / DEPTH_FLOOR_DIVISOR)
    }
}

/// The prices the model weighs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Costs {
    /// What a token re-sent after a compaction costs (the input price, or
    /// Anthropic's cache-write price) over what a cached token costs.
    pub ratio: f64,
}

impl Costs {
    /// The ratio of `price` under `rule`, Anthropic's writes priced for
    /// `ttl` (`policy.cache_ttl`); the listed ratio of current models (10)
    /// when the price or its cached figure is unknown.
    pub fn of(price: Option<&Price>, rule: CacheRule, ttl: Ttl) -> Self {
        let ratio = price
            .and_then(|p| {
                let cached = p.cached_input.filter(|c| *c > 0.0)?;
                let full = match rule {
                    CacheRule::Anthropic => p.cache_write(ttl),
                    CacheRule::Openai => p.input,
                };
                Some(full / cached)
            })
            .filter(|r| r.is_finite() && *r > 1.0)
            .unwrap_or(DEFAULT_PRICE_RATIO);
        Self { ratio }
    }
}

/// The cost model's answer for one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// Compact once the request reaches this many tokens.
    pub trigger: usize,
    /// The run planned between two compactions, in tokens: a compaction
    /// aims this far below the point where the next one fires.
    pub run: usize,
    /// The lowest depth aimed at.
    pub aim_floor: usize,
    /// The observed growth per call, in tokens.
    pub growth: usize,
}

impl Plan {
    /// Where a compaction aims when the next one would fire at
    /// `next_trigger` tokens: a run below it, never under the floor, never
    /// above `target` (`target_pct` of the window).
    pub fn target(&self, next_trigger: usize, target: usize) -> usize {
        next_trigger
            .saturating_sub(self.run)
            .max(self.aim_floor)
            .min(target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLOORS: Floors = Floors {
        min_tokens: 24_000,
        reactive_target: 51_200,
    };

    fn paced(growth: usize, depth: Option<usize>) -> Pace {
        let mut p = Pace::default();
        let mut tokens = 5_000;
        for _ in 0..MIN_OBSERVED + 2 {
            p.observe(tokens + growth, Some(tokens));
            tokens += growth;
        }
        p.depth = depth;
        p
    }

    #[test]
    fn nothing_is_planned_before_the_pace_is_known() {
        let mut p = Pace::default();
        p.observe(9_000, Some(8_000));
        p.observe(10_000, Some(9_000));
        assert_eq!(p.plan(&Costs { ratio: 10.0 }, FLOORS), None);
        p.observe(11_000, None);
        assert_eq!(
            p.plan(&Costs { ratio: 10.0 }, FLOORS),
            None,
            "a fresh call is not a pace"
        );
        p.observe(12_000, Some(11_000));
        assert!(p.plan(&Costs { ratio: 10.0 }, FLOORS).is_some());
    }

    #[test]
    fn the_run_is_the_economic_order_quantity() {
        let plan = paced(800, Some(14_000))
            .plan(&Costs { ratio: 10.0 }, FLOORS)
            .unwrap_or_else(|| panic!("planned"));
        // √(2·9·14,000·800) = 14,199.
        assert_eq!(plan.run, 14_199);
        assert_eq!(plan.trigger, 28_199);
        assert_eq!(plan.growth, 800);
    }

    #[test]
    fn a_slow_run_is_never_shorter_than_ten_calls() {
        let plan = paced(5_000, Some(12_000))
            .plan(&Costs { ratio: 10.0 }, FLOORS)
            .unwrap_or_else(|| panic!("planned"));
        assert_eq!(plan.run, 50_000);
    }

    #[test]
    fn the_trigger_never_falls_below_the_floor() {
        let plan = paced(50, Some(12_000))
            .plan(&Costs { ratio: 10.0 }, FLOORS)
            .unwrap_or_else(|| panic!("planned"));
        assert_eq!(plan.trigger, 24_000);
    }

    #[test]
    fn the_target_stays_between_the_floor_and_target_pct() {
        let plan = paced(800, Some(14_000))
            .plan(&Costs { ratio: 10.0 }, FLOORS)
            .unwrap_or_else(|| panic!("planned"));
        assert_eq!(plan.target(100_000, 76_800), 76_800);
        assert_eq!(plan.target(40_000, 76_800), 40_000 - 14_199);
        assert_eq!(
            plan.target(20_000, 76_800),
            8_000,
            "never below a third of cache_min_tokens"
        );
    }

    #[test]
    fn the_price_ratio_follows_the_rule() {
        let price = Price {
            input: 3.0,
            cached_input: Some(0.3),
            cache_write: Some(3.75),
            cache_write_1h: Some(6.0),
            output: 15.0,
        };
        let five = Ttl::FiveMinutes;
        assert_eq!(
            Costs::of(Some(&price), CacheRule::Anthropic, five).ratio,
            12.5
        );
        assert_eq!(
            Costs::of(Some(&price), CacheRule::Anthropic, Ttl::OneHour).ratio,
            20.0,
            "policy.cache_ttl: 1h weighs the 1-hour write"
        );
        assert!(
            (Costs::of(Some(&price), CacheRule::Openai, Ttl::OneHour).ratio - 10.0).abs() < 1e-9
        );
        assert_eq!(Costs::of(None, CacheRule::Openai, five).ratio, 10.0);
        let no_cache = Price {
            cached_input: None,
            ..price
        };
        assert_eq!(
            Costs::of(Some(&no_cache), CacheRule::Openai, five).ratio,
            10.0
        );
    }
}
