//! The store's one writer: changes are handed over under the registry's lock (a map insert,
//! no I/O), and a thread of its own commits whatever has gathered as one transaction — one
//! commit for many answers when the door is busy — then says how far it has committed. A
//! commit that fails (a full disk) is said once on stderr and tried again; nothing handed over
//! is dropped meanwhile.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{params, Connection};

use super::rows::TaskRow;
use super::Durable;
use super::Spent;
use crate::ids::TaskId;
use crate::inference::Msg;
use crate::stream::EventLog;
use crate::tasks::{Journal, Task};

/// How long a failed commit waits before it is tried again.
const RETRY: Duration = Duration::from_secs(1);

/// How long changes nobody waits for (rejections at a busy door) gather before they are
/// committed: each commit rewrites the pages it touches and appends them to the WAL, so a
/// flood of rejections written one commit each costs the door a third of its answers, and
/// one commit each 2 ms a sixth (BENCHMARKS.md, "The store"). What a `kill -9` can lose of
/// them is what came in this long (docs/store.md).
const LINGER: Duration = Duration::from_millis(10);

/// A conversation's messages, shared with the capsule's memory until they are committed.
type Messages = Arc<Vec<Msg>>;

/// What has changed since the last commit: the latest of each, so a task that changed ten
/// times between two commits is written once.
#[derive(Default)]
struct Pending {
    tasks: HashMap<String, TaskRow>,
    forgotten: Vec<String>,
    /// Conversation → its harness session (`None`: forgotten) and its place in the order.
    sessions: HashMap<String, Option<(String, u64)>>,
    /// An http capsule's conversation → when it was used, and its messages (`None`: dropped),
    /// encoded at the commit. The newest use wins.
    conversations: HashMap<String, (u64, Option<Messages>)>,
    spent: Option<Spent>,
    /// The ledger lines of the calls since the last commit, in order.
    ledger: Vec<String>,
    /// The newest registry position among the changes.
    newest: u64,
    closing: bool,
    /// The writer waits for changes: only then does a change need to wake it (a wake is a
    /// system call, and a busy door hands over a change per answer).
    idle: bool,
    /// A change an answer waits for is among them (anything but a rejection at the door):
    /// commit now. Without one, the writer lingers for more (see [`LINGER`]).
    binding: bool,
    /// The writer lingers: only a change an answer waits for wakes it.
    lingering: bool,
}

impl Pending {
    fn is_empty(&self) -> bool {
        self.tasks.is_empty()
            && self.forgotten.is_empty()
            && self.sessions.is_empty()
            && self.conversations.is_empty()
            && self.spent.is_none()
            && self.ledger.is_empty()
    }

    /// Puts back a batch that did not commit, under what changed since (which is newer).
    fn put_back(&mut self, batch: Pending) {
        for (id, row) in batch.tasks {
            self.tasks.entry(id).or_insert(row);
        }
        let mut forgotten = batch.forgotten;
        forgotten.append(&mut self.forgotten);
        self.forgotten = forgotten;
        for (k, v) in batch.sessions {
            self.sessions.entry(k).or_insert(v);
        }
        for (k, v) in batch.conversations {
            self.conversations.entry(k).or_insert(v);
        }
        self.spent = self.spent.or(batch.spent);
        let mut ledger = batch.ledger;
        ledger.append(&mut self.ledger);
        self.ledger = ledger;
        self.newest = self.newest.max(batch.newest);
        self.binding |= batch.binding;
    }
}

pub(super) struct Shared {
    pending: Mutex<Pending>,
    wake: Condvar,
    pub(super) durable: Durable,
    events: Arc<EventLog>,
    /// The next harness session's place in the order.
    session_order: Mutex<u64>,
    path: PathBuf,
    /// The page tokens' key, for a store the writer creates.
    page_key: [u8; 32],
}

