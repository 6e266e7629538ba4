//! The filesystem adapter: key `{session_id}/{file}` is the file
//! `{root}/{session_id}/{file}`.
//!
//! Durability: `put` writes a temporary file in the same directory, fsyncs
//! it, renames it over the final name and fsyncs the directory, so a crash
//! leaves the old file or the new one, never a mix. `append` writes the
//! whole batch with one `write` on an `O_APPEND` descriptor and fsyncs; a
//! tail left incomplete by a crash (no final newline) is cut off before the
//! next append, so lines are never torn, and the cost does not grow with the
//! file. Blocking I/O runs on tokio's blocking pool.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::{ArchiveError, StorageAdapter, check_key, check_prefix};
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

    /// `{root}/{key}` for a key [`check_key`] accepts: the only way a key
    /// reaches a path.
    fn file(&self, key: &str) -> Result<PathBuf, ArchiveError> {
        check_key(key)?;
        Ok(self.root.join(key))
    }
}

/// The directory and the file name of `path` (a checked key has both).
fn split(path: &Path) -> Result<(PathBuf, String), ArchiveError> {
    match (path.parent(), path.file_name().and_then(|n| n.to_str())) {
        (Some(dir), Some(name)) => Ok((dir.to_path_buf(), name.to_string())),
        _ => Err(ArchiveError::InvalidKey {
            key: path.display().to_string(),
            reason: "has no file name".into(),
        }),
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

/// The names and paths of what `dir` holds; nothing when it does not
/// exist.
pub(crate) fn dir_entries(dir: &Path) -> Result<Vec<(String, PathBuf)>, ArchiveError> {
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(ArchiveError::io("list", dir, e)),
    };
    let mut out = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| ArchiveError::io("list", dir, e))?;
        out.push((
            entry.file_name().to_string_lossy().into_owned(),
            entry.path(),
        ));
    }
    Ok(out)
}

/// Creates `dir` and its missing parents, fsyncing the parent of each
/// directory created so the new entry itself survives a crash.
pub(crate) fn ensure_dir(dir: &Path) -> Result<(), ArchiveError> {
    let mut missing = Vec::new();
    let mut d = dir;
    while !d.is_dir() {
        missing.push(d);
        match d.parent() {
            Some(p) if !p.as_os_str().is_empty() => d = p,
            _ => break,
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    fs::create_dir_all(dir).map_err(|e| ArchiveError::io("create directory", dir, e))?;
    for created in missing.iter().rev() {
        match created.parent() {
            Some(p) if !p.as_os_str().is_empty() => sync_dir(p)?,
            _ => sync_dir(Path::new("."))?,
        }
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

impl StorageAdapter for FsAdapter {
    fn kind(&self) -> &str {
        "filesystem"
    }

    fn root(&self) -> String {
        self.root.display().to_string()
    }

    fn location(&self, key: &str) -> String {
        self.root.join(key).display().to_string()
    }

    fn put<'a>(&'a self, key: &'a str, bytes: Vec<u8>) -> BoxFuture<'a, Result<(), ArchiveError>> {
        let path = self.file(key);
        Box::pin(blocking(move || {
            let (dir, name) = split(&path?)?;
            ensure_dir(&dir)?;
            write_atomic(&dir, &name, &bytes)
        }))
    }

    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Vec<u8>, ArchiveError>> {
        let path = self.file(key);
        Box::pin(blocking(move || {
            let path = path?;
            match fs::read(&path) {
                Ok(b) => Ok(b),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    Err(ArchiveError::NotFound(path.display().to_string()))
                }
                Err(e) => Err(ArchiveError::io("read", &path, e)),
            }
        }))
    }

    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Vec<String>, ArchiveError>> {
        let dir = check_prefix(prefix).map(|()| self.root.join(prefix));
        let prefix = prefix.to_string();
        Box::pin(blocking(move || {
            let dir = dir?;
            let mut out = Vec::new();
            for (name, path) in dir_entries(&dir)? {
                // Temp files of interrupted writes start with `.`; they are
                // not part of the store.
                if name.starts_with('.') {
                    continue;
                }
                if path.is_dir() {
                    out.push(format!("{prefix}{name}/"));
                } else if path.is_file() {
                    out.push(format!("{prefix}{name}"));
                }
            }
            out.sort();
            Ok(out)
        }))
    }

    fn append<'a>(
        &'a self,
        key: &'a str,
        bytes: Vec<u8>,
    ) -> BoxFuture<'a, Result<u64, ArchiveError>> {
        let path = self.file(key);
        Box::pin(blocking(move || {
            let (dir, name) = split(&path?)?;
            ensure_dir(&dir)?;
            append_lines(&dir, &name, &bytes)
        }))
    }

    fn native_append(&self) -> bool {
        true
    }
}
