//! The trace server alone, for load benchmarks of a release build without
//! compiling the whole `compact` binary (whose AWS SDK takes long to build):
//!
//! ```sh
//! cargo build --release -p ariadne-server --example serve
//! target/release/examples/serve --addr 127.0.0.1:5175 --data-dir /tmp/ariadne-data
//! ```
//!
//! It runs exactly what `compact serve` runs ([`ariadne_server::serve`])
//! with the default configuration, until Ctrl-C.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut config = ariadne_server::ServerConfig::default();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--addr" => config.addr = value.parse()?,
            "--data-dir" => config.data_dir = PathBuf::from(value),
            other => return Err(format!("unknown flag {other} (--addr, --data-dir)").into()),
        }
    }
    tokio::runtime::Runtime::new()?.block_on(ariadne_server::serve(config, async {
        let _ = tokio::signal::ctrl_c().await;
    }))?;
    Ok(())
}
