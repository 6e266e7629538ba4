//! The spool: a local directory holding archive writes the backend refused
//! (S3 down, disk full on a mounted volume), so nothing that left the
//! context is lost while the backend is away.
//!
//! Each item is one JSON file `{seq:012}.json` (written atomically), holding
//! the session id and the already-redacted payload. Items are delivered in
//! `seq` order and deleted once the backend accepted them; delivery stops
//! at the first failure so the order of a session's writes is kept.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::fs::{dir_entries, ensure_dir, sync_dir, write_atomic};
use super::{Archive, ArchiveError, SessionId, StorageAdapter, Stored};

/// What a spooled write was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SpoolPayload {
    /// An [`Archive::save_transcript`].
    Transcript {
        /// The compaction step.
        step: u32,
        /// The messages.
        messages: Vec<Value>,
    },
    /// An [`Archive::save_summary`].
    Summary {
        /// The compaction step.
        step: u32,
        /// The summary document.
        summary: Value,
    },
    /// An [`Archive::save_events`].
    Events {
        /// The events.
        events: Vec<Value>,
    },
}

/// One spooled write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpoolItem {
    /// The session it belongs to.
    pub session: String,
    /// The write.
    #[serde(flatten)]
    pub payload: SpoolPayload,
}

impl SpoolItem {
    /// Performs the write on the archive in `adapter`.
    pub async fn deliver(&self, adapter: &dyn StorageAdapter) -> Result<Stored, ArchiveError> {
        let session = SessionId::parse(&self.session)?;
        let archive = Archive::new(adapter);
        match &self.payload {
            SpoolPayload::Transcript { step, messages } => {
                archive.save_transcript(&session, *step, messages).await
            }
            SpoolPayload::Summary { step, summary } => {
                archive.save_summary(&session, *step, summary).await
            }
            SpoolPayload::Events { events } => archive.save_events(&session, events).await,
        }
    }

    /// The step of a transcript or summary.
    pub fn step(&self) -> Option<u32> {
        match self.payload {
            SpoolPayload::Transcript { step, .. } | SpoolPayload::Summary { step, .. } => {
                Some(step)
            }
            SpoolPayload::Events { .. } => None,
        }
    }
}

/// The outcome of one delivery attempt.
#[derive(Debug, Default)]
pub struct Delivery {
    /// What reached the backend, in order, with its session.
    pub delivered: Vec<(String, Stored)>,
    /// Why delivery stopped early.
    pub error: Option<ArchiveError>,
    /// Items still spooled.
    pub remaining: usize,
}

/// A spool directory.
#[derive(Debug)]
pub struct Spool {
    dir: PathBuf,
    next_seq: Mutex<Option<u64>>,
}

impl Spool {
    /// A spool at `dir`; created on the first push.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Spool {
            dir: dir.into(),
            next_seq: Mutex::new(None),
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Stores `item` durably; returns its file.
    pub async fn push(&self, item: SpoolItem) -> Result<PathBuf, ArchiveError> {
        let body = serde_json::to_vec(&item)?;
        let dir = self.dir.clone();
        let seq = {
            let known = self.lock().is_some();
            let listed = if known {
                None
            } else {
                Some(list_blocking(dir.clone()).await?)
            };
            let mut next = self.lock();
            let seq = next.unwrap_or_else(|| {
                listed
                    .as_ref()
                    .and_then(|l| l.last())
                    .map_or(1, |(s, _)| s + 1)
            });
            *next = Some(seq + 1);
            seq
        };
        tokio::task::spawn_blocking(move || {
            ensure_dir(&dir)?;
            let name = format!("{seq:012}.json");
            write_atomic(&dir, &name, &body)?;
            Ok(dir.join(name))
        })
        .await
        .map_err(|e| ArchiveError::Task(e.to_string()))?
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<u64>> {
        self.next_seq
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Spooled items in delivery order. Unreadable items are renamed to
    /// `*.corrupt` (and logged) so they do not block the rest.
    pub async fn pending(&self) -> Result<Vec<(PathBuf, SpoolItem)>, ArchiveError> {
        let listed = list_blocking(self.dir.clone()).await?;
        tokio::task::spawn_blocking(move || {
            let mut out = Vec::new();
            for (_, path) in listed {
                let parsed = fs::read(&path)
                    .map_err(|e| e.to_string())
                    .and_then(|b| serde_json::from_slice::<SpoolItem>(&b).map_err(|e| e.to_string()));
                match parsed {
                    Ok(item) => out.push((path, item)),
                    Err(e) => {
                        tracing::error!(path = %path.display(), error = %e, "unreadable spool item set aside");
                        let _ = fs::rename(&path, path.with_extension("corrupt"));
                    }
                }
            }
            Ok(out)
        })
        .await
        .map_err(|e| ArchiveError::Task(e.to_string()))?
    }

    /// How many items wait.
    pub async fn len(&self) -> Result<usize, ArchiveError> {
        Ok(list_blocking(self.dir.clone()).await?.len())
    }

    /// Whether nothing waits.
    pub async fn is_empty(&self) -> Result<bool, ArchiveError> {
        Ok(self.len().await? == 0)
    }

    /// The highest step spooled for `session` (0 when none).
    pub async fn last_step(&self, session: &SessionId) -> Result<u32, ArchiveError> {
        Ok(self
            .pending()
            .await?
            .iter()
            .filter(|(_, i)| i.session == session.as_str())
            .filter_map(|(_, i)| i.step())
            .max()
            .unwrap_or(0))
    }

    /// Delivers spooled items in order until one fails.
    pub async fn deliver(&self, adapter: &dyn StorageAdapter) -> Result<Delivery, ArchiveError> {
        let pending = self.pending().await?;
        let total = pending.len();
        let mut d = Delivery::default();
        for (i, (path, item)) in pending.into_iter().enumerate() {
            match item.deliver(adapter).await {
                Ok(stored) => {
                    let dir = self.dir.clone();
                    tokio::task::spawn_blocking(move || {
                        fs::remove_file(&path)
                            .map_err(|e| ArchiveError::io("remove", &path, e))
                            .and_then(|_| sync_dir(&dir))
                    })
                    .await
                    .map_err(|e| ArchiveError::Task(e.to_string()))??;
                    d.delivered.push((item.session, stored));
                }
                Err(e) => {
                    d.error = Some(e);
                    d.remaining = total - i;
                    return Ok(d);
                }
            }
        }
        Ok(d)
    }
}

/// `(seq, path)` of every item file, sorted by seq.
async fn list_blocking(dir: PathBuf) -> Result<Vec<(u64, PathBuf)>, ArchiveError> {
    tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        for (name, path) in dir_entries(&dir)? {
            if let Some(seq) = name
                .strip_suffix(".json")
                .filter(|s| s.len() == 12)
                .and_then(|s| s.parse::<u64>().ok())
            {
                out.push((seq, path));
            }
        }
        out.sort();
        Ok(out)
    })
    .await
    .map_err(|e| ArchiveError::Task(e.to_string()))?
}
