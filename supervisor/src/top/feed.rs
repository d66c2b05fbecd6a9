//! Where `mur top` learns what it shows, each source feeding the one loop: a task per session
//! reading its murmur.WatchSession (after a ListTasks for what came before the replay buffer),
//! reconnecting when the stream ends, as it does when a member restarts on its same port; and
//! the kernel's word (inotify) that the running-capsule folder or a session's trace changed.
//! Nothing here reads a file on a timer, and nothing asks a door more than once per connection.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::BodyExt;
use serde_json::{json, Value};
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;

use super::board::Link;
use crate::client;
use crate::error::{CliError, CliResult, Code};
use crate::follow::{Folders, JsonLines};
use crate::records::{self, RunningCapsule};

/// What a session's trace is read back from when it starts being shown.
pub const TRACE_BACK: u64 = 4 << 20;
/// How many tasks one ListTasks asks for: the newest.
const LIST_PAGE: u64 = 50;
/// A door has this long to answer a ListTasks.
const LIST_WITHIN: Duration = Duration::from_secs(5);
/// Between attempts to reach a door again: from the first, doubling to the last.
const RETRY_FIRST: Duration = Duration::from_millis(250);
const RETRY_LAST: Duration = Duration::from_secs(2);

/// What the loop is told.
pub enum Update {
    Tasks {
        session: String,
        tasks: Vec<Value>,
    },
    Event {
        session: String,
        result: Value,
    },
    Link {
        session: String,
        link: Link,
    },
    Input(crossterm::event::Event),
    /// The lines an action (a cancel, a stop) answered.
    Said(Vec<String>),
}

/// The files the kernel said changed since the loop last looked.
#[derive(Default)]
pub struct Changes {
    pub records: bool,
    pub traces: HashSet<PathBuf>,
}

/// Set by the watcher's thread, taken by the loop when woken.
#[derive(Default)]
pub struct Wake {
    changes: Mutex<Changes>,
    pub notify: Notify,
}

impl Wake {
    pub fn take(&self) -> Changes {
        self.changes
            .lock()
            .map(|mut c| std::mem::take(&mut *c))
            .unwrap_or_default()
    }
}

/// A session's stream task, and its word to stop reconnecting: an ended capsule's stream is
/// read to its end (its last events are its answer), never cut.
struct Stream {
    task: JoinHandle<()>,
    last: Arc<AtomicBool>,
}

/// Every source of one `mur top`.
pub struct Feeds {
    tx: mpsc::Sender<Update>,
    streams: HashMap<String, Stream>,
    traces: HashMap<String, JsonLines>,
    /// The traces of sessions no longer followed, kept at their offsets: a member between a
    /// crash and its restart leaves the records for a moment, and its trace must not be read
    /// twice when it comes back.
    parked: HashMap<String, JsonLines>,
    folders: Folders,
}

/// The parked traces kept at most.
const PARKED: usize = 64;

impl Feeds {
    pub fn new(tx: mpsc::Sender<Update>) -> CliResult<(Self, Arc<Wake>)> {
        let wake = Arc::new(Wake::default());
        let told = wake.clone();
        let run = records::run_dir();
        let folders = Folders::new(move |path: &Path| {
            if let Ok(mut c) = told.changes.lock() {
                if path.parent() == Some(run.as_path()) {
                    c.records = true;
                } else if path.file_name().is_some_and(|n| n == "trace.jsonl") {
                    c.traces.insert(path.to_path_buf());
                }
            }
            told.notify.notify_one();
        });
        let mut folders = folders.map_err(cannot_watch)?;
        let run = records::run_dir();
        // Watched before anything ran, the folder must exist for the first record to be seen.
        let _ = capsule::private::create_dir_under(&records::home(), &run);
        folders.add(&run).map_err(cannot_watch)?;
        let feeds = Feeds {
            tx,
            streams: HashMap::new(),
            traces: HashMap::new(),
            parked: HashMap::new(),
            folders,
        };
        Ok((feeds, wake))
    }

    /// Starts following a session: its stream, and its trace (whose last records it answers).
    pub fn follow(&mut self, rec: &RunningCapsule) -> Vec<Value> {
        self.restart_stream(rec);
        let _ = self.folders.add(&rec.records);
        let mut lines = self
            .parked
            .remove(&rec.session_id)
            .unwrap_or_else(|| JsonLines::from_last(&rec.records.join("trace.jsonl"), TRACE_BACK));
        let first = lines.read_new();
        self.traces.insert(rec.session_id.clone(), lines);
        first
    }

