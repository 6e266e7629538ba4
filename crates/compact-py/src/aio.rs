//! Rust futures as asyncio awaitables, and the runtime they run on.
//!
//! A call returns an `asyncio.Future` of the running loop at once; the work
//! runs on the process's tokio runtime without the GIL, and its result is
//! handed to the loop with `call_soon_threadsafe`. Cancelling the future
//! does not stop a compaction in flight (it holds the session's lock and
//! may be archiving): it completes and its result is dropped.
//!
//! Why not `pyo3-async-runtimes`: a task of ours may still hold the GIL
//! when `asyncio.run` returns, and a thread that releases the GIL after the
//! interpreter began finalizing aborts the process. Counting the tasks that
//! may still touch Python lets the exit hook wait for them first.

use std::future::Future;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use pyo3::IntoPyObjectExt;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyCFunction;
use tokio::runtime::Runtime;

static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();

/// Tasks spawned for Python that have not finished touching Python yet.
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// The runtime every manager of the process runs on: sync calls block on
/// it with the GIL released, async calls are spawned on it, network
/// session stores keep their connections on it.
pub(crate) fn runtime() -> PyResult<&'static Runtime> {
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .thread_name("compact-py")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start the compact runtime: {e}")))
}

/// Decrements [`IN_FLIGHT`] when the task is done with Python, however it
/// ends.
struct InFlight;

impl InFlight {
    fn start() -> Self {
        IN_FLIGHT.fetch_add(1, Ordering::AcqRel);
        InFlight
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Waits (the caller has released the GIL) until no task will touch
/// Python any more, or `timeout` passed. True when none is left.
pub(crate) fn wait_idle(timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while IN_FLIGHT.load(Ordering::Acquire) > 0 {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    true
}

/// Sets a future's result or exception unless it is done (cancelled);
/// runs on the loop's thread.
fn deliver(args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<()> {
    let (future, ok, value): (Bound<'_, PyAny>, bool, Bound<'_, PyAny>) = args.extract()?;
    if future.call_method0("done")?.is_truthy()? {
        return Ok(());
    }
    let setter = if ok { "set_result" } else { "set_exception" };
    future.call_method1(setter, (value,))?;
    Ok(())
}

static DELIVER: PyOnceLock<Py<PyCFunction>> = PyOnceLock::new();

/// How a method answers: the plain one blocks the calling thread (the GIL
/// released), its `a…` twin returns an awaitable of the running loop.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Mode {
    Blocking,
    Awaitable,
}

/// `fut` run on the runtime as `mode` asks: its output as a Python object
/// (or the exception) now, or an awaitable of it.
pub(crate) fn answer<'py, F, T>(py: Python<'py>, mode: Mode, fut: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = T> + Send + 'static,
    T: for<'a> IntoPyObject<'a, Error = PyErr> + Send + 'static,
{
    match mode {
        Mode::Awaitable => spawn(py, fut),
        Mode::Blocking => {
            let rt = runtime()?;
            py.detach(move || rt.block_on(fut)).into_bound_py_any(py)
        }
    }
}

/// `fut`, run on the runtime, as an awaitable of the running event loop.
/// Its output becomes the result (or the exception) under the GIL.
pub(crate) fn spawn<'py, F, T>(py: Python<'py>, fut: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = T> + Send + 'static,
    T: for<'a> IntoPyObject<'a, Error = PyErr> + Send + 'static,
{
    let event_loop = py
        .import("asyncio")?
        .call_method0("get_running_loop")
        .map_err(|_| {
            PyRuntimeError::new_err(
                "the a* methods must be awaited in a running asyncio event loop (use the method without the a for plain threads)",
            )
        })?;
    let future = event_loop.call_method0("create_future")?;
    let deliver = DELIVER
        .get_or_try_init(py, || {
            PyCFunction::new_closure(py, None, None, |args, _| deliver(args)).map(Bound::unbind)
        })?
        .clone_ref(py);
    let (loop_ref, future_ref) = (event_loop.unbind(), future.clone().unbind());
    let rt = runtime()?;
    let guard = InFlight::start();
    rt.spawn(async move {
        let output = fut.await;
        Python::attach(move |py| {
            let (ok, value) = match output.into_bound_py_any(py) {
                Ok(v) => (true, v),
                Err(e) => (false, e.into_value(py).into_bound(py).into_any()),
            };
            // A closed loop (its run ended first) has no one to tell.
            let _ = loop_ref.bind(py).call_method1(
                "call_soon_threadsafe",
                (deliver, future_ref.bind(py), ok, value),
            );
            drop((loop_ref, future_ref));
        });
        drop(guard);
    });
    Ok(future)
}
