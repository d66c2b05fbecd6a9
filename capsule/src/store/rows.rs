//! A task as the store keeps it: exactly what GetTask shows of it (its input and a waiting
//! question are not kept: a task that was waiting is failed when it comes back), and the
//! reading back of every table at the store's opening.

use std::path::Path;

use rusqlite::{params, Connection, Row};
use serde_json::{Map, Value};

use super::Restored;
use super::Spent;
use crate::clock::Millis;
use crate::ids::TaskId;
use crate::manifest::Usd;
use crate::tasks::{Owner, Task, TaskState};

/// One task's row, taken under the registry's lock and written by the writer thread.
#[derive(Debug, Clone)]
pub(super) struct TaskRow {
    pub id: String,
    pub seq: u64,
    pub context_id: String,
    pub owner: Option<String>,
    pub state: &'static str,
    pub status_text: Option<String>,
    pub changed_at: i64,
    pub response: Option<String>,
    pub residue: Option<String>,
    pub metadata: Option<String>,
}

impl TaskRow {
    pub fn of(task: &Task) -> TaskRow {
        TaskRow {
            id: task.id.as_str().to_owned(),
            seq: task.seq,
            context_id: task.context_id.clone(),
            owner: match &task.owner {
                Owner::Session => None,
                Owner::Credential(c) => Some(c.clone()),
            },
            state: task.state.wire(),
            status_text: task.status_text.clone(),
            changed_at: task.changed_at.0,
            response: task.response.clone(),
            residue: (!task.residue.is_empty())
                .then(|| Value::Array(task.residue.clone()).to_string()),
            metadata: (!task.murmur_metadata.is_empty())
                .then(|| Value::Object(task.murmur_metadata.clone()).to_string()),
        }
    }

    pub fn write(&self, conn: &Connection) -> rusqlite::Result<()> {
        conn.prepare_cached(
            "INSERT OR REPLACE INTO tasks (id, seq, context_id, owner, state, status_text, \
             changed_at, response, residue, metadata) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        )?
        .execute(params![
            self.id,
            self.seq as i64,
            self.context_id,
            self.owner,
            self.state,
            self.status_text,
            self.changed_at,
            self.response,
            self.residue,
            self.metadata,
        ])
        .map(|_| ())
    }
}

/// Why a store's contents do not read.
pub(super) enum ReadError {
    Sql(rusqlite::Error),
    /// A row that no murmur wrote (the file was changed by hand, or damaged).
    Row(String),
}

impl From<rusqlite::Error> for ReadError {
    fn from(e: rusqlite::Error) -> Self {
        ReadError::Sql(e)
    }
}

fn task_of(row: &Row<'_>) -> Result<Result<Task, String>, rusqlite::Error> {
    let id: String = row.get(0)?;
    let seq: i64 = row.get(1)?;
    let state: String = row.get(4)?;
    let residue: Option<String> = row.get(8)?;
    let metadata: Option<String> = row.get(9)?;
    let Some(state) = TaskState::from_wire(&state) else {
        return Ok(Err(format!("task {id} has the state {state:?}")));
    };
    let residue = match residue.as_deref().map(serde_json::from_str::<Vec<Value>>) {
        None => Vec::new(),
        Some(Ok(r)) => r,
        Some(Err(e)) => return Ok(Err(format!("task {id}'s residue does not read: {e}"))),
    };
    let metadata = match metadata
        .as_deref()
        .map(serde_json::from_str::<Map<String, Value>>)
    {
        None => Map::new(),
        Some(Ok(m)) => m,
        Some(Err(e)) => return Ok(Err(format!("task {id}'s metadata does not read: {e}"))),
    };
    if seq < 1 || !id.starts_with("tsk_") {
        return Ok(Err(format!("task {id:?} has the position {seq}")));
    }
    Ok(Ok(Task {
        id: TaskId::from_wire(&id),
        context_id: row.get(2)?,
        owner: match row.get::<_, Option<String>>(3)? {
            None => Owner::Session,
            Some(c) => Owner::Credential(c),
        },
        state,
        status_text: row.get(5)?,
        changed_at: Millis(row.get::<_, i64>(6)?),
        seq: seq as u64,
        response: row.get(7)?,
        prompt: None,
        approval: None,
        residue,
        murmur_metadata: metadata,
        input: None,
        held: 0,
    }))
}

fn meta_u64(conn: &Connection, key: &str) -> rusqlite::Result<u64> {
    use rusqlite::OptionalExtension;
    let v: Option<String> = conn
        .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
        .optional()?;
    Ok(v.and_then(|v| v.parse().ok()).unwrap_or(0))
}

/// What the session had spent.
pub(super) fn spent(conn: &Connection) -> rusqlite::Result<Spent> {
    Ok(Spent {
        tokens: meta_u64(conn, "spent_tokens")?,
        usd: Usd(meta_u64(conn, "spent_usd")?),
    })
}

/// Everything the store holds.
pub(super) fn read(conn: &Connection, _path: &Path) -> Result<Restored, ReadError> {
    let mut tasks = Vec::new();
    let mut stmt = conn.prepare(
        "SELECT id, seq, context_id, owner, state, status_text, changed_at, response, residue, \
         metadata FROM tasks ORDER BY seq",
    )?;
    let mut rows = stmt.query([])?;
    while let Some(row) = rows.next()? {
        tasks.push(task_of(row)?.map_err(ReadError::Row)?);
    }
    let mut harness_sessions = Vec::new();
    let mut stmt =
        conn.prepare("SELECT conversation, session FROM harness_sessions ORDER BY ord")?;
    let mut rows = stmt.query([])?;
    while let Some(row) = rows.next()? {
        harness_sessions.push((row.get(0)?, row.get(1)?));
    }
    let mut conversations = Vec::new();
    let mut stmt = conn.prepare("SELECT key, used, messages FROM conversations ORDER BY used")?;
    let mut rows = stmt.query([])?;
    while let Some(row) = rows.next()? {
        let (key, used, messages): (String, i64, String) = (row.get(0)?, row.get(1)?, row.get(2)?);
        let msgs = serde_json::from_str(&messages).map_err(|e| {
            ReadError::Row(format!("conversation {key:?}'s messages do not read: {e}"))
        })?;
        conversations.push((key, used.max(0) as u64, msgs));
    }
    Ok(Restored {
        newest: meta_u64(conn, "newest")?.max(tasks.iter().map(|t| t.seq).max().unwrap_or(0)),
        tasks,
        harness_sessions,
        conversations,
        events: meta_u64(conn, "events")?,
        page_key: [0; 32],
        spent: spent(conn)?,
    })
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(super) fn unhex(text: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    if text.len() != 64 {
        return None;
    }
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}
