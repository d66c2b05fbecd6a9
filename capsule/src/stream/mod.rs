//! The session's event log (DESIGN §9): every task change becomes numbered A2A stream events
//! (artifactUpdate, statusUpdate), kept in a replay buffer of the last 1024 events, and of at
//! most [`REPLAY_BYTES`] between them. Event ids are per session and strictly increasing across
//! tasks. Live streams read from the same buffer (they are woken when it grows), so an event
//! is held once, by the buffer, however many streams follow it: a stream that falls behind
//! what the buffer keeps is told so (a `gap` frame on a reconnect, `lagged` after) instead of
//! making the capsule hold what it has not read.

mod sse;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;
use serde_json::{json, Value};
use tokio::sync::watch;

pub use sse::{frame_result, open, SseBody, StreamSpec};

use crate::tasks::{Status, Task, TaskState};

/// The stream extension's URI: frames ride in `metadata` under it, and a request names it in
/// A2A-Extensions to have them.
pub const STREAM_URI: &str =
    "https://docs.murmur.nexus/reference/streaming-protocol/#murmur-stream-v1";

/// The replay buffer's length.
pub const REPLAY: usize = 1024;
/// What the replay buffer's events may hold between them. One event can carry a whole task
/// response (up to 8 MiB from a harness), so 1024 of them could be 8 GiB; 32 MiB keeps the
/// last four such answers, or the last 1024 ordinary events. The newest event is always kept.
pub const REPLAY_BYTES: usize = 32 << 20;

/// A statusUpdate event's `result`, in the spec's key order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusEvent<'a> {
    status_update: StatusUpdate<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusUpdate<'a> {
    task_id: &'a str,
    context_id: &'a str,
    status: Status<'a>,
}

/// What a status event does to its task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Settles {
    No,
    /// TASK_STATE_INPUT_REQUIRED: the task waits for a reply.
    Pauses,
    /// A terminal status.
    Ends,
}

