//! The message model: what agents send, kept losslessly.
//!
//! A [`Message`] wraps the JSON object exactly as the agent sent it (unknown
//! fields included) together with a format-neutral [`Kind`] that the pipeline
//! reasons about: who speaks, which tool calls an item makes and which calls it
//! answers. Codecs (`codec`) turn wire JSON into messages and report bad input
//! with a JSON path; [`groups`] and [`turns`] give the units of eviction; the
//! [`validate()`] function finds orphaned tool results and unanswered calls.
//!
//! Three wire formats: OpenAI Chat Completions, OpenAI Responses and Anthropic
//! Messages (`anthropic`). A format is a codec that fills the same [`Kind`]; the
//! pipeline reasons about `Kind` only.

mod anthropic;
mod codec;
mod error;
mod groups;
mod message;
mod repair;
mod request;
mod validate;

pub use anthropic::cache_control_ttl;
pub use codec::{Format, detect_format};
pub use error::InputError;
pub use groups::{groups, turn_of_groups, turns};
pub use message::{
    BRIDGE_TEXT, BreakpointMark, CallRef, ItemType, Kind, Markers, Message, Role, Shape,
};
pub use repair::{Repaired, missing_result_placeholder, repair};
pub use request::{Item, Request};
pub use validate::{Problem, lost_results, validate};
