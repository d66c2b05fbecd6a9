//! Opening a session's store: created 0600 when new (by the writer, with its first commit),
//! else checked before it is trusted — a file that is no database or fails SQLite's check, one
//! a newer murmur wrote, one this process cannot write, a disk with no room — each refused with
//! E-RUN-060 naming the file and what to do; then its layout made, and what it holds read back.

use std::fmt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension};

use super::rows;
use super::{Restored, VERSION};

/// Why a store cannot be opened.
#[derive(Debug)]
pub struct StoreError {
    pub file: PathBuf,
    /// What is wrong with it, said of the file.
    pub what: String,
    pub hint: String,
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "error[E-RUN-060]: the task store {} {}\n  hint: {}",
            self.file.display(),
            inert(&self.what),
            self.hint
        )
    }
}

/// `text` as one line no byte of a store can steer: what is wrong quotes the store's rows (a
/// task id, a parse error naming what it found), and it goes to the user's terminal. Control
/// characters, bidirectional overrides and line separators are written as escapes.
fn inert(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let hidden = c.is_control()
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}');
        match hidden {
            true => out.extend(c.escape_unicode()),
            false => out.push(c),
        }
    }
    out
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    context_id TEXT NOT NULL,
    owner TEXT,
    state TEXT NOT NULL,
    status_text TEXT,
    changed_at INTEGER NOT NULL,
    response TEXT,
    residue TEXT,
    metadata TEXT
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS harness_sessions (
    conversation TEXT PRIMARY KEY,
    session TEXT NOT NULL,
    ord INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ledger (n INTEGER PRIMARY KEY, entry TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS conversations (
    key TEXT PRIMARY KEY,
    used INTEGER NOT NULL,
    messages TEXT NOT NULL
);
";

/// What to do about a store that cannot be trusted: nothing is thrown away on murmur's own.
pub(super) const MOVE_ASIDE: &str =
    "move the file (and its -wal and -shm beside it) aside to start this \
                          session with no earlier tasks, or restore it from a backup";

fn refused(path: &Path, what: impl Into<String>, hint: impl Into<String>) -> StoreError {
    StoreError {
        file: path.to_path_buf(),
        what: what.into(),
        hint: hint.into(),
    }
}

/// SQLite's refusals, said of the file with what to do.
pub(super) fn said(path: &Path, e: &rusqlite::Error) -> StoreError {
    let code = e.sqlite_error_code();
    match code {
        Some(ErrorCode::NotADatabase) | Some(ErrorCode::DatabaseCorrupt) => refused(
            path,
            format!("is corrupt ({e})"),
            MOVE_ASIDE,
        ),
        Some(ErrorCode::ReadOnly) | Some(ErrorCode::PermissionDenied) | Some(ErrorCode::CannotOpen) => refused(
            path,
            format!("cannot be written ({e})"),
            "make the file and its folder writable by this user (chmod u+w), or run where $MURMUR_HOME is writable",
        ),
        Some(ErrorCode::DiskFull) => refused(
            path,
            format!("cannot be written: the disk is full ({e})"),
            "free space on the disk that holds $MURMUR_HOME (`mur gc` removes ended sessions' records)",
        ),
        Some(ErrorCode::DatabaseBusy) | Some(ErrorCode::DatabaseLocked) => refused(
            path,
            format!("is in use by another process ({e})"),
            "stop the capsule that has this session open (`mur ps`), then start it again",
        ),
        _ => refused(path, format!("cannot be opened ({e})"), MOVE_ASIDE),
    }
}

/// Makes the store's folder (0700), or makes one found open to others private again. Made at
/// the capsule's start whether or not the file is, so the jail covers it from the first
/// attempt on.
pub(super) fn prepare_dir(path: &Path) -> Result<(), StoreError> {
    if let Some(dir) = path.parent() {
        use std::os::unix::fs::DirBuilderExt;
        use std::os::unix::fs::PermissionsExt;
        match std::fs::DirBuilder::new().mode(0o700).create(dir) {
            Ok(()) => {}
            // Found open to others (put back by hand): private again.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let mode = std::fs::symlink_metadata(dir)
                    .map(|m| m.permissions().mode() & 0o777)
                    .map_err(|e| io_refused(path, e))?;
                if mode & 0o077 != 0 {
                    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode & 0o700))
                        .map_err(|e| io_refused(path, e))?;
                }
            }
            Err(e) => return Err(io_refused(path, e)),
        }
    }
    Ok(())
}

