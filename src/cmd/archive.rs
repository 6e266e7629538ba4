//! `compact archive list|show|verify`: the audit tools (docs/design.md §9,
//! §11). The reading is the middleware's `Archive`; this prints it.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::anyhow;
use compact_middleware::archive::{self, Archive, FsAdapter, SessionId, StorageAdapter};
use compact_middleware::config::S3Settings;
use serde_json::{Value, json};

use crate::exit::{CliError, CliResult};
use crate::input::ConfigFlags;
use crate::out::outln;

/// Which archive to read: a directory, S3, or what the configuration says.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct Target {
    #[command(flatten)]
    config: ConfigFlags,
    /// Filesystem archive root (default: `storage.path`).
    #[arg(long, value_name = "DIR", conflicts_with = "s3_bucket")]
    archive: Option<PathBuf>,
    /// Read from this S3 bucket (credentials from the standard AWS chain).
    #[arg(long, value_name = "BUCKET")]
    s3_bucket: Option<String>,
    /// S3 key prefix (default: `storage.s3.prefix`).
    #[arg(long, value_name = "PREFIX", requires = "s3_bucket")]
    s3_prefix: Option<String>,
    /// S3-compatible endpoint URL.
    #[arg(long, value_name = "URL", requires = "s3_bucket")]
    s3_endpoint_url: Option<String>,
    /// AWS region.
    #[arg(long, value_name = "REGION", requires = "s3_bucket")]
    s3_region: Option<String>,
}

#[derive(clap::Subcommand, Debug)]
pub(crate) enum Command {
    /// List archived sessions.
    List {
        #[command(flatten)]
        target: Target,
    },
    /// A session's files, or one step's summary and transcript, as JSON.
    Show {
        /// Session id.
        session: String,
        /// Compaction step (1, 2, …).
        step: Option<u32>,
        #[command(flatten)]
        target: Target,
    },
    /// Check a session against its manifest: exit 0 when whole, 1 naming
    /// the first missing, edited or reordered file.
    Verify {
        /// Session id.
        session: String,
        #[command(flatten)]
        target: Target,
    },
}

impl Target {
    async fn adapter(&self) -> CliResult<Arc<dyn StorageAdapter>> {
        let loaded = self.config.load()?;
        let storage = &loaded.config.storage;
        if let Some(bucket) = &self.s3_bucket {
            let settings = S3Settings {
                bucket: Some(bucket.clone()),
                prefix: self
                    .s3_prefix
                    .clone()
                    .unwrap_or_else(|| storage.s3.prefix.clone()),
                region: self.s3_region.clone().or_else(|| storage.s3.region.clone()),
                endpoint_url: self
                    .s3_endpoint_url
                    .clone()
                    .or_else(|| storage.s3.endpoint_url.clone()),
                kms_key_id: storage.s3.kms_key_id.clone(),
            };
            return Ok(compact_wiring::s3_adapter(&settings).await?);
        }
        let dir = self
            .archive
            .clone()
            .unwrap_or_else(|| PathBuf::from(&storage.path));
        Ok(Arc::new(FsAdapter::new(dir)))
    }
}

fn session_id(s: &str) -> CliResult<SessionId> {
    SessionId::parse(s).map_err(|e| CliError::BadInput(e.to_string()))
}

fn print_json(v: &Value) -> CliResult {
    let s = serde_json::to_string_pretty(v).map_err(|e| CliError::Other(e.into()))?;
    outln!("{s}")?;
    Ok(())
}

fn other(e: archive::ArchiveError) -> CliError {
    CliError::Other(e.into())
}

pub(crate) fn run(cmd: Command) -> CliResult {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        match cmd {
            Command::List { target } => {
                let a = target.adapter().await?;
                for s in Archive::new(a.as_ref()).sessions().await.map_err(other)? {
                    outln!("{s}")?;
                }
                Ok(())
            }
            Command::Show {
                session,
                step,
                target,
            } => {
                let sid = session_id(&session)?;
                let a = target.adapter().await?;
                show(Archive::new(a.as_ref()), &sid, step).await
            }
            Command::Verify { session, target } => {
                let sid = session_id(&session)?;
                let a = target.adapter().await?;
                let v = Archive::new(a.as_ref()).verify(&sid).await.map_err(other)?;
                match &v.problem {
                    None => {
                        outln!(
                            "ok: session {} in {}: {} files, {} manifest entries, head {}",
                            v.session,
                            a.root(),
                            v.files.len(),
                            v.entries,
                            v.head.as_deref().unwrap_or("-")
                        )?;
                        Ok(())
                    }
                    Some(p) => Err(CliError::Other(anyhow!(
                        "archive verify failed: session {}: {p}",
                        v.session
                    ))),
                }
            }
        }
    })
}

async fn show(a: Archive<'_>, sid: &SessionId, step: Option<u32>) -> CliResult {
    let files = a.files(sid).await.map_err(other)?;
    if files.is_empty() {
        return Err(CliError::Other(anyhow!(
            "no archive for session {sid} in {}",
            a.adapter().root()
        )));
    }
    let Some(step) = step else {
        let steps = archive::transcript_steps(&files);
        return print_json(&json!({
            "session_id": sid.as_str(),
            "root": a.adapter().root(),
            "steps": steps,
            "files": files,
        }));
    };
    let archive::Step {
        transcript,
        summary,
    } = a.step(sid, step).await.map_err(other)?;
    print_json(&json!({
        "session_id": sid.as_str(),
        "step": step,
        "summary": summary,
        "transcript": transcript,
    }))
}
