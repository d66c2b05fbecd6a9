//! The tools an http capsule's model is offered (DESIGN §8), with their JSON schemas: the five
//! operations, dispatched to the shared code (`crate::operations`) a harness's helper commands
//! reach through the control surface, so the allow list, credentials, errands and trace records
//! are the same whichever transport asked; and, when `capabilities.shell.allow` lists a command,
//! the `bash` tool (`crate::shell`).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::inference::ToolSpec;
use crate::operations::{self, args, Refusal, SendArgs, TOLD};
use crate::peers::{DEFAULT_WAIT_SECS, MAX_WAIT_SECS};
use crate::session::Session;
use crate::shell::{Call, Shell};

/// How long request-input waits for a reply when the model names no `timeout_secs`.
pub const INPUT_WAIT_SECS: u64 = 1800;

/// The tool that ends the task without an answer.
pub const END_WITHOUT_ANSWER: &str = "end-without-answer";

/// The tools, as the model of a capsule whose shell allow list is `shell_allow` is offered
/// them: the five operations, then `bash` when the list names a command.
pub fn specs(shell_allow: &[String]) -> Vec<ToolSpec> {
    let mut specs = operation_specs();
    if !shell_allow.is_empty() {
        specs.push(crate::shell::spec(shell_allow));
    }
    specs
}

/// The names of the tools the model is offered beyond the five operations, as the agent card's
/// capsule extension lists them.
pub fn offered_beyond_operations(shell_allow: &[String]) -> Vec<&'static str> {
    match shell_allow.is_empty() {
        true => vec![],
        false => vec![crate::shell::TOOL],
    }
}

fn operation_specs() -> Vec<ToolSpec> {
    let timeout = json!({"type": "integer", "minimum": 1, "maximum": MAX_WAIT_SECS,
        "description": "How many seconds to wait at most."});
    vec![
        ToolSpec {
            name: "call-member",
            description: "Give a text to one of the formation members this capsule may call, and wait for its answer.".into(),
            schema: json!({"type": "object", "properties": {
                "member": {"type": "string", "description": "The member's name."},
                "text": {"type": "string", "description": "What to ask it."},
                "timeout_secs": timeout}, "required": ["member", "text"]}),
        },
        ToolSpec {
            name: "delegate-task",
            description: "Start a sub-capsule (one of the capsules capabilities.delegate.allow lists) with a text as its task, and wait for its response.".into(),
            schema: json!({"type": "object", "properties": {
                "capsule": {"type": "string", "description": "The sub-capsule's name."},
                "text": {"type": "string", "description": "Its task."},
                "timeout_secs": timeout}, "required": ["capsule", "text"]}),
        },
        ToolSpec {
            name: "send-message",
            description: "Send a text to the A2A agent at a URL this capsule's network allow list names, and wait until its task settles; answers that task.".into(),
            schema: json!({"type": "object", "properties": {
                "url": {"type": "string", "description": "The agent's address, e.g. http://localhost:52222."},
                "text": {"type": "string"},
                "context_id": {"type": "string", "description": "Continue this conversation with the agent."},
                "task_id": {"type": "string", "description": "Reply to this task of the agent's, which waits for input."},
                "timeout_secs": timeout}, "required": ["url", "text"]}),
        },
        ToolSpec {
            name: "request-input",
            description: "Ask the person who sent the task a question, and wait for the reply.".into(),
            schema: json!({"type": "object", "properties": {
                "question": {"type": "string"},
                "timeout_secs": timeout}, "required": ["question"]}),
        },
        ToolSpec {
            name: END_WITHOUT_ANSWER,
            description: "End the task without an answer: it fails with the reason, marked as having no answer. Call no tool after it.".into(),
            schema: json!({"type": "object", "properties": {
                "reason": {"type": "string"}}, "required": ["reason"]}),
        },
    ]
}

/// What a tool call answered, for the model; and whether the task's loop must stop.
pub struct Answered {
    pub content: String,
    pub is_error: bool,
    pub stops: Option<Stops>,
}

/// A tool outcome that ends the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stops {
    /// request-input waited past its bound.
    InputTimedOut(u64),
    /// end-without-answer was accepted: the task ends as it said.
    WithoutAnswer,
}

