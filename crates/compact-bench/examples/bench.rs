//! `compact bench` without the CLI, for a release build that skips the
//! `compact` binary's S3 SDK (which takes long to build):
//!
//! ```sh
//! cargo run --release -p compact-bench --example bench -- server
//! ```
//!
//! Same suites, same JSON document as `compact bench SUITE`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let suite: compact_bench::Suite = args.next().as_deref().unwrap_or("all").parse()?;
    let quick = args.any(|a| a == "--quick");
    let doc = compact_bench::run(suite, quick)?;
    println!("{}", serde_json::to_string_pretty(&doc)?);
    Ok(())
}