impl Shared {
    pub(super) fn new(
        durable: Durable,
        events: Arc<EventLog>,
        sessions: u64,
        path: PathBuf,
        page_key: [u8; 32],
    ) -> Shared {
        Shared {
            pending: Mutex::new(Pending::default()),
            wake: Condvar::new(),
            durable,
            events,
            session_order: Mutex::new(sessions),
            path,
            page_key,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes the writer if it waits; called with the change handed over, the lock released.
    fn wake_if_idle(&self, was_idle: bool) {
        if was_idle {
            self.wake.notify_one();
        }
    }

    pub(super) fn harness_session(&self, conversation: &str, session: Option<&str>) {
        let at = {
            let mut order = self.session_order.lock().unwrap_or_else(|e| e.into_inner());
            *order += 1;
            *order
        };
        let mut pending = self.lock();
        pending
            .sessions
            .insert(conversation.to_owned(), session.map(|s| (s.to_owned(), at)));
        let idle = std::mem::take(&mut pending.idle);
        drop(pending);
        self.wake_if_idle(idle);
    }

    pub(super) fn conversation(&self, key: &str, used: u64, msgs: Option<Messages>) {
        let mut pending = self.lock();
        match pending.conversations.get(key) {
            Some((newer, _)) if *newer > used => return,
            _ => {}
        }
        pending.conversations.insert(key.to_owned(), (used, msgs));
        let idle = std::mem::take(&mut pending.idle);
        drop(pending);
        self.wake_if_idle(idle);
    }

    pub(super) fn spent(&self, totals: Spent, entry: String) {
        let mut pending = self.lock();
        pending.spent = Some(totals);
        pending.ledger.push(entry);
        // While commits fail (a full disk), no more lines wait than the store would keep.
        let over = pending
            .ledger
            .len()
            .saturating_sub(super::LEDGER_KEPT as usize);
        pending.ledger.drain(..over);
        drop(pending);
        self.wake.notify_one();
    }

    pub(super) fn close(&self) {
        self.lock().closing = true;
        self.wake.notify_one();
    }
}

impl Journal for Shared {
    fn changed(&self, task: &Task) {
        let row = TaskRow::of(task);
        let binding = task.state != crate::tasks::TaskState::Rejected;
        let mut pending = self.lock();
        pending.newest = pending.newest.max(row.seq);
        pending.binding |= binding;
        pending.tasks.insert(row.id.clone(), row);
        let lingering = binding && std::mem::take(&mut pending.lingering);
        let idle = std::mem::take(&mut pending.idle);
        drop(pending);
        self.wake_if_idle(idle || lingering);
    }

    fn forgotten(&self, id: &TaskId) {
        let mut pending = self.lock();
        pending.tasks.remove(id.as_str());
        pending.forgotten.push(id.as_str().to_owned());
    }
}

pub(super) fn start(
    conn: Option<Connection>,
    shared: Arc<Shared>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("store".into())
        .spawn(move || run(conn, &shared))
}

fn run(mut conn: Option<Connection>, shared: &Shared) {
    let mut said_failing = false;
    loop {
        let (batch, closing) = {
            let mut pending = shared.lock();
            while pending.is_empty() && !pending.closing {
                pending.idle = true;
                pending = shared.wake.wait(pending).unwrap_or_else(|e| e.into_inner());
            }
            if !pending.binding && !pending.closing {
                // Nobody waits for these: more may come before they are worth a commit.
                let until = std::time::Instant::now() + LINGER;
                while !pending.binding && !pending.closing {
                    let left = until.saturating_duration_since(std::time::Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    pending.lingering = true;
                    pending = shared
                        .wake
                        .wait_timeout(pending, left)
                        .map(|(p, _)| p)
                        .unwrap_or_else(|e| e.into_inner().0);
                }
                pending.lingering = false;
            }
            let closing = pending.closing;
            (std::mem::take(&mut *pending), closing)
        };
        let newest = batch.newest;
        let written = match &mut conn {
            Some(c) => commit(c, &batch, shared.events.last_id()).map_err(|e| e.to_string()),
            // A new session's store, made with its first commit.
            None => match super::open::open(&shared.path, shared.page_key) {
                Ok((mut c, _)) => {
                    let done = commit(&mut c, &batch, shared.events.last_id());
                    conn = Some(c);
                    done.map_err(|e| e.to_string())
                }
                Err(refusal) => Err(format!("{} {}", refusal.what, refusal.hint)),
            },
        };
        match written {
            Ok(()) => {
                if said_failing {
                    eprintln!(
                        "murmur: the task store {} is written again",
                        shared.path.display()
                    );
                    said_failing = false;
                    shared.durable.failing.store(false, Ordering::Release);
                }
                shared.durable.advance(newest);
            }
            Err(e) => {
                if !said_failing {
                    eprintln!(
                        "murmur: the task store {} cannot be written ({e}); answers no longer wait for it, and its changes are tried again every second",
                        shared.path.display()
                    );
                    said_failing = true;
                    shared.durable.failing.store(true, Ordering::Release);
                }
                shared.lock().put_back(batch);
                if closing {
                    return;
                }
                std::thread::sleep(RETRY);
                continue;
            }
        }
        if closing {
            if let Some(c) = &conn {
                let _ = c.pragma_update(None, "wal_checkpoint", "TRUNCATE");
            }
            return;
        }
    }
}

fn commit(conn: &mut Connection, batch: &Pending, events: u64) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    for row in batch.tasks.values() {
        row.write(&tx)?;
    }
    for id in &batch.forgotten {
        tx.prepare_cached("DELETE FROM tasks WHERE id = ?1")?
            .execute([id])?;
    }
    for (conversation, kept) in &batch.sessions {
        match kept {
            Some((session, at)) => tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO harness_sessions (conversation, session, ord) VALUES (?1, ?2, ?3)",
                )?
                .execute(params![conversation, session, *at as i64])?,
            None => tx
                .prepare_cached("DELETE FROM harness_sessions WHERE conversation = ?1")?
                .execute([conversation])?,
        };
    }
    for (key, (used, msgs)) in &batch.conversations {
        match msgs {
            Some(msgs) => tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO conversations (key, used, messages) VALUES (?1, ?2, ?3)",
                )?
                // Messages hold strings and JSON values only: their encoding cannot fail.
                .execute(params![key, *used as i64, serde_json::to_string(&**msgs).unwrap_or_default()])?,
            None => tx
                .prepare_cached("DELETE FROM conversations WHERE key = ?1")?
                .execute([key])?,
        };
    }
    for entry in &batch.ledger {
        tx.prepare_cached("INSERT INTO ledger (entry) VALUES (?1)")?
            .execute([entry])?;
    }
    if !batch.ledger.is_empty() {
        tx.prepare_cached("DELETE FROM ledger WHERE n <= (SELECT MAX(n) FROM ledger) - ?1")?
            .execute([super::LEDGER_KEPT])?;
    }
    let meta = |key: &str, value: u64| -> rusqlite::Result<()> {
        tx.prepare_cached("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)")?
            .execute(params![key, value.to_string()])
            .map(|_| ())
    };
    if batch.newest > 0 {
        meta("newest", batch.newest)?;
    }
    meta("events", events)?;
    if let Some(spent) = batch.spent {
        meta("spent_tokens", spent.tokens)?;
        meta("spent_usd", spent.usd.0)?;
    }
    tx.commit()
}
