//! `trace.jsonl`: one JSON object a line, each with `event_type`, `session_id` and `timestamp`,
//! written and flushed as each event happens so a reader may tail it. Callers hand in a typed
//! [`TraceEvent`]; [`event::line`] is the one place it becomes JSON. No token is ever passed in.

mod event;

pub use event::{
    EndStatus, ExitCause, InterruptSent, Interrupted, Origin, Ran, RequestedBy, SessionMode, Tool,
    TraceEvent,
};

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use crate::clock::Millis;
use crate::ids::SessionId;

/// The session's trace file. Events are small and rare next to door traffic, so a short-held
/// mutex around one `write` is enough; nothing on the GetTask path writes here.
pub struct Trace {
    session_id: SessionId,
    file: Mutex<Option<File>>,
}

impl Trace {
    /// Opens (appending) `trace.jsonl` in `dir`, creating the folder.
    pub fn open(dir: &Path, session_id: SessionId) -> std::io::Result<Trace> {
        std::fs::create_dir_all(dir)?;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("trace.jsonl"))?;
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

    /// Writes one event.
    pub fn event(&self, event: TraceEvent) {
        let Ok(bytes) = event::line(&event, &self.session_id, Millis::now()) else {
            return;
        };
        let mut guard = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(file) = guard.as_mut() {
            // A full disk must not take the door down; the event is lost, the task is not.
            let _ = file.write_all(&bytes).and_then(|_| file.flush());
        }
    }
}
