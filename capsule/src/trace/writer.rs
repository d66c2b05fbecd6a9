//! The thread that owns the trace file. Callers on the door and the worker only queue records;
//! every write, flush and the file's errors happen here, so a slow or full disk delays the
//! trace, never a request.

use std::io::{BufWriter, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::event::{self, TraceEvent};
use crate::clock::Millis;
use crate::ids::SessionId;

/// What the queue carries to the writer.
pub(super) enum Command {
    /// One record, stamped when it happened (not when it is written).
    Record(Millis, TraceEvent),
    /// Answered once everything queued before it is written and flushed.
    Barrier(oneshot::Sender<()>),
    /// Like a barrier, and the writer then ends: nothing queued after it is written.
    Close(oneshot::Sender<()>),
}

/// The writer's end of things: its queue and what it needs to spell a record.
pub(super) struct Writer<W: Write> {
    pub(super) queue: mpsc::Receiver<Command>,
    pub(super) out: BufWriter<W>,
    pub(super) session_id: SessionId,
    /// Records the callers dropped for want of room and have not reported yet (shared with
    /// [`super::Trace`]); the writer reports what is left at barriers and at the end.
    pub(super) lost: Arc<AtomicU64>,
}

impl<W: Write> Writer<W> {
    /// Runs until the trace is closed or dropped, then flushes what it holds.
    pub(super) fn run(mut self) {
        while let Some(command) = self.queue.blocking_recv() {
            match command {
                Command::Record(at, event) => {
                    self.write(&event, at);
                    // Batch while records keep coming; a reader tailing the file sees each
                    // burst as soon as the queue is empty.
                    if self.queue.is_empty() {
                        self.flush();
                    }
                }
                Command::Barrier(done) => {
                    self.settle_lost();
                    self.flush();
                    let _ = done.send(());
                }
                Command::Close(done) => {
                    self.settle_lost();
                    self.flush();
                    let _ = done.send(());
                    return;
                }
            }
        }
        self.settle_lost();
        self.flush();
    }

    fn write(&mut self, event: &TraceEvent, at: Millis) {
        if let Ok(bytes) = event::line(event, &self.session_id, at) {
            // A full disk must not take the capsule down; the record is lost, the task is not.
            let _ = self.out.write_all(&bytes);
        }
    }

    /// Reports drops no caller got to report (no record came after them).
    fn settle_lost(&mut self) {
        let lost = self.lost.swap(0, Ordering::Relaxed);
        if lost > 0 {
            self.write(&TraceEvent::TraceRecordsLost { lost }, Millis::now());
        }
    }

    fn flush(&mut self) {
        let _ = self.out.flush();
    }
}
