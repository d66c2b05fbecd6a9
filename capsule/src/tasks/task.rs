//! One task as the registry keeps it, and its A2A v1.0 ProtoJSON view (what GetTask answers).

use serde::Serialize;
use serde_json::{Map, Value};

use std::borrow::Cow;

use super::approval::Question;
use super::state::TaskState;
use crate::clock::Millis;
use crate::ids::TaskId;
use crate::provenance::Trust;

/// Who started a task, which decides who sees it (agent-card.md "Who sees a task").
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Owner {
    /// Started by the runtime itself (the launch's task) or by the operator: the session's.
    Session,
    /// Started by a request carrying a declared credential (`member:<name>` for formations).
    Credential(String),
}

impl Owner {
    /// The key a context's conversation is kept under for this owner: a harness session and
    /// an http conversation belong to the credential that started them, so another credential
    /// naming the same `contextId` starts a conversation of its own, and can neither resume
    /// nor forget this one. The session's own (the operator, a public door's callers, the
    /// launch) keep the context id as it is.
    pub fn conversation_key(&self, context_id: &str) -> String {
        match self {
            Owner::Session => context_id.to_owned(),
            // A NUL cannot be in a credential name or a context id a client can send in JSON
            // text it means to be one, so two owners' keys never meet.
            Owner::Credential(c) => format!("{c}\u{0}{context_id}"),
        }
    }
}

/// Who is asking.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Viewer {
    /// A public door's caller, or the operator: sees every task.
    Everyone,
    Credential(String),
}

impl Viewer {
    pub fn sees(&self, owner: &Owner) -> bool {
        match (self, owner) {
            (Viewer::Everyone, _) => true,
            (Viewer::Credential(v), Owner::Credential(o)) => v == o,
            (Viewer::Credential(_), Owner::Session) => false,
        }
    }

    /// The owner of a task this viewer starts.
    pub fn as_owner(&self) -> Owner {
        match self {
            Viewer::Everyone => Owner::Session,
            Viewer::Credential(c) => Owner::Credential(c.clone()),
        }
    }
}

/// What the agent is asked to do, fixed when the task is accepted. The registry holds it only
/// while the task waits in the queue: it is moved to the worker when the task starts, and never
/// kept for a task rejected at the door.
#[derive(Debug, Default)]
pub struct TaskInput {
    /// The parts joined as the spec's Parts section says, plus any referenced-tasks block.
    pub text: String,
    /// The client's `messageId` of the message that started the task.
    pub message_id: String,
    pub reference_task_ids: Vec<String>,
    pub forget_session: bool,
    /// How far the text is trusted; the task's outbound messages carry it on.
    pub trust: Trust,
    /// The message's image parts (media type, bytes), in part order, as the door checked them
    /// against `context.images`; only an http capsule takes any.
    pub images: Vec<(String, Vec<u8>)>,
    /// The span the task's attempt runs under: the door's span of the message that started it
    /// (itself continuing the caller's `traceparent`), a shell command's, or none for the
    /// launch's own task, which starts its trace.
    pub parent: Option<opentelemetry::trace::SpanContext>,
}

impl TaskInput {
    /// The heap bytes it holds.
    pub fn held_bytes(&self) -> usize {
        self.text.capacity()
            + self.message_id.capacity()
            + self
                .reference_task_ids
                .iter()
                .map(|id| id.capacity() + std::mem::size_of::<String>())
                .sum::<usize>()
            + self
                .images
                .iter()
                .map(|(m, b)| m.capacity() + b.capacity())
                .sum::<usize>()
    }
}

