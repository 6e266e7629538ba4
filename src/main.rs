//! `compact`: the command-line front end. Thin by design: every subcommand
//! parses its flags, calls the library, and prints; the logic lives in the
//! crates. Exit codes: 0 ok, 2 bad input, 3 insufficient budget, 4 not found
//! (`compact recall --id`), 1 other.

mod cmd;
mod exit;
mod input;
mod out;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "compact",
    version,
    about = "Context-compaction middleware for LLM agents, with an Ariadne-compatible trace server"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Drive a realistic long, tool-heavy agent session through the middleware.
    Demo(cmd::demo::Args),
    /// Token breakdown of a request read from stdin, as JSON.
    Estimate(cmd::estimate::Args),
    /// Compact a request read from stdin; compacted JSON of the same shape on stdout.
    Preflight(cmd::preflight::Args),
    /// What is remembered about a session now (summary, layers, last report), as JSON.
    Status(cmd::status::Args),
    /// What compaction took out of a session's context: search it, or read an entry by its recall id.
    Recall(cmd::recall::Args),
    /// Replay a recorded transcript turn by turn through the middleware; table of savings.
    Replay(cmd::replay::Args),
    /// Audit archived transcripts: list sessions, show a step, verify a session.
    #[command(subcommand)]
    Archive(cmd::archive::Command),
    /// Check or print the configuration.
    #[command(subcommand)]
    Config(cmd::config::Command),
    /// Benchmarks, JSON out: runs the `compact-bench` binary (see docs/performance.md).
    Bench(cmd::bench::Args),
    /// Follow a server's live events (`/events`) in the terminal.
    Tail(cmd::tail::Args),
    /// The Ariadne-compatible trace server (ingest, SSE, API, metrics, UI).
    Serve(cmd::serve::Args),
    /// A provider-compatible proxy that compacts every model call (point OPENAI_BASE_URL or ANTHROPIC_BASE_URL at it).
    Proxy(cmd::proxy::Args),
}

fn main() {
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("COMPACT_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(colour(
            std::io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR"),
        ))
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(a) => cmd::demo::run(a),
        Command::Estimate(a) => cmd::estimate::run(a),
        Command::Preflight(a) => cmd::preflight::run(a),
        Command::Status(a) => cmd::status::run(a),
        Command::Recall(a) => cmd::recall::run(a),
        Command::Replay(a) => cmd::replay::run(a),
        Command::Archive(c) => cmd::archive::run(c),
        Command::Config(c) => cmd::config::run(c),
        Command::Bench(a) => cmd::bench::run(a),
        Command::Tail(a) => cmd::tail::run(a),
        Command::Serve(a) => cmd::serve::run(a),
        Command::Proxy(a) => cmd::proxy::run(a),
    };
    if let Err(e) = result {
        if matches!(e, exit::CliError::OutputClosed) {
            std::process::exit(0);
        }
        eprintln!("compact: {e}");
        std::process::exit(e.code());
    }
}

/// Whether log lines on stderr get colour: only on a terminal, and not when
/// `NO_COLOR` is set to anything but the empty string (no-color.org), so
/// logs piped to a file or another program are plain text.
fn colour(stderr_is_terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    stderr_is_terminal && no_color.is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::colour;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour(true, None));
        assert!(colour(true, Some("".into())));
        assert!(!colour(true, Some("1".into())));
        assert!(!colour(false, None));
        assert!(!colour(false, Some("1".into())));
    }
}
