//! Storage keys: the relative, `/`-separated names a [`StorageAdapter`]
//! stores objects under (`{session_id}/summary-001.json`). The archive only
//! builds them from a [`SessionId`] and a [`layout`](super::layout) name, so
//! they are safe by construction; adapters check again before a key becomes
//! a path or an object key, so neither a bug nor another caller can reach
//! outside the root or address a different object.
//!
//! [`StorageAdapter`]: super::StorageAdapter
//! [`SessionId`]: super::SessionId

use super::ArchiveError;
use super::id::{display_id, segment_problem};

/// Longest accepted key, in bytes (a session id, a file name and room to
/// spare, well under S3's 1024-byte limit once a prefix is added).
pub const MAX_KEY_LEN: usize = 512;

/// Checks that `key` is safe to join under an adapter's root: 1 to
/// [`MAX_KEY_LEN`] bytes of `/`-separated segments, each following the
/// [`SessionId`](super::SessionId) rule (ASCII letters, digits, `.`, `_`,
/// `-`, starting with a letter or digit, no `..`). So no absolute paths, no
/// empty segments, no `.`/`..`, no backslashes, control characters or `%`.
pub fn check_key(key: &str) -> Result<(), ArchiveError> {
    let reject = |reason: String| ArchiveError::InvalidKey {
        key: display_id(key),
        reason,
    };
    if key.len() > MAX_KEY_LEN {
        return Err(reject(format!(
            "is {} bytes long (at most {MAX_KEY_LEN})",
            key.len()
        )));
    }
    for (i, segment) in key.split('/').enumerate() {
        if let Some(why) = segment_problem(segment) {
            return Err(reject(format!("segment {} {why}", i + 1)));
        }
    }
    Ok(())
}

/// Checks a listing prefix: empty (the root) or a safe key followed by `/`.
pub fn check_prefix(prefix: &str) -> Result<(), ArchiveError> {
    if prefix.is_empty() {
        return Ok(());
    }
    match prefix.strip_suffix('/') {
        Some(dir) => check_key(dir),
        None => Err(ArchiveError::InvalidKey {
            key: display_id(prefix),
            reason: "a listing prefix is empty or ends with `/`".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_archive_keys() {
        for k in [
            "s1/summary-001.json",
            "session-abc-123/transcript-pre-compact-012.jsonl",
            "s1/events.jsonl",
            "a",
        ] {
            assert!(check_key(k).is_ok(), "{k}");
        }
        for p in ["", "s1/", "a/b/"] {
            assert!(check_prefix(p).is_ok(), "{p}");
        }
    }

    #[test]
    fn rejects_unsafe_keys() {
        let long = format!("s/{}", "a/".repeat(MAX_KEY_LEN));
        for k in [
            "",
            "/etc/passwd",
            "../x",
            "s1/../../x",
            "s1/./x",
            "s1//x",
            "s1/",
            "s1\\x",
            "s1/.hidden",
            "s1/%2e%2e",
            "s1/a\0b",
            "s1/a\nb",
            "s1/a b",
            &long,
        ] {
            let e = check_key(k)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(e.starts_with("unsafe storage key"), "{k:?}: {e}");
        }
        for p in ["s1", "/", "../", "s1//", "/s1/"] {
            assert!(check_prefix(p).is_err(), "{p:?}");
        }
    }
}
