//! The session's durable store (docs/store.md): one SQLite file in the session's records that
//! keeps what a restarted capsule must answer as it did — every task as GetTask shows it, each
//! conversation's harness session (or, on an http capsule, its messages), the stream's event
//! ids, the page tokens' key and what the session has spent. Reads never come here: the
//! registry answers from memory. Changes are handed to one writer thread that commits them in
//! batches, and the door lets an answer leave only once every change it could show is
//! committed ([`Store::kept`]).

mod open;
mod rows;
#[cfg(test)]
mod tests;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use crate::stream::EventLog;
use crate::tasks::{Journal, Task};

pub use open::StoreError;

/// The store's folder in a session's records folder (0700), which the jail hides from every
/// harness attempt: the harness keeps the rest of its session's records in sight.
pub const DIR: &str = "store";

/// The store's file in [`DIR`] (with SQLite's `-wal` beside it).
pub const FILE: &str = "store.sqlite";

/// Where a session's store is, given its records folder.
pub fn path_in(records: &Path) -> PathBuf {
    records.join(DIR).join(FILE)
}

/// How many of the session's ledger lines the store keeps: the newest. The machine's ledger
/// (`$MURMUR_HOME/spend/`) keeps them all; the totals that ceilings count are kept apart.
pub const LEDGER_KEPT: i64 = 100_000;

/// The layout this release writes and reads (`PRAGMA user_version`).
pub const VERSION: i32 = 1;

/// `MURMUR_STORE=off` runs a capsule without a store: nothing it answers outlives it (the
/// benchmarks' baseline, and throwaway runs).
pub const ENV: &str = "MURMUR_STORE";

/// What the status of a task that was live when its capsule ended says once it is back.
pub const RESTARTED: &str =
    "task failed: the capsule restarted while the task was live (its process ended: killed, \
     crashed or its launch ended); send the task again";

/// What the status of a task that was live when its supervisor (`mur run`) died says: the
/// capsule stopped it as it went down with it. A delegation in flight fails so too.
pub const SUPERVISOR_GONE: &str =
    "task failed: murmur's supervisor (mur run) ended while the task was live, and the capsule \
     ended with it (so did any sub-capsule it had started); `mur run --resume` brings the \
     session back: send the task again";

/// The longest an answer waits for the store: past it (a disk that stopped taking writes) the
/// answer leaves anyway, and the capsule has said on stderr that the store is failing.
const WAIT_AT_MOST: Duration = Duration::from_secs(5);

/// What a session spent, in the ledger's units: tokens, and dollars in billionths
/// (`manifest::Usd`). Its own type rather than the gateway's, which sits above the store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spent {
    pub tokens: u64,
    pub usd: crate::manifest::Usd,
}

/// What a store held when it was opened.
#[derive(Default)]
pub struct Restored {
    /// Every task it kept, with the positions they had in the ListTasks order.
    pub tasks: Vec<Task>,
    /// The newest position it saw.
    pub newest: u64,
    /// Each conversation's harness session (conversation key, session id), oldest first.
    pub harness_sessions: Vec<(String, String)>,
    /// An http capsule's conversations (conversation key, when last used, messages), least
    /// recently used first.
    pub conversations: Vec<(String, u64, Vec<crate::inference::Msg>)>,
    /// The newest stream event id handed out.
    pub events: u64,
    /// The key page tokens are signed with.
    pub page_key: [u8; 32],
    /// What the session had spent.
    pub spent: Spent,
}

/// Whether a capsule keeps a store: unless `MURMUR_STORE=off`.
pub fn wanted() -> bool {
    std::env::var(ENV).map_or(true, |v| v != "off")
}

