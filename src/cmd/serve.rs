//! `compact serve`: the Ariadne-compatible trace server, until Ctrl-C or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use ariadne_server::ServerConfig;

use crate::exit::{CliError, CliResult};

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Listen address [default: 127.0.0.1:5175, or the config file's].
    #[arg(long)]
    addr: Option<SocketAddr>,
    /// Directory of the durable event log [default: .compact/server].
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// A YAML (or JSON) file with the server settings (`addr`, `data_dir`,
    /// `ingest_token`, `read_token`, `cors_origins`, `insecure`, `limits`,
    /// `retention`, `store`); flags override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Bearer token required to ingest.
    #[arg(long, env = "COMPACT_INGEST_TOKEN")]
    ingest_token: Option<String>,
    /// Bearer token required to read (/events, /api, /metrics).
    #[arg(long, env = "COMPACT_READ_TOKEN")]
    read_token: Option<String>,
    /// A browser origin allowed by CORS (repeatable); replaces the defaults.
    #[arg(long = "cors-origin")]
    cors_origins: Vec<String>,
    /// Allow a non-loopback address without tokens.
    #[arg(long)]
    insecure: bool,
}

fn load(args: Args) -> Result<ServerConfig, CliError> {
    let mut cfg = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            serde_saphyr::from_str::<ServerConfig>(&text)
                .map_err(|e| CliError::BadInput(format!("{}: {e}", path.display())))?
        }
        None => ServerConfig::default(),
    };
    if let Some(a) = args.addr {
        cfg.addr = a;
    }
    if let Some(d) = args.data_dir {
        cfg.data_dir = d;
    }
    if args.ingest_token.is_some() {
        cfg.ingest_token = args.ingest_token;
    }
    if args.read_token.is_some() {
        cfg.read_token = args.read_token;
    }
    if !args.cors_origins.is_empty() {
        cfg.cors_origins = args.cors_origins;
    }
    cfg.insecure |= args.insecure;
    Ok(cfg)
}

async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutting down");
}

pub(crate) fn run(args: Args) -> CliResult {
    let cfg = load(args)?;
    if let Err(e) = cfg.check() {
        return Err(CliError::BadInput(e.to_string()));
    }
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        eprintln!(
            "compact serve: listening on http://{} (data in {})",
            cfg.addr,
            cfg.data_dir.display()
        );
        ariadne_server::serve(cfg, shutdown_signal()).await
    })
    .context("server")?;
    Ok(())
}
