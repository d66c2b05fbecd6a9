//! The five operations a task's agent may run through its capsule (DESIGN §8): request-input,
//! send-message, call-member, delegate-task and end-without-answer. A harness reaches them
//! through its helper commands and the door's control surface (`door::control`); an http
//! capsule's agent loop calls them in-process as tools (`agent::tools`). Both run exactly this
//! code: the allow list, credentials, errands and trace records are the same either way.
//!
//! Each answers a JSON value on success, or a [`Refusal`]: the control surface's HTTP status,
//! code and sentence, which the loop hands the model as the tool's error.

pub mod args;
mod call_member;
mod delegate_task;
pub mod delegation;
mod end_without_answer;
mod request_input;
mod send_message;

pub use call_member::call_member;
pub use delegate_task::delegate_task;
pub use end_without_answer::{end_without_answer, TOLD};
pub use request_input::request_input;
pub use send_message::{send_message, SendArgs};

use crate::errands::Refused;
use crate::ids::TaskId;
use crate::session::Session;
use crate::telemetry::{keys, Kind, Span, SpanContext};

/// The `execute_tool {tool}` span of one operation, under its task's attempt span: a helper
/// the harness ran, or a tool the http loop called (the `bash` tool's too).
pub fn tool_span(session: &Session, task: &TaskId, tool: &'static str) -> Span {
    let parent = session.errands.span_of(task);
    let name = format!("{} {tool}", keys::EXECUTE_TOOL);
    let mut span = Span::start(name, Kind::Internal, parent.as_ref());
    span.set(keys::OPERATION, keys::EXECUTE_TOOL);
    span.set(keys::TOOL_NAME, tool);
    span.set(keys::TOOL_TYPE, "function");
    span.set(keys::A2A_TASK, task.as_str().to_owned());
    span
}

/// Runs an operation inside its `execute_tool {tool}` span, which `run` is handed (the calls it
/// makes go under it), failed with the refusal's code when it was refused.
async fn traced<T, F>(
    session: &Session,
    task: &TaskId,
    tool: &'static str,
    run: impl FnOnce(SpanContext) -> F,
) -> Result<T, Refusal>
where
    F: std::future::Future<Output = Result<T, Refusal>>,
{
    let span = tool_span(session, task, tool);
    let outcome = run(span.context().clone()).await;
    end_tool(session, span, &outcome);
    outcome
}

/// Ends an operation's span, failed with the refusal's code when it was refused.
fn end_tool<T>(session: &Session, mut span: Span, outcome: &Result<T, Refusal>) {
    if let Err(r) = outcome {
        span.fail(r.code, r.message.clone());
    }
    span.end(&session.trace);
}

/// Why an operation did not run (or ran without an outcome).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The HTTP status the control surface answers with.
    pub status: u16,
    /// The control surface's `error` code, e.g. `unknown_member`.
    pub code: &'static str,
    /// The sentence saying why.
    pub message: String,
    /// What to check, when the code's own hint would not fit (a TLS failure's certificate
    /// name and CAs, say). The helper prints it in place of its own.
    pub hint: Option<String>,
}

impl Refusal {
    pub fn new(status: u16, code: &'static str, message: impl Into<String>) -> Refusal {
        Refusal {
            status,
            code,
            message: message.into(),
            hint: None,
        }
    }

    pub fn with_hint(self, hint: impl Into<String>) -> Refusal {
        Refusal {
            hint: Some(hint.into()),
            ..self
        }
    }

    /// A task whose errands refuse a new call or ending.
    fn errands(r: Refused) -> Refusal {
        let code = match r {
            Refused::NotRunning => "task_not_running",
            Refused::EndingWithoutAnswer => "task_ending",
        };
        Refusal::new(409, code, r.message())
    }

    /// A call that ended inside the capsule without an outcome (it panicked).
    fn lost() -> Refusal {
        Refusal::new(500, "internal", "the call failed inside the capsule")
    }
}
