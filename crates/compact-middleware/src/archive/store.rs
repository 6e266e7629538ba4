//! [`Archive`]: the archive on top of any [`StorageAdapter`]. It names the
//! files, encodes them, keeps each session's hash-chained manifest, numbers
//! the steps and reads everything back, once for every backend.

use serde_json::Value;

use super::layout::{self, FileKind, MANIFEST_FILE};
use super::manifest::{self, Entry};
use super::{ArchiveError, SessionId, StorageAdapter, Stored, sha256_hex};

/// The archive kept in one adapter. Cheap to make: it borrows the adapter
/// and holds nothing else, so `Archive::new(adapter)` wherever one is needed.
#[derive(Debug, Clone, Copy)]
pub struct Archive<'a> {
    adapter: &'a dyn StorageAdapter,
}

/// One compaction step read back.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The history before the compaction, one value per message.
    pub transcript: Vec<Value>,
    /// The summary document, if the step produced one.
    pub summary: Option<Value>,
}

/// Where a write goes.
enum Target {
    /// A file written whole (transcript, summary).
    Whole(FileKind),
    /// The session's event log.
    Events,
}

impl<'a> Archive<'a> {
    /// The archive in `adapter`.
    pub fn new(adapter: &'a dyn StorageAdapter) -> Self {
        Archive { adapter }
    }

