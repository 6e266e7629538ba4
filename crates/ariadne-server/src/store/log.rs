//! The append-only segmented log: the durable half of the store.
//!
//! A segment is a file `{first_seq:020}.log` holding records
//! `[len u32 LE][crc32 u32 LE][seq u64 LE][received_ms i64 LE][json]`,
//! where `len` counts the 16 header bytes plus the JSON and the CRC covers
//! the same bytes. A write is acknowledged only after `sync_data`, so every
//! acknowledged record is whole on disk. A crash mid-write leaves at most a
//! torn tail on the last segment: its length runs past the end of the file
//! or its CRC does not match, so recovery stops there and cuts the file
//! back to the last whole record. Nothing after a bad record is ever served.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::error::StoreError;

/// Record header bytes before the JSON: len, crc, seq, received_ms.
const HEADER: usize = 4 + 4 + 8 + 8;
/// Larger records cannot be ours (the largest body is far smaller); a
/// length beyond this is garbage.
const MAX_RECORD: usize = 256 * 1024 * 1024;

/// One record read back from disk.
#[derive(Debug)]
pub(super) struct Record {
    /// Sequence number.
    pub seq: u64,
    /// When the server received it (epoch ms).
    pub received_ms: i64,
    /// The event's JSON.
    pub json: String,
}

#[derive(Debug)]
struct Segment {
    first_seq: u64,
    path: PathBuf,
    bytes: u64,
}

/// The open log: its segments and the file being appended to.
#[derive(Debug)]
pub(super) struct Log {
    dir: PathBuf,
    segments: Vec<Segment>,
    file: File,
    segment_bytes: u64,
}

/// What recovery found.
#[derive(Debug, Default)]
pub(super) struct Recovery {
    /// Bytes cut from the end of the last segment (a torn write).
    pub torn_bytes: u64,
    /// Segments whose middle was unreadable (their rest was skipped).
    pub corrupt_segments: usize,
    /// The next sequence number to assign.
    pub next_seq: u64,
}

