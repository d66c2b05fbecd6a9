//! Completions (DESIGN §7, agent-card.md "Completion errors"): what a sub-capsule sends its
//! parent when its launch task ends, and what the parent's door keeps to know which completions
//! it awaits.
//!
//! The child sends one `SendMessage` whose message carries one data part, [`Completion`]:
//!
//! ```json
//! {"delegation_id": "dlg_…", "child_session_id": "ses_…", "state": "completed",
//!  "response": "…", "reason": null}
//! ```
//!
//! `state` is the child task's final state in murmur's words (completed, failed, canceled,
//! rejected); `response` is its answer when it completed (`null` otherwise); `reason` is its
//! final status message otherwise (`null` when it completed).
//!
//! The parent keeps, per delegation a task of its awaits, the task, the sha256 of the
//! delegation's completion token (on an authenticated door: the child holds no door token,
//! so this token admits exactly that delegation's completion and nothing else), and where to
//! hand the completion. Only digests are kept; the token itself goes to the supervisor once.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::sync::oneshot;

use crate::ids::{DelegationId, TaskId};
use crate::tasks::Outcome;
use crate::trace::DelegationState;

/// The data part of a completion.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub delegation_id: String,
    pub child_session_id: String,
    pub state: DelegationState,
    pub response: Option<String>,
    pub reason: Option<String>,
}

impl Completion {
    /// What a child's launch task's outcome says to its parent.
    pub fn of(delegation_id: &str, child_session_id: &str, outcome: &Outcome) -> Completion {
        let (state, response, reason) = match outcome {
            Outcome::Completed(answer) => (DelegationState::Completed, Some(answer.clone()), None),
            Outcome::Failed(why) => (DelegationState::Failed, None, Some(why.clone())),
            Outcome::NoAnswer(why) => (
                DelegationState::Failed,
                None,
                Some(format!("the task ended without an answer: {why}")),
            ),
            Outcome::CanceledEnded(why) => (
                DelegationState::Canceled,
                None,
                Some(why.clone().unwrap_or_else(|| "task canceled".into())),
            ),
        };
        Completion {
            delegation_id: delegation_id.to_owned(),
            child_session_id: child_session_id.to_owned(),
            state,
            response,
            reason,
        }
    }

    pub fn to_json(&self) -> Value {
        json!({
            "delegation_id": self.delegation_id,
            "child_session_id": self.child_session_id,
            "state": self.state.as_str(),
            "response": self.response,
            "reason": self.reason,
        })
    }

    /// The `SendMessage` params a child posts.
    pub fn params(&self) -> Value {
        json!({"message": {
            "messageId": crate::ids::MessageId::mint().as_str(),
            // The child is the parent door's client here.
            "role": "ROLE_USER",
            "parts": [{"data": self.to_json(), "mediaType": "application/json"}],
        }})
    }

    /// Reads the completion of `delegation` out of a SendMessage's params: the first data part
    /// naming that delegation. A completion the parent cannot read still ends the wait, as a
    /// failure saying so, so the delegating task is never left waiting on a garbled message.
    pub fn read(delegation: &str, params: Option<&Value>) -> Completion {
        let parts = params
            .and_then(|p| p.pointer("/message/parts"))
            .and_then(Value::as_array);
        let data = parts.into_iter().flatten().find_map(|p| {
            p.get("data")
                .and_then(Value::as_object)
                .filter(|d| d.get("delegation_id").and_then(Value::as_str) == Some(delegation))
        });
        let unreadable = |why: &str| Completion {
            delegation_id: delegation.to_owned(),
            child_session_id: String::new(),
            state: DelegationState::Failed,
            response: None,
            reason: Some(format!(
                "the sub-capsule's completion could not be read: {why}"
            )),
        };
        let Some(data) = data else {
            return unreadable("it carries no data part naming this delegation");
        };
        let text =
            |d: &Map<String, Value>, k: &str| d.get(k).and_then(Value::as_str).map(str::to_owned);
        let state = text(data, "state")
            .and_then(|s| DelegationState::parse(&s))
            .filter(|s| {
                matches!(
                    s,
                    DelegationState::Completed
                        | DelegationState::Failed
                        | DelegationState::Canceled
                        | DelegationState::Rejected
                )
            });
        let Some(state) = state else {
            return unreadable("its state is not completed, failed, canceled or rejected");
        };
        Completion {
            delegation_id: delegation.to_owned(),
            child_session_id: text(data, "child_session_id").unwrap_or_default(),
            state,
            response: text(data, "response"),
            reason: text(data, "reason"),
        }
    }
}

