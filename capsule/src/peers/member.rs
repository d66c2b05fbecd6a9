//! `call-member NAME TEXT` (DESIGN §7): a message to a formation member this capsule's wiring
//! names, with the `member:<self>` token, waited on until the member's task settles, and
//! recorded as one `member_call` with its status. A call that gives no answer goes into the
//! calling task's noAnswerBelow, with what the member's task reported below it.

use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::client::{Failure, PeerDoor};
use super::exchange::{state_of, Ending, Exchange};
use super::{message, text_of};
use crate::errands::below::{self, NoAnswer};
use crate::errands::Ticket;
use crate::ids::TaskId;
use crate::policy;
use crate::session::Session;
use crate::tasks::TaskState;
use crate::telemetry::{keys, Kind, Span};
use crate::trace::{CallStatus, TraceEvent};
use crate::wiring::Callee;

/// How one member call ended, as the helper is told and the trace records it.
#[derive(Debug, Clone, PartialEq)]
pub struct Called {
    pub member: String,
    pub status: CallStatus,
    /// The member's task, when it took one.
    pub task_id: Option<String>,
    pub context_id: Option<String>,
    /// The member's answer, on `completed`.
    pub answer: Option<String>,
    /// Why there is no answer, on every other status.
    pub reason: Option<String>,
    /// What the member's task reported below it.
    pub reported: Vec<(String, CallStatus)>,
}

impl Called {
    /// What the control surface answers: `member`, `status`, `task_id`, `context_id`, then
    /// `answer` (completed) or `reason` (anything else).
    pub fn to_json(&self) -> Value {
        let mut v = Map::new();
        v.insert("member".into(), Value::from(self.member.as_str()));
        v.insert("status".into(), Value::from(self.status.as_str()));
        v.insert("task_id".into(), self.task_id.clone().into());
        v.insert("context_id".into(), self.context_id.clone().into());
        match (&self.answer, &self.reason) {
            (Some(a), _) => v.insert("answer".into(), Value::from(a.as_str())),
            (None, r) => v.insert("reason".into(), r.clone().unwrap_or_default().into()),
        };
        Value::Object(v)
    }
}

/// Calls `member` (whose door and token `callee` holds) with `text` for the task `caller`,
/// waiting at most `within`. Writes the `member_call` record, and notes a call without an
/// answer in the task's errands, before the ticket is let go.
pub async fn call(
    session: &Session,
    caller: &TaskId,
    member: &str,
    callee: &Callee,
    text: &str,
    within: Duration,
    mut ticket: Ticket,
) -> Called {
    let began = Instant::now();
    let mut span = Span::start(
        format!("call-member {member}"),
        Kind::Client,
        Some(&ticket.span),
    );
    span.set(keys::A2A_METHOD, "SendMessage");
    span.set(keys::CALLED_MEMBER, member.to_owned());
    span.set(keys::SERVER_ADDRESS, policy::shown(&callee.url));
    let called = match policy::check(&session.allow, &callee.url) {
        // The wiring's own callee is on the list by construction; a refusal means the wiring
        // and the list disagree, and nothing is sent either way.
        Err(refusal) => {
            session.trace.event(TraceEvent::NetworkRefused {
                caller_task_id: caller.clone(),
                destination: policy::shown(&callee.url),
                reason: refusal.reason.clone(),
            });
            unanswered(member, CallStatus::Unreachable, None, refusal.reason)
        }
        Ok(allowed) => {
            let door = PeerDoor::new(allowed, Some(callee.token.clone())).traced(span.context());
            let exchange = Exchange {
                trace: &session.trace,
                door: &door,
                caller,
                trust: ticket.trust,
                within,
            };
            let ending = exchange
                .run(message(text, None, None), &mut ticket.stop)
                .await;
            // A member waiting for input would wait for ever: call-member cannot reply.
            if let Ending::Settled(task) = &ending {
                if state_of(task) == Some(TaskState::InputRequired) {
                    let _ = exchange
                        .cancel(&text_of(task, "id").unwrap_or_default())
                        .await;
                }
            }
            judge(member, ending, within, ticket.stop.was_canceled())
        }
    };
    span.set(keys::CALL_STATUS, called.status.as_str());
    span.set_some(keys::A2A_TASK, called.task_id.clone());
    span.set_some(keys::CONVERSATION, called.context_id.clone());
    if called.status != CallStatus::Completed {
        let why = called.reason.clone().unwrap_or_default();
        span.fail(called.status.as_str(), why);
    }
    span.end(&session.trace);
    session.trace.event(TraceEvent::MemberCall {
        member: member.to_owned(),
        status: called.status,
        caller_task_id: caller.clone(),
        task_id: called.task_id.clone(),
        context_id: called.context_id.clone(),
        duration_ms: began.elapsed().as_millis() as u64,
        reason: called.reason.clone(),
    });
    if called.status != CallStatus::Completed {
        session.errands.gave_no_answer(
            caller,
            NoAnswer {
                member: member.to_owned(),
                status: called.status,
                reported: called.reported.clone(),
            },
        );
    }
    drop(ticket);
    called
}

