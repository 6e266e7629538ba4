//! Session id validation. A session id becomes a directory name and an S3
//! key segment, so it is checked against an allow-list rather than scrubbed:
//! an id is either safe as is, or rejected with the rule it broke.

use std::fmt;

use super::ArchiveError;

/// Longest accepted session id, in bytes (well under every filesystem's
/// 255-byte name limit and S3's 1024-byte key limit, with room for a prefix).
pub const MAX_SESSION_ID_LEN: usize = 128;

/// A session id that is safe to use as one path component or key segment:
/// 1-128 bytes of ASCII letters, digits, `.`, `_`, `-`, starting with a
/// letter or digit (so never `.`, `..`, a hidden file or a flag).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(String);

impl SessionId {
    /// Validates `id`. Rejects empty and over-long ids, path separators
    /// (`/`, `\`), `..`, NUL and other control characters, `%` (so a
    /// percent-encoded `%2e%2e` is not decoded into a traversal by some
    /// later layer) and anything outside the allow-list.
    pub fn parse(id: &str) -> Result<Self, ArchiveError> {
        match segment_problem(id) {
            None => Ok(SessionId(id.to_string())),
            Some(reason) => Err(ArchiveError::InvalidSessionId {
                id: display_id(id),
                reason,
            }),
        }
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for SessionId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// Why `s` cannot be one path component or key segment (the rule of
/// [`SessionId`], which every segment of a storage key follows too), or
/// `None` when it can.
pub(super) fn segment_problem(s: &str) -> Option<String> {
    if s.is_empty() {
        return Some("is empty".into());
    }
    if s.len() > MAX_SESSION_ID_LEN {
        return Some(format!(
            "is {} bytes long (at most {MAX_SESSION_ID_LEN})",
            s.len()
        ));
    }
    if s.contains("..") {
        return Some("contains `..`".into());
    }
    for c in s.chars() {
        let why = match c {
            '/' | '\\' => Some(format!("contains a path separator {c:?}")),
            '\0' => Some("contains a NUL byte".to_string()),
            c if c.is_control() => Some(format!("contains a control character {c:?}")),
            '%' => Some("contains `%` (percent-encoding is not decoded)".to_string()),
            c if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') => None,
            c => Some(format!(
                "contains {c:?}; allowed are ASCII letters, digits, `.`, `_` and `-`"
            )),
        };
        if why.is_some() {
            return why;
        }
    }
    if !s.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Some("must start with a letter or a digit".into());
    }
    None
}

/// The id quoted with control characters escaped, shortened: error messages
/// must not carry terminal escapes or megabytes of attacker input.
pub(super) fn display_id(id: &str) -> String {
    const SHOW: usize = 64;
    let mut shown: String = id.chars().take(SHOW).collect();
    let cut = shown.len() < id.len();
    if cut {
        shown.push('…');
    }
    format!("{shown:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_ids() {
        for id in ["cli", "session-abc-123", "a.b_c-d", "0f8e9c1a-uuid", "X"] {
            assert_eq!(SessionId::parse(id).map(|s| s.0).ok(), Some(id.to_string()));
        }
    }

    #[test]
    fn rejects_dangerous_ids() {
        let long = "a".repeat(MAX_SESSION_ID_LEN + 1);
        for id in [
            "",
            "..",
            ".",
            "../x",
            "a/b",
            "a\\b",
            "%2e%2e",
            "a\0b",
            "a\nb",
            "x\u{1b}[31m",
            ".hidden",
            "-flag",
            "a b",
            "ü",
            &long,
        ] {
            let err = SessionId::parse(id).err().map(|e| e.to_string());
            assert!(
                err.as_deref()
                    .is_some_and(|e| e.starts_with("invalid session id")),
                "{id:?} -> {err:?}"
            );
        }
    }

    #[test]
    fn errors_escape_and_shorten() {
        let err = SessionId::parse(&format!("\u{1b}{}", "z".repeat(500)))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(!err.contains('\u{1b}'), "{err}");
        assert!(err.len() < 300, "{err}");
    }
}
