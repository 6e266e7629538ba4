//! The filesystem adapter: `{root}/{session_id}/{file}`.
//!
//! Durability: a transcript or summary is written to a temporary file in
//! the same directory, fsynced, renamed over its final name and the
//! directory fsynced, so a crash leaves the old file or the new one, never a
//! mix. `events.jsonl` and `manifest.jsonl` are appended with one `write` per
//! batch on an `O_APPEND` descriptor and fsynced; a tail left incomplete by
//! a crash (no final newline) is cut off before the next append, so lines
//! are never torn. Blocking I/O runs on tokio's blocking pool.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

use super::layout::{self, EVENTS_FILE, FileKind, MANIFEST_FILE};
use super::manifest::{self, Entry};
use super::{ArchiveError, SessionId, StorageAdapter, Stored};
use crate::BoxFuture;

/// Archives to a local directory (the default, `storage.adapter: fs`).
#[derive(Debug, Clone)]
pub struct FsAdapter {
    root: PathBuf,
}

impl FsAdapter {
    /// An adapter rooted at `root`. Nothing is created until the first write.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        FsAdapter { root: root.into() }
    }

    /// The archive root.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// `{root}/{session_id}`: the only way a session id reaches a path, and
    /// only once validated.
    pub fn session_dir(&self, session: &SessionId) -> PathBuf {
        self.root.join(session.as_str())
    }

    fn save_whole(
        &self,
        session: &SessionId,
        name: String,
        bytes: Vec<u8>,
    ) -> BoxFuture<'static, Result<Stored, ArchiveError>> {
        let dir = self.session_dir(session);
        let root = self.root.clone();
        let sid = session.as_str().to_string();
        Box::pin(blocking(move || {
            ensure_dir(&root, &dir)?;
            write_atomic(&dir, &name, &bytes)?;
            let head = append_manifest(&sid, &dir, &name, 0, &bytes)?;
            Ok(stored(&dir, name, bytes.len() as u64, head))
        }))
    }
}

fn stored(dir: &Path, name: String, bytes: u64, manifest_head: String) -> Stored {
    Stored {
        location: dir.join(&name).display().to_string(),
        name,
        bytes,
        manifest_head,
    }
}

/// Runs blocking filesystem work off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ArchiveError> + Send + 'static,
) -> Result<T, ArchiveError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ArchiveError::Task(e.to_string()))?
}

/// Creates `dir` (and `root`) if needed, fsyncing each new directory's
/// parent so the directory entry itself survives a crash.
pub(crate) fn ensure_dir(root: &Path, dir: &Path) -> Result<(), ArchiveError> {
    if dir.is_dir() {
        return Ok(());
    }
    let root_existed = root.is_dir();
    fs::create_dir_all(dir).map_err(|e| ArchiveError::io("create directory", dir, e))?;
    if !root_existed && let Some(parent) = root.parent() {
        sync_dir(if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        })?;
    }
    if dir != root {
        sync_dir(root)?;
    }
    Ok(())
}

/// fsync of a directory: makes renames and new entries in it durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), ArchiveError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| ArchiveError::io("fsync directory", dir, e))
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `dir/name` atomically: temp file in `dir`, fsync, rename, fsync
/// of `dir`. Temp names start with `.` so listings skip them.
pub(crate) fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), ArchiveError> {
    let tmp = dir.join(format!(
        ".{name}.tmp-{}-{}",
        std::process::id(),
        TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| ArchiveError::io("create", &tmp, e))?;
        f.write_all(bytes)
            .map_err(|e| ArchiveError::io("write", &tmp, e))?;
        f.sync_all()
            .map_err(|e| ArchiveError::io("fsync", &tmp, e))?;
        let target = dir.join(name);
        fs::rename(&tmp, &target).map_err(|e| ArchiveError::io("rename", &target, e))?;
        sync_dir(dir)
    })();
    if result.is_err() {
        // Best effort: a leftover temp file is harmless (listings skip it).
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Appends `bytes` (whole lines) to `dir/name` and fsyncs. Returns the
/// offset the bytes start at. A tail without a final newline (a crash
/// mid-append on a filesystem that tore the write) is cut off first.
fn append_lines(dir: &Path, name: &str, bytes: &[u8]) -> Result<u64, ArchiveError> {
    let path = dir.join(name);
    let existed = path.exists();
    let mut f = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(&path)
        .map_err(|e| ArchiveError::io("open", &path, e))?;
    let len = f
        .metadata()
        .map_err(|e| ArchiveError::io("stat", &path, e))?
        .len();
    let offset = repair_tail(&mut f, &path, len)?;
    // One write call for the whole batch: with O_APPEND the kernel places it
    // at the end in one piece.
    f.write_all(bytes)
        .map_err(|e| ArchiveError::io("append", &path, e))?;
    f.sync_all()
        .map_err(|e| ArchiveError::io("fsync", &path, e))?;
    if !existed {
        sync_dir(dir)?;
    }
    Ok(offset)
}

/// Truncates `f` after its last newline if it does not end in one; returns
/// the resulting length.
fn repair_tail(f: &mut File, path: &Path, len: u64) -> Result<u64, ArchiveError> {
    if len == 0 {
        return Ok(0);
    }
    // Scan back in blocks for the last newline.
    let mut end = len;
    let mut buf = vec![0u8; 64 * 1024];
    let mut first = true;
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let n = (end - start) as usize;
        f.seek(SeekFrom::Start(start))
            .and_then(|_| f.read_exact(&mut buf[..n]))
            .map_err(|e| ArchiveError::io("read", path, e))?;
        if first && buf[n - 1] == b'\n' {
            return Ok(len);
        }
        first = false;
        if let Some(i) = buf[..n].iter().rposition(|b| *b == b'\n') {
            let keep = start + i as u64 + 1;
            tracing::warn!(path = %path.display(), cut = len - keep, "cutting an incomplete line left by an interrupted append");
            f.set_len(keep)
                .map_err(|e| ArchiveError::io("truncate", path, e))?;
            return Ok(keep);
        }
        end = start;
    }
    tracing::warn!(path = %path.display(), cut = len, "cutting an incomplete line left by an interrupted append");
    f.set_len(0)
        .map_err(|e| ArchiveError::io("truncate", path, e))?;
    Ok(0)
}

