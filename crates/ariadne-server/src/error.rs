//! The library's error type.

use std::net::SocketAddr;

/// Why the server could not start or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The settings break a rule: a non-loopback bind without tokens and
    /// without `insecure`, or a value out of range
    /// ([`compact_events::settings::ServerSettings::check`]).
    #[error(transparent)]
    Settings(#[from] compact_events::settings::SettingsError),
    /// Invalid configuration found past the settings' rules.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// Binding the listen address failed.
    #[error("cannot bind {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// The durable store failed to open or recover.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// The HTTP server failed.
    #[error("server i/o: {0}")]
    Io(#[from] std::io::Error),
}

/// A durable-store failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Reading or writing the log failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The writer thread is gone (the server is shutting down).
    #[error("the store is closed")]
    Closed,
}

impl StoreError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        StoreError::Io {
            context: context.into(),
            source,
        }
    }
}
