//! `compact serve`: the Ariadne-compatible trace server, until Ctrl-C or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use ariadne_server::ServerConfig;
use compact_middleware::config::{Config, Loaded, Source, StateStoreKind, redact_url_password};

use crate::exit::{CliError, CliResult};

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Listen address [default: 127.0.0.1:5175, or `server.addr`].
    #[arg(long)]
    addr: Option<SocketAddr>,
    /// Directory of the durable event log [default: .compact/server, or `server.data_dir`].
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The YAML configuration of the whole program: the compaction settings
    /// (`model`, `policy`, ...), `state:` and `server:` (docs/configuration.md).
    /// A file in the former server-only shape (`addr`, `data_dir`, ... at
    /// the top) is still read, with a warning. Flags override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Bearer token required to ingest and by the session API's writes.
    #[arg(long)]
    ingest_token: Option<String>,
    /// Bearer token required to read (/events, /api, /metrics, GET /v1/sessions).
    #[arg(long)]
    read_token: Option<String>,
    /// A browser origin allowed by CORS (repeatable); replaces the defaults.
    #[arg(long = "cors-origin")]
    cors_origins: Vec<String>,
    /// Allow a non-loopback address without tokens.
    #[arg(long)]
    insecure: bool,
    /// Also run the provider-compatible proxy (`compact proxy`) in this
    /// process, forwarding to URL (or to `proxy.upstream`/`proxy.upstreams`
    /// when no URL is given); its spans go to this server's timeline.
    #[arg(long, value_name = "URL", num_args = 0..=1, default_missing_value = "")]
    proxy: Option<String>,
    /// The proxy's listen address [default: 127.0.0.1:5176, or `proxy.addr`].
    #[arg(long, value_name = "ADDR", requires = "proxy")]
    proxy_addr: Option<SocketAddr>,
}

/// The program's configuration and the server's, flags applied.
fn load(args: &Args) -> Result<(Config, ServerConfig), CliError> {
    let (mut config, legacy) = match Loaded::from_process_env(args.config.as_deref()) {
        Ok(mut loaded) => {
            default_state_under_data_dir(&mut loaded)?;
            if args.proxy.is_some() {
                let url = args.proxy.as_deref().filter(|u| !u.is_empty());
                super::proxy::apply_flags(&mut loaded, url, args.proxy_addr, "--proxy")?;
            }
            (loaded.config, None)
        }
        Err(e) => {
            // The former `--config` shape: server settings at the top.
            let legacy = args.config.as_ref().and_then(|path| {
                let text = std::fs::read_to_string(path).ok()?;
                serde_saphyr::from_str::<ServerConfig>(&text).ok()
            });
            match legacy {
                Some(server) => {
                    eprintln!(
                        "compact serve: warning: the configuration file has the former server-only shape; move its keys under `server:`"
                    );
                    let mut loaded = Loaded::from_process_env(None)?;
                    default_state_under_data_dir(&mut loaded)?;
                    (loaded.config, Some(server))
                }
                None => return Err(e.into()),
            }
        }
    };
    // `server:` is the server's own settings type: nothing to translate.
    let mut cfg = legacy.unwrap_or_else(|| config.server.clone());
    if let Some(a) = args.addr {
        cfg.addr = a;
    }
    if let Some(d) = &args.data_dir {
        cfg.data_dir = d.clone();
    }
    if args.ingest_token.is_some() {
        cfg.ingest_token = args.ingest_token.clone();
    }
    if args.read_token.is_some() {
        cfg.read_token = args.read_token.clone();
    }
    if !args.cors_origins.is_empty() {
        cfg.cors_origins = args.cors_origins.clone();
    }
    cfg.insecure |= args.insecure;
    // The default SQLite state follows the data directory a flag chose.
    if config.state.path == STATE_UNDER_DATA_DIR {
        config.state.path = cfg.data_dir.join("state.sqlite3").display().to_string();
    }
    Ok((config, cfg))
}

