//! Shared flag handling: configuration with flag overrides, stdin JSON.

use std::io::Read;
use std::path::PathBuf;

use compact_middleware::config::{Loaded, Source};
use compact_middleware::model::{Format, Request};
use serde_json::Value;

use crate::exit::{CliError, CliResult};
use crate::out::outln;

/// The flags of a command that reads messages: the configuration's, and
/// the messages' wire format.
#[derive(clap::Args, Debug)]
pub(crate) struct MessagesFlags {
    #[command(flatten)]
    pub(crate) config: ConfigFlags,
    /// Wire format of the messages.
    #[arg(
        long,
        default_value = "auto",
        value_name = "auto|chat|responses|anthropic"
    )]
    pub(crate) format: Format,
}

/// Flags every command that compacts or counts takes.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct ConfigFlags {
    /// YAML configuration file (defaults and COMPACT_* env apply without it).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Model name (overrides `model`).
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// Context window in tokens (overrides `max_context_tokens`).
    #[arg(long, value_name = "N")]
    pub max_context_tokens: Option<u64>,
}

impl ConfigFlags {
    /// Defaults < file < env < these flags, with [`cli_defaults`] applied.
    pub(crate) fn load(&self) -> CliResult<Loaded> {
        let mut loaded = Loaded::from_process_env(self.config.as_deref())?;
        cli_defaults(&mut loaded)?;
        if let Some(m) = &self.model {
            loaded.set(
                "model",
                Value::String(m.clone()),
                Source::Flag("--model".into()),
            )?;
        }
        if let Some(n) = self.max_context_tokens {
            loaded.set(
                "max_context_tokens",
                Value::from(n),
                Source::Flag("--max-context-tokens".into()),
            )?;
        }
        Ok(loaded)
    }
}

/// The keys whose built-in defaults live under `./.compact/`, and where the
/// CLI puts them instead, relative to [`data_dir`].
const DATA_PATHS: [(&str, &str); 4] = [
    ("storage.path", "archive"),
    ("storage.spool_path", "spool"),
    ("telemetry.jsonl_path", "events.jsonl"),
    ("memory.store_path", "memory.sqlite3"),
];

/// The CLI's own defaults on top of the library's: a one-shot command run
/// in some directory must not leave `./.compact/` there, so the paths whose
/// value is still the built-in default (no file, variable or flag set them)
/// move under the user's data directory. They keep the source `default`.
/// Without a data directory (no absolute `XDG_DATA_HOME` or `HOME`) the
/// library defaults stay.
pub(crate) fn cli_defaults(loaded: &mut Loaded) -> CliResult {
    let Some(dir) = data_dir() else {
        return Ok(());
    };
    for (key, name) in DATA_PATHS {
        if loaded.source_of(key) == Some(Source::Default) {
            let path = dir.join(name).to_string_lossy().into_owned();
            loaded.set(key, Value::String(path), Source::Default)?;
        }
    }
    Ok(())
}

/// `$XDG_DATA_HOME/compact`, else `$HOME/.local/share/compact` (XDG Base
/// Directory: a relative or empty value is ignored).
pub(crate) fn data_dir() -> Option<PathBuf> {
    let absolute = |var: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    absolute("XDG_DATA_HOME")
        .map(|d| d.join("compact"))
        .or_else(|| absolute("HOME").map(|h| h.join(".local/share/compact")))
}

/// Reads and decodes a request from stdin.
pub(crate) fn read_request(format: Format) -> CliResult<Request> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| CliError::BadInput(format!("$: cannot read stdin: {e}")))?;
    let value: Value = serde_json::from_str(&text).map_err(|e| {
        CliError::BadInput(format!(
            "$: invalid JSON at line {} column {}: {e}",
            e.line(),
            e.column()
        ))
    })?;
    Ok(Request::from_value(value, format)?)
}

/// Pretty JSON on stdout.
pub(crate) fn print_json(v: &impl serde::Serialize) -> CliResult {
    let s = serde_json::to_string_pretty(v).map_err(|e| CliError::Other(e.into()))?;
    outln!("{s}")?;
    Ok(())
}

/// A `--usage` value: the provider's reported usage of the last response,
/// a number (its input tokens) or its usage object as JSON (OpenAI's or
/// Anthropic's, cache figures included).
#[derive(Debug, Clone)]
pub(crate) struct UsageArg {
    /// The input tokens to anchor the estimate to.
    pub tokens: usize,
    /// The whole figures, for a usage object.
    pub details: Option<compact_middleware::cache::ReportedUsage>,
}

/// Parses a `--usage` value; a bad one is a usage error (exit 2) naming the
/// JSON path.
pub(crate) fn usage_arg(text: &str) -> Result<UsageArg, String> {
    let trimmed = text.trim();
    let value: Value = if trimmed.starts_with('{') {
        serde_json::from_str(trimmed).map_err(|e| format!("not a JSON object: {e}"))?
    } else {
        let n: u64 = trimmed
            .parse()
            .map_err(|_| format!("expected a number of tokens or a usage object, got {text:?}"))?;
        Value::from(n)
    };
    match compact_wiring::usage_figures(Some(&value)) {
        Ok((Some(tokens), details)) => Ok(UsageArg { tokens, details }),
        Ok((None, _)) => Err("expected a number of tokens or a usage object".into()),
        Err(e) => Err(format!("{}: {}", e.path, e.message)),
    }
}
