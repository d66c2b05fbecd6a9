//! The operator's side of approvals (docs/agent-clis.md "Approvals"): the questions a running
//! session's tasks wait on (a TASK_STATE_INPUT_REQUIRED task whose status carries an `approval`
//! data part), read with the operator's token, and the answer sent back as a SendMessage naming
//! the task with the data part `{"approval_id", "decision", "reason"}`. `mur approve`, `mur deny`,
//! `mur top` and `mur watch` read and answer them through here.

use serde_json::{json, Value};

pub use capsule::tasks::approval::Decision;

use crate::client::{self, DoorRef};
use crate::error::{CliError, CliResult, Code};
use crate::records::RunningCapsule;
use crate::terminal::field;

/// The most questions one listing reads: each is a task of the session, and a session holds
/// one running task (and its queue) at a time.
const PAGE: u64 = 100;

/// One open question.
#[derive(Clone, Debug, PartialEq)]
pub struct Open {
    pub task_id: String,
    pub context_id: String,
    pub approval_id: String,
    pub tool: String,
    pub input: Value,
    /// The task's own sentence (`Claude Code asks to run Bash: …`).
    pub sentence: String,
}

impl Open {
    /// The question a task waits on, when it waits on one.
    pub fn of(task: &Value) -> Option<Open> {
        if task.pointer("/status/state").and_then(Value::as_str)
            != Some("TASK_STATE_INPUT_REQUIRED")
        {
            return None;
        }
        let parts = task.pointer("/status/message/parts")?.as_array()?;
        let data = parts
            .iter()
            .filter_map(|p| p.get("data"))
            .find(|d| d.get("kind").and_then(Value::as_str) == Some("approval"))?;
        let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_owned();
        Some(Open {
            task_id: text(task.get("id")),
            context_id: text(task.get("contextId")),
            approval_id: text(data.get("approval_id")),
            tool: text(data.get("tool")),
            input: data.get("input").cloned().unwrap_or(Value::Null),
            sentence: parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(" "),
        })
    }

    /// What it asks, on one line and shown, never obeyed: the tool and its main input.
    pub fn shown(&self) -> String {
        let input = match main_input(&self.tool, &self.input) {
            Some(s) => s.to_owned(),
            None => self.input.to_string(),
        };
        format!("{}: {}", field(&self.tool), field(&input))
    }
}

/// The input a person decides on, as the capsule's question names it.
fn main_input<'v>(tool: &str, input: &'v Value) -> Option<&'v str> {
    capsule::tasks::approval::main_input(tool, input)
}

/// Every question the session's tasks wait on, oldest task first.
pub async fn open(rec: &RunningCapsule) -> CliResult<Vec<Open>> {
    let door = DoorRef::of(rec);
    let params = json!({"status": "TASK_STATE_INPUT_REQUIRED", "pageSize": PAGE});
    let listed = client::rpc(&door, "ListTasks", params)
        .await?
        .map_err(|e| crate::stopping::refused(&rec.url, &e))?;
    let mut open: Vec<Open> = listed
        .get("tasks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Open::of)
        .collect();
    // ListTasks answers the most recently changed first.
    open.reverse();
    Ok(open)
}

/// Answers `question`; the task goes on at once (the answer does not wait for it to end).
pub async fn answer(
    rec: &RunningCapsule,
    question: &Open,
    decision: Decision,
    reason: Option<&str>,
) -> CliResult<()> {
    let door = DoorRef::of(rec);
    let mut data = json!({"approval_id": question.approval_id, "decision": decision.word()});
    if let Some(r) = reason {
        data["reason"] = json!(r);
    }
    let params = json!({
        "message": {
            "messageId": capsule::ids::MessageId::mint().to_string(),
            "role": "ROLE_USER",
            "taskId": question.task_id,
            "contextId": question.context_id,
            "parts": [{"data": data, "mediaType": "application/json"}],
        },
        "configuration": {"returnImmediately": true},
    });
    client::rpc(&door, "SendMessage", params)
        .await?
        .map(|_| ())
        .map_err(|e| crate::stopping::refused(&rec.url, &e))
}

/// The question `wanted` names (an approval id or a task id), or the only one open.
pub fn pick<'q>(open: &'q [Open], wanted: Option<&str>, address: &str) -> CliResult<&'q Open> {
    match (wanted, open) {
        (Some(w), _) => open
            .iter()
            .find(|q| q.approval_id == w || q.task_id == w)
            .ok_or_else(|| {
                CliError::new(
                    Code::BadArgument,
                    format!(
                        "no open question of {} is {}{}",
                        field(address),
                        field(w),
                        listing(open)
                    ),
                    format!(
                        "name one of them, or run `mur top {}` to see them",
                        field(address)
                    ),
                )
            }),
        (None, []) => Err(CliError::new(
            Code::BadArgument,
            format!("no task of {} waits for an approval", field(address)),
            "a question shows as TASK_STATE_INPUT_REQUIRED in `mur ps` and `mur top`",
        )),
        (None, [only]) => Ok(only),
        (None, _) => Err(CliError::new(
            Code::BadArgument,
            format!(
                "{} questions of {} are open{}",
                open.len(),
                field(address),
                listing(open)
            ),
            format!("name one: mur approve {} APPROVAL_ID", field(address)),
        )),
    }
}

