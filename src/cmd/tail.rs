//! `compact tail`: follows a server's `/events` and prints one line per
//! event until Ctrl-C (exit 0). Reconnects with `Last-Event-ID`.

use std::io::Write;
use std::time::Duration;

use anyhow::Context;
use ariadne_exporter::tail::{TailError, TailNotice, TailOptions, follow, format_line};

use crate::exit::{CliError, CliResult};

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The server's base URL.
    #[arg(
        long,
        default_value = "http://127.0.0.1:5175",
        env = "COMPACT_TAIL_URL"
    )]
    url: String,
    /// Only this trace (session) id.
    #[arg(long, value_name = "ID")]
    trace: Option<String>,
    /// Only these kinds, comma separated (e.g. `compaction,function`).
    #[arg(long, value_delimiter = ',', value_name = "K1,K2")]
    kinds: Vec<String>,
    /// The server's read token.
    #[arg(long, env = "COMPACT_READ_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

pub(crate) fn run(args: Args) -> CliResult {
    let opts = TailOptions {
        url: args.url,
        trace: args.trace,
        kinds: args
            .kinds
            .into_iter()
            .filter(|k| !k.trim().is_empty())
            .collect(),
        token: args.token,
        reconnect_delay: Duration::from_millis(500),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    rt.block_on(async {
        let stdout = std::io::stdout();
        // A closed pipe (`| head`) ends the command quietly, like Ctrl-C.
        let closed = tokio::sync::Notify::new();
        let on_event = |ev: &serde_json::Value| {
            if let Some(line) = format_line(ev) {
                let mut out = stdout.lock();
                let written = writeln!(out, "{line}").and_then(|()| out.flush());
                if written.is_err_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) {
                    closed.notify_one();
                }
            }
        };
        let on_notice = |n: TailNotice| match n {
            TailNotice::Connected => eprintln!("compact tail: connected"),
            TailNotice::Reconnecting(why) => eprintln!("compact tail: reconnecting ({why})"),
            TailNotice::Warning(w) => eprintln!("compact tail: server warning: {w}"),
        };
        tokio::select! {
            r = follow(&opts, on_event, on_notice) => match r {
                Ok(()) => Ok(()),
                Err(e @ TailError::Url(_)) => Err(CliError::BadInput(e.to_string())),
                Err(e) => Err(CliError::Other(e.into())),
            },
            _ = tokio::signal::ctrl_c() => Ok(()),
            () = closed.notified() => Ok(()),
        }
    })
}
