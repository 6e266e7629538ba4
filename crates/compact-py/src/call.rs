//! One compaction call from Python: the caller's messages decoded into a
//! [`PreflightRequest`], and the outcome turned back into Python objects.
//!
//! Items that come back unchanged are the very objects the caller passed
//! (no copy, no conversion), matched by content hash, which the library
//! computes anyway: also those a resent raw history had replaced by the
//! session's previous output. Only what compaction wrote (the summary,
//! placeholders, capped outputs) is built anew.

use std::collections::HashMap;

use compact_middleware::model::{Format, InputError, Request};
use compact_middleware::trigger::Forced;
use compact_middleware::{CompactError, PreflightOutcome, PreflightRequest};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use serde_json::{Map, Value};

use crate::convert::{At, object, to_py, to_value, type_name};
use crate::errors::{compact_error, invalid_input};

/// Our own fields on a message, stripped from what the provider receives.
const OURS: [&str; 2] = ["meta", "compacted"];

/// Why a call compacts.
pub(crate) enum Why {
    /// Before a model call; `force` compacts even if nothing triggers.
    Preflight { force: bool },
    /// On demand, with the caller's note.
    Manual { note: Option<String> },
    /// After the provider refused the request as too long.
    Overflow { error: String },
}

/// The caller's side of one call, kept until the outcome is converted.
pub(crate) struct Call {
    /// The caller's items, in order.
    items: Vec<Py<PyAny>>,
    /// Content hash of an item that may be handed back as it is -> the
    /// indices of the caller's items with that content, last first (each
    /// is handed back once: equal items stay distinct objects).
    reusable: HashMap<u128, Vec<usize>>,
    keep_meta: bool,
    /// How many tools the caller sent: more came back when the preflight
    /// added `compact_recall` (`recall.advertise`).
    tools_sent: usize,
}

/// The items of `messages` (a list or tuple of dicts) and `tools` as a
/// decoded request, or `InvalidInput` naming the JSON path at fault
/// (`$.messages[3].tool_call_id`, `$.tools[0]`).
pub(crate) fn decode(
    py: Python<'_>,
    messages: &Bound<'_, PyAny>,
    tools: Option<&Bound<'_, PyAny>>,
    format: &str,
) -> PyResult<(Request, Vec<Py<PyAny>>)> {
    let fail = |e: InputError| invalid_input(py, e);
    let format: Format = format.parse().map_err(|message| {
        fail(InputError {
            path: "$.format".into(),
            message,
        })
    })?;
    let root = At::Root("$.messages");
    let list = if let Ok(l) = messages.cast::<PyList>() {
        l.iter().collect::<Vec<_>>()
    } else if let Ok(t) = messages.cast::<PyTuple>() {
        t.iter().collect::<Vec<_>>()
    } else {
        return Err(fail(InputError {
            path: "$.messages".into(),
            message: format!("expected a list of messages, got {}", type_name(messages)),
        }));
    };
    let mut items = Vec::with_capacity(list.len());
    let mut values = Vec::with_capacity(list.len());
    for (i, item) in list.into_iter().enumerate() {
        values.push(to_value(&item, &At::Index(&root, i)).map_err(fail)?);
        items.push(item.unbind());
    }
    let mut envelope = Map::new();
    envelope.insert("messages".into(), Value::Array(values));
    if let Some(tools) = tools.filter(|t| !t.is_none()) {
        envelope.insert(
            "tools".into(),
            to_value(tools, &At::Root("$.tools")).map_err(fail)?,
        );
    }
    let request = Request::from_value(Value::Object(envelope), format).map_err(fail)?;
    Ok((request, items))
}

/// The provider's reported usage of the last response (`usage=`: a number,
/// a dict, or the provider SDK's usage object, a pydantic model): the input
/// tokens, and for an object its cache reads and writes.
pub(crate) fn usage(py: Python<'_>, usage: Option<&Bound<'_, PyAny>>) -> PyResult<Usage> {
    let Some(usage) = usage.filter(|u| !u.is_none()) else {
        return Ok((None, None));
    };
    let dumped;
    let usage = if usage.hasattr("model_dump")? {
        dumped = usage.call_method0("model_dump")?;
        &dumped
    } else {
        usage
    };
    let value = to_value(usage, &At::Root("$.usage")).map_err(|e| invalid_input(py, e))?;
    compact_wiring::usage_figures(Some(&value)).map_err(|e| invalid_input(py, e))
}

/// The input tokens to anchor to, and the whole figures when given.
pub(crate) type Usage = (
    Option<usize>,
    Option<compact_middleware::cache::ReportedUsage>,
);