/// A task in the registry.
#[derive(Debug)]
pub struct Task {
    pub id: TaskId,
    pub context_id: String,
    pub owner: Owner,
    pub state: TaskState,
    /// The final status's sentence, shown as `status.message` on a terminal task.
    pub status_text: Option<String>,
    /// The last change: the status timestamp and the ListTasks position.
    pub changed_at: Millis,
    pub seq: u64,
    pub response: Option<String>,
    /// The question of a task waiting in TASK_STATE_INPUT_REQUIRED.
    pub prompt: Option<String>,
    /// When that question is an approval: what its `approval` data part says.
    pub approval: Option<Box<Question>>,
    pub residue: Vec<Value>,
    /// `metadata.murmur` of a terminal task (noAnswer, noAnswerBelow, runningCommands).
    pub murmur_metadata: Map<String, Value>,
    /// `Some` only while the task waits to start (see [`TaskInput`]).
    pub input: Option<TaskInput>,
    /// What this task counted for in the registry's byte total when it last changed.
    pub held: usize,
}

/// Roughly the heap bytes a JSON value holds: its text length, which is within a small factor
/// of its in-memory size and costs no allocation to compute.
fn json_bytes(v: &Value) -> usize {
    match v {
        Value::Null | Value::Bool(_) | Value::Number(_) => 8,
        Value::String(s) => s.len() + 2,
        Value::Array(items) => 2 + items.iter().map(|i| json_bytes(i) + 1).sum::<usize>(),
        Value::Object(map) => {
            2 + map
                .iter()
                .map(|(k, v)| k.len() + 4 + json_bytes(v))
                .sum::<usize>()
        }
    }
}

/// A task's `status`, in the spec's key order.
#[derive(Serialize)]
pub struct Status<'a> {
    state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<StatusMessage<'a>>,
    timestamp: String,
}

/// The agent's message a terminal status carries: its sentence as one text part (and a waiting
/// approval's data part after it).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusMessage<'a> {
    message_id: String,
    context_id: &'a str,
    task_id: &'a str,
    role: &'static str,
    parts: StatusParts<'a>,
}

/// The status message's parts: its sentence, then a waiting approval's data part. Written as a
/// list without building one (every GetTask of a task with a sentence renders it).
struct StatusParts<'a> {
    text: TextPart<'a>,
    approval: Option<DataPart<'a>>,
}

impl Serialize for StatusParts<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(1 + self.approval.is_some() as usize))?;
        seq.serialize_element(&self.text)?;
        if let Some(data) = &self.approval {
            seq.serialize_element(data)?;
        }
        seq.end()
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TextPart<'a> {
    text: &'a str,
    media_type: &'static str,
}

/// The task as GetTask answers it, in the spec's key order: the one definition of its JSON,
/// serialised straight to bytes for GetTask and into a tree where a caller wraps it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskView<'a> {
    id: &'a str,
    context_id: &'a str,
    status: Status<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    artifacts: Option<Vec<Artifact<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<Metadata<'a>>,
}

