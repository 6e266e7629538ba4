//! Standard output for every command. A reader that goes away early
//! (`compact status S | head`) is not an error: the write fails with a
//! broken pipe, which becomes [`CliError::OutputClosed`], and the process
//! exits 0 without a word. `println!` would panic there instead.

use std::fmt;
use std::io::{self, Write};

use crate::exit::{CliError, CliResult};

/// Writes one line (`args` and a newline) to stdout.
pub(crate) fn line(args: fmt::Arguments<'_>) -> CliResult {
    let mut out = io::stdout().lock();
    out.write_fmt(args)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush())
        .map_err(error)
}

/// The error a failed stdout write is: quiet for a closed pipe.
pub(crate) fn error(e: io::Error) -> CliError {
    if e.kind() == io::ErrorKind::BrokenPipe {
        CliError::OutputClosed
    } else {
        CliError::Other(anyhow::Error::new(e).context("writing to stdout"))
    }
}

/// `println!` that returns a [`CliResult`] instead of panicking.
macro_rules! outln {
    () => {
        $crate::out::line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::out::line(format_args!($($arg)*))
    };
}
pub(crate) use outln;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_pipe_is_quiet_and_other_errors_are_not() {
        assert!(matches!(
            error(io::Error::from(io::ErrorKind::BrokenPipe)),
            CliError::OutputClosed
        ));
        let other = error(io::Error::from(io::ErrorKind::PermissionDenied));
        assert_eq!(other.code(), 1);
        assert!(other.to_string().contains("writing to stdout"), "{other}");
    }
}
