//! Composition: the exporters and storage the library cannot build itself
//! (they live in crates that depend on it) attached to a manager built from
//! configuration. Every command that compacts builds its manager here.

use std::sync::Arc;

use ariadne_exporter::{AriadneExporter, HttpOptions, OtlpExporter};
use compact_middleware::CompactManager;
use compact_middleware::config::{Config, ExporterKind};

use crate::exit::{CliError, CliResult};

/// A manager for `config`, with the exporter `telemetry.exporter` names.
pub fn manager(config: Config) -> CliResult<CompactManager> {
    let mut builder = CompactManager::builder(config.clone());
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
