//! The exit-code contract of docs/design.md §11.

use std::fmt;

use compact_middleware::CompactError;
use compact_middleware::config::ConfigError;
use compact_middleware::model::InputError;

/// An error and the exit code it maps to.
#[derive(Debug)]
pub(crate) enum CliError {
    /// Exit 2: bad input or configuration; the message names the JSON path or field.
    BadInput(String),
    /// Exit 3: the pinned messages do not fit; the message carries guidance.
    Insufficient(String),
    /// Exit 4: what was asked for does not exist (`compact recall --id`
    /// with an id the session does not have).
    NotFound(String),
    /// Exit 1: anything else.
    Other(anyhow::Error),
    /// Exit 0, nothing printed: stdout's reader went away (`| head`).
    OutputClosed,
}

impl CliError {
    pub(crate) fn code(&self) -> i32 {
        match self {
            CliError::BadInput(_) => 2,
            CliError::Insufficient(_) => 3,
            CliError::NotFound(_) => 4,
            CliError::Other(_) => 1,
            CliError::OutputClosed => 0,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::BadInput(m) => write!(f, "bad input: {m}"),
            CliError::Insufficient(m) => write!(f, "{m}"),
            CliError::NotFound(m) => write!(f, "not found: {m}"),
            CliError::Other(e) => write!(f, "error: {e:#}"),
            CliError::OutputClosed => write!(f, "stdout closed"),
        }
    }
}

impl From<anyhow::Error> for CliError {
    fn from(e: anyhow::Error) -> Self {
        CliError::Other(e)
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::Other(e.into())
    }
}

impl From<InputError> for CliError {
    fn from(e: InputError) -> Self {
        CliError::BadInput(e.to_string())
    }
}

impl From<ConfigError> for CliError {
    fn from(e: ConfigError) -> Self {
        CliError::BadInput(format!("configuration: {e}"))
    }
}

impl From<CompactError> for CliError {
    fn from(e: CompactError) -> Self {
        match e {
            CompactError::InsufficientBudget { .. } => CliError::Insufficient(e.to_string()),
            CompactError::Config(_)
            | CompactError::InvalidInput(_)
            | CompactError::InvalidSession(_)
            | CompactError::Overlay { .. } => CliError::BadInput(e.to_string()),
            CompactError::Internal(_) | CompactError::State(_) => {
                CliError::Other(anyhow::anyhow!(e))
            }
        }
    }
}

pub(crate) type CliResult<T = ()> = Result<T, CliError>;

impl From<compact_wiring::WiringError> for CliError {
    fn from(e: compact_wiring::WiringError) -> Self {
        use compact_wiring::WiringError;
        match e {
            WiringError::Config { message, .. } => {
                CliError::BadInput(format!("configuration: {message}"))
            }
            WiringError::Backend(e) => CliError::Other(anyhow::Error::from_boxed(e)),
            WiringError::Compact(e) => e.into(),
        }
    }
}
