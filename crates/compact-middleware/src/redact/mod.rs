//! Redaction (docs/design.md §9): secrets are replaced by
//! `<REDACTED>` in the copy that leaves the process, never in the messages
//! the agent keeps. The manager runs every event through a [`Redactor`]
//! before any exporter sees it, and every transcript, summary and event
//! before any storage write.
//!
//! Three layers, applied to every string leaf of a JSON value (object keys
//! are kept, so the redacted copy keeps its shape):
//! 1. the built-in patterns ([`BUILTIN_PATTERNS`]) and `redaction.patterns`;
//! 2. sensitive keys: the whole string value of an object key such as
//!    `password`, `api_key` or `authorization` (see [`SENSITIVE_KEY`]), since
//!    `{"password": "hunter2"}` has no pattern to match in its value alone;
//! 3. an optional callback for custom logic, run on each string after the
//!    patterns.

use std::borrow::Cow;
use std::sync::Arc;

use regex::{Regex, RegexSet};
use serde_json::Value;

use crate::config::Redaction;
use crate::events::Event;

/// What a match becomes.
pub const REDACTED: &str = "<REDACTED>";

/// The built-in patterns, by name. Each is documented in `docs/archive.md`.
pub const BUILTIN_PATTERNS: &[(&str, &str)] = &[
    // `api_key=…`, `API-KEY: …`, `"api_key": "…"` (the quoted form keeps
    // the closing quote out of the match only when the value is quoted).
    (
        "api_key",
        r#"(?i)api[_-]?key["']?\s*[:=]\s*(?:"[^"]*"|'[^']*'|\S+)"#,
    ),
    (
        "password",
        r#"(?i)(?:password|passwd|pwd)["']?\s*[:=]\s*(?:"[^"]*"|'[^']*'|\S+)"#,
    ),
    ("bearer_token", r"(?i)\bbearer\s+[A-Za-z0-9\-._~+/]+=*"),
    // OpenAI / Anthropic style secret keys: `sk-…`, `sk-proj-…`, `sk-ant-…`.
    ("sk_key", r"\bsk-[A-Za-z0-9_\-]{16,}"),
    (
        "aws_access_key_id",
        r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[0-9A-Z]{16}\b",
    ),
    // A 40-character secret only next to its name: a bare 40-character
    // string is as likely a git commit id.
    (
        "aws_secret_access_key",
        r#"(?i)aws_?secret_?(?:access_?)?key["']?\s*[:=]\s*["']?[A-Za-z0-9/+=]{40}"#,
    ),
    // PEM private keys; an unterminated block (a cut tool output) is
    // redacted to the end of the string.
    (
        "private_key",
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:(?s:.*?)-----END [A-Z0-9 ]*PRIVATE KEY-----|(?s:.*))",
    ),
    (
        "jwt",
        r"\beyJ[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+",
    ),
];

/// Object keys whose string values are redacted whole (case-insensitive,
/// `-` and `_` optional).
pub const SENSITIVE_KEY: &str = r"(?i)^(?:api[_-]?key|x[_-]?api[_-]?key|password|passwd|secret|client[_-]?secret|token|access[_-]?token|refresh[_-]?token|auth[_-]?token|authorization|aws[_-]?secret[_-]?access[_-]?key|private[_-]?key)$";

/// A custom redaction step: gets a string (patterns already applied) and
/// returns its replacement, or `None` to keep it.
pub type RedactCallback = dyn Fn(&str) -> Option<String> + Send + Sync;

/// A pattern from `redaction.patterns` that does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("redaction.patterns[{index}]: invalid regex: {message}")]
pub struct RedactError {
    /// Index in `redaction.patterns`.
    pub index: usize,
    /// The regex error.
    pub message: String,
}

/// Replaces known secret strings (fragments found earlier) wherever they
/// occur, as literals.
#[derive(Debug, Clone, Default)]
pub struct LiteralScrub {
    re: Option<Regex>,
    count: usize,
}

