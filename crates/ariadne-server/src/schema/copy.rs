//! Canonical copies of JSON values straight from a deserializer: the bytes
//! `serde_json::Value` would print after parsing them, without building the
//! tree (whose allocations were most of the cost of ingest).
//!
//! Every visitor here counts nesting like serde_json's parser does for a
//! whole body, so nothing deeper than the general path accepts gets through.
//! A copy gives up (an error with no message worth reading) on what only the
//! general path treats exactly: a key given twice in one object (`Value`
//! keeps the last value in the first key's place), a string the size rule
//! would cut, nesting too deep. The caller then leaves the body to the
//! general path, which also words every refusal.

use std::borrow::Cow;
use std::fmt;

use serde::Deserializer;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

/// Containers serde_json accepts nested in one document: its parser starts
/// with a budget of 128 and refuses the container that brings it to 0.
pub(super) const MAX_DEPTH: usize = 127;

/// The error of a copy that gives up.
pub(super) fn give_up<E: de::Error>() -> E {
    E::custom("left to the general path")
}

/// A string or key, borrowed from the input when it has no escapes.
pub(super) struct Text;

impl<'de> DeserializeSeed<'de> for Text {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Text {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

/// A string, or `null` (absent).
pub(super) struct OptText;

impl<'de> DeserializeSeed<'de> for OptText {
    type Value = Option<Cow<'de, str>>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for OptText {
    type Value = Option<Cow<'de, str>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string or null")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        Text.deserialize(d).map(Some)
    }
}

/// Only `null` is accepted (a field the fast path cannot take unless absent).
pub(super) struct NullOnly;

impl<'de> DeserializeSeed<'de> for NullOnly {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for NullOnly {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("null")
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, _: D) -> Result<(), D::Error> {
        Err(give_up())
    }
}

/// Copies one value into `out` (or, with `out: None`, only checks its
/// nesting: a field that is dropped). `depth` is how many containers may
/// still be entered, this value's own included.
pub(super) struct Copy<'o> {
    pub out: Option<&'o mut Vec<u8>>,
    pub depth: usize,
    /// Strings longer than this many characters give up (they would be cut).
    pub max_chars: usize,
}

impl Copy<'_> {
    fn inner(&mut self) -> Copy<'_> {
        Copy {
            out: self.out.as_deref_mut(),
            depth: self.depth - 1,
            max_chars: self.max_chars,
        }
    }

    fn put(&mut self, bytes: &[u8]) {
        if let Some(out) = self.out.as_deref_mut() {
            out.extend_from_slice(bytes);
        }
    }

    /// `v` as serde_json prints it (what `Value` would print).
    fn print<E: de::Error>(&mut self, v: &impl serde::Serialize) -> Result<(), E> {
        match self.out.as_deref_mut() {
            Some(out) => serde_json::to_writer(out, v).map_err(|_| give_up()),
            None => Ok(()),
        }
    }

    fn string<E: de::Error>(&mut self, v: &str) -> Result<(), E> {
        if self.out.is_some() && v.len() > self.max_chars && v.chars().count() > self.max_chars {
            return Err(give_up());
        }
        self.print(&v)
    }
}

/// The value of a field that must be an object or `null`, copied.
pub(super) struct OptObject<'o>(pub Copy<'o>);

impl<'de> DeserializeSeed<'de> for OptObject<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for OptObject<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object or null")
    }

    fn visit_none<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_map(self.0).map(|()| true)
    }
}

impl<'de> DeserializeSeed<'de> for Copy<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Copy<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(mut self, v: bool) -> Result<(), E> {
        self.put(if v { b"true" } else { b"false" });
        Ok(())
    }

    fn visit_i64<E: de::Error>(mut self, v: i64) -> Result<(), E> {
        self.print(&v)
    }

    fn visit_u64<E: de::Error>(mut self, v: u64) -> Result<(), E> {
        self.print(&v)
    }

    fn visit_f64<E: de::Error>(mut self, v: f64) -> Result<(), E> {
        // `Value` turns a non-finite float into `null`.
        if v.is_finite() {
            self.print(&v)
        } else {
            self.put(b"null");
            Ok(())
        }
    }

    fn visit_str<E: de::Error>(mut self, v: &str) -> Result<(), E> {
        self.string(v)
    }

    fn visit_unit<E: de::Error>(mut self) -> Result<(), E> {
        self.put(b"null");
        Ok(())
    }

    fn visit_none<E: de::Error>(mut self) -> Result<(), E> {
        self.put(b"null");
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        if self.depth == 0 {
            return Err(give_up());
        }
        self.put(b"[");
        let mut first = true;
        loop {
            if !first {
                // Written before knowing whether an element follows; a
                // trailing one is taken back below.
                self.put(b",");
            }
            if seq.next_element_seed(self.inner())?.is_none() {
                if !first && let Some(out) = self.out.as_deref_mut() {
                    out.pop();
                }
                break;
            }
            first = false;
        }
        self.put(b"]");
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        if self.depth == 0 {
            return Err(give_up());
        }
        let copying = self.out.is_some();
        let mut keys: Vec<Cow<'de, str>> = Vec::new();
        self.put(b"{");
        while let Some(key) = map.next_key_seed(Text)? {
            if copying {
                if keys.contains(&key) {
                    return Err(give_up());
                }
                if !keys.is_empty() {
                    self.put(b",");
                }
                self.print(&key.as_ref())?;
                self.put(b":");
                keys.push(key);
            }
            map.next_value_seed(self.inner())?;
        }
        self.put(b"}");
        Ok(())
    }
}
