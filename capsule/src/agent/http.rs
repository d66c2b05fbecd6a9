//! The http transport's agent loop: up to `inference.max_turns` calls to the provider, each
//! streamed into `text` / `thinking` / `tool-call-*` frames and recorded as an `inference`
//! trace record; the tools the model asks for run through the shared operations and their
//! results go back to it; its final text is the task's answer. The conversation of a contextId
//! continues across its tasks. A cancel drops the call in flight at once (its connection with
//! it).

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};
use tokio::sync::watch;

use super::tools::{self, Stops};
use crate::ids::TaskId;
use crate::inference::{
    Block, CallError, Delta, Driver, Msg, Reply, Request, Role, Stop, ToolCall,
};
use crate::session::Session;
use crate::tasks::TaskInput;
use crate::telemetry::{keys, Kind, Span};
use crate::trace::{Interrupted, TraceEvent};

/// What the model is told when a reply was cut at `max_tokens` with turns left.
const GO_ON: &str = "Your reply was cut off at the token limit. Continue exactly where it stopped.";

/// Why an http task did not finish: the guide's "Final status.state" table, one variant a
/// cause. The sentence is the task's status message and its `task_failed` cause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// An inference call failed (after its retries).
    Inference(CallError),
    /// The model ended a turn with no text and no tool call.
    NoText,
    /// A request-input wait timed out.
    InputTimedOut(u64),
    /// Every turn `inference.max_turns` allows was used.
    TurnsExhausted(u32),
    /// Two turns in a row stopped at `max_tokens` with no text and no tool call.
    CutTwice(u32),
    /// `inference.max_total_tokens` was passed.
    SpendCeiling { spent: u64, ceiling: u64 },
    /// A `spend:` ceiling refused the next call; the sentence names it.
    Spend(String),
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cause::Inference(e) => write!(f, "an inference call failed: {e}"),
            Cause::NoText => write!(
                f,
                "an inference call failed: the model ended its turn with no text and no tool call"
            ),
            Cause::InputTimedOut(s) => write!(
                f,
                "a request-input wait timed out: no reply came within {s} s"
            ),
            Cause::TurnsExhausted(n) => write!(
                f,
                "the task used every turn inference.max_turns allows ({n})"
            ),
            Cause::CutTwice(n) => write!(
                f,
                "two turns in a row stopped at inference.max_tokens ({n}) with no text and no tool call"
            ),
            Cause::SpendCeiling { spent, ceiling } => write!(
                f,
                "a spend ceiling stopped it: the task used {spent} tokens, past inference.max_total_tokens ({ceiling})"
            ),
            Cause::Spend(sentence) => f.write_str(sentence),
        }
    }
}

/// The `chat {model}` span of one provider call, under the task's `invoke_agent`.
fn chat_span(session: &Session, agent: &HttpAgent, task: &TaskId) -> Span {
    let parent = session.errands.span_of(task);
    let name = format!("{} {}", keys::CHAT, agent.model);
    let mut span = Span::start(name, Kind::Client, parent.as_ref());
    span.set(keys::OPERATION, keys::CHAT);
    span.set(keys::PROVIDER, agent.driver.provider.word());
    span.set(keys::REQUEST_MODEL, agent.model.clone());
    span
}

/// Ends a call's span with the provider's usage and how soon its first token came.
fn end_chat(session: &Session, mut span: Span, reply: &Reply, first: Option<Duration>) {
    span.set(keys::INPUT_TOKENS, reply.usage.input_tokens as i64);
    span.set(keys::OUTPUT_TOKENS, reply.usage.output_tokens as i64);
    let reason = opentelemetry::StringValue::from(stop_word(&reply.stop));
    span.set(
        keys::FINISH_REASONS,
        opentelemetry::Value::Array(opentelemetry::Array::String(vec![reason])),
    );
    if let Some(first) = first {
        span.set(keys::TIME_TO_FIRST_TOKEN, first.as_millis() as i64);
    }
    span.end(&session.trace);
}

/// How the loop ended.
pub enum Ending {
    Answer(String),
    Failed(Cause),
    /// end-without-answer was accepted (the errands hold the reason).
    WithoutAnswer,
    /// Canceled while the loop waited on a call or on a tool.
    Canceled(Interrupted),
}

/// The model and driver an http capsule runs on.
#[derive(Clone)]
pub struct HttpAgent {
    pub driver: Driver,
    pub model: String,
    /// What runs the `bash` tool's commands, when `capabilities.shell.allow` lists one.
    pub shell: Option<crate::shell::Shell>,
}

