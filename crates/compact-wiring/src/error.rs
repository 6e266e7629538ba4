use compact_middleware::CompactError;

/// Why the parts a configuration names could not be built.
#[derive(Debug, thiserror::Error)]
pub enum WiringError {
    /// A configured value cannot be used (an exporter URL that does not
    /// parse, a session store that cannot be opened, a feature this build
    /// lacks). `message` is the whole sentence; `field` the dotted path.
    #[error("{message}")]
    Config {
        /// The configuration key at fault (`telemetry.ariadne_url`).
        field: &'static str,
        /// What is wrong, starting with the key.
        message: String,
    },
    /// A backend the configuration names failed to start (S3 could not be
    /// reached).
    #[error(transparent)]
    Backend(Box<dyn std::error::Error + Send + Sync>),
    /// The manager could not be built from the configuration.
    #[error(transparent)]
    Compact(#[from] CompactError),
}

impl WiringError {
    pub(crate) fn config(field: &'static str, detail: impl std::fmt::Display) -> Self {
        WiringError::Config {
            field,
            message: format!("{field}: {detail}"),
        }
    }
}
