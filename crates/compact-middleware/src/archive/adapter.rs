//! [`StorageAdapter`]: what a backend implements. A store of named byte
//! objects, nothing more: names, encodings, the manifest and verification
//! are the [`Archive`](super::Archive)'s, so every backend holds the same
//! bytes under the same keys.

use super::ArchiveError;
use crate::BoxFuture;

/// A place archive objects are kept: bytes under relative keys.
///
/// Keys are `/`-separated and relative (`{session_id}/summary-001.json`);
/// the adapter maps them under its root (a directory, a bucket and prefix).
/// The archive only hands over keys built from a validated session id and a
/// layout name; an adapter still refuses anything [`check_key`] rejects
/// before it becomes a path or an object key.
///
/// A `put` or `append` that returned `Ok` is on stable storage, and a crash
/// leaves an object as it was before or after a write, never a mix. A single
/// writer per session is assumed: the manager serializes its own writes, and
/// two processes must not archive the same session id at once.
///
/// Everything handed over is already redacted; adapters store bytes, they
/// never look inside.
///
/// [`check_key`]: super::check_key
pub trait StorageAdapter: Send + Sync + std::fmt::Debug {
    /// The backend's name in events and errors: `filesystem`, `s3`.
    fn kind(&self) -> &str;

    /// A human-readable root (`./.compact/archive`, `s3://bucket/prefix/`).
    fn root(&self) -> String;

    /// Where `key` is, for people and events: a path
    /// (`/archive/s1/summary-001.json`) or a URL
    /// (`s3://bucket/prefix/s1/summary-001.json`).
    fn location(&self, key: &str) -> String;

    /// Stores `bytes` as `key`, replacing it whole.
    fn put<'a>(&'a self, key: &'a str, bytes: Vec<u8>) -> BoxFuture<'a, Result<(), ArchiveError>>;

    /// The bytes of `key`; [`ArchiveError::NotFound`] when absent.
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Vec<u8>, ArchiveError>>;

    /// The entries one level below `prefix` (`""` for the root, or a key
    /// followed by `/`), sorted, as keys: `{prefix}{name}` for an object,
    /// `{prefix}{name}/` for a level holding more. Empty when there is
    /// nothing. Entries that are not part of the store (an adapter's own
    /// temporary files) are left out.
    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Vec<String>, ArchiveError>>;

    /// Adds `bytes` (whole lines, each ending in `\n`) at the end of `key`,
    /// creating it if needed; returns the offset they start at.
    ///
    /// The default reads the object and puts it back longer: right, but the
    /// cost grows with the object. A backend that can append in place (the
    /// filesystem) overrides it and says so in [`native_append`].
    ///
    /// [`native_append`]: StorageAdapter::native_append
    fn append<'a>(
        &'a self,
        key: &'a str,
        bytes: Vec<u8>,
    ) -> BoxFuture<'a, Result<u64, ArchiveError>> {
        Box::pin(async move {
            let mut whole = match self.get(key).await {
                Ok(b) => b,
                Err(e) if e.is_not_found() => Vec::new(),
                Err(e) => return Err(e),
            };
            let offset = whole.len() as u64;
            whole.extend_from_slice(&bytes);
            self.put(key, whole).await?;
            Ok(offset)
        })
    }

    /// Whether [`append`](StorageAdapter::append) costs only the appended
    /// bytes and never tears a line. The archive then keeps one growing
    /// `events.jsonl` per session; otherwise it writes each events batch as
    /// its own object (`events-000001.jsonl`, …).
    fn native_append(&self) -> bool {
        false
    }
}
