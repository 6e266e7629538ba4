//! What each session's last request decoded, kept so that the next one
//! (the same history resent with an item or two more, as agents do)
//! decodes only what is new. An item is reused only where its JSON text is
//! byte for byte the text decoded at the same place last time, in the same
//! format: a decoded item is a function of its text and format, so the
//! request the core gets is the one a full decode gives. The kept items
//! carry their memoised content hashes, which the core would otherwise
//! compute again for every item of every call.
//!
//! Bounded by `proxy.history_cache_bytes` (the items' text kept, copied
//! out of the request: a slice would keep hyper's whole read buffer alive;
//! the least recently used sessions go first). `0` keeps nothing.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Bytes;
use compact_middleware::model::{Format, Item, Message};
use serde_json::value::RawValue;

/// One session's last decoded history.
struct Kept {
    format: Format,
    /// The items' JSON text, one after the other.
    text: Bytes,
    /// Each item's text in `text`, and the item decoded.
    items: Vec<(Range<usize>, Message)>,
}

struct Slot {
    kept: Arc<Kept>,
    /// When it was last used ([`State::order`]'s key).
    tick: u64,
}

#[derive(Default)]
struct State {
    sessions: HashMap<String, Slot>,
    /// Sessions by last use, oldest first.
    order: BTreeMap<u64, String>,
    tick: u64,
    /// Text kept, all sessions.
    bytes: usize,
}

impl State {
    fn touch(&mut self, session: &str) -> Option<Arc<Kept>> {
        self.tick += 1;
        let tick = self.tick;
        let slot = self.sessions.get_mut(session)?;
        let old = std::mem::replace(&mut slot.tick, tick);
        let kept = slot.kept.clone();
        if let Some(name) = self.order.remove(&old) {
            self.order.insert(tick, name);
        }
        Some(kept)
    }

    /// Forgets `session`; the caller drops what it kept, outside the lock.
    fn remove(&mut self, session: &str) -> Option<Arc<Kept>> {
        let slot = self.sessions.remove(session)?;
        self.order.remove(&slot.tick);
        self.bytes -= slot.kept.text.len();
        Some(slot.kept)
    }
}

/// The sessions' last decoded histories.
pub(crate) struct Histories {
    budget: usize,
    state: Mutex<State>,
}

