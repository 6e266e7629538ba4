//! Composition: the exporters and storage the library cannot build itself
//! (they live in crates that depend on it) attached to a manager built from
//! configuration. Every command that compacts builds its manager here.

use std::sync::Arc;

use ariadne_exporter::{AriadneExporter, HttpOptions, OtlpExporter};
use std::path::Path;
use std::time::Duration;

use compact_middleware::CompactManager;
use compact_middleware::config::{
    Config, ExporterKind, Loaded, Source, StateStoreKind, StorageAdapterKind,
};
use compact_middleware::state::{SessionStore, SqliteSessionStore};
use serde_json::Value;

use crate::exit::{CliError, CliResult};

/// A manager for `config`, with the exporter `telemetry.exporter` names and
/// the S3 adapter when `storage.adapter` is `s3` (connected on `rt`).
pub(crate) fn manager(config: Config, rt: &tokio::runtime::Runtime) -> CliResult<CompactManager> {
    let mut builder = CompactManager::builder(config.clone());
    if let Some(store) = session_store(&config, rt)? {
        builder = builder.session_store(store);
    }
    if config.storage.adapter == StorageAdapterKind::S3 {
        let s3 = rt
            .block_on(compact_s3::S3Adapter::connect(
                &config.storage.s3,
                compact_s3::RetryOptions::default(),
            ))
            .map_err(|e| CliError::Other(e.into()))?;
        builder = builder.storage(Arc::new(s3));
    }
    match config.telemetry.exporter {
        ExporterKind::Ariadne => {
            let e = AriadneExporter::new(&config.telemetry.ariadne_url, HttpOptions::default())
                .map_err(|e| {
                    CliError::BadInput(format!("configuration: telemetry.ariadne_url: {e}"))
                })?;
            builder = builder.exporter(Arc::new(e));
        }
        ExporterKind::Otlp => {
            let e = OtlpExporter::new(
                &config.telemetry.otlp_endpoint,
                &config.telemetry.agent_name,
                HttpOptions::default(),
            )
            .map_err(|e| {
                CliError::BadInput(format!("configuration: telemetry.otlp_endpoint: {e}"))
            })?;
            builder = builder.exporter(Arc::new(e));
        }
        ExporterKind::None | ExporterKind::Console | ExporterKind::Jsonl => {}
    }
    Ok(builder.build()?)
}

/// How long a one-shot command waits for its exporters at exit: a dead
/// collector costs at most this, once.
pub(crate) const FLUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// Points `state:` at the SQLite file `file` (a flag such as `--state`).
pub(crate) fn set_state_file(loaded: &mut Loaded, file: &Path, flag: &str) -> CliResult {
    let source = Source::Flag(flag.into());
    loaded.set(
        "state.store",
        Value::String("sqlite".into()),
        source.clone(),
    )?;
    loaded.set(
        "state.path",
        Value::String(file.display().to_string()),
        source,
    )?;
    Ok(())
}

/// The session store `state.store` names; `None` for `memory` (the
/// manager's own map).
pub(crate) fn session_store(
    config: &Config,
    rt: &tokio::runtime::Runtime,
) -> CliResult<Option<Arc<dyn SessionStore>>> {
    let _ = rt;
    match config.state.store {
        StateStoreKind::Memory => Ok(None),
        StateStoreKind::Sqlite => {
            let store = SqliteSessionStore::open(&config.state.path)
                .map_err(|e| CliError::BadInput(format!("configuration: state.path: {e}")))?;
            Ok(Some(Arc::new(store)))
        }
        StateStoreKind::Postgres => Err(CliError::BadInput(
            "configuration: state.store: postgres is not built into this binary yet".into(),
        )),
    }
}
