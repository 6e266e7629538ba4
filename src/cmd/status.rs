//! `compact status SESSION`: what the manager remembers about a session now
//! (its summary, the layers and report of its last call, its breaker), read
//! from the session store, as JSON.

use std::path::PathBuf;

use crate::exit::{CliError, CliResult};
use crate::input::{ConfigFlags, print_json};

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    #[command(flatten)]
    config: ConfigFlags,
    /// The session id.
    session: String,
    /// The SQLite file of `compact preflight --state FILE` (sets
    /// `state.store: sqlite` and `state.path`).
    #[arg(long, value_name = "FILE")]
    state: Option<PathBuf>,
}

pub(crate) fn run(args: Args) -> CliResult {
    let mut loaded = args.config.load()?;
    if let Some(file) = &args.state {
        if !file.exists() {
            return Err(CliError::BadInput(format!(
                "--state: {}: no such file",
                file.display()
            )));
        }
        compact_wiring::set_state_file(&mut loaded, file, "--state")?;
    }
    let rt = tokio::runtime::Runtime::new()?;
    let manager = compact_wiring::manager(loaded.config, &rt)?;
    let status = rt.block_on(manager.status(&args.session))?;
    super::preflight::finish_events(manager.dispatcher());
    print_json(&status)
}
