//! `compact estimate`: the token breakdown of stdin.

use compact_middleware::CompactManager;

use crate::exit::CliResult;
use crate::input::{MessagesFlags, print_json, read_request};

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    #[command(flatten)]
    input: MessagesFlags,
    /// The provider's reported `usage.input_tokens` of the response that produced the
    /// last assistant reply in the input: the estimate becomes N plus the estimate of
    /// that reply and what follows it, and says the observed error of the pure
    /// estimate (`anchor.error`). Or the provider's usage object as JSON (its input
    /// tokens, Anthropic's cache reads and writes included).
    #[arg(long, value_name = "N|JSON", value_parser = crate::input::usage_arg)]
    usage: Option<crate::input::UsageArg>,
}

pub(crate) fn run(args: Args) -> CliResult {
    let loaded = args.input.config.load()?;
    let manager = CompactManager::builder(loaded.config)
        .without_config_exporters()
        .without_storage()
        .build()?;
    let req = read_request(args.input.format)?;
    let est = match args.usage.map(|u| u.tokens) {
        Some(n) => {
            let est = manager.estimate_with_usage(&req.messages, &req.tools, n);
            if est.anchor.is_none() {
                eprintln!(
                    "compact: warning: --usage ignored: the input has no assistant reply whose request it could be the usage of"
                );
            }
            est
        }
        None => manager.estimate(&req.messages, &req.tools),
    };
    print_json(&est)
}
