//! `compact bench`: runs the `compact-bench` binary with the same
//! arguments. The benchmarks are not part of the product (docs/design.md
//! §2), so `compact` does not link them: it looks for `compact-bench` next
//! to its own executable (where cargo and an install put both), then on
//! `PATH`, and says how to build it when neither has it.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

use crate::exit::{CliError, CliResult};

#[derive(clap::Args, Debug)]
#[command(disable_help_flag = true)]
pub(crate) struct Args {
    /// `compact-bench`'s arguments: SUITE (tokens, preflight, server,
    /// retention, sidecar, proxy, soak, cost, recall, all), `--quick`, `--json`,
    /// `--runs N` and `--seed S` (soak), `--table`, `--config FILE`,
    /// `--openai-model`, `--anthropic-model`, `--gap-secs`,
    /// `--no-caller-breakpoints`, `--plan-for each|RULE` (cost), `--help`.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<OsString>,
}

/// The file name of the benchmarks' binary.
const BENCH_BIN: &str = "compact-bench";

pub(crate) fn run(args: Args) -> CliResult {
    let bin = bench_binary()?;
    let mut command = Command::new(&bin);
    command.args(&args.args);
    exec(command, &bin)
}

/// `compact-bench` next to this executable, else on `PATH`.
fn bench_binary() -> CliResult<PathBuf> {
    let name = format!("{BENCH_BIN}{}", std::env::consts::EXE_SUFFIX);
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(&name)))
        .filter(|p| p.is_file());
    let on_path = || {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(&name))
                .find(|p| p.is_file())
        })
    };
    beside.or_else(on_path).ok_or_else(|| {
        CliError::Other(anyhow::anyhow!(
            "compact bench runs the `{BENCH_BIN}` binary, which is neither next to this executable \
             nor on PATH: build it with `cargo build --release -p compact-bench` (or install it \
             beside `compact`)"
        ))
    })
}

/// Replaces this process with the benchmarks: their exit code and output
/// are the command's.
#[cfg(unix)]
fn exec(mut command: Command, bin: &std::path::Path) -> CliResult {
    use std::os::unix::process::CommandExt;
    let e = command.exec();
    Err(CliError::Other(
        anyhow::Error::new(e).context(format!("running {}", bin.display())),
    ))
}

/// Runs the benchmarks and exits with their code.
#[cfg(not(unix))]
fn exec(mut command: Command, bin: &std::path::Path) -> CliResult {
    let status = command
        .status()
        .map_err(|e| anyhow::Error::new(e).context(format!("running {}", bin.display())))?;
    std::process::exit(status.code().unwrap_or(1));
}