/// What the session whose records are `records` had spent, read from its store without
/// opening it for writing; `None` without a store that reads.
pub fn spent_in(records: &Path) -> Option<Spent> {
    let conn = rusqlite::Connection::open_with_flags(
        path_in(records),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .ok()?;
    rows::spent(&conn).ok()
}

/// The store of a session, as its writer thread keeps it.
pub struct Store {
    path: PathBuf,
    shared: Arc<writer::Shared>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// How far the store has committed, for answers waiting on it.
pub(crate) struct Durable {
    reached: AtomicU64,
    changes: watch::Sender<u64>,
    /// Set while commits fail: answers stop waiting on them.
    failing: AtomicBool,
}

impl Durable {
    fn new(at: u64) -> Durable {
        Durable {
            reached: AtomicU64::new(at),
            changes: watch::channel(at).0,
            failing: AtomicBool::new(false),
        }
    }

    fn advance(&self, to: u64) {
        self.reached.fetch_max(to, Ordering::AcqRel);
        self.changes.send_replace(to);
    }
}

impl Store {
    /// Opens (or creates) the store in `records`, and starts its writer. A store that cannot
    /// be trusted — corrupt, from a newer murmur, read-only, on a full disk — is refused with
    /// what to do: a capsule never starts empty in its place.
    ///
    /// A session with no store yet (a new one) has nothing to restore: its file is made by the
    /// writer with its first commit, so a capsule that never takes a task writes none (and
    /// touches none of SQLite: an idle capsule stays small). Its folder is made now.
    pub fn open(records: &Path, events: Arc<EventLog>) -> Result<(Store, Restored), StoreError> {
        let path = path_in(records);
        open::prepare_dir(&path)?;
        let (conn, restored) = match open::exists(&path) {
            true => {
                let (conn, restored) = open::open(&path, rand::random())?;
                (Some(conn), restored)
            }
            false => (
                None,
                Restored {
                    page_key: rand::random(),
                    ..Restored::default()
                },
            ),
        };
        let durable = Durable::new(restored.newest);
        let shared = Arc::new(writer::Shared::new(
            durable,
            events,
            restored.harness_sessions.len() as u64,
            path.clone(),
            restored.page_key,
        ));
        let thread = writer::start(conn, shared.clone()).map_err(|e| StoreError {
            file: path.clone(),
            what: format!("cannot be written: its writer thread did not start ({e})"),
            hint: "check the process limits (ulimit -u)".into(),
        })?;
        Ok((
            Store {
                path,
                shared,
                thread: Mutex::new(Some(thread)),
            },
            restored,
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The registry's journal: every task change, and every task forgotten.
    pub fn journal(&self) -> Arc<dyn Journal> {
        self.shared.clone()
    }

    /// Keeps a conversation's harness session (`None`: forgotten).
    pub fn harness_session(&self, conversation: &str, session: Option<&str>) {
        self.shared.harness_session(conversation, session);
    }

    /// Keeps an http capsule's conversation as it was at `used` (`None`: dropped); the writer
    /// encodes it, off the task's way.
    pub fn conversation(
        &self,
        key: &str,
        used: u64,
        msgs: Option<Arc<Vec<crate::inference::Msg>>>,
    ) {
        self.shared.conversation(key, used, msgs);
    }

    /// Keeps what the session has spent so far, and the ledger line (JSON) of the call that
    /// brought it there.
    pub fn spent(&self, totals: Spent, entry: String) {
        self.shared.spent(totals, entry);
    }

    /// Returns once every change up to registry position `seq` is committed (at once when it
    /// is, or when the store is failing; within [`WAIT_AT_MOST`] in any case).
    pub async fn kept(&self, seq: u64) {
        let durable = &self.shared.durable;
        if durable.reached.load(Ordering::Acquire) >= seq || durable.failing.load(Ordering::Acquire)
        {
            return;
        }
        let mut rx = durable.changes.subscribe();
        let _ = tokio::time::timeout(WAIT_AT_MOST, rx.wait_for(|d| *d >= seq)).await;
    }

    /// Commits what is pending and stops the writer: the capsule's last act before it exits.
    pub fn close(&self) {
        self.shared.close();
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = thread {
            let _ = t.join();
        }
    }
}

impl crate::stream::Keeper for Store {
    fn kept(
        &self,
        seq: u64,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(Store::kept(self, seq))
    }
}
