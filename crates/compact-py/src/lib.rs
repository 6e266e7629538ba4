//! The `compact` Python wheel's native module, `compact._native`: the
//! library's [`CompactManager`](compact_middleware::CompactManager) for
//! Python, in-process, built from the same configuration and with the same
//! parts (`compact-wiring`) as the CLI and the server. maturin packages it
//! with the pure-Python half in `python/compact/` (exceptions, the OpenAI
//! Agents SDK and LangChain adapters).
//!
//! - `manager`: `CompactManager`, its sync and async calls, the flush at
//!   interpreter exit.
//! - `aio`: the process's tokio runtime, Rust futures as asyncio awaitables.
//! - `call`: one call's arguments decoded, its outcome (`Outcome`) built.
//! - `convert`: Python objects to JSON values and back, with JSON paths.
//! - `errors`: Rust errors as the exceptions of `compact._errors`.

mod aio;
mod call;
mod convert;
mod errors;
mod manager;

use pyo3::prelude::*;

/// Rust logs on stderr, filtered by `COMPACT_LOG` as the CLI's are; none
/// without it (or when the host process installed a subscriber already).
fn init_logging() {
    let Ok(filter) = std::env::var("COMPACT_LOG") else {
        return;
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .try_init();
}

/// The native half of the `compact` package (import `compact`, not this).
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    init_logging();
    m.add_class::<manager::Manager>()?;
    m.add_class::<call::Outcome>()?;
    m.add_function(wrap_pyfunction!(manager::_at_exit, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
