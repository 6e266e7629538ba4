//! `compact.CompactManager`: the library's manager for Python, built from
//! the same configuration as the CLI and the server, with the same parts
//! (exporters, archive adapter, session store).

use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use compact_middleware::CompactManager;
use compact_middleware::config::{Config, Loaded};
use compact_middleware::model::InputError;
use compact_middleware::recall::{RecallQuery, tool};
use pyo3::prelude::*;

use crate::aio::{Mode, answer, runtime};
use crate::call::{self, Finished, Why};
use crate::convert::{At, to_py, to_value};
use crate::errors::{compact_error, config_error, wiring_error};

/// Managers still alive, so that interpreter exit can flush their events
/// (a script that never closes its manager must not lose the last ones).
static LIVE: Mutex<Vec<Weak<CompactManager>>> = Mutex::new(Vec::new());

/// How long `flush_all` at exit waits for each manager's exporters.
const EXIT_FLUSH: Duration = Duration::from_secs(2);

fn seconds(timeout: f64) -> Duration {
    Duration::try_from_secs_f64(timeout).unwrap_or(Duration::ZERO)
}

/// Compacts an agent's history before each model call.
///
/// `config` is a dict of configuration keys (the YAML schema of
/// docs/configuration.md, e.g. `{"model": "gpt-4o", "policy":
/// {"trigger_pct": 0.8}}`); `config_file` a YAML file. Precedence, lowest
/// first: defaults, `config_file`, `COMPACT_*` environment variables,
/// `config`. Raises `ConfigError` naming the field at fault.
///
/// One manager serves any number of sessions, threads and asyncio tasks;
/// calls for one session are serialized, different sessions run in
/// parallel. The GIL is released while compacting.
#[pyclass(name = "CompactManager", module = "compact", frozen)]
pub(crate) struct Manager {
    inner: Arc<CompactManager>,
}

/// The effective configuration: defaults < file < environment < `config`.
fn load_config(
    py: Python<'_>,
    config: Option<&Bound<'_, PyAny>>,
    config_file: Option<PathBuf>,
) -> PyResult<Config> {
    let loaded =
        Loaded::from_process_env(config_file.as_deref()).map_err(|e| config_error(py, &e))?;
    let Some(layer) = config.filter(|c| !c.is_none()) else {
        return Ok(loaded.config);
    };
    let field_of = |e: InputError| {
        let field = e.path.trim_start_matches('$').trim_start_matches('.');
        let e = compact_middleware::config::ConfigError::Invalid {
            errors: vec![compact_middleware::config::FieldError::new(
                field, e.message,
            )],
        };
        config_error(py, &e)
    };
    let layer = to_value(layer, &At::Root("$")).map_err(field_of)?;
    if !layer.is_object() {
        return Err(field_of(InputError {
            path: "$".into(),
            message: "config must be a dict of configuration keys".into(),
        }));
    }
    loaded
        .config
        .overlay(&layer)
        .map_err(|e| config_error(py, &e))
}

impl Manager {
    /// One compaction call (`why`), answered as `mode` asks.
    fn compact<'py>(
        &self,
        py: Python<'py>,
        mode: Mode,
        session_id: String,
        why: Why,
        args: Args<'_, 'py>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (req, call) = args.prepare(py, why)?;
        let manager = self.inner.clone();
        answer(py, mode, async move {
            let result = manager.preflight_with(&session_id, req).await;
            Finished { result, call }
        })
    }

    /// The session's status, answered as `mode` asks.
    fn session_status<'py>(
        &self,
        py: Python<'py>,
        mode: Mode,
        session_id: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let manager = self.inner.clone();
        answer(py, mode, async move {
            Answer(manager.status(&session_id).await)
        })
    }

    /// Forgets the session, answered as `mode` asks.
    fn forget<'py>(
        &self,
        py: Python<'py>,
        mode: Mode,
        session_id: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let manager = self.inner.clone();
        answer(py, mode, async move {
            Answer(manager.delete_session(&session_id).await)
        })
    }

    /// A recall query, answered as `mode` asks.
    fn query_recall<'py>(
        &self,
        py: Python<'py>,
        mode: Mode,
        session_id: String,
        q: RecallQuery,
    ) -> PyResult<Bound<'py, PyAny>> {
        let manager = self.inner.clone();
        answer(py, mode, async move {
            Answer(manager.recall(&session_id, q).await)
        })
    }

    /// One `compact_recall` tool call, answered as `mode` asks.
    fn tool_call<'py>(
        &self,
        py: Python<'py>,
        mode: Mode,
        session_id: String,
        arguments: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let arguments = tool_arguments(arguments)?;
        let manager = self.inner.clone();
        answer(py, mode, async move {
            Answer(tool::handle(&manager, &session_id, &arguments).await)
        })
    }
}

