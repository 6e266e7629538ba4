//! `compact proxy`: the provider-compatible proxy (docs/design.md §15),
//! until Ctrl-C or SIGTERM. Agents point their base URL at it
//! (`OPENAI_BASE_URL=http://127.0.0.1:5176/v1`, `ANTHROPIC_BASE_URL=…`).

use std::net::SocketAddr;

use compact_middleware::config::{Config, Loaded, Source};
use serde_json::Value;

use crate::exit::{CliError, CliResult};
use crate::input::ConfigFlags;

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The provider's base URL, e.g. https://api.openai.com (`proxy.upstream`).
    #[arg(long, value_name = "URL")]
    upstream: Option<String>,
    /// Listen address [default: 127.0.0.1:5176, or `proxy.addr`].
    #[arg(long)]
    addr: Option<SocketAddr>,
    #[command(flatten)]
    flags: ConfigFlags,
}

/// `--upstream` and `--addr` over the configuration, checked like any key.
pub(crate) fn apply_flags(
    loaded: &mut Loaded,
    upstream: Option<&str>,
    addr: Option<SocketAddr>,
    flag: &str,
) -> CliResult {
    if let Some(url) = upstream {
        loaded.set(
            "proxy.upstream",
            Value::String(url.to_owned()),
            Source::Flag(flag.into()),
        )?;
    }
    if let Some(addr) = addr {
        loaded.set(
            "proxy.addr",
            Value::String(addr.to_string()),
            Source::Flag("--addr".into()),
        )?;
    }
    Ok(())
}

pub(crate) fn run(args: Args) -> CliResult {
    let mut loaded = args.flags.load()?;
    apply_flags(
        &mut loaded,
        args.upstream.as_deref(),
        args.addr,
        "--upstream",
    )?;
    let config: Config = loaded.config;
    let rt = tokio::runtime::Runtime::new()?;
    let label = super::serve::state_label(&config);
    let settings = config.proxy.clone();
    let manager = compact_wiring::manager(config, &rt)?;
    let proxy = compact_service::proxy::Proxy::new(&settings, manager.clone())
        .map_err(|e| CliError::BadInput(e.to_string()))?;
    let addr = proxy
        .addr()
        .map_err(|e| CliError::BadInput(e.to_string()))?;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| CliError::Other(anyhow::anyhow!("proxy: cannot listen on {addr}: {e}")))?;
        eprintln!(
            "compact proxy: listening on http://{} ({}; session state: {label})",
            listener.local_addr().unwrap_or(addr),
            proxy.describe()
        );
        compact_service::proxy::serve(proxy, listener, super::serve::shutdown_signal())
            .await
            .map_err(|e| CliError::Other(e.into()))
    })?;
    // Spans of the last calls still queued go out before the process ends.
    manager
        .dispatcher()
        .flush(std::time::Duration::from_secs(5));
    Ok(())
}
