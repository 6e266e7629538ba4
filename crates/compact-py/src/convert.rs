//! Python objects to JSON values and back, without a detour through JSON
//! text. Only what JSON can say crosses: dicts with string keys, lists and
//! tuples, strings, ints, floats, bools and None. Anything else is an
//! error naming its JSON path, and nothing panics on what a caller passes
//! (cycles and absurd nesting stop at [`MAX_DEPTH`]).

use compact_middleware::model::InputError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

/// Nesting accepted from Python. Real messages nest a handful of levels;
/// this bound keeps a self-referencing dict from overflowing the stack.
pub(crate) const MAX_DEPTH: usize = 256;

/// Where a value sits, built only when an error needs the text.
#[derive(Clone, Copy)]
pub(crate) enum At<'a> {
    /// The root, with its name (`$.messages`, `$`).
    Root(&'a str),
    /// A key of an object.
    Key(&'a At<'a>, &'a str),
    /// An index of an array.
    Index(&'a At<'a>, usize),
}

impl At<'_> {
    pub(crate) fn path(&self) -> String {
        match self {
            At::Root(name) => (*name).to_owned(),
            At::Key(parent, key) => {
                let plain =
                    !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if plain {
                    format!("{}.{key}", parent.path())
                } else {
                    format!("{}[{}]", parent.path(), Value::String((*key).to_owned()))
                }
            }
            At::Index(parent, i) => format!("{}[{i}]", parent.path()),
        }
    }

    fn error(&self, message: impl Into<String>) -> InputError {
        InputError {
            path: self.path(),
            message: message.into(),
        }
    }
}

/// The JSON value of `obj`, or an error naming where it is not JSON.
pub(crate) fn to_value(obj: &Bound<'_, PyAny>, at: &At<'_>) -> Result<Value, InputError> {
    value_at(obj, at, 0)
}

fn value_at(obj: &Bound<'_, PyAny>, at: &At<'_>, depth: usize) -> Result<Value, InputError> {
    if depth > MAX_DEPTH {
        return Err(at.error(format!(
            "nested deeper than {MAX_DEPTH} levels (a dict or list that contains itself?)"
        )));
    }
    // Most frequent first: message histories are strings in dicts in lists.
    if let Ok(s) = obj.cast::<PyString>() {
        return s
            .to_str()
            .map(|s| Value::String(s.to_owned()))
            .map_err(|_| at.error("a string that is not valid Unicode (lone surrogate)"));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut map = Map::with_capacity(d.len());
        for (k, v) in d.iter() {
            let Ok(key) = k.cast::<PyString>() else {
                return Err(at.error(format!(
                    "object keys must be strings, got {}",
                    type_name(&k)
                )));
            };
            let key = key
                .to_str()
                .map_err(|_| at.error("a key that is not valid Unicode (lone surrogate)"))?;
            let child = At::Key(at, key);
            map.insert(key.to_owned(), value_at(&v, &child, depth + 1)?);
        }
        return Ok(Value::Object(map));
    }
    if let Ok(l) = obj.cast::<PyList>() {
        let mut items = Vec::with_capacity(l.len());
        for (i, v) in l.iter().enumerate() {
            items.push(value_at(&v, &At::Index(at, i), depth + 1)?);
        }
        return Ok(Value::Array(items));
    }
    if obj.is_none() {
        return Ok(Value::Null);
    }
    // bool before int: in Python, True is an int.
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.cast::<PyInt>().is_ok() {
        if let Ok(n) = obj.extract::<i64>() {
            return Ok(Value::Number(n.into()));
        }
        if let Ok(n) = obj.extract::<u64>() {
            return Ok(Value::Number(n.into()));
        }
        return Err(at.error("an integer outside the 64-bit range"));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Number::from_f64(f.value())
            .map(Value::Number)
            .ok_or_else(|| at.error("NaN and infinity are not JSON numbers"));
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        let mut items = Vec::with_capacity(t.len());
        for (i, v) in t.iter().enumerate() {
            items.push(value_at(&v, &At::Index(at, i), depth + 1)?);
        }
        return Ok(Value::Array(items));
    }
    Err(at.error(format!(
        "expected a JSON value (dict, list, str, int, float, bool or None), got {}",
        type_name(obj)
    )))
}

/// The Python type name of `obj`, for messages.
pub(crate) fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "an object".to_owned())
}

/// The Python object for a JSON value: dicts (key order kept), lists, str,
/// int, float, bool, None.
pub(crate) fn to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => number(py, n)?,
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => object(py, map, |_| true)?.into_any(),
    })
}

/// A dict of the entries of `map` whose key `keep` accepts.
pub(crate) fn object<'py>(
    py: Python<'py>,
    map: &Map<String, Value>,
    keep: impl Fn(&str) -> bool,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (k, v) in map {
        if keep(k) {
            dict.set_item(PyString::new(py, k), to_py(py, v)?)?;
        }
    }
    Ok(dict)
}

fn number<'py>(py: Python<'py>, n: &Number) -> PyResult<Bound<'py, PyAny>> {
    if let Some(i) = n.as_i64() {
        Ok(i.into_pyobject(py)?.into_any())
    } else if let Some(u) = n.as_u64() {
        Ok(u.into_pyobject(py)?.into_any())
    } else {
        Ok(n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any())
    }
}
