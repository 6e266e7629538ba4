//! Composition: the exporters and storage the library cannot build itself
//! (they live in crates that depend on it) attached to a manager built from
//! configuration. Every command that compacts builds its manager here.

use std::sync::Arc;

use ariadne_exporter::{AriadneExporter, HttpOptions, OtlpExporter};
use std::path::Path;
use std::time::Duration;

use compact_middleware::CompactManager;
use compact_middleware::archive::StorageAdapter;
use compact_middleware::config::{
    Config, ExporterKind, Loaded, Source, StateStoreKind, StorageAdapterKind,
};
use compact_middleware::events::Exporter;
use compact_middleware::manager::Builder;
use compact_middleware::state::{PostgresSessionStore, SessionStore, SqliteSessionStore};
use serde_json::Value;

use crate::exit::{CliError, CliResult};

/// A manager for `config`, with the exporter `telemetry.exporter` names and
/// the S3 adapter when `storage.adapter` is `s3` (connected on `rt`).
pub(crate) fn manager(config: Config, rt: &tokio::runtime::Runtime) -> CliResult<CompactManager> {
    let parts = Parts::new(&config, rt)?;
    Ok(parts.builder(config).build()?)
}

/// What every manager of one process shares: the archive adapter, the
/// exporters, the session store. `compact serve` builds one manager per
/// strategy layer from the same parts.
#[derive(Clone)]
pub(crate) struct Parts {
    storage: Option<Arc<dyn StorageAdapter>>,
    exporters: Vec<Arc<dyn Exporter>>,
    pub(crate) store: Option<Arc<dyn SessionStore>>,
}

impl Parts {
    /// The parts `config` names (S3 connected on `rt`).
    pub(crate) fn new(config: &Config, rt: &tokio::runtime::Runtime) -> CliResult<Self> {
        let mut storage: Option<Arc<dyn StorageAdapter>> = None;
        if config.storage.adapter == StorageAdapterKind::S3 {
            let s3 = rt
                .block_on(compact_s3::S3Adapter::connect(
                    &config.storage.s3,
                    compact_s3::RetryOptions::default(),
                ))
                .map_err(|e| CliError::Other(e.into()))?;
            storage = Some(Arc::new(s3));
        }
        let mut exporters: Vec<Arc<dyn Exporter>> = Vec::new();
        match config.telemetry.exporter {
            ExporterKind::Ariadne => {
                let e = AriadneExporter::new(&config.telemetry.ariadne_url, HttpOptions::default())
                    .map_err(|e| {
                        CliError::BadInput(format!("configuration: telemetry.ariadne_url: {e}"))
                    })?;
                exporters.push(Arc::new(e));
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
                exporters.push(Arc::new(e));
            }
            ExporterKind::None | ExporterKind::Console | ExporterKind::Jsonl => {}
        }
        Ok(Parts {
            storage,
            exporters,
            store: session_store(config, rt)?,
        })
    }

    /// Adds an exporter every manager built from these parts gets.
    pub(crate) fn with_exporter(mut self, e: Arc<dyn Exporter>) -> Self {
        self.exporters.push(e);
        self
    }

    /// A builder for `config` with these parts.
    pub(crate) fn builder(&self, config: Config) -> Builder {
        let mut builder = CompactManager::builder(config);
        if let Some(storage) = &self.storage {
            builder = builder.storage(storage.clone());
        }
        for e in &self.exporters {
            builder = builder.exporter(e.clone());
        }
        if let Some(store) = &self.store {
            builder = builder.session_store(store.clone());
        }
        builder
    }
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
/// manager's own map). PostgreSQL connects on `rt`, whose tasks then carry
/// its connections.
pub(crate) fn session_store(
    config: &Config,
    rt: &tokio::runtime::Runtime,
) -> CliResult<Option<Arc<dyn SessionStore>>> {
    match config.state.store {
        StateStoreKind::Memory => Ok(None),
        StateStoreKind::Sqlite => {
            let store = SqliteSessionStore::open(&config.state.path)
                .map_err(|e| CliError::BadInput(format!("configuration: state.path: {e}")))?;
            Ok(Some(Arc::new(store)))
        }
        StateStoreKind::Postgres => {
            // Validation requires the URL with this store; never print it
            // unmasked (the store's errors mask its password).
            let url = config.state.url.as_deref().ok_or_else(|| {
                CliError::BadInput(
                    "configuration: state.url is required when state.store is postgres".into(),
                )
            })?;
            let store = rt
                .block_on(PostgresSessionStore::connect(url))
                .map_err(|e| CliError::BadInput(format!("configuration: state.url: {e}")))?;
            Ok(Some(Arc::new(store)))
        }
    }
}
