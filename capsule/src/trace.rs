//! `trace.jsonl`: one JSON object a line, each with `event_type`, `session_id` and `timestamp`,
//! written and flushed as each event happens so a reader may tail it. No token is ever passed in.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use serde_json::{Map, Value};

use crate::clock::Millis;
use crate::ids::SessionId;

/// The session's trace file. Events are small and rare next to door traffic, so a short-held
/// mutex around one `write` is enough; nothing on the GetTask path writes here.
pub struct Trace {
    session_id: SessionId,
    file: Mutex<Option<File>>,
}

impl Trace {
    /// Opens (appending) `trace.jsonl` in `dir`, creating the folder; both private (0700, 0600).
    pub fn open(dir: &Path, session_id: SessionId) -> std::io::Result<Trace> {
        crate::private::create_dir_all(dir)?;
        let file = crate::private::open(&dir.join("trace.jsonl"), true)?;
        Ok(Trace {
            session_id,
            file: Mutex::new(Some(file)),
        })
    }

    /// A trace that writes nothing (unit tests).
    pub fn disabled(session_id: SessionId) -> Trace {
        Trace {
            session_id,
            file: Mutex::new(None),
        }
    }

    /// Writes one event. `fields` follow the three common keys in their given order.
    pub fn event(&self, event_type: &str, fields: Value) {
        let mut line = Map::new();
        line.insert("event_type".into(), Value::from(event_type));
        line.insert("session_id".into(), Value::from(self.session_id.as_str()));
        line.insert("timestamp".into(), Value::from(Millis::now().rfc3339()));
        if let Value::Object(extra) = fields {
            line.extend(extra);
        }
        let mut bytes = Value::Object(line).to_string().into_bytes();
        bytes.push(b'\n');
        let mut guard = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(file) = guard.as_mut() {
            // A full disk must not take the door down; the event is lost, the task is not.
            let _ = file.write_all(&bytes).and_then(|_| file.flush());
        }
    }
}