/// The arguments every compaction call shares.
struct Args<'a, 'py> {
    messages: &'a Bound<'py, PyAny>,
    tools: Option<&'a Bound<'py, PyAny>>,
    usage: Option<&'a Bound<'py, PyAny>>,
    format: &'a str,
    keep_meta: bool,
}

impl Args<'_, '_> {
    fn prepare(
        self,
        py: Python<'_>,
        why: Why,
    ) -> PyResult<(compact_middleware::PreflightRequest, call::Call)> {
        let (request, items) = call::decode(py, self.messages, self.tools, self.format)?;
        let usage = call::usage(py, self.usage)?;
        Ok(call::prepare(request, items, why, usage, self.keep_meta))
    }
}

fn json_dict<'py>(py: Python<'py>, v: &impl serde::Serialize) -> PyResult<Bound<'py, PyAny>> {
    let value = serde_json::to_value(v)
        .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))?;
    to_py(py, &value)
}

/// A library answer on its way back to Python: a JSON-shaped value as
/// plain Python objects, or the exception.
struct Answer<T>(Result<T, compact_middleware::CompactError>);

impl<'py, T: serde::Serialize> IntoPyObject<'py> for Answer<T> {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        match self.0 {
            Ok(v) => json_dict(py, &v),
            Err(e) => Err(compact_error(py, e)),
        }
    }
}

#[pymethods]
impl Manager {
    #[new]
    #[pyo3(signature = (config=None, *, config_file=None))]
    fn new(
        py: Python<'_>,
        config: Option<&Bound<'_, PyAny>>,
        config_file: Option<PathBuf>,
    ) -> PyResult<Self> {
        let config = load_config(py, config, config_file)?;
        let rt = runtime()?;
        let manager = py
            .detach(|| compact_wiring::manager(config, rt))
            .map_err(|e| wiring_error(py, e))?;
        let inner = Arc::new(manager);
        let mut live = LIVE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        live.retain(|w| w.strong_count() > 0);
        live.push(Arc::downgrade(&inner));
        Ok(Manager { inner })
    }

