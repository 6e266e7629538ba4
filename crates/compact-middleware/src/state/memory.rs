//! [`MemorySessionStore`]: records kept in this process, shared by every
//! manager given the same store. Records are cloned, not serialized (their
//! messages are shared), so it costs little; it survives a manager, not the
//! process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::OwnedMutexGuard;

use super::{
    Etag, Fetched, SessionGuard, SessionRecord, SessionStore, StateError, WriteStats, Written,
    new_etag,
};
use crate::BoxFuture;
use crate::archive::SessionId;

type Records = Arc<Mutex<HashMap<SessionId, (Etag, SessionRecord)>>>;

/// Session records in this process's memory.
#[derive(Debug, Default, Clone)]
pub struct MemorySessionStore {
    records: Records,
    locks: Arc<Mutex<HashMap<SessionId, Arc<tokio::sync::Mutex<()>>>>>,
    written: Arc<Written>,
}

impl MemorySessionStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many sessions have a record.
    pub fn len(&self) -> usize {
        lock(&self.records).len()
    }

    /// True when no session has a record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

struct Guard {
    id: SessionId,
    records: Records,
    written: Arc<Written>,
    _held: OwnedMutexGuard<()>,
}

impl SessionStore for MemorySessionStore {
    fn kind(&self) -> &'static str {
        "memory"
    }

    /// Saves are counted; bytes stay 0: a save keeps a clone of the record
    /// (its messages shared), it serializes nothing.
    fn write_stats(&self) -> WriteStats {
        self.written.stats()
    }

    fn lock<'a>(
        &'a self,
        id: &'a SessionId,
    ) -> BoxFuture<'a, Result<Box<dyn SessionGuard>, StateError>> {
        Box::pin(async move {
            let mutex = lock(&self.locks).entry(id.clone()).or_default().clone();
            let held = mutex.lock_owned().await;
            Ok(Box::new(Guard {
                id: id.clone(),
                records: self.records.clone(),
                written: self.written.clone(),
                _held: held,
            }) as Box<dyn SessionGuard>)
        })
    }
}

impl SessionGuard for Guard {
    fn load(&mut self, known: Option<Etag>) -> BoxFuture<'_, Result<Fetched, StateError>> {
        let found = match lock(&self.records).get(&self.id) {
            None => Fetched::Absent,
            Some((etag, _)) if Some(*etag) == known => Fetched::Unchanged,
            Some((etag, record)) => Fetched::Record(*etag, Box::new(record.clone())),
        };
        Box::pin(async move { Ok(found) })
    }

    fn save<'a>(
        &'a mut self,
        record: &'a SessionRecord,
    ) -> BoxFuture<'a, Result<Etag, StateError>> {
        let etag = new_etag();
        lock(&self.records).insert(self.id.clone(), (etag, record.clone()));
        self.written.add(0);
        Box::pin(async move { Ok(etag) })
    }

    fn delete(&mut self) -> BoxFuture<'_, Result<bool, StateError>> {
        let removed = lock(&self.records).remove(&self.id).is_some();
        Box::pin(async move { Ok(removed) })
    }

    fn release(self: Box<Self>) -> BoxFuture<'static, Result<(), StateError>> {
        Box::pin(async move { Ok(()) })
    }
}
