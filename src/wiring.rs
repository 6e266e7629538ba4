//! Composition: the exporters and storage the library cannot build itself
//! (they live in crates that depend on it) attached to a manager built from
//! configuration. Every command that compacts builds its manager here.

use std::sync::Arc;

use ariadne_exporter::{AriadneExporter, HttpOptions, OtlpExporter};
use compact_middleware::CompactManager;
use compact_middleware::config::{Config, ExporterKind, StorageAdapterKind};

use crate::exit::{CliError, CliResult};

/// A manager for `config`, with the exporter `telemetry.exporter` names and
/// the S3 adapter when `storage.adapter` is `s3` (connected on `rt`).
pub(crate) fn manager(config: Config, rt: &tokio::runtime::Runtime) -> CliResult<CompactManager> {
    let mut builder = CompactManager::builder(config.clone());
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