    /// The adapter.
    pub fn adapter(&self) -> &'a dyn StorageAdapter {
        self.adapter
    }

    /// Stores the full history before compaction number `step`
    /// (`transcript-pre-compact-{step:03}.jsonl`, one message per line).
    pub async fn save_transcript(
        &self,
        session: &SessionId,
        step: u32,
        messages: &[Value],
    ) -> Result<Stored, ArchiveError> {
        let bytes = layout::encode_lines(messages)?;
        self.save(session, Target::Whole(FileKind::Transcript(step)), bytes)
            .await
    }

    /// Stores the summary compaction number `step` produced (`summary-{step:03}.json`).
    pub async fn save_summary(
        &self,
        session: &SessionId,
        step: u32,
        summary: &Value,
    ) -> Result<Stored, ArchiveError> {
        let bytes = layout::encode_summary(summary)?;
        self.save(session, Target::Whole(FileKind::Summary(step)), bytes)
            .await
    }

    /// Adds events (one preflight's worth) to the session's event log:
    /// appended to `events.jsonl` where the adapter appends in place, the
    /// next `events-{n:06}.jsonl` object elsewhere.
    pub async fn save_events(
        &self,
        session: &SessionId,
        events: &[Value],
    ) -> Result<Stored, ArchiveError> {
        let bytes = layout::encode_lines(events)?;
        self.save(session, Target::Events, bytes).await
    }

    /// Writes `bytes` and records them in the manifest. The manifest is read
    /// first: a corrupt one stops the write before anything unrecorded lands.
    async fn save(
        &self,
        session: &SessionId,
        target: Target,
        bytes: Vec<u8>,
    ) -> Result<Stored, ArchiveError> {
        let mut entries = self.manifest_for_append(session).await?;
        let len = bytes.len() as u64;
        let sha256 = sha256_hex(&bytes);
        let (kind, offset) = match target {
            Target::Whole(kind) => {
                // A compaction's writes start with its transcript: the
                // moment to take in what a killed writer left unrecorded.
                if matches!(kind, FileKind::Transcript(_)) {
                    self.record_unrecorded_files(session, &mut entries).await?;
                }
                self.adapter.put(&layout::key(session, kind), bytes).await?;
                (kind, 0)
            }
            Target::Events if self.adapter.native_append() => {
                let key = layout::key(session, FileKind::Events);
                let offset = self.adapter.append(&key, bytes).await?;
                self.record_unrecorded(session, &key, offset, &mut entries)
                    .await?;
                (FileKind::Events, offset)
            }
            Target::Events => {
                // Numbered from the manifest, so an object whose entry never
                // made it (the write is retried) is written again under the
                // same number rather than left unrecorded.
                let next = entries
                    .iter()
                    .filter_map(|e| match FileKind::parse(&e.file) {
                        Some(FileKind::EventObject(n)) => Some(n),
                        _ => None,
                    })
                    .max()
                    .unwrap_or(0)
                    + 1;
                let kind = FileKind::EventObject(next);
                self.adapter.put(&layout::key(session, kind), bytes).await?;
                (kind, 0)
            }
        };
        let name = kind.name();
        let entry = Entry::chained(entries.last(), &name, offset, len, sha256);
        self.adapter
            .append(
                &layout::key(session, FileKind::Manifest),
                entry.to_line().into_bytes(),
            )
            .await?;
        Ok(Stored {
            location: self.adapter.location(&layout::key(session, kind)),
            name,
            bytes: len,
            manifest_head: entry.hash,
        })
    }

    /// The manifest's entries, for extending it.
    /// A process killed between appending events and appending their
    /// manifest line (a SIGKILLed replica) leaves whole, unrecorded lines
    /// before the ones just appended at `offset` (the adapter cuts a torn
    /// line). They are that preflight's events: recorded as they are, before
    /// the new chunk, the chain stays whole and they stay verifiable.
    async fn record_unrecorded(
        &self,
        session: &SessionId,
        key: &str,
        offset: u64,
        entries: &mut Vec<Entry>,
    ) -> Result<(), ArchiveError> {
        let name = FileKind::Events.name();
        let recorded = entries
            .iter()
            .filter(|e| e.file == name)
            .map(|e| e.offset + e.len)
            .max()
            .unwrap_or(0);
        if offset <= recorded {
            return Ok(());
        }
        let data = self.adapter.get(key).await?;
        let gap = usize::try_from(recorded)
            .ok()
            .zip(usize::try_from(offset).ok())
            .and_then(|(a, b)| data.get(a..b));
        // Shorter than the manifest says: not ours to mend (verify says so).
        let Some(gap) = gap else {
            return Ok(());
        };
        tracing::warn!(
            session = %session,
            bytes = gap.len(),
            "archive: events a killed writer appended without recording them are recorded now"
        );
        let entry = Entry::next(entries.last(), &name, recorded, gap);
        self.record_entry(session, entries, entry).await
    }

    /// Appends `entry` to the session's manifest and to `entries`.
    async fn record_entry(
        &self,
        session: &SessionId,
        entries: &mut Vec<Entry>,
        entry: Entry,
    ) -> Result<(), ArchiveError> {
        self.adapter
            .append(
                &layout::key(session, FileKind::Manifest),
                entry.to_line().into_bytes(),
            )
            .await?;
        entries.push(entry);
        Ok(())
    }

    /// A process killed between writing a compaction's transcript or
    /// summary and appending its manifest line (a SIGKILLed replica) leaves
    /// a whole file the manifest does not record. The compaction it belongs
    /// to was never committed (the session's record is saved after the
    /// archive writes), so the call is retried and archived again under the
    /// next step; the file left behind is recorded as it is, like
    /// [`record_unrecorded`](Self::record_unrecorded)'s events, so the chain
    /// stays whole and it stays verifiable. One listing per compaction.
    async fn record_unrecorded_files(
        &self,
        session: &SessionId,
        entries: &mut Vec<Entry>,
    ) -> Result<(), ArchiveError> {
        let recorded: std::collections::HashSet<String> =
            entries.iter().map(|e| e.file.clone()).collect();
        let mut left: Vec<(u32, String)> = self
            .files(session)
            .await?
            .into_iter()
            .filter(|name| !recorded.contains(name))
            .filter_map(|name| match FileKind::parse(&name) {
                Some(kind @ (FileKind::Transcript(_) | FileKind::Summary(_))) => {
                    Some((kind.step().unwrap_or(0), name))
                }
                _ => None,
            })
            .collect();
        // In the order they were written: a step's transcript, then its summary.
        left.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| b.1.cmp(&a.1)));
        for (_, name) in left {
            let data = self.read(session, &name).await?;
            tracing::warn!(
                session = %session,
                file = %name,
                "archive: a file a killed writer wrote without recording it is recorded now"
            );
            let entry = Entry::next(entries.last(), &name, 0, &data);
            self.record_entry(session, entries, entry).await?;
        }
        Ok(())
    }

    async fn manifest_for_append(&self, session: &SessionId) -> Result<Vec<Entry>, ArchiveError> {
        let bytes = match self.read(session, MANIFEST_FILE).await {
            Ok(b) => b,
            Err(e) if e.is_not_found() => Vec::new(),
            Err(e) => return Err(e),
        };
        manifest::parse_for_append(&bytes).map_err(|e| ArchiveError::Manifest {
            session: session.to_string(),
            reason: e.to_string(),
        })
    }

    /// The session ids present, sorted.
    pub async fn sessions(&self) -> Result<Vec<String>, ArchiveError> {
        let mut out: Vec<String> = self
            .adapter
            .list("")
            .await?
            .into_iter()
            .filter_map(|e| e.strip_suffix('/').map(str::to_owned))
            .filter(|s| SessionId::parse(s).is_ok())
            .collect();
        out.sort();
        Ok(out)
    }

    /// The file names of one session (manifest included), sorted. Empty when
    /// the session has no archive.
    pub async fn files(&self, session: &SessionId) -> Result<Vec<String>, ArchiveError> {
        let prefix = layout::session_prefix(session);
        let mut out: Vec<String> = self
            .adapter
            .list(&prefix)
            .await?
            .into_iter()
            .filter(|e| !e.ends_with('/'))
            .filter_map(|e| e.strip_prefix(&prefix).map(str::to_owned))
            .collect();
        out.sort();
        Ok(out)
    }

    /// The bytes of one file; [`ArchiveError::NotFound`] when absent,
    /// [`ArchiveError::InvalidName`] when `name` is not a layout name.
    pub async fn read(&self, session: &SessionId, name: &str) -> Result<Vec<u8>, ArchiveError> {
        let kind = layout::check_name(name)?;
        self.adapter.get(&layout::key(session, kind)).await
    }

    /// The highest compaction step archived for `session` (0 when none),
    /// from the transcript and summary names present.
    pub async fn last_step(&self, session: &SessionId) -> Result<u32, ArchiveError> {
        Ok(self
            .files(session)
            .await?
            .iter()
            .filter_map(|n| FileKind::parse(n).and_then(FileKind::step))
            .max()
            .unwrap_or(0))
    }

    /// Compaction `step` of `session`: its transcript (which must exist) and
    /// its summary (if any), decoded.
    pub async fn step(&self, session: &SessionId, step: u32) -> Result<Step, ArchiveError> {
        let name = layout::transcript_name(step);
        let transcript = layout::decode_lines(&name, &self.read(session, &name).await?)?;
        let name = layout::summary_name(step);
        let summary = match self.read(session, &name).await {
            Ok(b) => Some(layout::decode_document(&name, &b)?),
            Err(e) if e.is_not_found() => None,
            Err(e) => return Err(e),
        };
        Ok(Step {
            transcript,
            summary,
        })
    }
}
