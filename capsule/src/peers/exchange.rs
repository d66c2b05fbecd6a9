//! One message to a peer and the wait for its task: SendMessage with `returnImmediately`, then
//! the task's own stream (SubscribeToTask) until it says the task settled (completed, failed,
//! canceled, rejected, or waiting for input), and GetTask for the task as it settled; where no
//! stream can be had, or it breaks, GetTask polls instead. Waiting stops at the call's deadline, when this capsule's own task is canceled or
//! its attempt ends, or when the peer stops answering; in the first two cases the peer's task
//! is canceled (CancelTask), since nobody will read its answer. Each message a peer answered
//! is traced `a2a_send`. A task waiting for an approval (its status carries an `approval` data
//! part) has not settled: the wait goes on with the deadline paused, since a person, not the
//! caller, answers it.
//!
//! Not a held SendMessage: the task's id is known (and traced, and cancelable) from the first
//! answer. The stream tells the end the moment it happens (a poll would learn it late by up to
//! its interval); every request besides it is answered at once and bounded
//! (`client::ANSWER_WITHIN`).

use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

use super::client::{Failure, PeerDoor};
use super::text_of;
use crate::errands::Stop;
use crate::ids::TaskId;
use crate::provenance::Trust;
use crate::tasks::TaskState;
use crate::trace::{Trace, TraceEvent};

/// How long a CancelTask sent on the way out may take.
pub const CANCEL_WITHIN: Duration = Duration::from_secs(5);
/// GetTask intervals: from the first, doubling up to the last.
const FIRST_POLL: Duration = Duration::from_millis(1);
const LAST_POLL: Duration = Duration::from_millis(250);
/// How often a wait on a stream also asks GetTask, against a stream that went quiet.
const STREAM_CHECK: Duration = Duration::from_secs(1);
/// A peer that cannot be reached this many times in a row while its task runs is lost.
const MISSES: u32 = 3;

/// Who sends, to which door, and how long to wait.
pub struct Exchange<'a> {
    pub trace: &'a Trace,
    pub door: &'a PeerDoor,
    /// The task of this capsule the message is sent for.
    pub caller: &'a TaskId,
    pub trust: Trust,
    pub within: Duration,
}

/// How an exchange ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Ending {
    /// The peer answered no task: it was not reached, or it refused the message.
    NotSent(Failure),
    /// The peer's task settled; as GetTask (or the first answer) showed it.
    Settled(Value),
    /// The peer could not say how its task stands (unreachable, or an answer that is not the
    /// task) while it ran; the task as last seen.
    Lost { task: Value, why: String },
    /// The deadline passed first; the peer's task was canceled.
    TimedOut { task: Value },
    /// This capsule's task was canceled or its attempt ended; the peer's task was canceled.
    Stopped { task: Value },
}

/// True for a state a stream names that ends the wait.
fn settles(state: &str) -> bool {
    TaskState::from_wire(state).is_some_and(TaskState::is_settled)
}

/// True for a task waiting in TASK_STATE_INPUT_REQUIRED for an approval
/// (`harness.approvals: ask`), which the caller does not answer.
pub fn awaits_approval(task: &Value) -> bool {
    state_of(task) == Some(TaskState::InputRequired)
        && task
            .pointer("/status/message/parts")
            .and_then(Value::as_array)
            .is_some_and(|parts| {
                parts
                    .iter()
                    .any(|p| p.pointer("/data/kind").and_then(Value::as_str) == Some("approval"))
            })
}

/// The call's deadline, paused while the peer's task waits for an approval.
struct Deadline {
    at: Instant,
    paused_since: Option<Instant>,
}

impl Deadline {
    /// Pauses or resumes it as the task now stands.
    fn follow(&mut self, task: &Value) {
        match (awaits_approval(task), self.paused_since) {
            (true, None) => self.paused_since = Some(Instant::now()),
            (false, Some(since)) => {
                self.at += since.elapsed();
                self.paused_since = None;
            }
            _ => {}
        }
    }

    /// When the wait gives up: never while paused (the peer's own approval timeout bounds it).
    async fn passed(&self) {
        match self.paused_since {
            Some(_) => std::future::pending().await,
            None => tokio::time::sleep_until(self.at).await,
        }
    }
}

/// Where a task stands, when it says.
pub fn state_of(task: &Value) -> Option<TaskState> {
    task.pointer("/status/state")
        .and_then(Value::as_str)
        .and_then(TaskState::from_wire)
}

