//! `trace.jsonl` (DESIGN §10): one JSON object a line, each with `event_type`, `session_id` and
//! `timestamp`. Callers hand in a typed [`TraceEvent`] ([`event`] is the one place it becomes
//! JSON); a dedicated writer thread ([`writer`]) fed through a bounded queue does every write,
//! so tracing never does file I/O on, nor blocks, the door or the worker. No token is ever
//! passed in: no event has a field for one.
//!
//! When the queue is full a record is dropped and counted, never waited for; the count goes
//! into the file as one `trace_records_lost` record as soon as there is room. [`Trace::flush`]
//! is the barrier a caller awaits when a record must be on file before it goes on (a task's
//! `task_end`, the session's `session_end`).

mod event;
mod span;
mod writer;

pub use event::{
    Backgrounded, CallStatus, DelegationState, EndStatus, ExitCause, GatewayCall, InterruptSent,
    Interrupted, Origin, Ran, RequestedBy, SessionMode, Tool, TraceEvent, Trust,
};
pub use span::{EventRecord, SpanRecord};

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use crate::clock::Millis;
use crate::ids::SessionId;
use writer::{Command, Writer};

/// The file's name in the session's records folder.
pub const FILE_NAME: &str = "trace.jsonl";

/// How many records may wait for the writer. A task writes about eight, so this holds the
/// records of hundreds of tasks: only a disk stalled for a long while fills it. Each record is a
/// few hundred bytes, so a full queue holds a megabyte or two.
pub const QUEUE_BOUND: usize = 4096;

/// The longest a barrier waits for the writer. A stalled disk delays a task's release or the
/// capsule's exit by this much, and no more: the records are still written once it recovers.
pub const FLUSH_WAIT: Duration = Duration::from_secs(5);

/// How a barrier ([`Trace::flush`], [`Trace::close`]) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flushed {
    /// Everything queued before it is written and flushed to the file.
    Written,
    /// There is no writer: the trace is disabled, or already closed.
    NoWriter,
    /// The writer did not get there within [`FLUSH_WAIT`].
    TimedOut,
}

/// The session's trace: the sending end of the writer's queue.
pub struct Trace {
    session_id: SessionId,
    /// `None` for a disabled trace, and once dropped.
    queue: Option<mpsc::Sender<Command>>,
    /// Records dropped for want of room and not yet reported (shared with the writer).
    lost: Arc<AtomicU64>,
    writer: Option<WriterThread>,
}

/// The writer thread, and a channel that disconnects when it ends (so a drop can wait for it
/// with a deadline; `JoinHandle::join` has none). The mutex only makes the receiver `Sync`;
/// it is used once, in `drop`.
struct WriterThread {
    thread: std::thread::JoinHandle<()>,
    ended: Mutex<std::sync::mpsc::Receiver<()>>,
}

impl Trace {
    /// Opens (appending) `trace.jsonl` in `dir` and starts its writer. The folder is made
    /// private (0700) and the file is created 0600: records are the user's alone.
    pub fn open(dir: &Path, session_id: SessionId) -> std::io::Result<Trace> {
        let file = create_private(dir)?;
        Trace::to_sink(file, session_id, QUEUE_BOUND)
    }

    /// A trace written to `sink` through a queue of `bound` records (at least one).
    pub fn to_sink<W: Write + Send + 'static>(
        sink: W,
        session_id: SessionId,
        bound: usize,
    ) -> std::io::Result<Trace> {
        let (queue, receiver) = mpsc::channel(bound.max(1));
        let lost = Arc::new(AtomicU64::new(0));
        let writer = Writer {
            queue: receiver,
            out: BufWriter::new(sink),
            session_id: session_id.clone(),
            lost: lost.clone(),
        };
        let (ended_tx, ended) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("trace-writer".into())
            .spawn(move || {
                let _ended = ended_tx;
                writer.run();
            })?;
        Ok(Trace {
            session_id,
            queue: Some(queue),
            lost,
            writer: Some(WriterThread {
                thread,
                ended: Mutex::new(ended),
            }),
        })
    }

    /// A trace that writes nothing (unit tests).
    pub fn disabled(session_id: SessionId) -> Trace {
        Trace {
            session_id,
            queue: None,
            lost: Arc::new(AtomicU64::new(0)),
            writer: None,
        }
    }

    /// The session this trace belongs to.
    pub fn session_id(&self) -> &SessionId {
        &self.session_id
    }

    /// Queues one event, stamped now. Never blocks and never touches the file: when the queue
    /// is full the event is counted as lost instead.
    pub fn event(&self, event: TraceEvent) {
        let Some(queue) = &self.queue else {
            return;
        };
        let at = Millis::now();
        if self.report_lost(queue, at) && queue.try_send(Command::Record(at, event)).is_ok() {
            return;
        }
        self.lost.fetch_add(1, Ordering::Relaxed);
    }

    /// Puts the count of dropped records in the queue ahead of the next record, where the gap
    /// is. False when there is still no room (the count is kept for the next try).
    fn report_lost(&self, queue: &mpsc::Sender<Command>, at: Millis) -> bool {
        let lost = self.lost.swap(0, Ordering::Relaxed);
        if lost == 0 {
            return true;
        }
        let report = Command::Record(at, TraceEvent::TraceRecordsLost { lost });
        if queue.try_send(report).is_ok() {
            return true;
        }
        self.lost.fetch_add(lost, Ordering::Relaxed);
        false
    }

    /// Resolves once every event queued before this call is written and flushed (waiting for
    /// room in the queue if it must, and at most [`FLUSH_WAIT`]).
    pub async fn flush(&self) -> Flushed {
        self.barrier(Command::Barrier).await
    }

    /// [`Trace::flush`], then ends the writer: the capsule is going. Events after this are
    /// dropped.
    pub async fn close(&self) -> Flushed {
        self.barrier(Command::Close).await
    }

    async fn barrier(&self, command: fn(oneshot::Sender<()>) -> Command) -> Flushed {
        let Some(queue) = &self.queue else {
            return Flushed::NoWriter;
        };
        let (done, written) = oneshot::channel();
        let wait = async {
            queue.send(command(done)).await.ok()?;
            written.await.ok()
        };
        match tokio::time::timeout(FLUSH_WAIT, wait).await {
            Ok(Some(())) => Flushed::Written,
            Ok(None) => Flushed::NoWriter,
            Err(_) => Flushed::TimedOut,
        }
    }
}

/// Nothing queued is lost when the trace goes away: the writer drains the queue, reports any
/// drops and flushes before it ends. The wait is bounded so a stalled disk cannot keep the
/// process from exiting.
impl Drop for Trace {
    fn drop(&mut self) {
        self.queue = None;
        let Some(writer) = self.writer.take() else {
            return;
        };
        let ended = writer
            .ended
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .recv_timeout(FLUSH_WAIT);
        if ended == Err(std::sync::mpsc::RecvTimeoutError::Disconnected) {
            let _ = writer.thread.join();
        }
    }
}

/// Creates `dir` (0700, and tightens it if it was there) and opens the trace file in it (0600).
fn create_private(dir: &Path) -> std::io::Result<File> {
    crate::private::create_dir_all(dir)?;
    crate::private::open(&dir.join(FILE_NAME), true)
}

#[cfg(test)]
pub(crate) mod tests;
