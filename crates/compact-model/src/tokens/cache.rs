//! Content hash of an item and the bounded per-item count cache.
use super::Encoding;
use crate::prehashed::Prehashed;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use xxhash_rust::xxh3::Xxh3Default;

/// Stable 128-bit content hash of an item, for use as a cache key.
///
/// xxh3-128 (seed 0) over a walk of the value in which every node starts with a type tag and
/// every string, array and object carries its length, so two different values never feed the
/// hasher the same bytes (`["ab"]` and `["a","b"]` differ). Object keys are visited in sorted
/// order because JSON object equality ignores key order. The byte format is fixed (see
/// `docs/tokens.md`): the hash of a value does not change between runs or builds.
pub fn item_hash(item: &Map<String, Value>) -> u128 {
    let mut hasher = Xxh3Default::new();
    hash_object(&mut hasher, item);
    hasher.digest128()
}

fn hash_len(h: &mut Xxh3Default, len: usize) {
    // usize -> u64 is lossless on every supported target.
    h.update(&(len as u64).to_le_bytes());
}

fn hash_str(h: &mut Xxh3Default, s: &str) {
    hash_len(h, s.len());
    h.update(s.as_bytes());
}

fn hash_object(h: &mut Xxh3Default, map: &Map<String, Value>) {
    h.update(b"o");
    hash_len(h, map.len());
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    for (key, value) in entries {
        hash_str(h, key);
        hash_value(h, value);
    }
}

fn hash_value(h: &mut Xxh3Default, value: &Value) {
    match value {
        Value::Null => h.update(b"z"),
        Value::Bool(false) => h.update(b"f"),
        Value::Bool(true) => h.update(b"t"),
        Value::Number(n) => {
            // The JSON text keeps 1 and 1.0 apart, as serde_json's equality does.
            h.update(b"n");
            hash_str(h, &n.to_string());
        }
        Value::String(s) => {
            h.update(b"s");
            hash_str(h, s);
        }
        Value::Array(items) => {
            h.update(b"a");
            hash_len(h, items.len());
            for item in items {
                hash_value(h, item);
            }
        }
        Value::Object(map) => hash_object(h, map),
    }
}

/// Hit and miss counters and current size of a [`CountCache`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct CacheStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that had to count.
    pub misses: u64,
    /// Entries held now (never more than the capacity).
    pub len: usize,
}

type Key = (u128, Encoding);
type Generation = HashMap<Key, usize, BuildHasherDefault<Prehashed>>;

struct Generations {
    current: Generation,
    previous: Generation,
}

/// Bounded, thread-safe cache of per-item token counts keyed by `(item_hash, encoding)`.
///
/// Two generations: new entries go into the current one; when it holds `capacity / 2`
/// entries it becomes the previous one and the old previous one is dropped whole. A hit in
/// the previous generation moves the entry forward, so what a long-running server keeps
/// touching (the unchanged prefix of each conversation) survives, memory stays at most
/// `capacity` entries, and every operation is O(1).
pub struct CountCache {
    capacity: usize,
    generation_cap: usize,
    inner: Mutex<Generations>,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl std::fmt::Debug for CountCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CountCache")
            .field("capacity", &self.capacity)
            .field("stats", &self.stats())
            .finish()
    }
}

impl CountCache {
    /// A cache holding at most `capacity` counts. `0` disables caching (every lookup counts).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            generation_cap: (capacity / 2).max(1),
            inner: Mutex::new(Generations {
                current: Generation::default(),
                previous: Generation::default(),
            }),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Generations> {
        // The maps are always left consistent (no user code runs under the lock), so a
        // poisoned lock is still safe to use.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The cached count for `(key, encoding)`, or `f()` (run without holding the lock, then
    /// cached). Two threads missing on the same key may both run `f`; they get the same value.
    pub fn get_or_insert_with(
        &self,
        key: u128,
        encoding: Encoding,
        f: impl FnOnce() -> usize,
    ) -> usize {
        let k = (key, encoding);
        {
            let mut g = self.lock();
            if let Some(&v) = g.current.get(&k) {
                self.hits.fetch_add(1, Ordering::Relaxed);
                return v;
            }
            if let Some(v) = g.previous.remove(&k) {
                self.hits.fetch_add(1, Ordering::Relaxed);
                self.insert_locked(&mut g, k, v);
                return v;
            }
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let v = f();
        if self.capacity > 0 {
            let mut g = self.lock();
            self.insert_locked(&mut g, k, v);
        }
        v
    }

    fn insert_locked(&self, g: &mut Generations, k: Key, v: usize) {
        if self.capacity == 0 {
            return;
        }
        if g.current.len() >= self.generation_cap && !g.current.contains_key(&k) {
            if self.capacity >= 2 {
                g.previous = std::mem::take(&mut g.current);
            } else {
                // Capacity 1 has no room for a second generation.
                g.current.clear();
            }
        }
        g.previous.remove(&k);
        g.current.insert(k, v);
    }

    /// Hits, misses and current number of entries.
    pub fn stats(&self) -> CacheStats {
        let len = {
            let g = self.lock();
            g.current.len() + g.previous.len()
        };
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            len,
        }
    }

    /// Maximum number of entries.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}
