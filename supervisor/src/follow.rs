//! Reading files as they grow, woken by the kernel (inotify, through `notify`) rather than by
//! reading them again on a timer: a session's trace.jsonl for `mur watch` and `mur top`, and
//! the running-capsule folder for `mur top`. A watcher only says which path changed; the reader
//! then reads what was appended since its last offset.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use notify::{EventKind, RecursiveMode, Watcher};
use serde_json::Value;

/// What one read takes at most; the rest is read on the next call.
const READ_MAX: u64 = 4 << 20;
/// A JSON line longer than this is not a trace record; it is skipped whole.
const LINE_MAX: usize = 1 << 20;

/// A JSON-lines file read from an offset: each call answers the whole records appended since.
pub struct JsonLines {
    path: PathBuf,
    offset: u64,
    pending: Vec<u8>,
    skipping: bool,
}

impl JsonLines {
    /// Reads from the file's current end: only what is written from now on.
    pub fn from_end(path: &Path) -> Self {
        let offset = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        Self::at(path, offset)
    }

    /// Reads the last `back` bytes already written (from the first whole line in them), then
    /// what follows.
    pub fn from_last(path: &Path, back: u64) -> Self {
        let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let offset = len.saturating_sub(back);
        let mut lines = Self::at(path, offset);
        lines.skipping = offset > 0 && !Self::line_starts_at(path, offset);
        lines
    }

    /// The byte before `offset` ends a line.
    fn line_starts_at(path: &Path, offset: u64) -> bool {
        let mut byte = [0u8];
        std::fs::File::open(path)
            .and_then(|mut f| {
                f.seek(SeekFrom::Start(offset - 1))?;
                f.read_exact(&mut byte)
            })
            .is_ok_and(|_| byte[0] == b'\n')
    }

    fn at(path: &Path, offset: u64) -> Self {
        JsonLines {
            path: path.to_path_buf(),
            offset,
            pending: Vec::new(),
            skipping: false,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The records appended since the last call (at most [`READ_MAX`] bytes of them). A line
    /// that is not JSON (a record cut short by a crash) is skipped.
    pub fn read_new(&mut self) -> Vec<Value> {
        let mut fresh = Vec::new();
        let read = std::fs::File::open(&self.path).and_then(|mut f| {
            let len = f.metadata()?.len();
            if len < self.offset {
                // Replaced by a shorter file: start again from its beginning.
                self.offset = 0;
                self.pending.clear();
            }
            f.seek(SeekFrom::Start(self.offset))?;
            f.take(READ_MAX).read_to_end(&mut fresh)
        });
        let Ok(n) = read else {
            return Vec::new();
        };
        self.offset += n as u64;
        self.lines(&fresh)
    }

    fn lines(&mut self, fresh: &[u8]) -> Vec<Value> {
        let mut records = Vec::new();
        for chunk in fresh.split_inclusive(|b| *b == b'\n') {
            let whole = chunk.ends_with(b"\n");
            if self.skipping || self.pending.len() + chunk.len() > LINE_MAX {
                self.pending.clear();
                self.skipping = !whole;
                continue;
            }
            self.pending.extend_from_slice(chunk);
            if whole {
                if let Ok(v) = serde_json::from_slice::<Value>(&self.pending) {
                    records.push(v);
                }
                self.pending.clear();
            }
        }
        records
    }
}

/// Watches folders (not their subfolders) and tells `changed` each path created, written,
/// renamed or removed in them. Dropping it stops the watch.
pub struct Folders {
    watcher: notify::RecommendedWatcher,
}

impl Folders {
    pub fn new(changed: impl Fn(&Path) + Send + 'static) -> notify::Result<Self> {
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            // Opening and reading a file is an event too (Access): the reader's own reads must
            // not wake it, or it would read for ever.
            if let Some(event) = event
                .ok()
                .filter(|e| !matches!(e.kind, EventKind::Access(_)))
            {
                event.paths.iter().for_each(|p| changed(p));
            }
        })?;
        Ok(Folders { watcher })
    }

    /// Starts watching `dir`; a folder that does not exist yet is an error the caller may ignore.
    pub fn add(&mut self, dir: &Path) -> notify::Result<()> {
        self.watcher.watch(dir, RecursiveMode::NonRecursive)
    }

    pub fn remove(&mut self, dir: &Path) {
        let _ = self.watcher.unwatch(dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// `trace.jsonl` in a folder of the test's own, removed when dropped.
    struct Temp(PathBuf);

    impl std::ops::Deref for Temp {
        type Target = Path;
        fn deref(&self) -> &Path {
            &self.0
        }
    }

    impl AsRef<Path> for Temp {
        fn as_ref(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Temp {
        fn drop(&mut self) {
            if let Some(dir) = self.0.parent() {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }

    fn temp(name: &str) -> Temp {
        let dir = std::env::temp_dir().join(format!("murmur-follow-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Temp(dir.join("trace.jsonl"))
    }

    #[test]
    fn only_whole_lines_are_answered_and_each_once() {
        let path = temp("whole");
        std::fs::write(&path, "{\"a\":1}\n").unwrap();
        let mut lines = JsonLines::from_end(&path);
        assert!(lines.read_new().is_empty());
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"{\"a\":2}\nnot json\n{\"a\":").unwrap();
        assert_eq!(lines.read_new(), vec![serde_json::json!({"a": 2})]);
        f.write_all(b"3}\n").unwrap();
        assert_eq!(lines.read_new(), vec![serde_json::json!({"a": 3})]);
        assert!(lines.read_new().is_empty());
    }

    #[test]
    fn reading_the_last_bytes_starts_at_a_whole_line() {
        let path = temp("last");
        std::fs::write(&path, "{\"a\":1}\n{\"a\":22}\n{\"a\":3}\n").unwrap();
        let mut lines = JsonLines::from_last(&path, 12);
        assert_eq!(lines.read_new(), vec![serde_json::json!({"a": 3})]);
        let mut all = JsonLines::from_last(&path, 1 << 20);
        assert_eq!(all.read_new().len(), 3);
        let mut at_a_line = JsonLines::from_last(&path, 8);
        assert_eq!(at_a_line.read_new(), vec![serde_json::json!({"a": 3})]);
    }

    #[test]
    fn reading_a_watched_file_is_not_a_change() {
        let path = temp("read");
        std::fs::write(&path, "{}\n").unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let mut folders = Folders::new(move |p| {
            let _ = tx.send(p.to_path_buf());
        })
        .unwrap();
        folders.add(path.parent().unwrap()).unwrap();
        let mut lines = JsonLines::from_last(&path, 1 << 20);
        assert_eq!(lines.read_new().len(), 1);
        let _ = std::fs::read_to_string(&path).unwrap();
        // A write after the reads is the first thing told.
        std::fs::write(path.with_extension("other"), "x").unwrap();
        let told = rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
        assert_eq!(told, path.with_extension("other"));
    }

    #[test]
    fn a_change_in_a_watched_folder_is_told() {
        let path = temp("watched");
        let (tx, rx) = std::sync::mpsc::channel();
        let mut folders = Folders::new(move |p| {
            let _ = tx.send(p.to_path_buf());
        })
        .unwrap();
        folders.add(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "{}\n").unwrap();
        let told = rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
        assert_eq!(told, path.0);
    }
}