impl Exchange<'_> {
    /// Sends `message` (an A2A Message) and waits for its task.
    pub async fn run(&self, message: Value, stop: &mut Stop) -> Ending {
        let mut deadline = Deadline {
            at: Instant::now() + self.within,
            paused_since: None,
        };
        let message_id = text_of(&message, "messageId").unwrap_or_default();
        let params = json!({"message": message, "configuration": {"returnImmediately": true}});
        let taken = self
            .door
            .call("SendMessage", params, self.trust)
            .await
            .and_then(|result| {
                result
                    .get("task")
                    .filter(|t| t.get("id").is_some_and(Value::is_string))
                    .cloned()
                    .ok_or_else(|| {
                        Failure::Unreadable("the peer answered the message with no task".into())
                    })
            });
        // Traced once the peer answered, whatever it answered; a peer never reached saw nothing.
        if !matches!(taken, Err(Failure::Unreachable(_) | Failure::Tls(_))) {
            let task = taken.as_ref().ok();
            self.trace.event(TraceEvent::A2aSend {
                peer_url: self.door.peer_url(),
                message_id,
                task_id: task.and_then(|t| text_of(t, "id")),
                context_id: task.and_then(|t| text_of(t, "contextId")),
                caller_task_id: self.caller.clone(),
            });
        }
        let mut task = match taken {
            Ok(task) => task,
            Err(failure) => return Ending::NotSent(failure),
        };
        let id = text_of(&task, "id").unwrap_or_default();
        // Told, not asked: the task's own stream says the moment it settles. Polling is the
        // fallback for a stream that cannot be had or breaks.
        let mut events =
            match state_of(&task).is_some_and(TaskState::is_settled) && !awaits_approval(&task) {
                true => None,
                false => self.door.subscribe(&id, self.trust).await.ok(),
            };
        let mut pause = FIRST_POLL;
        let mut misses = 0;
        loop {
            deadline.follow(&task);
            let waiting = deadline.paused_since.is_some();
            if state_of(&task).is_some_and(TaskState::is_settled) && !waiting {
                return Ending::Settled(task);
            }
            if let Some(stream) = events.as_mut() {
                let said = tokio::select! {
                    _ = stop.fired() => Err(false),
                    _ = deadline.passed() => Err(true),
                    said = stream.next_state() => Ok(said),
                    // A stream that goes quiet must not hold the wait: ask now and then.
                    _ = tokio::time::sleep(STREAM_CHECK) => Ok(Some(String::new())),
                };
                match said {
                    Err(timed_out) => return self.give_up(&id, task, timed_out).await,
                    Ok(Some(state)) if state.is_empty() || settles(&state) || waiting => {
                        // The stream carries the state; the task as GetTask shows it carries
                        // the answer.
                        match self
                            .door
                            .call("GetTask", json!({"id": id}), self.trust)
                            .await
                        {
                            Ok(now) => task = now,
                            Err(_) => events = None,
                        }
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => events = None,
                }
                continue;
            }
            let waited = tokio::select! {
                _ = stop.fired() => Some(false),
                _ = deadline.passed() => Some(true),
                _ = tokio::time::sleep(pause) => None,
            };
            if let Some(timed_out) = waited {
                return self.give_up(&id, task, timed_out).await;
            }
            pause = (pause * 2).min(LAST_POLL);
            let polled = tokio::select! {
                _ = stop.fired() => Err(false),
                _ = deadline.passed() => Err(true),
                polled = self.door.call("GetTask", json!({"id": id}), self.trust) => Ok(polled),
            };
            match polled {
                Err(timed_out) => return self.give_up(&id, task, timed_out).await,
                Ok(Ok(now)) => {
                    task = now;
                    misses = 0;
                }
                Ok(Err(Failure::Unreachable(why))) => {
                    misses += 1;
                    if misses >= MISSES {
                        return Ending::Lost { task, why };
                    }
                }
                Ok(Err(other)) => {
                    return Ending::Lost {
                        task,
                        why: other.to_string(),
                    }
                }
            }
        }
    }

    /// Stops waiting: cancels the peer's task. A task that ended meanwhile is answered as it
    /// ended, since it settled before the cancel could land.
    async fn give_up(&self, id: &str, last: Value, timed_out: bool) -> Ending {
        match self.cancel(id).await {
            Cancel::Canceled(task) => match timed_out {
                true => Ending::TimedOut { task },
                false => Ending::Stopped { task },
            },
            Cancel::AlreadyEnded(task) => Ending::Settled(task),
            Cancel::Failed => {
                let task = last;
                match timed_out {
                    true => Ending::TimedOut { task },
                    false => Ending::Stopped { task },
                }
            }
        }
    }

    /// CancelTask on the peer, bounded by [`CANCEL_WITHIN`].
    pub async fn cancel(&self, id: &str) -> Cancel {
        let call = async {
            match self
                .door
                .call("CancelTask", json!({"id": id}), self.trust)
                .await
            {
                Ok(task) => Cancel::Canceled(task),
                // -32002: it had already ended; read how.
                Err(Failure::Rpc { code: -32002, .. }) => {
                    match self
                        .door
                        .call("GetTask", json!({"id": id}), self.trust)
                        .await
                    {
                        Ok(task) => Cancel::AlreadyEnded(task),
                        Err(_) => Cancel::Failed,
                    }
                }
                Err(_) => Cancel::Failed,
            }
        };
        tokio::time::timeout(CANCEL_WITHIN, call)
            .await
            .unwrap_or(Cancel::Failed)
    }
}

/// What a CancelTask on the way out found.
pub enum Cancel {
    Canceled(Value),
    AlreadyEnded(Value),
    Failed,
}