fn ok(v: Value) -> Answered {
    Answered {
        content: v.to_string(),
        is_error: false,
        stops: None,
    }
}

fn err(message: String) -> Answered {
    Answered {
        content: message,
        is_error: true,
        stops: None,
    }
}

fn refused(r: Refusal) -> Answered {
    err(json!({"error": r.code, "message": r.message}).to_string())
}

/// Runs the tool `name` with the model's `arguments` (JSON text) for `call`'s task; `shell` is
/// what runs the `bash` tool's commands, when the capsule grants a shell.
pub async fn run(
    session: &Arc<Session>,
    shell: Option<&Shell>,
    call: Call<'_>,
    name: &str,
    arguments: &str,
) -> Answered {
    let task = call.task;
    let given: Map<String, Value> =
        match serde_json::from_str::<Value>(if arguments.trim().is_empty() {
            "{}"
        } else {
            arguments
        }) {
            Ok(Value::Object(m)) => m,
            _ => return err(format!("the arguments of {name} must be a JSON object")),
        };
    if name == crate::shell::TOOL {
        if let Some(shell) = shell {
            let mut span = operations::tool_span(session, task, crate::shell::TOOL);
            let ran = crate::shell::tool(session, shell, call, &given).await;
            if let Err((code, message)) = &ran {
                span.fail(code, message.clone());
            }
            span.end(&session.trace);
            return match ran {
                Ok(v) => ok(v),
                Err((code, message)) => err(json!({"error": code, "message": message}).to_string()),
            };
        }
    }
    let text = |key: &str| args::text(&given, key);
    let within = match args::timeout(&given) {
        Ok(w) => w,
        Err(why) => return err(why),
    };
    let call_within = within.unwrap_or(Duration::from_secs(DEFAULT_WAIT_SECS));
    match name {
        "call-member" => {
            let (Some(member), Some(message)) = (text("member"), text("text")) else {
                return err("call-member takes a non-empty member and a non-empty text".into());
            };
            match operations::call_member(session, task, member, message, call_within).await {
                Ok(v) => ok(v),
                Err(r) => refused(r),
            }
        }
        "delegate-task" => {
            let (Some(capsule), Some(message)) = (text("capsule"), text("text")) else {
                return err("delegate-task takes a non-empty capsule and a non-empty text".into());
            };
            match operations::delegate_task(session, task, capsule, message, call_within).await {
                Ok(v) => ok(v),
                Err(r) => refused(r),
            }
        }
        "send-message" => {
            let (Some(url), Some(message)) = (text("url"), text("text")) else {
                return err("send-message takes a non-empty url and a non-empty text".into());
            };
            let (context_id, task_id) = match (
                args::optional_text(&given, "context_id"),
                args::optional_text(&given, "task_id"),
            ) {
                (Ok(c), Ok(t)) => (c, t),
                (Err(why), _) | (_, Err(why)) => return err(why),
            };
            let send = SendArgs {
                url,
                text: message,
                context_id,
                task_id,
                within: call_within,
            };
            match operations::send_message(session, task, send).await {
                Ok(v) => ok(v),
                Err(r) => refused(r),
            }
        }
        "request-input" => {
            let Some(question) = text("question") else {
                return err("request-input takes a non-empty question".into());
            };
            let bound = within.unwrap_or(Duration::from_secs(INPUT_WAIT_SECS));
            match operations::request_input(session, task, question, Some(bound)).await {
                Ok(reply) => ok(json!({ "reply": reply })),
                Err(r) if r.code == "input_timed_out" => Answered {
                    stops: Some(Stops::InputTimedOut(bound.as_secs())),
                    ..refused(r)
                },
                Err(r) => refused(r),
            }
        }
        END_WITHOUT_ANSWER => {
            let Some(reason) = text("reason") else {
                return err("end-without-answer takes a non-empty reason".into());
            };
            match operations::end_without_answer(session, task, reason) {
                Ok(()) => Answered {
                    stops: Some(Stops::WithoutAnswer),
                    ..ok(json!({"ended": true, "message": TOLD}))
                },
                Err(r) => refused(r),
            }
        }
        other => err(format!(
            "there is no tool {other}; the tools are call-member, delegate-task, send-message, request-input and end-without-answer"
        )),
    }
}