/// One task's run of the loop: its ending and the turns it used. `conversation` is the key
/// its context's history is kept under for the task's owner.
pub async fn run(
    session: &Arc<Session>,
    agent: &HttpAgent,
    task: &TaskId,
    (context_id, conversation): (&str, &str),
    input: &TaskInput,
    mut canceled: watch::Receiver<bool>,
) -> (Ending, u32) {
    let m = &session.manifest.inference;
    let system = system_prompt(session);
    let specs = tools::specs(&session.manifest.capabilities.shell_allow);
    let mut history = session.conversations.get(conversation);
    history.push(first_message(input));
    let (mut answer, mut cut_empty, mut spent) = (String::new(), 0u32, 0u64);
    for turn in 1..=m.max_turns {
        let req = Request {
            model: &agent.model,
            max_tokens: m.max_tokens,
            system: &system,
            messages: &history,
            tools: &specs,
        };
        // The same ceilings a harness's calls meet at the gateway (`gateway::spend`).
        let mut span = chat_span(session, agent, task);
        if let Err(stop) = session.spend.check(task.as_str(), Some(&agent.model)) {
            stop.fail_span(&mut span);
            span.end(&session.trace);
            session.trace.event(TraceEvent::SpendCeiling {
                task_id: task.clone(),
                scope: stop.scope.word(),
                key: stop.key.clone(),
                used: stop.used.clone(),
                ceiling: stop.ceiling.clone(),
            });
            return (Ending::Failed(Cause::Spend(stop.sentence)), turn);
        }
        session
            .events
            .working_note(task.as_str(), context_id, &format!("inference turn {turn}"));
        let mut frames = Frames::new(session, task, context_id, turn);
        let (asked, mut first) = (Instant::now(), None);
        let mut on = |d: Delta<'_>| {
            first.get_or_insert_with(|| asked.elapsed());
            frames.send(d)
        };
        let reply = tokio::select! {
            r = agent.driver.call(&req, &mut on) => r,
            // Dropping the call drops its connection: the provider stops there.
            _ = canceled.wait_for(|c| *c) => {
                span.event(keys::EV_CANCELED, vec![]);
                span.fail("canceled", "the task was canceled while the provider answered");
                span.end(&session.trace);
                return (Ending::Canceled(Interrupted::Inference), turn);
            }
        };
        let reply = match reply {
            Ok(r) => r,
            Err(e) => {
                span.fail("inference_error", e.to_string());
                span.end(&session.trace);
                return (Ending::Failed(Cause::Inference(e)), turn);
            }
        };
        span.set(keys::RESPONSE_MODEL, agent.model.clone());
        end_chat(session, span, &reply, first);
        session.trace.event(TraceEvent::Inference {
            task_id: task.clone(),
            turn,
            provider: agent.driver.provider.word(),
            model: agent.model.clone(),
            input_tokens: reply.usage.input_tokens,
            output_tokens: reply.usage.output_tokens,
            stop_reason: stop_word(&reply.stop),
            tool_calls: reply.tool_calls.iter().map(|c| c.name.clone()).collect(),
            latency_ms: reply.latency.as_millis() as u64,
            call: None,
        });
        let usage = crate::gateway::Usage {
            model: Some(agent.model.clone()),
            input: reply.usage.input_tokens,
            output: reply.usage.output_tokens,
            ..Default::default()
        };
        session
            .spend
            .record(task.as_str(), &agent.model, Some(&usage), 0);
        spent += reply.usage.input_tokens + reply.usage.output_tokens;
        if let Some(ceiling) = m.max_total_tokens.filter(|c| spent > *c) {
            return (Ending::Failed(Cause::SpendCeiling { spent, ceiling }), turn);
        }
        let last = turn == m.max_turns;
        // No turn is left to read a tool's result: running one would only start work nobody
        // reads (or wait for a person whose reply is thrown away). end-without-answer alone
        // still ends the task as the model asked.
        let ends = |c: &ToolCall| c.name == tools::END_WITHOUT_ANSWER;
        if last && !reply.tool_calls.is_empty() && !reply.tool_calls.iter().all(ends) {
            return (Ending::Failed(Cause::TurnsExhausted(m.max_turns)), turn);
        }
        if !reply.tool_calls.is_empty() {
            cut_empty = 0;
            let mut said = Vec::new();
            if !reply.text.is_empty() {
                said.push(Block::Text(reply.text.clone()));
            }
            for c in &reply.tool_calls {
                let input = serde_json::from_str(&c.arguments).unwrap_or_else(|_| json!({}));
                said.push(Block::ToolUse {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    input,
                });
            }
            history.push(Msg {
                role: Role::Assistant,
                blocks: said,
            });
            let mut results = Vec::new();
            for c in &reply.tool_calls {
                let call = crate::shell::Call {
                    task,
                    context_id,
                    call_id: &c.id,
                    turn,
                };
                let answered = tokio::select! {
                    a = tools::run(session, agent.shell.as_ref(), call, &c.name, &c.arguments) => a,
                    _ = canceled.wait_for(|c| *c) => return (Ending::Canceled(Interrupted::Tool), turn),
                };
                // A tool the cancel ended (a request-input wait answers `task_canceled`) may
                // finish first: the cancel still interrupted the tool, not a call.
                if *canceled.borrow() {
                    return (Ending::Canceled(Interrupted::Tool), turn);
                }
                results.push(Block::ToolResult {
                    id: c.id.clone(),
                    content: answered.content,
                    is_error: answered.is_error,
                });
                match answered.stops {
                    Some(Stops::WithoutAnswer) => return (Ending::WithoutAnswer, turn),
                    Some(Stops::InputTimedOut(s)) => {
                        return (Ending::Failed(Cause::InputTimedOut(s)), turn)
                    }
                    None => {}
                }
            }
            history.push(Msg {
                role: Role::User,
                blocks: results,
            });
            if last {
                return (Ending::Failed(Cause::TurnsExhausted(m.max_turns)), turn);
            }
            continue;
        }
        match (&reply.stop, reply.text.is_empty()) {
            (Stop::MaxTokens, true) => {
                cut_empty += 1;
                if cut_empty >= 2 {
                    return (Ending::Failed(Cause::CutTwice(m.max_tokens)), turn);
                }
                // A continued answer whose last allowed turn was cut with nothing more is
                // the answer so far: a reply cut on the last turn still counts.
                if last && !answer.is_empty() {
                    session.conversations.keep(conversation, history);
                    return (Ending::Answer(answer), turn);
                }
                if last {
                    return (Ending::Failed(Cause::TurnsExhausted(m.max_turns)), turn);
                }
            }
            (Stop::MaxTokens, false) if !last => {
                cut_empty = 0;
                answer.push_str(&reply.text);
                history.push(Msg {
                    role: Role::Assistant,
                    blocks: vec![Block::Text(reply.text)],
                });
                history.push(Msg {
                    role: Role::User,
                    blocks: vec![Block::Text(GO_ON.into())],
                });
            }
            (_, true) if answer.is_empty() => return (Ending::Failed(Cause::NoText), turn),
            // A finished reply, or one cut on the last allowed turn: the answer either way.
            _ => {
                answer.push_str(&reply.text);
                // An empty close to a continued answer adds nothing, and Anthropic refuses an
                // empty text block when the context's next task sends the history back.
                if !reply.text.is_empty() {
                    history.push(Msg {
                        role: Role::Assistant,
                        blocks: vec![Block::Text(reply.text)],
                    });
                }
                session.conversations.keep(conversation, history);
                return (Ending::Answer(answer), turn);
            }
        }
    }
    (
        Ending::Failed(Cause::TurnsExhausted(m.max_turns)),
        m.max_turns,
    )
}