/// The acknowledgement a door answers an accepted completion with (agent-card.md "A
/// completion:"), in the context of the task that awaited it.
pub fn acknowledgement(delegation: &str, context_id: &str) -> Value {
    json!({"message": {
        "messageId": format!("msg_{delegation}_received"),
        "contextId": context_id,
        "role": "ROLE_AGENT",
        "parts": [{"data": {"delegation_id": delegation, "received": true},
                   "mediaType": "application/json"}],
    }})
}

struct Entry {
    task: TaskId,
    token: Option<[u8; 32]>,
    /// Taken by the one completion delivered.
    deliver: Option<oneshot::Sender<Completion>>,
    /// The delegating task stopped waiting and is ending the child: a completion is refused
    /// -31002 (the token still opens the door, so the child hears why).
    ending: bool,
}

/// Why a completion is not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotAwaited {
    /// No task here waits for it (never did, or it is over).
    Unknown,
    /// Its task is ending it.
    Ending,
}

/// The delegations this session's tasks await.
#[derive(Default)]
pub struct Awaited {
    entries: Mutex<HashMap<String, Entry>>,
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl Awaited {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `task` awaits `delegation`'s completion, presented with `token` when there is one (only
    /// its digest is kept). Answers where the completion will arrive.
    pub fn expect(
        &self,
        delegation: &DelegationId,
        task: &TaskId,
        token: Option<&str>,
    ) -> oneshot::Receiver<Completion> {
        let (tx, rx) = oneshot::channel();
        self.lock().insert(
            delegation.as_str().to_owned(),
            Entry {
                task: task.clone(),
                token: token.map(digest),
                deliver: Some(tx),
                ending: false,
            },
        );
        rx
    }

    /// Step 2: whether `token` is the completion token of `delegation` (constant time).
    pub fn admits(&self, delegation: &str, token: &str) -> bool {
        let presented = digest(token);
        self.lock()
            .get(delegation)
            .and_then(|e| e.token)
            .is_some_and(|t| bool::from(t.ct_eq(&presented)))
    }

    /// The task awaiting `delegation`, if it still does.
    pub fn task_of(&self, delegation: &str) -> Result<TaskId, NotAwaited> {
        match self.lock().get(delegation) {
            None => Err(NotAwaited::Unknown),
            Some(e) if e.ending || e.deliver.is_none() => Err(NotAwaited::Ending),
            Some(e) => Ok(e.task.clone()),
        }
    }

    /// Hands `completion` to the task awaiting it; answers that task.
    pub fn deliver(&self, completion: Completion) -> Result<TaskId, NotAwaited> {
        let mut entries = self.lock();
        let entry = entries
            .get_mut(&completion.delegation_id)
            .ok_or(NotAwaited::Unknown)?;
        if entry.ending {
            return Err(NotAwaited::Ending);
        }
        let tx = entry.deliver.take().ok_or(NotAwaited::Ending)?;
        let task = entry.task.clone();
        // The waiter gone (its task's run stopped at that instant) is its own ending.
        let _ = tx.send(completion);
        Ok(task)
    }

    /// The task stopped waiting: completions from here on are refused.
    pub fn ending(&self, delegation: &DelegationId) {
        if let Some(e) = self.lock().get_mut(delegation.as_str()) {
            e.ending = true;
        }
    }

    /// The delegation is over: its token opens nothing any more.
    pub fn forget(&self, delegation: &DelegationId) {
        self.lock().remove(delegation.as_str());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_part_a_child_sends_and_its_parent_reads() {
        let done = Completion::of("dlg_1", "ses_2", &Outcome::Completed("four".into()));
        assert_eq!(
            done.to_json(),
            json!({"delegation_id": "dlg_1", "child_session_id": "ses_2", "state": "completed",
                   "response": "four", "reason": null})
        );
        let params = done.params();
        assert_eq!(params["message"]["role"], "ROLE_USER");
        assert_eq!(
            params["message"]["parts"][0]["mediaType"],
            "application/json"
        );
        assert_eq!(Completion::read("dlg_1", Some(&params)), done);
        let failed = Completion::of("dlg_1", "ses_2", &Outcome::Failed("boom".into()));
        assert_eq!(
            failed.to_json(),
            json!({"delegation_id": "dlg_1", "child_session_id": "ses_2", "state": "failed",
                   "response": null, "reason": "boom"})
        );
        let canceled = Completion::of("dlg_1", "ses_2", &Outcome::CanceledEnded(None));
        assert_eq!(canceled.state, DelegationState::Canceled);
        assert_eq!(canceled.reason.as_deref(), Some("task canceled"));
    }

    #[test]
    fn an_unreadable_completion_reads_as_a_failure_saying_so() {
        let other = Completion::of("dlg_other", "ses_2", &Outcome::Completed("x".into()));
        let read = Completion::read("dlg_1", Some(&other.params()));
        assert_eq!(read.state, DelegationState::Failed);
        assert!(read
            .reason
            .unwrap()
            .contains("no data part naming this delegation"));
        let ended =
            json!({"message": {"parts": [{"data": {"delegation_id": "dlg_1", "state": "ended"}}]}});
        assert_eq!(
            Completion::read("dlg_1", Some(&ended)).state,
            DelegationState::Failed
        );
        assert_eq!(
            Completion::read("dlg_1", None).state,
            DelegationState::Failed
        );
    }

    #[test]
    fn the_acknowledgement_is_spelled_as_the_spec_shows() {
        assert_eq!(
            acknowledgement("dlg_1", "ctx_1"),
            json!({"message": {"messageId": "msg_dlg_1_received", "contextId": "ctx_1",
                "role": "ROLE_AGENT",
                "parts": [{"data": {"delegation_id": "dlg_1", "received": true},
                           "mediaType": "application/json"}]}})
        );
    }

    #[test]
    fn a_token_admits_only_its_delegation_and_one_completion_is_delivered() {
        let awaited = Awaited::default();
        let (d, task) = (DelegationId::mint(), TaskId::mint());
        let other = DelegationId::mint();
        let mut rx = awaited.expect(&d, &task, Some("secret"));
        let _rx2 = awaited.expect(&other, &task, None);
        assert!(awaited.admits(d.as_str(), "secret"));
        assert!(!awaited.admits(d.as_str(), "secrets"));
        assert!(!awaited.admits(other.as_str(), "secret"));
        assert!(!awaited.admits("dlg_none", "secret"));
        let c = Completion::of(d.as_str(), "ses_2", &Outcome::Completed("a".into()));
        assert_eq!(awaited.deliver(c.clone()), Ok(task));
        assert_eq!(rx.try_recv(), Ok(c.clone()));
        assert_eq!(awaited.deliver(c), Err(NotAwaited::Ending), "only once");
        awaited.ending(&other);
        assert_eq!(awaited.task_of(other.as_str()), Err(NotAwaited::Ending));
        awaited.forget(&d);
        assert!(!awaited.admits(d.as_str(), "secret"));
        assert_eq!(awaited.task_of(d.as_str()), Err(NotAwaited::Unknown));
    }
}
