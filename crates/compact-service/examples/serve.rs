//! `compact serve` without the CLI around it: the service and the trace
//! server on one port, configured from `COMPACT_*` variables, for
//! `compact bench sidecar` (`COMPACT_BIN=target/release/examples/serve`).
//! It builds without the S3 adapter, so a release build of it skips the
//! AWS SDK: what the sidecar latency figures need, in minutes.
//!
//! Usage: `serve [serve] --addr HOST:PORT --data-dir DIR` (what the bench
//! passes). Session state: `COMPACT_STATE_STORE` (default `sqlite` under
//! the data directory, as `compact serve`), `COMPACT_STATE_URL`.

use std::path::PathBuf;

use compact_middleware::config::{Loaded, Source};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut addr = None;
    let mut data_dir = PathBuf::from(".compact/server");
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "serve" => {}
            "--addr" => addr = args.next(),
            "--data-dir" => data_dir = args.next().map(PathBuf::from).unwrap_or(data_dir),
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let mut loaded = Loaded::from_process_env(None)?;
    if loaded.source_of("state.store") == Some(Source::Default) {
        loaded.set("state.store", "sqlite".into(), Source::Default)?;
        let path = data_dir.join("state.sqlite3").display().to_string();
        loaded.set("state.path", path.into(), Source::Default)?;
    }
    let config = loaded.config;
    let mut server = ariadne_server::ServerConfig {
        data_dir,
        ..ariadne_server::ServerConfig::default()
    };
    if let Some(addr) = addr {
        server.addr = addr.parse()?;
    }
    server.check()?;
    let rt = tokio::runtime::Runtime::new()?;
    let parts = compact_wiring::Parts::new(&config, &rt)?;
    let service = compact_service::Service::new(config, parts)?;
    rt.block_on(compact_service::serve(service, server, async {
        let _ = tokio::signal::ctrl_c().await;
    }))?;
    Ok(())
}