/// The task's text, then its images in part order.
fn first_message(input: &TaskInput) -> Msg {
    let mut blocks = Vec::new();
    if !input.text.is_empty() {
        blocks.push(Block::Text(input.text.clone()));
    }
    for (media_type, bytes) in &input.images {
        blocks.push(Block::Image {
            media_type: media_type.clone(),
            base64: base64::engine::general_purpose::STANDARD.encode(bytes),
        });
    }
    Msg {
        role: Role::User,
        blocks,
    }
}

fn stop_word(stop: &Stop) -> String {
    match stop {
        Stop::EndTurn => "end_turn".into(),
        Stop::ToolUse => "tool_use".into(),
        Stop::MaxTokens => "max_tokens".into(),
        Stop::Other(s) => s.clone(),
    }
}

fn system_prompt(session: &Session) -> String {
    let members: Vec<&str> = session
        .wiring
        .iter()
        .flat_map(|w| w.callees.keys().map(String::as_str))
        .collect();
    let members = match members.is_empty() {
        true => "none".to_owned(),
        false => members.join(", "),
    };
    let shell = match session.manifest.capabilities.shell_allow.is_empty() {
        true => "",
        false => " bash runs a command in your work folder.",
    };
    format!(
        "You are the agent of the murmur capsule {}. Work on the task you are given; your final \
         message's text is your answer. Your tools talk to the capsule that runs you: \
         call-member asks a formation member (members you may call: {members}), delegate-task \
         starts a sub-capsule, send-message reaches an A2A agent the allow list names, \
         request-input asks the task's sender, end-without-answer ends the task without an \
         answer.{shell}",
        session.manifest.name
    )
}

/// Where one turn's deltas go as frames.
struct Frames<'a> {
    session: &'a Session,
    task: &'a str,
    context: &'a str,
    turn: u32,
}

impl<'a> Frames<'a> {
    fn new(session: &'a Session, task: &'a TaskId, context: &'a str, turn: u32) -> Self {
        Frames {
            session,
            task: task.as_str(),
            context,
            turn,
        }
    }

    fn send(&mut self, d: Delta<'_>) {
        let (frame, text, extra): (&str, &str, Value) = match d {
            Delta::Text(t) => ("text", t, json!({"turn": self.turn})),
            Delta::Thinking(t) => ("thinking", t, json!({"turn": self.turn})),
            Delta::ToolStarted { id, name } => (
                "tool-call-started",
                name,
                json!({"turn": self.turn, "toolCallId": id, "tool": name}),
            ),
            Delta::ToolProgress { id, chunk } => (
                "tool-call-progress",
                chunk,
                json!({"turn": self.turn, "toolCallId": id}),
            ),
        };
        self.session
            .events
            .frame_for(self.task, self.context, frame, text, extra);
    }
}
