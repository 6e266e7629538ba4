//! Shared flag handling: configuration with flag overrides, stdin JSON.

use std::io::Read;
use std::path::PathBuf;

use compact_middleware::config::{Loaded, Source};
use compact_middleware::model::{Format, Request};
use serde_json::Value;

use crate::exit::{CliError, CliResult};

/// Flags every command that compacts or counts takes.
#[derive(clap::Args, Debug, Clone)]
pub struct ConfigFlags {
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
    /// Defaults < file < env < these flags.
    pub fn load(&self) -> CliResult<Loaded> {
        let mut loaded = Loaded::from_process_env(self.config.as_deref())?;
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

/// Reads and decodes a request from stdin.
pub fn read_request(format: Format) -> CliResult<Request> {
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
pub fn print_json(v: &impl serde::Serialize) -> CliResult {
    let s = serde_json::to_string_pretty(v).map_err(|e| CliError::Other(e.into()))?;
    println!("{s}");
    Ok(())
}
