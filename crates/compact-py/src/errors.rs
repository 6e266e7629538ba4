//! Rust errors as the wheel's exceptions. The classes are Python
//! (`compact/_errors.py`: docstrings, typed attributes, picklable); this
//! module instantiates them with the JSON path or field path filled in.

use compact_middleware::CompactError;
use compact_middleware::config::ConfigError;
use compact_middleware::model::InputError;
use compact_wiring::WiringError;
use pyo3::IntoPyObjectExt;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyType};

const MODULE: &str = "compact._errors";

static COMPACT_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static INVALID_INPUT: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static CONFIG_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static INSUFFICIENT_BUDGET: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// An instance of `compact._errors.<name>` built from `message` and
/// keyword attributes, as a `PyErr`. When the class cannot be had (the
/// pure-Python part of the package is missing), a `RuntimeError` says so.
fn raise(
    py: Python<'_>,
    class: &PyOnceLock<Py<PyType>>,
    name: &str,
    message: String,
    attrs: &[(&str, Py<PyAny>)],
) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let cls = class.import(py, MODULE, name)?;
        let kwargs = PyDict::new(py);
        for (key, value) in attrs {
            kwargs.set_item(key, value)?;
        }
        Ok(PyErr::from_value(cls.call((message,), Some(&kwargs))?))
    };
    build().unwrap_or_else(|e| e)
}

fn obj<'py, T: IntoPyObject<'py>>(py: Python<'py>, v: T) -> Py<PyAny> {
    v.into_py_any(py).unwrap_or_else(|_| py.None())
}

/// `InvalidInput` with the JSON path of the bad value.
pub(crate) fn invalid_input(py: Python<'_>, e: InputError) -> PyErr {
    let path = obj(py, e.path.as_str());
    raise(
        py,
        &INVALID_INPUT,
        "InvalidInput",
        e.message,
        &[("path", path)],
    )
}

/// `ConfigError` with the field path (`None` when the problem is the file
/// itself) and every field problem as `(path, message)` pairs.
pub(crate) fn config_error(py: Python<'_>, e: &ConfigError) -> PyErr {
    let errors: Vec<(String, String)> = e
        .field_errors()
        .iter()
        .map(|f| (f.path.clone(), f.to_string()))
        .collect();
    let field = errors.first().map(|(p, _)| p.clone());
    let attrs = [("field", obj(py, field)), ("errors", obj(py, errors))];
    raise(py, &CONFIG_ERROR, "ConfigError", e.to_string(), &attrs)
}

fn config_field_error(py: Python<'_>, field: Option<String>, message: String) -> PyErr {
    let attrs = [("field", obj(py, field))];
    raise(py, &CONFIG_ERROR, "ConfigError", message, &attrs)
}

/// The configuration key a library message starts with (`memory.store_path:
/// …`, `model "x" has no built-in profile …`), when it does.
fn leading_key(message: &str) -> Option<String> {
    let word = message.split([' ', ':']).next()?;
    let is_key = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.[]".contains(c));
    is_key.then(|| word.to_owned())
}

/// The exception for a failed call.
pub(crate) fn compact_error(py: Python<'_>, e: CompactError) -> PyErr {
    let kind = e.kind();
    let message = e.to_string();
    match e {
        CompactError::InsufficientBudget {
            pinned_tokens,
            tail_tokens,
            fixed_tokens,
            budget,
            max_tokens,
            guidance,
        } => {
            let attrs = [
                ("pinned_tokens", obj(py, pinned_tokens)),
                ("tail_tokens", obj(py, tail_tokens)),
                ("fixed_tokens", obj(py, fixed_tokens)),
                ("budget", obj(py, budget)),
                ("max_tokens", obj(py, max_tokens)),
                ("guidance", obj(py, guidance)),
            ];
            raise(
                py,
                &INSUFFICIENT_BUDGET,
                "InsufficientBudget",
                message,
                &attrs,
            )
        }
        CompactError::InvalidInput(m) => {
            // Strict mode names the pairing problems, not one path.
            invalid_input(
                py,
                InputError {
                    path: "$.messages".into(),
                    message: m,
                },
            )
        }
        CompactError::InvalidSession(m) => invalid_input(
            py,
            InputError {
                path: "$.session_id".into(),
                message: m,
            },
        ),
        CompactError::Config(m) => config_field_error(py, leading_key(&m), message),
        CompactError::Overlay { field, .. } => config_field_error(py, Some(field), message),
        CompactError::Internal(_) | CompactError::State(_) => {
            let attrs = [("kind", obj(py, kind))];
            raise(py, &COMPACT_ERROR, "CompactError", message, &attrs)
        }
    }
}

/// The exception for parts a configuration names that could not be built.
pub(crate) fn wiring_error(py: Python<'_>, e: WiringError) -> PyErr {
    match e {
        WiringError::Config { field, message } => {
            config_field_error(py, Some(field.to_owned()), message)
        }
        WiringError::Compact(e) => compact_error(py, e),
        WiringError::Backend(e) => {
            let attrs = [("kind", obj(py, "Backend"))];
            raise(py, &COMPACT_ERROR, "CompactError", e.to_string(), &attrs)
        }
    }
}