/// The request for the library and what converting its outcome needs.
pub(crate) fn prepare(
    request: Request,
    items: Vec<Py<PyAny>>,
    why: Why,
    usage: Usage,
    keep_meta: bool,
) -> (PreflightRequest, Call) {
    // The hashes are memoised in the messages, so the library does not
    // compute them again.
    let mut reusable: HashMap<u128, Vec<usize>> = HashMap::with_capacity(items.len());
    for (i, m) in request.messages.iter().enumerate().rev() {
        if keep_meta || !m.has_our_fields() {
            reusable.entry(m.content_hash()).or_default().push(i);
        }
    }
    let (forced, note) = match why {
        Why::Preflight { force: false } => (None, None),
        Why::Preflight { force: true } => (
            Some(Forced::Manual),
            Some("compact.CompactManager.preflight(force=True)".to_owned()),
        ),
        Why::Manual { note } => (
            Some(Forced::Manual),
            Some(note.unwrap_or_else(|| "compact.CompactManager.manual_compact".to_owned())),
        ),
        Why::Overflow { error } => (Some(Forced::ContextOverflow), Some(error)),
    };
    let call = Call {
        items,
        reusable,
        keep_meta,
        tools_sent: request.tools.len(),
    };
    let req = PreflightRequest {
        messages: request.messages,
        tools: request.tools,
        forced,
        note,
        strict: false,
        usage: usage.0,
        usage_details: usage.1,
        overlays: Default::default(),
    };
    (req, call)
}

/// What `preflight` returns: the messages to send and the report.
#[pyclass(name = "Outcome", module = "compact", frozen)]
pub(crate) struct Outcome {
    messages: Py<PyList>,
    report: Py<PyDict>,
    tools: Option<Py<PyAny>>,
}

#[pymethods]
impl Outcome {
    /// The history to send to the model: provider-clean dicts (no `meta`,
    /// no `compacted`) unless `keep_meta=True`. Items compaction did not
    /// change are the objects that were passed in.
    #[getter]
    fn messages(&self, py: Python<'_>) -> Py<PyList> {
        self.messages.clone_ref(py)
    }

    /// What the call did: tokens before and after, the tiers that ran, the
    /// summary version, ... (the report `compact preflight --report` prints).
    #[getter]
    fn report(&self, py: Python<'_>) -> Py<PyDict> {
        self.report.clone_ref(py)
    }

    /// The tools to send when the preflight changed them: the caller's and
    /// the `compact_recall` tool (`recall.advertise`), in the request's
    /// wire. `None` when they are the caller's as sent.
    #[getter]
    fn tools(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.tools.as_ref().map(|t| t.clone_ref(py))
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let report = self.report.bind(py);
        let field = |k: &str| {
            report
                .get_item(k)
                .ok()
                .flatten()
                .and_then(|v| v.repr().ok().map(|r| r.to_string()))
                .unwrap_or_else(|| "?".into())
        };
        format!(
            "Outcome(messages=<{} items>, triggered={}, tokens_before={}, tokens_after={})",
            self.messages.bind(py).len(),
            field("triggered"),
            field("tokens_before"),
            field("tokens_after"),
        )
    }
}

impl Call {
    /// The outcome as Python objects.
    pub(crate) fn finish(mut self, py: Python<'_>, outcome: PreflightOutcome) -> PyResult<Outcome> {
        let list = PyList::empty(py);
        for m in &outcome.messages {
            // What the caller receives is the provider view unless
            // keep_meta: an item of ours with meta matches a caller's item
            // without it.
            let hash = if self.keep_meta || !m.has_our_fields() {
                m.content_hash()
            } else {
                m.provider_hash()
            };
            match self.reusable.get_mut(&hash).and_then(Vec::pop) {
                Some(i) => list.append(self.items[i].bind(py))?,
                None if self.keep_meta => list.append(object(py, m.raw(), |_| true)?)?,
                None => list.append(object(py, m.raw(), |k| !OURS.contains(&k))?)?,
            }
        }
        let report = serde_json::to_value(&outcome.report)
            .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))?;
        let report = to_py(py, &report)?.cast_into::<PyDict>()?;
        // Converted only when changed: the common call hands nothing back.
        let tools = if outcome.tools.len() != self.tools_sent {
            Some(to_py(py, &serde_json::Value::Array(outcome.tools))?.unbind())
        } else {
            None
        };
        Ok(Outcome {
            messages: list.unbind(),
            report: report.unbind(),
            tools,
        })
    }
}

/// A call's result on its way back to Python: converted (or raised) under
/// the GIL, by whichever thread holds it when the call ends.
pub(crate) struct Finished {
    pub(crate) result: Result<PreflightOutcome, CompactError>,
    pub(crate) call: Call,
}

impl<'py> IntoPyObject<'py> for Finished {
    type Target = Outcome;
    type Output = Bound<'py, Outcome>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        match self.result {
            Ok(outcome) => Bound::new(py, self.call.finish(py, outcome)?),
            Err(e) => Err(compact_error(py, e)),
        }
    }
}

/// The text of the provider's error for `on_context_overflow`: a string as
/// is, an exception as `TypeName: message`.
pub(crate) fn error_text(error: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(s) = error.cast::<PyString>() {
        return Ok(s.to_str()?.to_owned());
    }
    let text = error.str()?.to_string();
    if error.is_instance_of::<pyo3::exceptions::PyBaseException>() {
        Ok(format!("{}: {text}", type_name(error)))
    } else {
        Ok(text)
    }
}