impl LiteralScrub {
    /// A scrubber for `literals` (longest first, so a fragment inside a
    /// longer one does not leave the rest behind).
    pub fn new<'a>(literals: impl IntoIterator<Item = &'a String>) -> Self {
        let mut l: Vec<&String> = literals.into_iter().collect();
        l.sort_by_key(|s| std::cmp::Reverse(s.len()));
        l.dedup();
        let count = l.len();
        if l.is_empty() {
            return Self::default();
        }
        let alt = l
            .iter()
            .map(|s| regex::escape(s))
            .collect::<Vec<_>>()
            .join("|");
        LiteralScrub {
            re: regex::RegexBuilder::new(&alt)
                .size_limit(64 << 20)
                .build()
                .ok(),
            count,
        }
    }

    /// How many literals.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there is nothing to scrub.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Scrubs every string leaf of `v` in place.
    pub fn scrub_value(&self, v: &mut Value) {
        let Some(re) = &self.re else { return };
        match v {
            Value::String(s) => {
                if let Cow::Owned(o) = re.replace_all(s, REDACTED) {
                    *s = o;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|i| self.scrub_value(i)),
            Value::Object(map) => map.values_mut().for_each(|i| self.scrub_value(i)),
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    /// A scrubbed copy of an event.
    pub fn scrub_event(&self, e: &Event) -> Event {
        let mut c = e.clone();
        self.scrub_event_in_place(&mut c);
        c
    }

    /// Scrubs every string of an event in place.
    pub fn scrub_event_in_place(&self, e: &mut Event) {
        let Some(re) = &self.re else { return };
        visit_event(e, &mut |s| {
            if let Cow::Owned(o) = re.replace_all(s, REDACTED) {
                *s = o;
            }
        });
    }
}

/// Replaces secrets with [`REDACTED`]. Cheap to clone.
#[derive(Clone)]
pub struct Redactor {
    enabled: bool,
    set: RegexSet,
    patterns: Arc<Vec<Regex>>,
    sensitive_key: Option<Regex>,
    callback: Option<Arc<RedactCallback>>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("enabled", &self.enabled)
            .field("patterns", &self.patterns.len())
            .field("callback", &self.callback.is_some())
            .finish()
    }
}

fn compile(p: &str) -> Result<Regex, String> {
    Regex::new(p).map_err(|e| e.to_string())
}

impl Redactor {
    /// The built-in patterns plus `extra`.
    pub fn new(extra: &[String]) -> Result<Self, RedactError> {
        let mut sources: Vec<String> = BUILTIN_PATTERNS
            .iter()
            .map(|(_, p)| p.to_string())
            .collect();
        let mut patterns = Vec::new();
        for (_, p) in BUILTIN_PATTERNS {
            patterns.push(compile(p).map_err(|message| RedactError {
                index: usize::MAX,
                message,
            })?);
        }
        for (index, p) in extra.iter().enumerate() {
            patterns.push(compile(p).map_err(|message| RedactError { index, message })?);
            sources.push(p.clone());
        }
        let set = RegexSet::new(&sources).map_err(|e| RedactError {
            index: usize::MAX,
            message: e.to_string(),
        })?;
        let sensitive_key = Some(compile(SENSITIVE_KEY).map_err(|message| RedactError {
            index: usize::MAX,
            message,
        })?);
        Ok(Redactor {
            enabled: true,
            set,
            patterns: Arc::new(patterns),
            sensitive_key,
            callback: None,
        })
    }

    /// From the `redaction` config section.
    pub fn from_config(cfg: &Redaction) -> Result<Self, RedactError> {
        let mut r = Self::new(&cfg.patterns)?;
        r.enabled = cfg.enabled;
        Ok(r)
    }

    /// A redactor that changes nothing (redaction switched off).
    pub fn disabled() -> Self {
        // The built-ins are constants that compile; fall back to an empty
        // set rather than panic if that ever changed.
        let mut r = Self::new(&[]).unwrap_or_else(|_| Redactor {
            enabled: false,
            set: RegexSet::empty(),
            patterns: Arc::new(Vec::new()),
            sensitive_key: None,
            callback: None,
        });
        r.enabled = false;
        r
    }

    /// Adds a custom step run on every string after the patterns.
    pub fn with_callback(mut self, f: Arc<RedactCallback>) -> Self {
        self.callback = Some(f);
        self
    }

    /// Whether redaction is on.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// `s` with every match replaced.
    pub fn redact_str<'a>(&self, s: &'a str) -> Cow<'a, str> {
        if !self.enabled {
            return Cow::Borrowed(s);
        }
        let mut out = Cow::Borrowed(s);
        // One pass of the set tells which patterns can match at all.
        let hits = self.set.matches(s);
        if hits.matched_any() {
            for i in hits.iter() {
                if let Some(re) = self.patterns.get(i)
                    && let Cow::Owned(o) = re.replace_all(&out, REDACTED)
                {
                    out = Cow::Owned(o);
                }
            }
        }
        if let Some(cb) = &self.callback
            && let Some(replaced) = cb(&out)
        {
            out = Cow::Owned(replaced);
        }
        out
    }

    /// The secret parts of every match in `s`: the pieces (split at
    /// whitespace, escaped line breaks, quotes, `:` and `=`) of at least 8 characters that are not
    /// labels such as `password` or PEM armour, and the alphanumeric runs of
    /// at least 12 characters inside them. The manager scrubs these
    /// literally from text derived from the messages (a summary may quote a
    /// key's body without the `BEGIN` line that made it match).
    pub fn secret_fragments(&self, s: &str) -> Vec<String> {
        const LABELS: &[&str] = &[
            "api_key",
            "api-key",
            "apikey",
            "password",
            "passwd",
            "authorization",
            "bearer",
            "aws_secret_access_key",
            "aws_secret_key",
            "private",
        ];
        let mut out = Vec::new();
        if !self.enabled {
            return out;
        }
        let hits = self.set.matches(s);
        for i in hits.iter() {
            let Some(re) = self.patterns.get(i) else {
                continue;
            };
            for m in re.find_iter(s) {
                // Inside a JSON-encoded string (tool arguments) line breaks
                // are the two characters `\n`: split there too, or a key's
                // body stays glued to its armour and is never learned.
                let text = m
                    .as_str()
                    .replace("\\n", " ")
                    .replace("\\r", " ")
                    .replace("\\t", " ");
                for piece in
                    text.split(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ':' | '='))
                {
                    if piece.chars().count() >= 8
                        && !piece.contains("-----")
                        && !LABELS.iter().any(|l| piece.eq_ignore_ascii_case(l))
                    {
                        // A summary may quote a secret without its prefix
                        // (`sk-`, `sk-proj-`, a JWT's header): its long
                        // alphanumeric runs are secrets on their own.
                        let runs = piece
                            .split(|c: char| !c.is_ascii_alphanumeric())
                            .filter(|r| r.len() >= 12 && r.len() < piece.len());
                        out.extend(runs.map(str::to_string));
                        out.push(piece.to_string());
                    }
                }
            }
        }
        out
    }

    /// Collects [`Redactor::secret_fragments`] of every string leaf of `v`.
    pub fn collect_fragments(&self, v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) => out.extend(self.secret_fragments(s)),
            Value::Array(items) => items.iter().for_each(|i| self.collect_fragments(i, out)),
            Value::Object(map) => {
                for (k, item) in map {
                    match item {
                        Value::String(s)
                            if self.sensitive_key.as_ref().is_some_and(|re| re.is_match(k)) =>
                        {
                            if s.chars().count() >= 8 {
                                out.push(s.clone());
                            }
                        }
                        _ => self.collect_fragments(item, out),
                    }
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    /// Redacts every string leaf of `v` in place; object keys are kept.
    pub fn redact_value_in_place(&self, v: &mut Value) {
        if !self.enabled {
            return;
        }
        match v {
            Value::String(s) => {
                if let Cow::Owned(o) = self.redact_str(s) {
                    *s = o;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|i| self.redact_value_in_place(i)),
            Value::Object(map) => {
                for (k, item) in map.iter_mut() {
                    if item.is_string()
                        && self.sensitive_key.as_ref().is_some_and(|re| re.is_match(k))
                    {
                        *item = Value::String(REDACTED.to_string());
                    } else {
                        self.redact_value_in_place(item);
                    }
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    /// A redacted copy of `v`.
    pub fn redact_value(&self, v: &Value) -> Value {
        let mut c = v.clone();
        self.redact_value_in_place(&mut c);
        c
    }

    /// A redacted copy of an event (every string in it, ids included: they
    /// hold no secrets, and redacting everything is simpler to trust).
    pub fn redact_event(&self, e: &Event) -> Event {
        let mut c = e.clone();
        self.redact_event_in_place(&mut c);
        c
    }

    /// Redacts every string of an event in place: its ids, names, times,
    /// metadata and every string leaf of its `data`.
    pub fn redact_event_in_place(&self, e: &mut Event) {
        if !self.enabled {
            return;
        }
        if let Event::Trace(t) = e
            && let Some(meta) = &mut t.metadata
        {
            for (k, v) in meta.iter_mut() {
                if self.sensitive_key.as_ref().is_some_and(|re| re.is_match(k)) {
                    *v = REDACTED.to_string();
                }
            }
        }
        visit_event(e, &mut |s| {
            if let Cow::Owned(o) = self.redact_str(s) {
                *s = o;
            }
        });
    }
}

/// Calls `f` on every string of an event: ids, names, times, metadata
/// values and every string leaf of a span's `data` (keys are kept).
fn visit_event(e: &mut Event, f: &mut dyn FnMut(&mut String)) {
    fn visit_value(v: &mut Value, f: &mut dyn FnMut(&mut String)) {
        match v {
            Value::String(s) => f(s),
            Value::Array(items) => items.iter_mut().for_each(|i| visit_value(i, f)),
            Value::Object(map) => map.values_mut().for_each(|i| visit_value(i, f)),
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
    match e {
        Event::Trace(t) => {
            f(&mut t.trace_id);
            let opts = [
                &mut t.name,
                &mut t.group_id,
                &mut t.started_at,
                &mut t.ended_at,
            ];
            opts.into_iter().flatten().for_each(&mut *f);
            if let Some(meta) = &mut t.metadata {
                meta.values_mut().for_each(&mut *f);
            }
        }
        Event::Span(s) => {
            f(&mut s.trace_id);
            f(&mut s.span_id);
            f(&mut s.started_at);
            let opts = [&mut s.parent_id, &mut s.kind, &mut s.name, &mut s.ended_at];
            opts.into_iter().flatten().for_each(&mut *f);
            s.data.values_mut().for_each(|v| visit_value(v, f));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn r() -> Redactor {
        Redactor::new(&[]).unwrap_or_else(|_| Redactor::disabled())
    }

    #[test]
    fn fragments_of_a_key_inside_json_encoded_arguments() {
        // Tool arguments are a JSON string: the key's newlines are `\n` there.
        let args = serde_json::json!({"key": "-----BEGIN RSA PRIVATE KEY-----\nabcDEF0123+/xyz\n-----END RSA PRIVATE KEY-----"}).to_string();
        let frags = r().secret_fragments(&args);
        assert!(frags.iter().any(|f| f == "abcDEF0123+/xyz"), "{frags:?}");
    }

    #[test]
    fn builtins_compile() {
        assert!(Redactor::new(&[]).is_ok());
    }

    #[test]
    fn each_builtin_kind_is_redacted() {
        let cases = [
            "api_key=abc123def",
            "API-KEY: zzz",
            "password: hunter2",
            "Authorization: Bearer abc.def-ghi",
            "sk-proj-abcdefghijklmnop1234",
            "AKIAIOSFODNN7EXAMPLE",
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlXzEyMw",
        ];
        for c in cases {
            let out = r().redact_str(&format!("before {c} after")).into_owned();
            assert!(out.contains(REDACTED), "{c} -> {out}");
            assert!(out.starts_with("before "), "{c} -> {out}");
        }
    }

    #[test]
    fn values_keys_and_callback() {
        let red = r().with_callback(Arc::new(|s: &str| {
            s.contains("ACME-").then(|| s.replace("ACME-", "[acme]"))
        }));
        let v = json!({"password": "plain", "note": ["api_key=1", 3, "ACME-9"], "api_key": 5});
        assert_eq!(
            red.redact_value(&v),
            json!({"password": REDACTED, "note": [REDACTED, 3, "[acme]9"], "api_key": 5})
        );
        let off = Redactor::disabled();
        assert_eq!(off.redact_value(&v), v);
    }

    #[test]
    fn bad_extra_pattern_names_its_index() {
        let e = Redactor::new(&["ok".into(), "(".into()]).err();
        assert_eq!(e.map(|e| e.index), Some(1));
    }
}
