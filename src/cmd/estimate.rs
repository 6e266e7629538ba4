//! `compact estimate`: the token breakdown of stdin.

use compact_middleware::CompactManager;
use compact_middleware::model::Format;

use crate::exit::CliResult;
use crate::input::{ConfigFlags, print_json, read_request};

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    #[command(flatten)]
    config: ConfigFlags,
    /// Wire format of the messages.
    #[arg(
        long,
        default_value = "auto",
        value_name = "auto|chat|responses|anthropic"
    )]
    format: Format,
}

pub(crate) fn run(args: Args) -> CliResult {
    let loaded = args.config.load()?;
    let manager = CompactManager::builder(loaded.config)
        .without_config_exporters()
        .without_storage()
        .build()?;
    let req = read_request(args.format)?;
    let est = manager.estimate(&req.messages, &req.tools);
    print_json(&est)
}
