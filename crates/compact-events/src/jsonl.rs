//! `jsonl`: appends one JSON object per line to a file.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use crate::exporter::{ExportError, Exporter};
use crate::span::Event;

/// Appends each event as one line of JSON (the Ariadne wire shape) to a file.
///
/// The file is opened in append mode and each batch is written with one
/// `write` call, so lines from several exporters or processes appending to
/// the same file never interleave (local filesystems; a short write, which
/// only happens when the disk is full, is completed by a second call). The
/// parent directories are created on first use. [`Exporter::flush`] fsyncs.
#[derive(Debug)]
pub struct JsonlExporter {
    path: PathBuf,
    state: Arc<Mutex<FileState>>,
}

#[derive(Debug, Default)]
struct FileState {
    file: Option<File>,
    // A newly created file's directory entry is only durable once the
    // directory itself is synced; done once, at the first flush.
    dir_synced: bool,
}

impl JsonlExporter {
    /// An exporter for `path`; the file (and its directories) are created
    /// when the first batch arrives. Use [`JsonlExporter::create`] to fail
    /// early on a bad path instead.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        JsonlExporter {
            path: path.into(),
            state: Arc::new(Mutex::new(FileState::default())),
        }
    }

    /// Like [`JsonlExporter::new`], but creates the directories and opens
    /// the file now, so a misconfigured path is reported at startup.
    pub fn create(path: impl Into<PathBuf>) -> Result<Self, ExportError> {
        let exporter = Self::new(path);
        let file = open_append(&exporter.path)?;
        exporter
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .file = Some(file);
        Ok(exporter)
    }

    /// The file written to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The bytes a batch is written as: one JSON object and `\n` per event.
    pub fn encode(batch: &[Event]) -> Result<Vec<u8>, ExportError> {
        let mut buf = Vec::with_capacity(batch.len() * 256);
        for event in batch {
            serde_json::to_writer(&mut buf, event)?;
            buf.push(b'\n');
        }
        Ok(buf)
    }
}

fn open_append(path: &Path) -> Result<File, ExportError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    Ok(OpenOptions::new().create(true).append(true).open(path)?)
}

fn append(path: &Path, state: &Mutex<FileState>, bytes: &[u8]) -> Result<(), ExportError> {
    let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
    if state.file.is_none() {
        state.file = Some(open_append(path)?);
        state.dir_synced = false;
    }
    let Some(file) = state.file.as_mut() else {
        return Err(ExportError::Other("jsonl file not open".to_owned()));
    };
    if let Err(e) = file.write_all(bytes) {
        // Reopen next time: the handle may be what is broken.
        state.file = None;
        return Err(e.into());
    }
    Ok(())
}

fn sync(path: &Path, state: &Mutex<FileState>) -> Result<(), ExportError> {
    let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(file) = state.file.as_ref() else {
        return Ok(());
    };
    file.sync_data()?;
    if !state.dir_synced {
        // Best effort: not every platform can open a directory to sync it.
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
            && let Ok(dir) = File::open(dir)
        {
            let _ = dir.sync_all();
        }
        state.dir_synced = true;
    }
    Ok(())
}

// File I/O blocks; inside tokio it goes to the blocking pool so the
// dispatcher's thread keeps serving the other exporters.
async fn blocking<F>(f: F) -> Result<(), ExportError>
where
    F: FnOnce() -> Result<(), ExportError> + Send + 'static,
{
    if tokio::runtime::Handle::try_current().is_ok() {
        tokio::task::spawn_blocking(f)
            .await
            .map_err(|e| ExportError::Other(format!("jsonl writer task: {e}")))?
    } else {
        f()
    }
}

impl Exporter for JsonlExporter {
    fn name(&self) -> &str {
        "jsonl"
    }

    fn export<'a>(&'a self, batch: &'a [Event]) -> crate::BoxFuture<'a, Result<(), ExportError>> {
        Box::pin(async move {
            let bytes = Self::encode(batch)?;
            let path = self.path.clone();
            let state = Arc::clone(&self.state);
            blocking(move || append(&path, &state, &bytes)).await
        })
    }

    fn flush(&self) -> crate::BoxFuture<'_, Result<(), ExportError>> {
        Box::pin(async move {
            let path = self.path.clone();
            let state = Arc::clone(&self.state);
            blocking(move || sync(&path, &state)).await
        })
    }
}