fn unanswered(member: &str, status: CallStatus, task: Option<&Value>, reason: String) -> Called {
    Called {
        member: member.to_owned(),
        status,
        task_id: task.and_then(|t| text_of(t, "id")),
        context_id: task.and_then(|t| text_of(t, "contextId")),
        answer: None,
        reason: Some(reason),
        reported: task.map(below::reported_by).unwrap_or_default(),
    }
}

/// The text of a task's `response` artifact.
pub fn response_of(task: &Value) -> Option<String> {
    let artifact = task
        .get("artifacts")?
        .as_array()?
        .iter()
        .find(|a| a.get("artifactId").and_then(Value::as_str) == Some("response"))?;
    let texts: Vec<&str> = artifact
        .get("parts")?
        .as_array()?
        .iter()
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n"))
}

/// The sentence of a task's final status, when it has one.
fn status_message(task: &Value) -> Option<String> {
    let parts = task.pointer("/status/message/parts")?.as_array()?;
    let texts: Vec<&str> = parts
        .iter()
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect();
    (!texts.is_empty()).then(|| texts.join(" "))
}

fn with_message(head: String, task: &Value) -> String {
    match status_message(task) {
        Some(m) => format!("{head}: {m}"),
        None => head,
    }
}

/// The status an exchange's ending gives a member call, and why.
pub fn judge(member: &str, ending: Ending, within: Duration, stopped_by_cancel: bool) -> Called {
    let id_of = |t: &Value| text_of(t, "id").unwrap_or_default();
    match ending {
        Ending::NotSent(Failure::Unreachable(why)) => unanswered(
            member,
            CallStatus::Unreachable,
            None,
            format!("cannot reach its door: {why}"),
        ),
        Ending::NotSent(refused) => unanswered(
            member,
            CallStatus::Rejected,
            None,
            format!("its door refused the message: {refused}"),
        ),
        Ending::Lost { task, why } => {
            let reason = format!(
                "its door could not say how its task {} stands: {why}",
                id_of(&task)
            );
            unanswered(member, CallStatus::Unreachable, Some(&task), reason)
        }
        Ending::TimedOut { task } => {
            let reason = format!(
                "no answer within {} s; its task {} was canceled",
                within.as_secs(),
                id_of(&task)
            );
            unanswered(member, CallStatus::TimedOut, Some(&task), reason)
        }
        Ending::Stopped { task } => {
            let why = match stopped_by_cancel {
                true => "this task was canceled",
                false => "this task's attempt ended",
            };
            let reason = format!("{why}, so its task {} was canceled", id_of(&task));
            unanswered(member, CallStatus::Canceled, Some(&task), reason)
        }
        Ending::Settled(task) => settled(member, task),
    }
}

