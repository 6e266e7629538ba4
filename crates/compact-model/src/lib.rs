//! The message model and everything that only reads it: what the
//! middleware, the summarizers, the proxy and the Python wheel all share,
//! with no I/O, no runtime and no configuration file of its own.
//!
//! - [`model`]: the message model. Lossless codecs for OpenAI Chat Completions
//!   messages, Responses input items and Anthropic Messages, atomic groups,
//!   turns, the validator.
//! - [`tokens`]: exact OpenAI BPE token accounting, model profiles, the
//!   per-message count cache.
//! - [`estimate`]: whole-request estimates and the breakdown, model limits.
//! - [`price`]: list prices per million tokens (`models.NAME.price` and the
//!   built-in table) and the cost of a call's input, cache and output tokens.
//! - [`rules`]: the validation rules of configuration values, shared by the
//!   crates that own a configuration section.
//!
//! `compact-middleware` re-exports these modules at their old paths
//! (`compact_middleware::model`, `::tokens`, `::estimate`, `::price`).
pub mod estimate;
pub mod model;
#[doc(hidden)]
pub mod prehashed;
pub mod price;
pub mod rules;
pub mod tokens;