/// What holds the session's changes beyond the process (the store): a stream writes an event
/// only once the change it reports is kept, so no client sees what a crash could take back.
pub trait Keeper: Send + Sync {
    /// Returns once the change at registry position `seq` is kept.
    fn kept(
        &self,
        seq: u64,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>>;
}

/// One numbered event: a StreamResponse `result`, serialised once for every stream.
#[derive(Debug)]
pub struct Event {
    pub id: u64,
    /// The registry position of the task change it reports; 0 for a frame, which reports none.
    pub seq: u64,
    pub task_id: String,
    /// The `result` member, as JSON text.
    pub result: String,
    /// This event is the task's terminal status: a task's stream ends after it.
    pub ends_task: bool,
    /// This event is the task's TASK_STATE_INPUT_REQUIRED status: SendStreamingMessage's stream
    /// ends after it.
    pub pauses_task: bool,
}

impl Event {
    /// What the event holds, as the replay buffer counts it.
    fn held_bytes(&self) -> usize {
        std::mem::size_of::<Event>() + self.task_id.capacity() + self.result.capacity()
    }
}

/// The events after a stream's position, and how many it can no longer have.
#[derive(Debug, Default)]
pub struct Batch {
    /// Events after the position that fell out of the buffer before they were read.
    pub lost: u64,
    pub events: Vec<Arc<Event>>,
}

struct Log {
    next_id: u64,
    buffer: VecDeque<Arc<Event>>,
    /// The sum of the buffered events' [`Event::held_bytes`].
    bytes: usize,
}

pub struct EventLog {
    log: Mutex<Log>,
    /// The newest event's id: live streams wait on it and then read the buffer.
    newest: watch::Sender<u64>,
    limits: (usize, usize),
}

impl Default for EventLog {
    fn default() -> Self {
        EventLog::with_limits(REPLAY, REPLAY_BYTES)
    }
}

impl EventLog {
    /// A log keeping at most `events` events holding at most `bytes` (see [`REPLAY`]).
    pub fn with_limits(events: usize, bytes: usize) -> Self {
        EventLog {
            log: Mutex::new(Log {
                next_id: 1,
                buffer: VecDeque::new(),
                bytes: 0,
            }),
            newest: watch::channel(0).0,
            limits: (events.max(1), bytes),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Numbers the events from `id + 1` on: a restarted capsule goes on from the ids its
    /// store kept, so a client's Last-Event-ID from before never names a different event.
    pub fn continue_after(&self, id: u64) {
        let mut log = self.lock();
        log.next_id = log.next_id.max(id + 1);
        drop(log);
        self.newest.send_if_modified(|n| {
            let was = *n;
            *n = (*n).max(id);
            *n != was
        });
    }

    fn push(&self, task_id: &str, seq: u64, result: Value) {
        self.push_text(task_id, seq, result.to_string(), Settles::No);
    }

    fn push_text(&self, task_id: &str, seq: u64, mut result: String, settles: Settles) {
        // Serialising grows its buffer by doubling: give back the slack of an event kept for
        // replay (a large one is its own mapping, which shrinks in place).
        result.shrink_to_fit();
        let mut log = self.lock();
        let event = Arc::new(Event {
            id: log.next_id,
            seq,
            task_id: task_id.to_owned(),
            result,
            ends_task: settles == Settles::Ends,
            pauses_task: settles == Settles::Pauses,
        });
        let size = event.held_bytes();
        let (events, bytes) = self.limits;
        while log.buffer.len() >= events || (log.bytes + size > bytes && !log.buffer.is_empty()) {
            if let Some(old) = log.buffer.pop_front() {
                log.bytes -= old.held_bytes();
            }
        }
        let id = event.id;
        log.next_id += 1;
        log.bytes += size;
        log.buffer.push_back(event);
        drop(log);
        self.newest.send_replace(id);
    }

    /// Records a task change: its artifact (response or prompt) when it has one, then its status.
    /// Called by the registry under its own lock, so events follow the order of changes.
    pub fn record(&self, task: &Task) {
        let ids = (task.id.as_str(), task.context_id.as_str());
        if matches!(task.state, TaskState::Completed | TaskState::InputRequired) {
            for artifact in task.artifacts() {
                // Each artifact is written whole: its one chunk is its last (ADK, for one, keeps
                // no artifact that does not say so).
                let update = json!({"artifactUpdate": {
                    "taskId": ids.0, "contextId": ids.1, "artifact": artifact, "lastChunk": true,
                }});
                self.push(ids.0, task.seq, update);
            }
        }
        // Rendered straight to text: this runs for every change, under the registry's lock.
        let status = StatusEvent {
            status_update: StatusUpdate {
                task_id: ids.0,
                context_id: ids.1,
                status: task.status(),
            },
        };
        let text = serde_json::to_string(&status).unwrap_or_default();
        let settles = match task.state {
            s if s.is_terminal() => Settles::Ends,
            TaskState::InputRequired => Settles::Pauses,
            _ => Settles::No,
        };
        self.push_text(ids.0, task.seq, text, settles);
    }

    /// A murmur frame about a task (a harness turn's text, …), numbered like any event. Its
    /// message's keys come in the order of every other task message (the spec's status
    /// messages): messageId, contextId, taskId, role, parts, then the frame's metadata.
    pub fn frame_for(
        &self,
        task_id: &str,
        context_id: &str,
        frame: &str,
        text: &str,
        extra: Value,
    ) {
        let mut meta = json!({ "frame": frame });
        if let (Some(m), Value::Object(x)) = (meta.as_object_mut(), extra) {
            m.extend(x);
        }
        let result = json!({ "message": {
            "messageId": crate::ids::MessageId::mint().as_str(),
            "contextId": context_id,
            "taskId": task_id,
            "role": "ROLE_AGENT",
            "parts": [{"mediaType": "text/plain", "text": text}],
            "metadata": frame_metadata(meta),
        }});
        self.push(task_id, 0, result);
    }

    /// A working task's progress note (the http loop's `inference turn N`): a statusUpdate in
    /// TASK_STATE_WORKING whose message says it, as the spec's WatchSession example shows. The
    /// task's state does not change; only streams see the note.
    pub fn working_note(&self, task_id: &str, context_id: &str, text: &str) {
        let status = json!({"statusUpdate": {
            "taskId": task_id, "contextId": context_id,
            "status": {
                "state": TaskState::Working.wire(),
                "message": {
                    "messageId": crate::ids::MessageId::mint().to_string(),
                    "contextId": context_id, "taskId": task_id, "role": "ROLE_AGENT",
                    "parts": [{"mediaType": "text/plain", "text": text}],
                },
                "timestamp": crate::clock::Millis::now().rfc3339(),
            },
        }});
        self.push(task_id, 0, status);
    }

    /// Wakes on every new event (it carries the newest id).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.newest.subscribe()
    }

    /// The id of the newest event (0 before any).
    pub fn last_id(&self) -> u64 {
        self.lock().next_id - 1
    }

    /// What the buffered events hold between them, in bytes.
    pub fn held_bytes(&self) -> usize {
        self.lock().bytes
    }

    /// Up to `max` buffered events after `after`, and how many events after `after` the buffer
    /// no longer has (a `gap` on a reconnect, `lagged` for a live stream).
    pub fn after(&self, after: u64, max: usize) -> Batch {
        let log = self.lock();
        let oldest = log.buffer.front().map_or(log.next_id, |e| e.id);
        let lost = oldest.saturating_sub(after.saturating_add(1));
        // Ids are consecutive in the buffer, so the first wanted one is found by arithmetic.
        let first = after.saturating_add(1).saturating_sub(oldest);
        let first = usize::try_from(first).unwrap_or(usize::MAX);
        let events = (first..first.saturating_add(max))
            .map_while(|i| log.buffer.get(i).cloned())
            .collect();
        Batch { lost, events }
    }
}

/// The metadata key frames ride under.
pub fn frame_metadata(meta: Value) -> Value {
    json!({ STREAM_URI: meta })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(batch: &Batch) -> Vec<u64> {
        batch.events.iter().map(|e| e.id).collect()
    }

    #[test]
    fn replay_serves_what_the_buffer_holds_and_reports_a_gap_past_it() {
        let log = EventLog::default();
        for n in 0..(REPLAY + 10) {
            log.push("tsk_x", 0, json!({ "n": n }));
        }
        assert_eq!(log.last_id(), (REPLAY + 10) as u64);
        let recent = log.after(REPLAY as u64, usize::MAX);
        assert_eq!(recent.lost, 0);
        assert_eq!(recent.events.len(), 10);
        assert_eq!(recent.events[0].id, REPLAY as u64 + 1);
        let old = log.after(3, usize::MAX);
        assert_eq!(old.lost, 7, "events 4..=10 fell out of the buffer");
        assert_eq!(old.events.len(), REPLAY);
        assert_eq!(log.after(10, usize::MAX).lost, 0, "the buffer starts at 11");
        assert_eq!(ids(&log.after(1030, 2)), [1031, 1032], "at most max");
        let end = log.after(5000, usize::MAX);
        assert_eq!(
            (end.lost, end.events.len()),
            (0, 0),
            "nothing after the newest"
        );
    }

    #[test]
    fn the_buffer_is_bounded_by_bytes_and_keeps_the_newest_event() {
        let big = "r".repeat(100 << 10);
        let log = EventLog::with_limits(REPLAY, 1 << 20);
        for _ in 0..30 {
            log.push("tsk_x", 0, json!({ "artifact": big }));
            assert!(log.held_bytes() <= 1 << 20, "{}", log.held_bytes());
        }
        let kept = log.after(0, usize::MAX);
        assert!(
            (8..=10).contains(&kept.events.len()),
            "1 MiB holds about ten 100 KiB events, not {}",
            kept.events.len()
        );
        assert_eq!(kept.events.last().map(|e| e.id), Some(30));
        assert_eq!(kept.lost, 30 - kept.events.len() as u64, "a gap past them");
        // An event larger than the whole bound still replaces everything before it.
        log.push_text(
            "tsk_x",
            0,
            json!({ "artifact": "r".repeat(2 << 20) }).to_string(),
            Settles::Ends,
        );
        let last = log.after(0, usize::MAX);
        assert_eq!(ids(&last), [31]);
        assert!(last.events[0].ends_task);
        // Small events fill in behind it once it is pushed out.
        log.push("tsk_x", 0, json!(1));
        assert_eq!(ids(&log.after(0, usize::MAX)), [32]);
    }

    #[test]
    fn a_subscriber_is_woken_with_the_newest_id() {
        let log = EventLog::default();
        let mut rx = log.subscribe();
        log.push("a", 0, json!(1));
        log.push_text("b", 0, "2".into(), Settles::Ends);
        log.push_text("c", 0, "3".into(), Settles::Pauses);
        assert_eq!(rx.has_changed().ok(), Some(true));
        assert_eq!(*rx.borrow_and_update(), 3);
        let batch = log.after(0, usize::MAX);
        let read: Vec<(u64, bool, bool)> = batch
            .events
            .iter()
            .map(|e| (e.id, e.ends_task, e.pauses_task))
            .collect();
        assert_eq!(
            read,
            [(1, false, false), (2, true, false), (3, false, true)]
        );
    }
}