/// `metadata` of a terminal task: its `murmur` members.
#[derive(Serialize)]
struct Metadata<'a> {
    murmur: &'a Map<String, Value>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact<'a> {
    artifact_id: &'static str,
    name: &'static str,
    parts: Vec<Part<'a>>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Part<'a> {
    Text(TextPart<'a>),
    Data(DataPart<'a>),
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DataPart<'a> {
    data: Cow<'a, Value>,
    media_type: &'static str,
}

fn text_artifact<'a>(name: &'static str, text: &'a str) -> Artifact<'a> {
    Artifact {
        artifact_id: name,
        name,
        parts: vec![Part::Text(TextPart {
            text,
            media_type: "text/plain",
        })],
    }
}

impl Task {
    /// What the task holds, in bytes: the record itself, its ids, its status sentence, its
    /// response, prompt, residue and metadata, and its input while it still has one. The
    /// registry's byte bound counts this.
    pub fn held_bytes(&self) -> usize {
        let owner = match &self.owner {
            Owner::Session => 0,
            Owner::Credential(c) => c.capacity(),
        };
        let text = |s: &Option<String>| s.as_ref().map_or(0, String::capacity);
        std::mem::size_of::<Task>()
            + self.id.as_str().len()
            + self.context_id.capacity()
            + owner
            + text(&self.status_text)
            + text(&self.response)
            + text(&self.prompt)
            + self.approval.as_ref().map_or(0, |q| q.held_bytes())
            + self.residue.iter().map(json_bytes).sum::<usize>()
            + self
                .murmur_metadata
                .iter()
                .map(|(k, v)| k.len() + json_bytes(v))
                .sum::<usize>()
            + self.input.as_ref().map_or(0, TaskInput::held_bytes)
    }

    /// The status object as a typed view: state; a message on a terminal task that said
    /// something, and on a TASK_STATE_INPUT_REQUIRED one, where it is the question (as its
    /// prompt artifact is: a client that shows the status, as ADK does, shows what is asked);
    /// timestamp. Serialised straight to text where a stream event needs it, without building
    /// a JSON tree first (every task change renders one).
    pub fn status(&self) -> Status<'_> {
        let said = match self.state {
            s if s.is_terminal() => self.status_text.as_deref().map(|t| (t, "status")),
            TaskState::InputRequired => self.prompt.as_deref().map(|t| (t, "prompt")),
            _ => None,
        };
        let message = said.map(|(text, kind)| {
            let approval = match (self.state, &self.approval) {
                (TaskState::InputRequired, Some(q)) => Some(DataPart {
                    data: Cow::Owned(q.data()),
                    media_type: "application/json",
                }),
                _ => None,
            };
            let parts = StatusParts {
                text: TextPart {
                    text,
                    media_type: "text/plain",
                },
                approval,
            };
            StatusMessage {
                message_id: format!("msg_{}_{kind}", self.id),
                context_id: &self.context_id,
                task_id: self.id.as_str(),
                role: "ROLE_AGENT",
                parts,
            }
        });
        Status {
            state: self.state.wire(),
            message,
            timestamp: self.changed_at.rfc3339(),
        }
    }

    /// The task's artifacts, in the order response, prompt, residue.
    pub fn artifacts(&self) -> Vec<Artifact<'_>> {
        let mut out = Vec::new();
        if let (TaskState::Completed, Some(r)) = (self.state, &self.response) {
            out.push(text_artifact("response", r));
        }
        if let (TaskState::InputRequired, Some(p)) = (self.state, &self.prompt) {
            out.push(text_artifact("prompt", p));
        }
        if !self.residue.is_empty() {
            let parts = self
                .residue
                .iter()
                .map(|data| {
                    Part::Data(DataPart {
                        data: Cow::Borrowed(data),
                        media_type: "application/json",
                    })
                })
                .collect();
            out.push(Artifact {
                artifact_id: "residue",
                name: "residue",
                parts,
            });
        }
        out
    }

    /// The task as GetTask answers it. `artifacts`: `Some(true)` always writes the key (ListTasks
    /// with includeArtifacts), `Some(false)` never, `None` when there are any.
    pub fn view(&self, artifacts: Option<bool>) -> TaskView<'_> {
        let list = self.artifacts();
        let artifacts = match artifacts {
            Some(true) => Some(list),
            None if !list.is_empty() => Some(list),
            _ => None,
        };
        let metadata =
            (self.state.is_terminal() && !self.murmur_metadata.is_empty()).then_some(Metadata {
                murmur: &self.murmur_metadata,
            });
        TaskView {
            id: self.id.as_str(),
            context_id: &self.context_id,
            status: self.status(),
            artifacts,
            metadata,
        }
    }

    /// [`Task::view`] as a JSON tree, for answers that wrap or collect tasks.
    pub fn to_json(&self, artifacts: Option<bool>) -> Value {
        serde_json::to_value(self.view(artifacts)).unwrap_or_default()
    }

    /// [`Task::view`] as JSON text, for GetTask: no tree is built, and the door splices the bytes
    /// into its envelope. The same text [`Task::to_json`] prints.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(&self.view(None)).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Map, Value};

    use super::{Owner, Task, TaskState};
    use crate::clock::Millis;
    use crate::ids::TaskId;

    fn task(state: TaskState) -> Task {
        Task {
            id: TaskId::from_wire("tsk_1"),
            context_id: "ctx_\"1\"".into(),
            owner: Owner::Session,
            state,
            status_text: None,
            changed_at: Millis(1_700_000_000_123),
            seq: 1,
            response: None,
            prompt: None,
            approval: None,
            residue: Vec::new(),
            murmur_metadata: Map::new(),
            input: None,
            held: 0,
        }
    }

    /// GetTask's bytes and the tree the other answers wrap are one shape: every state, with and
    /// without a status sentence, response, prompt, residue and metadata.
    #[test]
    fn bytes_and_tree_print_the_same_text() {
        let states = [
            TaskState::Submitted,
            TaskState::Working,
            TaskState::InputRequired,
            TaskState::Completed,
            TaskState::Failed,
            TaskState::Rejected,
            TaskState::Canceled,
        ];
        let mut metadata = Map::new();
        metadata.insert("noAnswer".into(), json!(true));
        metadata.insert("runningCommands".into(), json!(["sleep 9", "é\n"]));
        for state in states {
            for mask in 0..64u8 {
                let mut t = task(state);
                let on = |bit: u8| mask & (1 << bit) != 0;
                if on(0) {
                    t.status_text = Some("done \"quoted\"\n".into());
                }
                if on(1) {
                    t.response = Some("the answer ✓".into());
                }
                if on(2) {
                    t.prompt = Some("which one?".into());
                }
                if on(3) {
                    t.residue = vec![json!({"kind": "shell", "n": 1.5}), Value::Null];
                }
                if on(4) {
                    t.murmur_metadata = metadata.clone();
                }
                if on(5) {
                    t.approval = Some(Box::new(crate::tasks::approval::Question {
                        id: crate::ids::ApprovalId::from_wire("apr_1"),
                        cli: "Claude Code",
                        tool: "Bash".into(),
                        input: json!({"command": "touch \"a\"\n"}),
                        caller_may_answer: false,
                    }));
                }
                let bytes = String::from_utf8(t.to_bytes()).unwrap();
                assert_eq!(bytes, t.to_json(None).to_string(), "{state:?} {mask}");
                for all in [Some(true), Some(false)] {
                    let tree = t.to_json(all).to_string();
                    let view = serde_json::to_string(&t.view(all)).unwrap();
                    assert_eq!(view, tree);
                }
            }
        }
    }

    #[test]
    fn a_completed_task_keeps_the_spec_shape() {
        let mut t = task(TaskState::Completed);
        t.status_text = Some("ok".into());
        t.response = Some("hi".into());
        let v: Value = serde_json::from_slice(&t.to_bytes()).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["id", "contextId", "status", "artifacts"]);
        assert_eq!(
            v["artifacts"],
            json!([{"artifactId": "response", "name": "response",
                     "parts": [{"text": "hi", "mediaType": "text/plain"}]}])
        );
        assert_eq!(v["status"]["message"]["parts"][0]["text"], "ok");
    }

    #[test]
    fn a_waiting_approval_shows_its_question_and_data_part() {
        let mut t = task(TaskState::InputRequired);
        t.prompt = Some("Claude Code asks to run Bash: touch a".into());
        t.approval = Some(Box::new(crate::tasks::approval::Question {
            id: crate::ids::ApprovalId::from_wire("apr_1"),
            cli: "Claude Code",
            tool: "Bash".into(),
            input: json!({"command": "touch a"}),
            caller_may_answer: false,
        }));
        let v: Value = serde_json::from_slice(&t.to_bytes()).unwrap();
        assert_eq!(
            v["status"]["message"]["parts"],
            json!([
                {"text": "Claude Code asks to run Bash: touch a", "mediaType": "text/plain"},
                {"data": {"kind": "approval", "approval_id": "apr_1", "tool": "Bash",
                          "input": {"command": "touch a"}},
                 "mediaType": "application/json"}
            ])
        );
        assert_eq!(v["artifacts"][0]["artifactId"], "prompt");
        assert_eq!(
            v["artifacts"][0]["parts"][0]["text"],
            "Claude Code asks to run Bash: touch a"
        );
    }
}