    /// Estimates, decides and, when the history is too big, compacts it
    /// (docs/design.md §5). `messages` is a list of OpenAI Chat Completions
    /// messages or Responses input items (`format` "auto" tells them apart;
    /// "chat", "responses", "anthropic" force one); `tools` the tool schemas
    /// sent with the call (counted, never changed). `usage` is the
    /// provider's reported usage of the last response (`{"input_tokens": N}`
    /// or N), which anchors the estimate. `force` compacts even if nothing
    /// triggers. Raises `InvalidInput` (with `.path`) or
    /// `InsufficientBudget`.
    #[pyo3(signature = (session_id, messages, tools=None, *, usage=None, force=false, format="auto", keep_meta=false))]
    #[allow(clippy::too_many_arguments)]
    fn preflight<'py>(
        &self,
        py: Python<'py>,
        session_id: String,
        messages: &Bound<'py, PyAny>,
        tools: Option<&Bound<'py, PyAny>>,
        usage: Option<&Bound<'py, PyAny>>,
        force: bool,
        format: &str,
        keep_meta: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let args = Args {
            messages,
            tools,
            usage,
            format,
            keep_meta,
        };
        self.compact(
            py,
            Mode::Blocking,
            session_id,
            Why::Preflight { force },
            args,
        )
    }

    /// `preflight` as an awaitable: runs on the manager's own threads,
    /// neither holding the GIL nor blocking the event loop.
    #[pyo3(signature = (session_id, messages, tools=None, *, usage=None, force=false, format="auto", keep_meta=false))]
    #[allow(clippy::too_many_arguments)]
    fn apreflight<'py>(
        &self,
        py: Python<'py>,
        session_id: String,
        messages: &Bound<'py, PyAny>,
        tools: Option<&Bound<'py, PyAny>>,
        usage: Option<&Bound<'py, PyAny>>,
        force: bool,
        format: &str,
        keep_meta: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let args = Args {
            messages,
            tools,
            usage,
            format,
            keep_meta,
        };
        self.compact(
            py,
            Mode::Awaitable,
            session_id,
            Why::Preflight { force },
            args,
        )
    }

    /// Compacts now, whatever the trigger says; `note` goes into the events.
    #[pyo3(signature = (session_id, messages, tools=None, *, note=None, usage=None, format="auto", keep_meta=false))]
    #[allow(clippy::too_many_arguments)]
    fn manual_compact<'py>(
        &self,
        py: Python<'py>,
        session_id: String,
        messages: &Bound<'py, PyAny>,
        tools: Option<&Bound<'py, PyAny>>,
        note: Option<String>,
        usage: Option<&Bound<'py, PyAny>>,
        format: &str,
        keep_meta: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let args = Args {
            messages,
            tools,
            usage,
            format,
            keep_meta,
        };
        self.compact(py, Mode::Blocking, session_id, Why::Manual { note }, args)
    }

    /// `manual_compact` as an awaitable.
    #[pyo3(signature = (session_id, messages, tools=None, *, note=None, usage=None, format="auto", keep_meta=false))]
    #[allow(clippy::too_many_arguments)]
    fn amanual_compact<'py>(
        &self,
        py: Python<'py>,
        session_id: String,
        messages: &Bound<'py, PyAny>,
        tools: Option<&Bound<'py, PyAny>>,
        note: Option<String>,
        usage: Option<&Bound<'py, PyAny>>,
        format: &str,
        keep_meta: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let args = Args {
            messages,
            tools,
            usage,
            format,
            keep_meta,
        };
        self.compact(py, Mode::Awaitable, session_id, Why::Manual { note }, args)
    }

    /// The reactive path: the provider rejected `messages` as too long
    /// (`error`: its message or the exception). Compacts to
    /// `policy.reactive_target_pct` and returns messages for one retry.
    #[pyo3(signature = (session_id, messages, error, tools=None, *, usage=None, format="auto", keep_meta=false))]
    #[allow(clippy::too_many_arguments)]
    fn on_context_overflow<'py>(
        &self,
        py: Python<'py>,
        session_id: String,
        messages: &Bound<'py, PyAny>,
        error: &Bound<'py, PyAny>,
        tools: Option<&Bound<'py, PyAny>>,
        usage: Option<&Bound<'py, PyAny>>,
        format: &str,
        keep_meta: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let error = call::error_text(error)?;
        let args = Args {
            messages,
            tools,
            usage,
            format,
            keep_meta,
        };
        self.compact(
            py,
            Mode::Blocking,
            session_id,
            Why::Overflow { error },
            args,
        )
    }

    /// `on_context_overflow` as an awaitable.
    #[pyo3(signature = (session_id, messages, error, tools=None, *, usage=None, format="auto", keep_meta=false))]
    #[allow(clippy::too_many_arguments)]
    fn aon_context_overflow<'py>(
        &self,
        py: Python<'py>,
        session_id: String,
        messages: &Bound<'py, PyAny>,
        error: &Bound<'py, PyAny>,
        tools: Option<&Bound<'py, PyAny>>,
        usage: Option<&Bound<'py, PyAny>>,
        format: &str,
        keep_meta: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let error = call::error_text(error)?;
        let args = Args {
            messages,
            tools,
            usage,
            format,
            keep_meta,
        };
        self.compact(
            py,
            Mode::Awaitable,
            session_id,
            Why::Overflow { error },
            args,
        )
    }

    /// The token estimate of a request, without touching any session: the
    /// dict `compact estimate` prints (`t_est`, `max_tokens`, `usage_pct`,
    /// `breakdown`, ...). With `usage`, anchored to the provider's figure.
    #[pyo3(signature = (messages, tools=None, *, usage=None, format="auto"))]
    fn estimate<'py>(
        &self,
        py: Python<'py>,
        messages: &Bound<'py, PyAny>,
        tools: Option<&Bound<'py, PyAny>>,
        usage: Option<&Bound<'py, PyAny>>,
        format: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (request, _) = call::decode(py, messages, tools, format)?;
        let (usage, _) = call::usage(py, usage)?;
        let manager = self.inner.clone();
        let estimate = py.detach(move || match usage {
            Some(n) => manager.estimate_with_usage(&request.messages, &request.tools, n),
            None => manager.estimate(&request.messages, &request.tools),
        });
        json_dict(py, &estimate)
    }

    /// What the manager remembers about a session now: the summary and its
    /// version, the fact ledger, the layers and report of the last call,
    /// the breaker (redacted like every export).
    fn status<'py>(&self, py: Python<'py>, session_id: String) -> PyResult<Bound<'py, PyAny>> {
        self.session_status(py, Mode::Blocking, session_id)
    }

    /// `status` as an awaitable.
    fn astatus<'py>(&self, py: Python<'py>, session_id: String) -> PyResult<Bound<'py, PyAny>> {
        self.session_status(py, Mode::Awaitable, session_id)
    }

    /// Forgets a session (here and in the session store); its archive
    /// stays. True when something was remembered.
    fn delete_session<'py>(
        &self,
        py: Python<'py>,
        session_id: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.forget(py, Mode::Blocking, session_id)
    }

    /// `delete_session` as an awaitable.
    fn adelete_session<'py>(
        &self,
        py: Python<'py>,
        session_id: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.forget(py, Mode::Awaitable, session_id)
    }

    /// Recall (issue 25, `recall.enabled`): what compaction took out of the
    /// session's context. With `query` (words): `{"hits": [{"id", "score",
    /// "excerpt", "chars", "origin"}, ...]}`, best first, at most `limit`
    /// (default 5, at most 20). With `id` (from a placeholder's `recall
    /// r…` or a hit): `{"hits": [], "entry": {"id", "origin", "text",
    /// "offset", "total_chars", "next_offset"?}}`, no `entry` when the
    /// session has no such id. Exactly one of `query` and `id`. Raises
    /// `ConfigError` when recall is off, `InvalidInput` for a bad query.
    #[pyo3(signature = (session_id, query=None, *, id=None, limit=None, offset=None))]
    fn recall<'py>(
        &self,
        py: Python<'py>,
        session_id: String,
        query: Option<String>,
        id: Option<String>,
        limit: Option<usize>,
        offset: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let q = RecallQuery {
            query,
            id,
            limit,
            offset,
        };
        self.query_recall(py, Mode::Blocking, session_id, q)
    }

    /// `recall` as an awaitable.
    #[pyo3(signature = (session_id, query=None, *, id=None, limit=None, offset=None))]
    fn arecall<'py>(
        &self,
        py: Python<'py>,
        session_id: String,
        query: Option<String>,
        id: Option<String>,
        limit: Option<usize>,
        offset: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let q = RecallQuery {
            query,
            id,
            limit,
            offset,
        };
        self.query_recall(py, Mode::Awaitable, session_id, q)
    }

    /// Runs one `compact_recall` tool call of the session: `arguments` is
    /// the call's JSON arguments (a string or a dict); returns the tool
    /// result's text. A model's bad arguments come back as text it can
    /// read; recall being off raises.
    fn recall_tool_call<'py>(
        &self,
        py: Python<'py>,
        session_id: String,
        arguments: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.tool_call(py, Mode::Blocking, session_id, arguments)
    }

    /// `recall_tool_call` as an awaitable.
    fn arecall_tool_call<'py>(
        &self,
        py: Python<'py>,
        session_id: String,
        arguments: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.tool_call(py, Mode::Awaitable, session_id, arguments)
    }

    /// The `compact_recall` tool: `{"name", "description", "parameters"}`
    /// (the parameters' JSON schema), for a framework's own tool type.
    #[staticmethod]
    fn recall_tool_definition(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
        let def = tool::openai_responses_tool();
        let mut out = serde_json::Map::new();
        for key in ["name", "description", "parameters"] {
            out.insert(
                key.into(),
                def.get(key).cloned().unwrap_or(serde_json::Value::Null),
            );
        }
        to_py(py, &serde_json::Value::Object(out))
    }

    /// Waits until every event emitted so far reached the exporters, or
    /// `timeout` seconds passed; True when they did.
    #[pyo3(signature = (timeout=5.0))]
    fn flush(&self, py: Python<'_>, timeout: f64) -> bool {
        let manager = self.inner.clone();
        py.detach(move || manager.dispatcher().flush(seconds(timeout)))
    }

    /// Delivers what is queued (up to `timeout` seconds) and stops the
    /// event exporters. Compaction still works afterwards; its events are
    /// no longer exported.
    #[pyo3(signature = (timeout=5.0))]
    fn close(&self, py: Python<'_>, timeout: f64) {
        let manager = self.inner.clone();
        py.detach(move || manager.dispatcher().shutdown(seconds(timeout)));
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close(py, 5.0);
        false
    }

    /// The effective configuration, as a dict.
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_dict(py, self.inner.config())
    }

    /// The model budgeted for.
    #[getter]
    fn model(&self) -> String {
        self.inner.limits().model.clone()
    }

    /// The model's context window in tokens.
    #[getter]
    fn max_tokens(&self) -> usize {
        self.inner.limits().max_tokens
    }

    fn __repr__(&self) -> String {
        format!(
            "CompactManager(model={:?}, max_tokens={})",
            self.inner.limits().model,
            self.inner.limits().max_tokens
        )
    }
}

/// A tool call's arguments: its JSON text as the model wrote it, or a dict.
fn tool_arguments(arguments: &Bound<'_, PyAny>) -> PyResult<serde_json::Value> {
    if let Ok(s) = arguments.extract::<String>() {
        return Ok(serde_json::Value::String(s));
    }
    to_value(arguments, &At::Root("$.arguments"))
        .map_err(|e| pyo3::exceptions::PyTypeError::new_err(format!("{}: {}", e.path, e.message)))
}

/// At interpreter exit (before it finalizes): lets async calls in flight
/// finish with Python, then flushes the events of every live manager.
#[pyfunction]
pub(crate) fn _at_exit(py: Python<'_>) {
    let live: Vec<Arc<CompactManager>> = LIVE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .filter_map(Weak::upgrade)
        .collect();
    py.detach(move || {
        crate::aio::wait_idle(EXIT_FLUSH);
        for m in live {
            m.dispatcher().flush(EXIT_FLUSH);
        }
    });
}
