//! The session's event log (DESIGN §9): every task change becomes numbered A2A stream events
//! (artifactUpdate, statusUpdate), kept in a replay buffer of the last 1024 and broadcast to
//! live streams. Event ids are per session and strictly increasing across tasks.

mod sse;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::sync::broadcast;

pub use sse::{frame_result, open, SseBody, StreamSpec};

use crate::door::STREAM_URI;
use crate::tasks::{Task, TaskState};

/// The replay buffer's length.
pub const REPLAY: usize = 1024;
/// How far a live stream may fall behind before it gets a `lagged` frame.
const LIVE_CAPACITY: usize = 256;

/// One numbered event: a StreamResponse `result`, serialised once for every stream.
#[derive(Debug)]
pub struct Event {
    pub id: u64,
    pub task_id: String,
    /// The `result` member, as JSON text.
    pub result: String,
    /// This event is the task's terminal status: a task's stream ends after it.
    pub ends_task: bool,
}

struct Log {
    next_id: u64,
    buffer: VecDeque<Arc<Event>>,
}

pub struct EventLog {
    log: Mutex<Log>,
    live: broadcast::Sender<Arc<Event>>,
}

impl Default for EventLog {
    fn default() -> Self {
        EventLog {
            log: Mutex::new(Log {
                next_id: 1,
                buffer: VecDeque::with_capacity(REPLAY),
            }),
            live: broadcast::channel(LIVE_CAPACITY).0,
        }
    }
}

impl EventLog {
    fn push(&self, task_id: &str, result: Value, ends_task: bool) {
        let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        let event = Arc::new(Event {
            id: log.next_id,
            task_id: task_id.to_owned(),
            result: result.to_string(),
            ends_task,
        });
        log.next_id += 1;
        if log.buffer.len() == REPLAY {
            log.buffer.pop_front();
        }
        log.buffer.push_back(event.clone());
        // Sent under the log lock so live streams see events in id order.
        let _ = self.live.send(event);
    }

    /// Records a task change: its artifact (response or prompt) when it has one, then its status.
    /// Called by the registry under its own lock, so events follow the order of changes.
    pub fn record(&self, task: &Task) {
        let ids = (task.id.as_str(), task.context_id.as_str());
        if matches!(task.state, TaskState::Completed | TaskState::InputRequired) {
            for artifact in task.artifacts() {
                let update = json!({"artifactUpdate": {
                    "taskId": ids.0, "contextId": ids.1, "artifact": artifact,
                }});
                self.push(ids.0, update, false);
            }
        }
        let status = json!({"statusUpdate": {
            "taskId": ids.0, "contextId": ids.1, "status": task.status_json(),
        }});
        self.push(ids.0, status, task.state.is_terminal());
    }

    /// A murmur frame about a task (a harness turn's text, …), numbered like any event.
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
        let mut result = frame_result(text, meta);
        result["message"]["contextId"] = json!(context_id);
        result["message"]["taskId"] = json!(task_id);
        self.push(task_id, result, false);
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.live.subscribe()
    }

    /// The id of the newest event (0 before any).
    pub fn last_id(&self) -> u64 {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).next_id - 1
    }

    /// The buffered events after `after`, and whether the buffer lost any of them (a gap).
    pub fn replay_after(&self, after: u64) -> (bool, Vec<Arc<Event>>) {
        let log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        let oldest = log.buffer.front().map(|e| e.id).unwrap_or(log.next_id);
        let gap = after + 1 < oldest;
        let events = log
            .buffer
            .iter()
            .filter(|e| e.id > after)
            .cloned()
            .collect();
        (gap, events)
    }
}

/// The metadata key frames ride under.
pub fn frame_metadata(meta: Value) -> Value {
    json!({ STREAM_URI: meta })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_serves_what_the_buffer_holds_and_reports_a_gap_past_it() {
        let log = EventLog::default();
        for n in 0..(REPLAY + 10) {
            log.push("tsk_x", json!({ "n": n }), false);
        }
        assert_eq!(log.last_id(), (REPLAY + 10) as u64);
        let (gap, events) = log.replay_after(REPLAY as u64);
        assert!(!gap);
        assert_eq!(events.len(), 10);
        assert_eq!(events[0].id, REPLAY as u64 + 1);
        let (gap, events) = log.replay_after(3);
        assert!(gap, "events 4..=10 fell out of the buffer");
        assert_eq!(events.len(), REPLAY);
        let (gap, _) = log.replay_after(10);
        assert!(!gap, "the buffer starts at 11: nothing after 10 is lost");
    }

    #[test]
    fn a_live_subscriber_sees_events_in_order() {
        let log = EventLog::default();
        let mut rx = log.subscribe();
        log.push("a", json!(1), false);
        log.push("b", json!(2), true);
        assert_eq!(rx.try_recv().map(|e| e.id).ok(), Some(1));
        let second = rx.try_recv().ok();
        assert_eq!(
            second.as_ref().map(|e| (e.id, e.ends_task)),
            Some((2, true))
        );
    }
}
