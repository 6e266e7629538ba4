//! Configuration (docs/design.md §10): the YAML schema,
//! `COMPACT_*` environment overrides, and validation that names the field path.
//!
//! Precedence, lowest first: built-in defaults, the YAML file, environment
//! variables, CLI flags ([`Loaded::set`]). [`Loaded::sources`] says which of
//! these supplied each effective value. Every key, default, rule and variable
//! is documented in `docs/configuration.md`; `config/default.yaml` spells out
//! the defaults and is checked against [`Config::default`] by the tests.
//!
//! - `schema`: the types ([`Config`] and its sections).
//! - `sections`, `process`: the `summarizer:`/`memory:` and `state:`/`server:`/`proxy:` sections.
//! - `rules`: the validation rules garde runs, with messages that show the value.
//! - `env`: the environment variable table and value parsing.
//! - `load`: merging, provenance, [`load`], [`Loaded`].
//! - `error`: [`ConfigError`] and [`FieldError`].
//!
//! Whether `model` has a profile is not checked here: the token module owns
//! the built-in profiles and resolves the model against them and `models`.

mod env;
mod error;
mod load;
mod process;
mod rules;
mod schema;
mod sections;

pub use env::{EnvVar, env_vars};
pub use error::{ConfigError, FieldError};
pub use load::{Loaded, Source, load};
pub use process::{
    DEFAULT_STATE_WAIT_MS, ProxySettings, ServerLimits, ServerRetention, ServerSettings,
    ServerStore, ServerStoreBackend, StateSettings, StateStoreKind, redact_url_password,
};
pub use schema::{
    CacheBreakpoints, CachePolicy, CacheTtl, Config, ExporterKind, Mode, ModelOverride,
    OtlpProtocolKind, Policy, Redaction, Repair, Role, S3Settings, Storage, StorageAdapterKind,
    Telemetry,
};
pub use sections::{
    MemorySettings, RecallSettings, SummarizerKind, SummarizerSettings, SummaryPrompt,
};