/// Marks `state.path` to be put under the server's data directory.
const STATE_UNDER_DATA_DIR: &str = "\0data_dir";

/// `compact serve` keeps session state in SQLite under its data directory
/// unless `state.store` was set.
fn default_state_under_data_dir(loaded: &mut Loaded) -> CliResult {
    if loaded.source_of("state.store") == Some(Source::Default) {
        loaded.set("state.store", "sqlite".into(), Source::Default)?;
        if loaded.source_of("state.path") == Some(Source::Default) {
            loaded.set("state.path", STATE_UNDER_DATA_DIR.into(), Source::Default)?;
        }
    }
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM.
pub(crate) async fn shutdown_signal() {
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
    let (config, cfg) = load(&args)?;
    if let Err(e) = cfg.check() {
        return Err(CliError::BadInput(e.to_string()));
    }
    let rt = tokio::runtime::Runtime::new()?;
    // Everything that can fail (the parts, the manager) before a port is bound.
    let parts = compact_wiring::Parts::new(&config, &rt)?;
    let label = state_label(&config);
    let proxy_settings = config.proxy.clone();
    let mut service = compact_service::Service::new(config, parts)
        .map_err(|e| CliError::BadInput(e.to_string()))?;
    // The proxy shares the service's manager: its calls' compaction and
    // spans land in this server's store, its figures in this /metrics.
    let proxy = match &args.proxy {
        None => None,
        Some(_) => {
            let proxy =
                compact_service::proxy::Proxy::new(&proxy_settings, service.manager().clone())
                    .map_err(|e| CliError::BadInput(e.to_string()))?;
            let addr = proxy
                .addr()
                .map_err(|e| CliError::BadInput(e.to_string()))?;
            let metrics = proxy.clone();
            service.add_metrics(move |out| metrics.render_metrics(out));
            Some((proxy, addr))
        }
    };
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let wait = |mut stopped: tokio::sync::watch::Receiver<bool>| async move {
        let _ = stopped.wait_for(|s| *s).await;
    };
    let (signal, proxy_signal) = (wait(stopped.clone()), wait(stopped));
    rt.spawn(async move {
        shutdown_signal().await;
        let _ = stop.send(true);
    });
    let proxy_task = match proxy {
        None => None,
        Some((proxy, addr)) => {
            let listener = rt
                .block_on(tokio::net::TcpListener::bind(addr))
                .map_err(|e| anyhow::anyhow!("proxy: cannot listen on {addr}: {e}"))?;
            eprintln!(
                "compact serve: proxy listening on http://{} ({})",
                listener.local_addr().unwrap_or(addr),
                proxy.describe()
            );
            Some(rt.spawn(compact_service::proxy::serve(proxy, listener, proxy_signal)))
        }
    };
    rt.block_on(async {
        let events = match cfg.store.backend {
            ariadne_server::StoreBackend::Log => format!("data in {}", cfg.data_dir.display()),
            ariadne_server::StoreBackend::Clickhouse => format!(
                "events in clickhouse {} {}.{}",
                redact_url_password(cfg.store.clickhouse_url.as_deref().unwrap_or_default()),
                cfg.store.clickhouse_database,
                cfg.store.clickhouse_table
            ),
        };
        eprintln!(
            "compact serve: listening on http://{} ({events}, session state: {label})",
            cfg.addr,
        );
        compact_service::serve(service, cfg, signal).await
    })
    .context("server")?;
    if let Some(task) = proxy_task {
        rt.block_on(task)
            .context("proxy")?
            .map_err(|e| CliError::Other(e.into()))?;
    }
    Ok(())
}

pub(crate) fn state_label(config: &Config) -> String {
    match config.state.store {
        StateStoreKind::Memory => "memory".into(),
        StateStoreKind::Sqlite => format!("sqlite {}", config.state.path),
        StateStoreKind::Postgres => format!(
            "postgres {}",
            redact_url_password(config.state.url.as_deref().unwrap_or_default())
        ),
    }
}