fn settled(member: &str, task: Value) -> Called {
    let id = text_of(&task, "id").unwrap_or_default();
    let no_answer_flag = task.pointer("/metadata/murmur/noAnswer") == Some(&Value::Bool(true));
    let (status, reason) = match state_of(&task) {
        Some(TaskState::Completed) => match response_of(&task) {
            Some(answer) => {
                return Called {
                    member: member.to_owned(),
                    status: CallStatus::Completed,
                    task_id: Some(id),
                    context_id: text_of(&task, "contextId"),
                    answer: Some(answer),
                    reason: None,
                    reported: below::reported_by(&task),
                }
            }
            None => (
                CallStatus::NoAnswer,
                format!("its task {id} completed without an answer"),
            ),
        },
        Some(TaskState::Failed) if no_answer_flag => (
            CallStatus::NoAnswer,
            with_message(format!("its task {id} ended without an answer"), &task),
        ),
        Some(TaskState::Failed) => (
            CallStatus::Failed,
            with_message(format!("its task {id} failed"), &task),
        ),
        Some(TaskState::Canceled) => (
            CallStatus::Canceled,
            with_message(format!("its task {id} was canceled"), &task),
        ),
        Some(TaskState::Rejected) => (
            CallStatus::Rejected,
            with_message(format!("its task {id} was rejected"), &task),
        ),
        Some(TaskState::InputRequired) => {
            let question = task
                .get("artifacts")
                .and_then(Value::as_array)
                .and_then(|a| {
                    a.iter()
                        .find(|a| a.get("artifactId") == Some(&Value::from("prompt")))
                })
                .and_then(|a| a.pointer("/parts/0/text"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            (
                CallStatus::NoAnswer,
                format!("its task {id} asked for input call-member cannot give ({question:?}); it was canceled"),
            )
        }
        // Not settled, or a state no door writes: nothing to read an answer from.
        _ => (
            CallStatus::Failed,
            format!("its task {id} ended in a state this capsule does not know"),
        ),
    };
    unanswered(member, status, Some(&task), reason)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn task(state: &str, extra: Value) -> Value {
        let mut t = json!({"id": "tsk_m", "contextId": "ctx_m", "status": {"state": state}});
        if let (Value::Object(t), Value::Object(extra)) = (&mut t, extra) {
            t.extend(extra);
        }
        t
    }

    fn status(ending: Ending) -> (CallStatus, Option<String>, Option<String>) {
        let c = judge("coder", ending, Duration::from_secs(7), false);
        (c.status, c.answer, c.reason)
    }

    #[test]
    fn every_ending_has_its_status() {
        use CallStatus::*;
        let response = json!({"artifacts": [{"artifactId": "response", "name": "response",
            "parts": [{"text": "four", "mediaType": "text/plain"}]}]});
        assert_eq!(
            status(Ending::Settled(task("TASK_STATE_COMPLETED", response))),
            (Completed, Some("four".into()), None)
        );
        let says = |text: &str| json!({"status": {"message": {"parts": [{"text": text}]}}});
        let failed = task("TASK_STATE_FAILED", json!({}));
        let mut failed_said = failed.clone();
        failed_said["status"] =
            json!({"state": "TASK_STATE_FAILED", "message": says("boom")["status"]["message"]});
        assert_eq!(status(Ending::Settled(failed)).0, Failed);
        assert_eq!(
            status(Ending::Settled(failed_said)).2.as_deref(),
            Some("its task tsk_m failed: boom")
        );
        let no_answer = task(
            "TASK_STATE_FAILED",
            json!({"metadata": {"murmur": {"noAnswer": true}}}),
        );
        assert_eq!(status(Ending::Settled(no_answer)).0, NoAnswer);
        assert_eq!(
            status(Ending::Settled(task("TASK_STATE_COMPLETED", json!({})))).0,
            NoAnswer,
            "completed without a response"
        );
        assert_eq!(
            status(Ending::Settled(task("TASK_STATE_CANCELED", json!({})))).0,
            Canceled
        );
        assert_eq!(
            status(Ending::Settled(task("TASK_STATE_REJECTED", json!({})))).0,
            Rejected
        );
        let asks = task(
            "TASK_STATE_INPUT_REQUIRED",
            json!({"artifacts": [{"artifactId": "prompt",
            "parts": [{"text": "which?"}]}]}),
        );
        let (s, _, why) = status(Ending::Settled(asks));
        assert_eq!(s, NoAnswer);
        assert!(why.unwrap_or_default().contains("\"which?\""));
        assert_eq!(
            status(Ending::NotSent(Failure::Unreachable("refused".into()))).0,
            Unreachable
        );
        assert_eq!(
            status(Ending::NotSent(Failure::Refused {
                status: 403,
                error: "peer_not_accepted".into(),
                message: "m".into()
            }))
            .2
            .as_deref(),
            Some("its door refused the message: HTTP 403 peer_not_accepted: m")
        );
        assert_eq!(
            status(Ending::NotSent(Failure::Rpc {
                code: -32602,
                message: "x".into()
            }))
            .0,
            Rejected
        );
        let working = task("TASK_STATE_WORKING", json!({}));
        assert_eq!(
            status(Ending::TimedOut {
                task: working.clone()
            })
            .2
            .as_deref(),
            Some("no answer within 7 s; its task tsk_m was canceled")
        );
        assert_eq!(
            status(Ending::Stopped {
                task: working.clone()
            })
            .0,
            Canceled
        );
        assert_eq!(
            status(Ending::Lost {
                task: working,
                why: "gone".into()
            })
            .0,
            Unreachable
        );
        let by_cancel = judge(
            "coder",
            Ending::Stopped {
                task: task("TASK_STATE_CANCELED", json!({})),
            },
            Duration::from_secs(1),
            true,
        );
        assert_eq!(
            by_cancel.reason.as_deref(),
            Some("this task was canceled, so its task tsk_m was canceled")
        );
    }

    #[test]
    fn what_a_member_reported_below_it_is_kept() {
        let t = task(
            "TASK_STATE_FAILED",
            json!({"metadata": {"murmur": {"noAnswer": true,
                "noAnswerBelow": [{"member": "q", "status": "timed_out"}]}}}),
        );
        let c = judge("p", Ending::Settled(t), Duration::from_secs(1), false);
        assert_eq!(c.reported, vec![("q".to_owned(), CallStatus::TimedOut)]);
        assert_eq!(
            c.to_json(),
            json!({"member": "p", "status": "no_answer", "task_id": "tsk_m",
                   "context_id": "ctx_m", "reason": "its task tsk_m ended without an answer"})
        );
    }
}
