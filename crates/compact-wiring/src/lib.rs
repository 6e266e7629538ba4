//! The composition root every program that compacts shares: the `compact`
//! binary (CLI and `compact serve`'s session API) and the Python wheel
//! (`crates/compact-py`). The library cannot build these parts itself,
//! because they live in crates that depend on it.
//!
//! - `parts`: [`Parts`], the exporters `telemetry.exporter` names (Ariadne,
//!   OTLP), the archive adapter `storage.adapter` names (fs; S3 with the
//!   cargo feature `s3`, also as [`s3_adapter`] for `compact archive`),
//!   and the session store; [`manager`] builds a manager from them.
//! - `store`: [`session_store`] (`state.store`), and [`set_state_file`]
//!   for a `--state FILE` flag.
//! - `usage`: [`usage_tokens`] and [`usage_figures`] (cache reads and writes too), the provider's reported usage of the last
//!   response as the callers pass it (the sidecar's `usage`, the wheel's
//!   `usage=`).
//! - `error`: [`WiringError`].

mod error;
mod parts;
mod store;
mod usage;

pub use error::WiringError;
pub use parts::{Parts, exporting_builder, manager, s3_adapter};
pub use store::{session_store, set_state_file};
pub use usage::{usage_figures, usage_tokens};