    /// Reads a session's stream again from the start (its capsule is a new process).
    pub fn restart_stream(&mut self, rec: &RunningCapsule) {
        if let Some(old) = self.streams.remove(&rec.session_id) {
            old.task.abort();
        }
        let last = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(stream(rec.clone(), self.tx.clone(), last.clone()));
        self.streams
            .insert(rec.session_id.clone(), Stream { task, last });
    }

    /// Stops following a session whose capsule ended; answers its trace's last records.
    pub fn unfollow(&mut self, session: &str) -> Vec<Value> {
        if let Some(stream) = self.streams.remove(session) {
            stream.last.store(true, Ordering::Relaxed);
        }
        let Some(mut lines) = self.traces.remove(session) else {
            return Vec::new();
        };
        if let Some(dir) = lines.path().parent() {
            self.folders.remove(dir);
        }
        let last = lines.read_new();
        if self.parked.len() >= PARKED {
            self.parked.clear();
        }
        self.parked.insert(session.to_owned(), lines);
        last
    }

    /// The new records of the traces in `changed`, by session.
    pub fn read_traces(&mut self, changed: &HashSet<PathBuf>) -> Vec<(String, Vec<Value>)> {
        self.traces
            .iter_mut()
            .filter(|(_, lines)| changed.contains(lines.path()))
            .map(|(session, lines)| (session.clone(), lines.read_new()))
            .collect()
    }
}

impl Drop for Feeds {
    fn drop(&mut self) {
        self.streams.values().for_each(|s| s.task.abort());
    }
}

fn cannot_watch(e: notify::Error) -> CliError {
    CliError::new(
        Code::Unreachable,
        format!("cannot watch the running capsules' folder: {e}"),
        "`mur top --once` prints one snapshot without watching",
    )
}

/// The newest tasks of a session, newest first, as ListTasks answers them.
pub async fn list_tasks(rec: &RunningCapsule) -> CliResult<Vec<Value>> {
    let door = client::DoorRef::of(rec);
    let asked = client::rpc(&door, "ListTasks", json!({"pageSize": LIST_PAGE}));
    let answer = tokio::time::timeout(LIST_WITHIN, asked)
        .await
        .map_err(|_| {
            CliError::new(
                Code::Unreachable,
                format!(
                    "the door at {} gave no task list within {}s",
                    rec.url,
                    LIST_WITHIN.as_secs()
                ),
                "check it with `mur ps`",
            )
        })??;
    let result = answer.map_err(|e| crate::stopping::refused(&rec.url, &e))?;
    Ok(result["tasks"].as_array().cloned().unwrap_or_default())
}

/// One session's stream, for as long as it is shown: what came before from ListTasks, then
/// every event; reconnecting whenever the stream ends or cannot open.
async fn stream(rec: RunningCapsule, tx: mpsc::Sender<Update>, last: Arc<AtomicBool>) {
    let session = rec.session_id.clone();
    let mut wait = RETRY_FIRST;
    loop {
        let read = read_once(&rec, &tx).await;
        if last.load(Ordering::Relaxed) {
            return;
        }
        let link = match read {
            Ok(()) => Link::Lost("the stream ended".into()),
            Err(e) => Link::Lost(e.message().to_owned()),
        };
        let told = tx.send(Update::Link {
            session: session.clone(),
            link,
        });
        if told.await.is_err() {
            return;
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(RETRY_LAST);
    }
}

async fn read_once(rec: &RunningCapsule, tx: &mpsc::Sender<Update>) -> CliResult<()> {
    let session = &rec.session_id;
    let tasks = list_tasks(rec).await?;
    let door = client::DoorRef::of(rec);
    let mut body = client::watch_session(&door).await?;
    let _ = tx
        .send(Update::Tasks {
            session: session.clone(),
            tasks,
        })
        .await;
    let _ = tx
        .send(Update::Link {
            session: session.clone(),
            link: Link::Live,
        })
        .await;
    let mut events = client::SseEvents::default();
    while let Some(Ok(frame)) = body.frame().await {
        let Some(data) = frame.data_ref() else {
            continue;
        };
        let Some(batch) = events.feed(data) else {
            return Err(CliError::new(
                Code::Unreachable,
                format!("the door at {} sent an event past 16 MiB", rec.url),
                "reconnecting",
            ));
        };
        for v in batch {
            let Some(result) = v.get("result").cloned() else {
                continue;
            };
            let update = Update::Event {
                session: session.clone(),
                result,
            };
            if tx.send(update).await.is_err() {
                return Ok(());
            }
        }
    }
    Ok(())
}
