//! Advisory file locks that hold a session across processes: one of
//! [`STRIPES`] lock files next to the database, chosen by the session id's
//! hash. The operating system releases a lock when its holder dies, so a
//! killed process never leaves a session locked.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use super::{StateError, lock_key};
use crate::archive::SessionId;

/// Lock files per store. Two sessions on one stripe only wait for each other.
pub(super) const STRIPES: i64 = 256;

/// The directory of lock files of the database at `db`.
pub(super) fn lock_dir(db: &Path) -> PathBuf {
    let mut name = db.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".locks");
    db.with_file_name(name)
}

/// Blocks until the session's stripe is locked (call on the blocking pool).
/// The lock lasts as long as the returned file is open.
pub(super) fn acquire(dir: &Path, id: &SessionId) -> Result<File, StateError> {
    let path = dir.join(format!("{:02x}.lock", lock_key(id).rem_euclid(STRIPES)));
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| StateError::Backend(format!("{}: {e}", path.display())))?;
    file.lock()
        .map_err(|e| StateError::Backend(format!("locking {}: {e}", path.display())))?;
    Ok(file)
}
