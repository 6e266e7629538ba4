//! `compact config check FILE` and `compact config print`.

use std::path::PathBuf;

use compact_middleware::config::load;
use compact_middleware::estimate::ModelLimits;

use crate::exit::{CliError, CliResult};
use crate::out::outln;

#[derive(clap::Subcommand, Debug)]
pub(crate) enum Command {
    /// Validate FILE (with COMPACT_* env applied): exit 0, or 2 naming each bad field.
    Check { file: PathBuf },
    /// Print every effective value and where it came from (default, file, env).
    Print {
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// JSON instead of aligned text.
        #[arg(long)]
        json: bool,
    },
}

fn env() -> Vec<(String, String)> {
    std::env::vars().collect()
}

pub(crate) fn run(cmd: Command) -> CliResult {
    match cmd {
        Command::Check { file } => {
            let loaded = load(Some(&file), &env())?;
            ModelLimits::from_config(&loaded.config)
                .map_err(|e| CliError::BadInput(format!("configuration: model: {e}")))?;
            outln!("{}: ok", file.display())?;
            Ok(())
        }
        Command::Print { config, json } => {
            let mut loaded = load(config.as_deref(), &env())?;
            // What the other commands would use, the CLI's defaults included.
            crate::input::cli_defaults(&mut loaded)?;
            let rows: Vec<_> = loaded
                .sources()
                .into_iter()
                .map(|(path, value, source)| {
                    let shown = shown(&path, value);
                    (path, shown, source)
                })
                .collect();
            if json {
                let v: Vec<serde_json::Value> = rows
                    .iter()
                    .map(|(path, value, source)| {
                        serde_json::json!({"key": path, "value": value, "source": source.to_string()})
                    })
                    .collect();
                return crate::input::print_json(&v);
            }
            let width = rows.iter().map(|(p, _, _)| p.len()).max().unwrap_or(0);
            for (path, value, source) in rows {
                outln!("{path:width$}  {value}  # {source}")?;
            }
            for var in loaded.ignored_env() {
                eprintln!(
                    "compact: warning: {var} is set but names no configuration key (ignored)"
                );
            }
            Ok(())
        }
    }
}

/// A value as `config print` may show it: tokens hidden, a connection URL's
/// password hidden.
fn shown(path: &str, value: serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::String(_) if path.ends_with("_token") => {
            serde_json::Value::String("***".into())
        }
        serde_json::Value::String(s)
            if path == "state.url" || path == "server.store.clickhouse_url" =>
        {
            serde_json::Value::String(compact_middleware::config::redact_url_password(&s))
        }
        other => other,
    }
}
