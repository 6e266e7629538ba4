use std::sync::Arc;

use ariadne_exporter::{AriadneExporter, HttpOptions, OtlpExporter, OtlpProtocol};
use compact_middleware::CompactManager;
use compact_middleware::archive::{FsAdapter, StorageAdapter};
use compact_middleware::config::{
    Config, ExporterKind, OtlpProtocolKind, S3Settings, StorageAdapterKind,
};
use compact_middleware::events::Exporter;
use compact_middleware::manager::Builder;
use compact_middleware::state::SessionStore;
use tokio::runtime::Runtime;

use crate::WiringError;
use crate::store::session_store;

/// A manager for `config`, with the exporter `telemetry.exporter` names,
/// the S3 adapter when `storage.adapter` is `s3`, and the session store
/// `state.store` names (the network ones connected on `rt`, whose tasks
/// then carry their connections: keep it alive as long as the manager).
pub fn manager(config: Config, rt: &Runtime) -> Result<CompactManager, WiringError> {
    let parts = Parts::new(&config, rt)?;
    Ok(parts.builder(config).build()?)
}

/// A builder for `config` with the exporters `telemetry.exporter` names
/// and nothing else: no archive adapter, no session store, nothing
/// connected. For a one-shot command that only reads (`compact recall`)
/// and reports what it did as events.
pub fn exporting_builder(config: Config) -> Result<Builder, WiringError> {
    let parts = Parts {
        storage: None,
        exporters: exporters(&config)?,
        store: None,
    };
    Ok(parts.builder(config))
}

/// The parts a configuration names, built here and nowhere else in the
/// programs: the archive adapter (`storage.adapter`: fs, S3, none), the
/// exporters the library does not build (Ariadne, OTLP), the session
/// store (`state.store`).
#[derive(Clone)]
pub struct Parts {
    storage: Option<Arc<dyn StorageAdapter>>,
    exporters: Vec<Arc<dyn Exporter>>,
    store: Option<Arc<dyn SessionStore>>,
}

impl std::fmt::Debug for Parts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parts")
            .field("storage", &self.storage.is_some())
            .field(
                "exporters",
                &self.exporters.iter().map(|e| e.name()).collect::<Vec<_>>(),
            )
            .field("store", &self.store.is_some())
            .finish()
    }
}

impl Parts {
    /// The parts `config` names (S3 and PostgreSQL connected on `rt`).
    pub fn new(config: &Config, rt: &Runtime) -> Result<Self, WiringError> {
        Ok(Parts {
            storage: storage(config, rt)?,
            exporters: exporters(config)?,
            store: session_store(config, rt)?,
        })
    }

    /// Adds an exporter every manager built from these parts gets.
    pub fn with_exporter(mut self, e: Arc<dyn Exporter>) -> Self {
        self.exporters.push(e);
        self
    }

    /// The session store, `None` for `state.store: memory` (each manager's
    /// own map).
    pub fn store(&self) -> Option<&Arc<dyn SessionStore>> {
        self.store.as_ref()
    }

    /// Replaces the session store (a server whose managers must share one
    /// even when the configuration says `memory`).
    pub fn with_store(mut self, store: Arc<dyn SessionStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// A builder for `config` with these parts.
    pub fn builder(&self, config: Config) -> Builder {
        let mut builder = CompactManager::builder(config);
        builder = match &self.storage {
            Some(storage) => builder.storage(storage.clone()),
            None => builder.without_storage(),
        };
        for e in &self.exporters {
            builder = builder.exporter(e.clone());
        }
        if let Some(store) = &self.store {
            builder = builder.session_store(store.clone());
        }
        builder
    }
}

/// The exporters the library cannot build itself (`console` and `jsonl`
/// it builds from the same configuration).
fn exporters(config: &Config) -> Result<Vec<Arc<dyn Exporter>>, WiringError> {
    let t = &config.telemetry;
    let exporter: Arc<dyn Exporter> = match t.exporter {
        ExporterKind::Ariadne => Arc::new(
            AriadneExporter::new(&t.ariadne_url, HttpOptions::default())
                .map_err(|e| WiringError::config("telemetry.ariadne_url", e))?,
        ),
        ExporterKind::Otlp => Arc::new(
            OtlpExporter::new(&t.otlp_endpoint, &t.agent_name, HttpOptions::default())
                .map_err(|e| WiringError::config("telemetry.otlp_endpoint", e))?
                .with_protocol(match t.otlp_protocol {
                    OtlpProtocolKind::HttpJson => OtlpProtocol::HttpJson,
                    OtlpProtocolKind::HttpProtobuf => OtlpProtocol::HttpProtobuf,
                }),
        ),
        ExporterKind::None | ExporterKind::Console | ExporterKind::Jsonl => return Ok(Vec::new()),
    };
    Ok(vec![exporter])
}

/// The archive adapter `storage.adapter` names: the filesystem at
/// `storage.path`, S3 (connected on `rt`), or none.
fn storage(config: &Config, rt: &Runtime) -> Result<Option<Arc<dyn StorageAdapter>>, WiringError> {
    match config.storage.adapter {
        StorageAdapterKind::None => Ok(None),
        StorageAdapterKind::Fs => Ok(Some(Arc::new(FsAdapter::new(&config.storage.path)))),
        StorageAdapterKind::S3 => rt.block_on(s3_adapter(&config.storage.s3)).map(Some),
    }
}

/// The S3 archive adapter of `settings` (credentials from the standard AWS
/// chain), as `storage.adapter: s3` and `compact archive --s3-bucket` use it.
#[cfg(feature = "s3")]
pub async fn s3_adapter(settings: &S3Settings) -> Result<Arc<dyn StorageAdapter>, WiringError> {
    let s3 = compact_s3::S3Adapter::connect(settings, compact_s3::RetryOptions::default())
        .await
        .map_err(|e| WiringError::Backend(Box::new(e)))?;
    Ok(Arc::new(s3))
}

/// Without the `s3` feature: refused, naming the field.
#[cfg(not(feature = "s3"))]
pub async fn s3_adapter(_settings: &S3Settings) -> Result<Arc<dyn StorageAdapter>, WiringError> {
    Err(WiringError::config(
        "storage.adapter",
        "s3 needs a build with the `s3` feature (this one was built without the AWS SDK); use fs or none",
    ))
}