/// Whether there is anything at `path` to open (a file, or what must be refused as one).
pub(super) fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// Opens the store at `path` (creating it 0600 when there is none, signed with `page_key`)
/// and reads it back; a store that has one keeps its own key.
pub(super) fn open(path: &Path, page_key: [u8; 32]) -> Result<(Connection, Restored), StoreError> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if !meta.file_type().is_file() => {
            return Err(refused(
                path,
                "is not a regular file",
                "remove what is at that path; a store is never read through a link",
            ))
        }
        Ok(meta) => {
            // Found open to others (a copy put back): private again, its owner's bits kept.
            use std::os::unix::fs::PermissionsExt;
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                for p in [
                    path.to_path_buf(),
                    with_suffix(path, "-wal"),
                    with_suffix(path, "-shm"),
                ] {
                    if p.exists() {
                        let private = std::fs::Permissions::from_mode(mode & 0o700);
                        std::fs::set_permissions(&p, private).map_err(|e| io_refused(path, e))?;
                    }
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::OpenOptions::new()
                .create_new(true)
                .write(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(path)
                .map_err(|e| io_refused(path, e))?;
        }
        Err(e) => return Err(io_refused(path, e)),
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| said(path, &e))?;
    // One process has a store open at a time: held from the first read to the close, which
    // makes a second opener's refusal certain and spares every commit its file locks and
    // shared-memory index (the WAL's index lives in this process's memory; no -shm file).
    conn.pragma_update(None, "locking_mode", "EXCLUSIVE")
        .map_err(|e| said(path, &e))?;
    if conn.is_readonly(rusqlite::MAIN_DB).unwrap_or(false) {
        return Err(refused(
            path,
            "is read-only",
            "make it writable by this user (chmod u+w, or chattr -i where it is immutable), or move it aside to start afresh",
        ));
    }
    let version: i32 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(|e| said(path, &e))?;
    if version > VERSION {
        return Err(refused(
            path,
            format!("was written by a newer murmur (store version {version}; this one reads {VERSION})"),
            "run the murmur that wrote it, or move the file aside to start this session with no earlier tasks",
        ));
    }
    let check: String = conn
        .pragma_query_value(None, "quick_check", |r| r.get(0))
        .map_err(|e| said(path, &e))?;
    if check != "ok" {
        return Err(refused(
            path,
            format!("is corrupt (SQLite's check: {check})"),
            MOVE_ASIDE,
        ));
    }
    // WAL: a commit is one append, readers never block it. NORMAL: a commit reaches the
    // kernel before it counts, so a killed process loses none; only the machine's crash can
    // lose the last commits (docs/store.md).
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "wal", |r| r.get(0))
        .map_err(|e| said(path, &e))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(refused(
            path,
            format!("cannot be put in WAL mode (SQLite kept {mode})"),
            "keep $MURMUR_HOME on a local file system that supports shared memory (not NFS)",
        ));
    }
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(|e| said(path, &e))?;
    // The store is written, and read once: a small page cache keeps an idle capsule small.
    conn.pragma_update(None, "cache_size", -4096)
        .map_err(|e| said(path, &e))?;
    conn.execute_batch(SCHEMA).map_err(|e| said(path, &e))?;
    if version == 0 {
        conn.pragma_update(None, "user_version", VERSION)
            .map_err(|e| said(path, &e))?;
    }
    let page_key = kept_page_key(&conn, page_key).map_err(|e| said(path, &e))?;
    let mut restored = rows::read(&conn, path).map_err(|e| match e {
        rows::ReadError::Sql(e) => said(path, &e),
        rows::ReadError::Row(what) => refused(path, format!("is corrupt ({what})"), MOVE_ASIDE),
    })?;
    restored.page_key = page_key;
    Ok((conn, restored))
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn io_refused(path: &Path, e: std::io::Error) -> StoreError {
    match e.raw_os_error() {
        Some(libc::ENOSPC) => refused(
            path,
            format!("cannot be created: the disk is full ({e})"),
            "free space on the disk that holds $MURMUR_HOME (`mur gc` removes ended sessions' records)",
        ),
        _ => refused(
            path,
            format!("cannot be created ({e})"),
            "make the session's records folder writable by this user",
        ),
    }
}

/// The page tokens' key: the store's own, or `fresh` written in a store that has none yet.
fn kept_page_key(conn: &Connection, fresh: [u8; 32]) -> rusqlite::Result<[u8; 32]> {
    let kept: Option<String> = conn
        .query_row("SELECT value FROM meta WHERE key = 'page_key'", [], |r| {
            r.get(0)
        })
        .optional()?;
    if let Some(key) = kept.as_deref().and_then(rows::unhex) {
        return Ok(key);
    }
    conn.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES ('page_key', ?1)",
        [rows::hex(&fresh)],
    )?;
    Ok(fresh)
}