impl Histories {
    /// Keeps up to `budget` bytes of history text.
    pub(crate) fn new(budget: usize) -> Self {
        Self {
            budget,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The items of `raw` for [`Request::from_envelope`]: decoded where the
    /// session's last request had the same text at the same place in
    /// `format`, values otherwise. `None` when an item is one the
    /// whole-body parse would refuse (the caller falls back to it).
    ///
    /// [`Request::from_envelope`]: compact_middleware::model::Request::from_envelope
    pub(crate) fn items(
        &self,
        session: &str,
        format: Format,
        raw: &[&RawValue],
    ) -> Option<Vec<Item>> {
        let kept = self.state().touch(session).filter(|k| k.format == format);
        let mut items = Vec::with_capacity(raw.len());
        for (i, r) in raw.iter().enumerate() {
            let same = kept
                .as_deref()
                .and_then(|k| Some((k.text.get(k.items.get(i)?.0.clone())?, &k.items[i].1)))
                .filter(|(text, _)| *text == r.get().as_bytes());
            items.push(match same {
                Some((_, m)) => Item::Decoded(m.clone()),
                None => Item::Json(super::body::item(r)?),
            });
        }
        Some(items)
    }

    /// Keeps `messages`, decoded from `raw` in `format`, as the session's
    /// last history (their content hashes computed:
    /// [`super::compact::Ran::decoded`]).
    pub(crate) fn keep(
        &self,
        session: &str,
        format: Format,
        raw: &[&RawValue],
        messages: Vec<Message>,
    ) {
        if self.budget == 0 || raw.len() != messages.len() {
            return;
        }
        let size: usize = raw.iter().map(|r| r.get().len()).sum();
        let mut dropped = Vec::new();
        {
            let mut state = self.state();
            dropped.extend(state.remove(session));
        }
        if size > self.budget {
            return;
        }
        let mut text = Vec::with_capacity(size);
        let mut items = Vec::with_capacity(raw.len());
        for (r, m) in raw.iter().zip(messages) {
            let start = text.len();
            text.extend_from_slice(r.get().as_bytes());
            items.push((start..text.len(), m));
        }
        let kept = Arc::new(Kept {
            format,
            text: Bytes::from(text),
            items,
        });
        let mut state = self.state();
        while state.bytes + size > self.budget {
            let Some((_, oldest)) = state.order.pop_first() else {
                break;
            };
            dropped.extend(state.remove(&oldest));
        }
        state.tick += 1;
        let tick = state.tick;
        state.order.insert(tick, session.to_owned());
        // A concurrent call of the same session may have kept its own
        // meanwhile: this one, the later, replaces it.
        dropped.extend(state.remove(session));
        state
            .sessions
            .insert(session.to_owned(), Slot { kept, tick });
        state.bytes += size;
        drop(state);
        drop(dropped);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use compact_middleware::model::Request;
    use serde_json::Map;

    fn raw(items: &[&str]) -> String {
        format!("[{}]", items.join(","))
    }

    fn decode(h: &Histories, session: &str, text: &str) -> (Vec<bool>, Vec<Message>) {
        let raw: Vec<&RawValue> = serde_json::from_str(text).unwrap();
        let items = h.items(session, Format::Chat, &raw).unwrap();
        let reused = items
            .iter()
            .map(|i| matches!(i, Item::Decoded(_)))
            .collect();
        let req = Request::from_envelope(Map::new(), items, Format::Chat).unwrap();
        h.keep(session, Format::Chat, &raw, req.messages.clone());
        (reused, req.messages)
    }

    const A: &str = r#"{"role":"user","content":"a"}"#;
    const B: &str = r#"{"role":"assistant","content":"b"}"#;
    const C: &str = r#"{"role":"user","content":"c"}"#;

    #[test]
    fn the_same_text_at_the_same_place_is_reused() {
        let h = Histories::new(1 << 20);
        assert_eq!(decode(&h, "s", &raw(&[A, B])).0, [false, false]);
        let (reused, messages) = decode(&h, "s", &raw(&[A, B, C]));
        assert_eq!(reused, [true, true, false]);
        let whole = Request::from_value(
            serde_json::from_str(&raw(&[A, B, C])).unwrap(),
            Format::Chat,
        )
        .unwrap();
        assert_eq!(messages, whole.messages);
        // Another place, other text (one space more), another session,
        // another format: decoded afresh.
        assert_eq!(decode(&h, "s", &raw(&[B, A, C])).0, [false, false, true]);
        let spaced = r#"{"role": "user","content":"a"}"#;
        assert_eq!(decode(&h, "s", &raw(&[spaced, C])).0, [false, false]);
        assert_eq!(decode(&h, "t", &raw(&[spaced, A])).0, [false, false]);
        let text = raw(&[spaced, A]);
        let r: Vec<&RawValue> = serde_json::from_str(&text).unwrap();
        let items = h.items("t", Format::Responses, &r).unwrap();
        assert!(items.iter().all(|i| matches!(i, Item::Json(_))));
    }

    #[test]
    fn the_budget_drops_the_least_recently_used_session() {
        let one = raw(&[A, B]).len() - 3; // the items' text, no brackets or comma
        let h = Histories::new(2 * one);
        decode(&h, "s1", &raw(&[A, B]));
        decode(&h, "s2", &raw(&[A, B]));
        // s1 used last: s2 goes when s3 comes.
        assert_eq!(decode(&h, "s1", &raw(&[A, B])).0, [true, true]);
        decode(&h, "s3", &raw(&[A, B]));
        assert_eq!(decode(&h, "s2", &raw(&[A, B])).0, [false, false]);
        assert!(h.state().bytes <= 2 * one);
        let off = Histories::new(0);
        decode(&off, "s", &raw(&[A]));
        assert_eq!(decode(&off, "s", &raw(&[A])).0, [false]);
    }

    #[test]
    fn an_item_the_whole_parse_refuses_is_left_to_it() {
        let h = Histories::new(1 << 20);
        let r: Vec<&RawValue> = serde_json::from_str("[1e999]").unwrap();
        assert!(h.items("s", Format::Chat, &r).is_none());
    }
}
