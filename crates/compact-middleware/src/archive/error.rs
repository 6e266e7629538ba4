use std::path::PathBuf;

/// Why an archive operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArchiveError {
    /// The session id cannot be used as a directory or key segment.
    #[error("invalid session id {id}: {reason}")]
    InvalidSessionId {
        /// The id, escaped and shortened for display.
        id: String,
        /// Which rule it broke.
        reason: String,
    },
    /// A file name that is not part of the archive layout.
    #[error("not an archive file name: {0:?}")]
    InvalidName(String),
    /// A storage key or listing prefix that could leave the archive root or
    /// name something other than one object (see [`super::check_key`]).
    #[error("unsafe storage key {key}: {reason}")]
    InvalidKey {
        /// The key, escaped and shortened for display.
        key: String,
        /// Which rule it broke.
        reason: String,
    },
    /// An archive file whose bytes do not decode (a transcript that is not
    /// JSON Lines, a summary that is not JSON).
    #[error("{file}: {reason}")]
    Corrupt {
        /// The file.
        file: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The file, object or session does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// A filesystem operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done (`write`, `rename`, `fsync`).
        op: &'static str,
        /// On which path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Something could not be encoded or decoded as JSON.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    /// The session's manifest cannot be extended (it is corrupt).
    #[error("manifest of session {session}: {reason}")]
    Manifest {
        /// The session.
        session: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A remote backend (S3) failed after its retries.
    #[error("{backend}: {message}")]
    Backend {
        /// `s3`, ...
        backend: String,
        /// The backend's error, with its cause chain.
        message: String,
    },
    /// A background task failed to run.
    #[error("task failed: {0}")]
    Task(String),
}

impl ArchiveError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ArchiveError::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// Whether this is a [`ArchiveError::NotFound`].
    pub fn is_not_found(&self) -> bool {
        matches!(self, ArchiveError::NotFound(_))
    }
}