/// Records `bytes` written to `file` at `offset` in the session's manifest;
/// returns the new head hash.
fn append_manifest(
    session: &str,
    dir: &Path,
    file: &str,
    offset: u64,
    bytes: &[u8],
) -> Result<String, ArchiveError> {
    let path = dir.join(MANIFEST_FILE);
    let existing = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(ArchiveError::io("read", &path, e)),
    };
    // A torn last line is an interrupted append of ours, not tampering:
    // the next append cuts it (see `append_lines`), so parse without it.
    let complete = match existing.iter().rposition(|b| *b == b'\n') {
        Some(i) => &existing[..=i],
        None => &existing[..0],
    };
    let entries = manifest::parse(complete).map_err(|e| ArchiveError::Manifest {
        session: session.to_string(),
        reason: e.to_string(),
    })?;
    let entry = Entry::next(entries.last(), file, offset, bytes);
    append_lines(dir, MANIFEST_FILE, entry.to_line().as_bytes())?;
    Ok(entry.hash)
}

impl StorageAdapter for FsAdapter {
    fn kind(&self) -> &str {
        "filesystem"
    }

    fn root(&self) -> String {
        self.root.display().to_string()
    }

    fn save_transcript<'a>(
        &'a self,
        session: &'a SessionId,
        step: u32,
        messages: &'a [Value],
    ) -> BoxFuture<'a, Result<Stored, ArchiveError>> {
        match layout::encode_lines(messages) {
            Ok(bytes) => self.save_whole(session, layout::transcript_name(step), bytes),
            Err(e) => Box::pin(async move { Err(e) }),
        }
    }

    fn save_summary<'a>(
        &'a self,
        session: &'a SessionId,
        step: u32,
        summary: &'a Value,
    ) -> BoxFuture<'a, Result<Stored, ArchiveError>> {
        match layout::encode_summary(summary) {
            Ok(bytes) => self.save_whole(session, layout::summary_name(step), bytes),
            Err(e) => Box::pin(async move { Err(e) }),
        }
    }

    fn save_event<'a>(
        &'a self,
        session: &'a SessionId,
        events: &'a [Value],
    ) -> BoxFuture<'a, Result<Stored, ArchiveError>> {
        let bytes = layout::encode_lines(events);
        let dir = self.session_dir(session);
        let root = self.root.clone();
        let sid = session.as_str().to_string();
        Box::pin(async move {
            let bytes = bytes?;
            blocking(move || {
                ensure_dir(&root, &dir)?;
                let offset = append_lines(&dir, EVENTS_FILE, &bytes)?;
                let head = append_manifest(&sid, &dir, EVENTS_FILE, offset, &bytes)?;
                Ok(stored(
                    &dir,
                    EVENTS_FILE.to_string(),
                    bytes.len() as u64,
                    head,
                ))
            })
            .await
        })
    }

    fn list_sessions(&self) -> BoxFuture<'_, Result<Vec<String>, ArchiveError>> {
        let root = self.root.clone();
        Box::pin(blocking(move || {
            let rd = match fs::read_dir(&root) {
                Ok(rd) => rd,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(e) => return Err(ArchiveError::io("list", &root, e)),
            };
            let mut out = Vec::new();
            for entry in rd {
                let entry = entry.map_err(|e| ArchiveError::io("list", &root, e))?;
                let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                    continue;
                };
                if entry.path().is_dir() && SessionId::parse(&name).is_ok() {
                    out.push(name);
                }
            }
            out.sort();
            Ok(out)
        }))
    }

    fn list_files<'a>(
        &'a self,
        session: &'a SessionId,
    ) -> BoxFuture<'a, Result<Vec<String>, ArchiveError>> {
        let dir = self.session_dir(session);
        Box::pin(blocking(move || {
            let rd = match fs::read_dir(&dir) {
                Ok(rd) => rd,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(e) => return Err(ArchiveError::io("list", &dir, e)),
            };
            let mut out = Vec::new();
            for entry in rd {
                let entry = entry.map_err(|e| ArchiveError::io("list", &dir, e))?;
                let name = entry.file_name().to_string_lossy().into_owned();
                // Temp files of interrupted writes start with `.`; they are
                // not part of the archive.
                if !name.starts_with('.') && entry.path().is_file() {
                    out.push(name);
                }
            }
            out.sort();
            Ok(out)
        }))
    }

    fn read_file<'a>(
        &'a self,
        session: &'a SessionId,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Vec<u8>, ArchiveError>> {
        let checked = layout::check_name(name).map(FileKind::name);
        let dir = self.session_dir(session);
        Box::pin(async move {
            let name = checked?;
            blocking(move || {
                let path = dir.join(&name);
                match fs::read(&path) {
                    Ok(b) => Ok(b),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        Err(ArchiveError::NotFound(path.display().to_string()))
                    }
                    Err(e) => Err(ArchiveError::io("read", &path, e)),
                }
            })
            .await
        })
    }
}