/// `: apr_… (tsk_…) Bash: touch x; …` for a refusal's sentence.
fn listing(open: &[Open]) -> String {
    if open.is_empty() {
        return String::new();
    }
    let each: Vec<String> = open
        .iter()
        .map(|q| {
            format!(
                "{} ({}) {}",
                field(&q.approval_id),
                field(&q.task_id),
                q.shown()
            )
        })
        .collect();
    format!(": {}", each.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting(id: &str, command: &str) -> Value {
        json!({"id": id, "contextId": "ctx_1", "status": {"state": "TASK_STATE_INPUT_REQUIRED",
            "message": {"parts": [
                {"text": format!("Claude Code asks to run Bash: {command}"), "mediaType": "text/plain"},
                {"data": {"kind": "approval", "approval_id": format!("apr_{id}"), "tool": "Bash",
                          "input": {"command": command}}, "mediaType": "application/json"}]}}})
    }

    #[test]
    fn a_question_is_read_from_the_waiting_tasks_status() {
        let q = Open::of(&waiting("t1", "touch a")).unwrap();
        assert_eq!(
            (q.task_id.as_str(), q.approval_id.as_str(), q.tool.as_str()),
            ("t1", "apr_t1", "Bash")
        );
        assert_eq!(q.sentence, "Claude Code asks to run Bash: touch a");
        assert_eq!(q.shown(), "Bash: touch a");
        let mut plain = waiting("t2", "x");
        plain["status"]["message"]["parts"]
            .as_array_mut()
            .unwrap()
            .pop();
        assert_eq!(Open::of(&plain), None, "a question that is no approval");
        let mut working = waiting("t3", "x");
        working["status"]["state"] = json!("TASK_STATE_WORKING");
        assert_eq!(Open::of(&working), None);
    }

    #[test]
    fn an_input_holding_controls_is_shown_not_obeyed() {
        let q = Open::of(&waiting("t1", "echo \u{1b}]0;owned\u{7}")).unwrap();
        assert!(!q.shown().contains('\u{1b}'), "{}", q.shown());
    }

    #[test]
    fn a_question_is_picked_by_id_or_as_the_only_one() {
        let one = vec![Open::of(&waiting("t1", "a")).unwrap()];
        assert_eq!(pick(&one, None, "@1").unwrap().task_id, "t1");
        let two = vec![one[0].clone(), Open::of(&waiting("t2", "b")).unwrap()];
        let e = pick(&two, None, "@1").unwrap_err().to_string();
        assert!(
            e.contains("2 questions of @1 are open: apr_t1 (t1) Bash: a; apr_t2 (t2) Bash: b"),
            "{e}"
        );
        assert_eq!(pick(&two, Some("apr_t2"), "@1").unwrap().task_id, "t2");
        assert_eq!(pick(&two, Some("t1"), "@1").unwrap().task_id, "t1");
        let e = pick(&two, Some("apr_x"), "@1").unwrap_err().to_string();
        assert!(e.contains("no open question of @1 is apr_x"), "{e}");
        let e = pick(&[], None, "@1").unwrap_err().to_string();
        assert!(e.contains("no task of @1 waits for an approval"), "{e}");
    }
}