/// Appends one record to `buf`.
pub(super) fn encode(buf: &mut Vec<u8>, seq: u64, received_ms: i64, json: &str) {
    let len = (16 + json.len()) as u32;
    let start = buf.len();
    buf.extend_from_slice(&len.to_le_bytes());
    buf.extend_from_slice(&[0; 4]);
    buf.extend_from_slice(&seq.to_le_bytes());
    buf.extend_from_slice(&received_ms.to_le_bytes());
    buf.extend_from_slice(json.as_bytes());
    let crc = crc32fast::hash(&buf[start + 8..]);
    buf[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// Decodes the records at the front of `bytes`; returns them and how many
/// bytes were whole. Stops at the first bad record.
fn decode_all(bytes: &[u8], mut on_record: impl FnMut(Record)) -> usize {
    let mut pos = 0;
    while bytes.len() - pos >= HEADER {
        let word = |at: usize| -> [u8; 4] {
            let mut w = [0; 4];
            w.copy_from_slice(&bytes[at..at + 4]);
            w
        };
        let len = u32::from_le_bytes(word(pos)) as usize;
        let crc = u32::from_le_bytes(word(pos + 4));
        if !(16..=MAX_RECORD).contains(&len) || bytes.len() - pos - 8 < len {
            break;
        }
        let body = &bytes[pos + 8..pos + 8 + len];
        if crc32fast::hash(body) != crc {
            break;
        }
        let mut seq = [0; 8];
        seq.copy_from_slice(&body[0..8]);
        let mut received = [0; 8];
        received.copy_from_slice(&body[8..16]);
        let Ok(json) = std::str::from_utf8(&body[16..]) else {
            break;
        };
        on_record(Record {
            seq: u64::from_le_bytes(seq),
            received_ms: i64::from_le_bytes(received),
            json: json.to_owned(),
        });
        pos += 8 + len;
    }
    pos
}

fn segment_path(dir: &Path, first_seq: u64) -> PathBuf {
    dir.join(format!("{first_seq:020}.log"))
}

impl Log {
    /// Opens (or creates) the log in `dir`, feeding every whole record to
    /// `on_record` in sequence order and cutting a torn tail.
    pub(super) fn open(
        dir: &Path,
        segment_bytes: u64,
        mut on_record: impl FnMut(Record),
    ) -> Result<(Log, Recovery), StoreError> {
        fs::create_dir_all(dir)
            .map_err(|e| StoreError::io(format!("create {}", dir.display()), e))?;
        let mut segments = Vec::new();
        let entries =
            fs::read_dir(dir).map_err(|e| StoreError::io(format!("read {}", dir.display()), e))?;
        for entry in entries {
            let entry = entry.map_err(|e| StoreError::io("read dir entry", e))?;
            let name = entry.file_name();
            let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(".log")) else {
                continue;
            };
            if let Ok(first_seq) = stem.parse::<u64>() {
                segments.push(Segment {
                    first_seq,
                    path: entry.path(),
                    bytes: 0,
                });
            }
        }
        segments.sort_by_key(|s| s.first_seq);

        let mut rec = Recovery::default();
        let mut last_seq: Option<u64> = None;
        let count = segments.len();
        for (i, seg) in segments.iter_mut().enumerate() {
            let mut bytes = Vec::new();
            File::open(&seg.path)
                .and_then(|mut f| f.read_to_end(&mut bytes))
                .map_err(|e| StoreError::io(format!("read {}", seg.path.display()), e))?;
            let mut out_of_order = false;
            let whole = decode_all(&bytes, |r| {
                // A sequence going backwards means the bytes are not ours.
                if out_of_order || last_seq.is_some_and(|l| r.seq <= l) {
                    out_of_order = true;
                    return;
                }
                last_seq = Some(r.seq);
                on_record(r);
            });
            seg.bytes = whole as u64;
            if whole < bytes.len() || out_of_order {
                if i + 1 == count {
                    let cut = bytes.len() - whole;
                    tracing::warn!(
                        segment = %seg.path.display(),
                        bytes = cut,
                        "torn write at the end of the log: cut back to the last whole record"
                    );
                    let f = OpenOptions::new()
                        .write(true)
                        .open(&seg.path)
                        .map_err(|e| StoreError::io("open torn segment", e))?;
                    f.set_len(whole as u64)
                        .and_then(|()| f.sync_all())
                        .map_err(|e| StoreError::io("cut torn segment", e))?;
                    rec.torn_bytes = cut as u64;
                } else {
                    tracing::error!(
                        segment = %seg.path.display(),
                        "unreadable record inside the log: the rest of this segment is skipped"
                    );
                    rec.corrupt_segments += 1;
                }
            }
        }
        let newest_first = segments.last().map_or(0, |s| s.first_seq);
        rec.next_seq = last_seq.map_or(0, |l| l + 1).max(newest_first).max(1);

        if segments.is_empty() {
            segments.push(Segment {
                first_seq: rec.next_seq,
                path: segment_path(dir, rec.next_seq),
                bytes: 0,
            });
        }
        let current = segments.last().map(|s| s.path.clone()).unwrap_or_default();
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&current)
            .map_err(|e| StoreError::io(format!("open {}", current.display()), e))?;
        sync_dir(dir)?;
        Ok((
            Log {
                dir: dir.to_owned(),
                segments,
                file,
                segment_bytes,
            },
            rec,
        ))
    }

    /// Writes `buf` (whole records, the first numbered `first_seq`) and
    /// syncs it. On failure the segment is cut back, so a failed batch
    /// leaves nothing behind.
    pub(super) fn append(&mut self, first_seq: u64, buf: &[u8]) -> Result<(), StoreError> {
        if self.current_bytes() >= self.segment_bytes {
            self.roll(first_seq)?;
        }
        let before = self.current_bytes();
        let res = self
            .file
            .write_all(buf)
            .and_then(|()| self.file.sync_data());
        if let Err(e) = res {
            let _ = self.file.set_len(before);
            return Err(StoreError::io("append to log", e));
        }
        if let Some(seg) = self.segments.last_mut() {
            seg.bytes += buf.len() as u64;
        }
        Ok(())
    }

    fn current_bytes(&self) -> u64 {
        self.segments.last().map_or(0, |s| s.bytes)
    }

    fn roll(&mut self, first_seq: u64) -> Result<(), StoreError> {
        let path = segment_path(&self.dir, first_seq);
        self.file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| StoreError::io(format!("create {}", path.display()), e))?;
        // The new file's directory entry must be durable too.
        sync_dir(&self.dir)?;
        self.segments.push(Segment {
            first_seq,
            path,
            bytes: 0,
        });
        Ok(())
    }

    /// Deletes the segments holding only records before `seq` (retention).
    pub(super) fn drop_before(&mut self, seq: u64) {
        while self.segments.len() > 1 && self.segments[1].first_seq <= seq {
            let seg = self.segments.remove(0);
            if let Err(e) = fs::remove_file(&seg.path) {
                tracing::warn!(segment = %seg.path.display(), error = %e, "cannot delete old segment");
            }
        }
    }

    /// Bytes on disk across all segments.
    pub(super) fn disk_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.bytes).sum()
    }
}

fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::io(format!("sync {}", dir.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, rec) = Log::open(dir.path(), 1 << 20, |_| {}).unwrap();
        assert_eq!(rec.next_seq, 1);
        let mut buf = Vec::new();
        encode(&mut buf, 1, 10, r#"{"a":1}"#);
        encode(&mut buf, 2, 11, r#"{"a":2}"#);
        log.append(1, &buf).unwrap();
        drop(log);
        // Tear the second record.
        let path = segment_path(dir.path(), 1);
        let len = fs::metadata(&path).unwrap().len();
        OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len - 3)
            .unwrap();
        let mut got = Vec::new();
        let (_log, rec) = Log::open(dir.path(), 1 << 20, |r| got.push(r.json)).unwrap();
        assert_eq!(got, vec![r#"{"a":1}"#.to_owned()]);
        assert_eq!(rec.next_seq, 2);
        assert!(rec.torn_bytes > 0);
    }

    #[test]
    fn rolls_and_drops_segments() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = Log::open(dir.path(), 64, |_| {}).unwrap();
        for seq in 1..=10u64 {
            let mut buf = Vec::new();
            encode(
                &mut buf,
                seq,
                0,
                r#"{"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx":1}"#,
            );
            log.append(seq, &buf).unwrap();
        }
        assert!(log.segments.len() > 2);
        log.drop_before(9);
        assert!(log.segments[0].first_seq <= 9);
        let mut seqs = Vec::new();
        drop(log);
        Log::open(dir.path(), 64, |r| seqs.push(r.seq)).unwrap();
        assert!(seqs.contains(&9) && seqs.contains(&10));
        assert!(!seqs.contains(&1));
    }
}
