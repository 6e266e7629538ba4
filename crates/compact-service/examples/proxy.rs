//! `compact proxy` without the CLI around it: the same
//! `compact_service::proxy` over a manager configured from `COMPACT_*`
//! variables, for `compact bench proxy`
//! (`COMPACT_BIN=target/release/examples/proxy`). It builds without the S3
//! adapter, so a release build of it skips the AWS SDK: what the proxy
//! overhead figures need, in minutes.
//!
//! Usage: `proxy [proxy] --upstream URL --addr HOST:PORT
//! [--max-context-tokens N]` (what the bench passes). Paths the CLI would
//! move under the user's data directory stay the library's defaults: the
//! bench runs with memory sessions, no archive and no exporter.

use compact_middleware::config::{Loaded, Source};
use serde_json::Value;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut loaded = Loaded::from_process_env(None)?;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let (key, value) = match arg.as_str() {
            "proxy" => continue,
            "--upstream" => ("proxy.upstream", args.next().map(Value::String)),
            "--addr" => ("proxy.addr", args.next().map(Value::String)),
            "--max-context-tokens" => (
                "max_context_tokens",
                args.next()
                    .and_then(|n| n.parse::<u64>().ok())
                    .map(Value::from),
            ),
            other => return Err(format!("unknown argument {other}").into()),
        };
        let value = value.ok_or_else(|| format!("{arg}: a value is missing or bad"))?;
        loaded.set(key, value, Source::Flag(arg.clone()))?;
    }
    let config = loaded.config;
    let settings = config.proxy.clone();
    let rt = tokio::runtime::Runtime::new()?;
    let manager = compact_wiring::manager(config, &rt)?;
    let proxy = compact_service::proxy::Proxy::new(&settings, manager.clone())?;
    let addr = proxy.addr()?;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        compact_service::proxy::serve(proxy, listener, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
    })?;
    manager
        .dispatcher()
        .flush(std::time::Duration::from_secs(5));
    Ok(())
}
