//! The trace's records (DESIGN §10) as one typed enum, and the one place an event becomes its
//! JSON line. Every caller names an event and its typed fields; none spells an `event_type` or
//! a key, so a record cannot drift from what `mur trace show` and the tests read. No variant has
//! a field that could hold a token.
//!
//! Over 600 lines: one enum of every record type and its spellings, so that no record's JSON
//! shape lives in two places; its tests are apart.

use std::path::{Path, PathBuf};

use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::clock::Millis;
use crate::ids::{ApprovalId, DelegationId, SessionId, TaskId, WorkId};
use crate::manifest::Interrupt;
use crate::process::containment::Walls;
use crate::process::Mode;
pub use crate::provenance::{Origin, Trust};
use crate::tasks::approval::{By, Decision};
use crate::tasks::TaskState;

/// One trace record, without the three keys every record starts with (`event_type`,
/// `session_id`, `timestamp`), which [`line`] adds. Each variant's fields serialise in the
/// order they are declared here, which is the order they appear in the file.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(untagged)]
pub enum TraceEvent {
    SessionStart {
        capsule: String,
        version: String,
        pid: u32,
        url: String,
        #[serde(serialize_with = "lossy_path")]
        workdir: PathBuf,
        #[serde(serialize_with = "lossy_path")]
        manifest: PathBuf,
        /// How harness attempts are contained; `null` for a door that starts no task.
        containment: Option<Mode>,
        /// Which of the jail's walls stand around its harness attempts; `null` with no harness.
        walls: Option<Box<Walls>>,
    },
    SessionEnd {
        /// The state the launch's own task ended in; `null` when the launch had none.
        #[serde(serialize_with = "state_word")]
        launch_task_state: Option<TaskState>,
    },
    A2aTaskReceived {
        task_id: TaskId,
        context_id: String,
        /// The client's `messageId`; the launch's own task has none worth naming.
        #[serde(skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
        origin: Origin,
        trust: Trust,
    },
    TaskStart {
        task_id: TaskId,
        context_id: String,
        message_id: String,
        reference_task_ids: Vec<String>,
        /// The images handed to the agent with the task (`image/png, 68 bytes`), in part order;
        /// a process capsule takes none.
        attachments: Vec<String>,
    },
    TaskFailed {
        task_id: TaskId,
        cause: String,
    },
    TaskCanceled {
        task_id: TaskId,
        interrupted: Interrupted,
        /// What was in flight when the loop stopped (residue items); a process capsule
        /// leaves nothing in flight.
        in_flight: Vec<Value>,
        /// Only when a harness was interrupted: whether it had to be killed.
        #[serde(skip_serializing_if = "Option::is_none")]
        harness_killed: Option<bool>,
    },
    TaskEnd {
        task_id: TaskId,
        status: EndStatus,
        exit_status: EndStatus,
        /// Absent for a task canceled before it ever ran.
        #[serde(flatten, skip_serializing_if = "Option::is_none")]
        ran: Option<Ran>,
    },
    /// One inference call of an http capsule's loop, once it answered: the provider's own
    /// token counts and how long the call took, first byte to last.
    Inference {
        task_id: TaskId,
        /// 1 for the task's first call.
        turn: u32,
        /// `anthropic`, `openai` or `deepseek`.
        provider: &'static str,
        model: String,
        input_tokens: u64,
        output_tokens: u64,
        /// `end_turn`, `tool_use`, `max_tokens`, or the provider's own word.
        stop_reason: String,
        /// The tools the model asked for, by name, in order.
        tool_calls: Vec<String>,
        latency_ms: u64,
        /// A call through the model gateway: its cache tokens, cost, status and first byte.
        #[serde(flatten, skip_serializing_if = "Option::is_none")]
        call: Option<Box<GatewayCall>>,
    },
    /// A model call refused because a spend ceiling was reached (`gateway::spend`).
    SpendCeiling {
        task_id: TaskId,
        /// `task`, `session`, `formation` or `machine`.
        scope: &'static str,
        /// Where the ceiling is set.
        key: String,
        used: String,
        ceiling: String,
    },
    HarnessStart {
        task_id: TaskId,
        context_id: String,
        pid: i32,
        /// The program the driver runs (its first word), never its arguments: they may carry
        /// the guide or the prompt.
        command: Option<String>,
        session_mode: SessionMode,
        harness_session: Option<String>,
        containment: Mode,
        /// Which of the jail's walls stand around this attempt (boxed: a trace record stays
        /// small on the queue).
        walls: Box<Walls>,
    },
    HarnessInterrupt {
        task_id: TaskId,
        pid: i32,
        interrupt: InterruptSent,
        /// How long the harness has to end before the next step: the SIGINT fallback after a
        /// `control_request`, the kill after anything else.
        grace_ms: u64,
        /// Only for `control_request`: the request id the line carried.
        #[serde(skip_serializing_if = "Option::is_none")]
        request_id: Option<String>,
        /// Only on a fallback: the interrupt that brought no end in its bound.
        #[serde(skip_serializing_if = "Option::is_none")]
        fallback_for: Option<InterruptSent>,
    },
    HarnessExit {
        task_id: TaskId,
        pid: i32,
        cause: ExitCause,
        exit_code: Option<i32>,
        signal: Option<i32>,
        killed: bool,
        duration_ms: u64,
        harness_session: Option<String>,
    },
    HarnessSessionForgotten {
        context_id: String,
        harness_session: String,
        requested_by: RequestedBy,
    },
    /// A harness's CLI asked to run a tool beyond its permission level
    /// (`harness.approvals: ask`); the rules or a person answer it.
    ApprovalAsked {
        task_id: TaskId,
        approval_id: ApprovalId,
        /// The CLI's own id of the question, which its answer names.
        request_id: String,
        tool: String,
        input: Value,
    },
    /// The answer the CLI was given.
    ApprovalAnswered {
        task_id: TaskId,
        approval_id: ApprovalId,
        decision: Decision,
        by: By,
        /// The rule that decided (`harness.deny[0] "Bash(rm:*)"`), for `by: rule`.
        #[serde(skip_serializing_if = "Option::is_none")]
        rule: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The jail's egress proxy refused a destination a harness asked for (DESIGN §8).
    EgressDenied {
        task_id: TaskId,
        host: String,
        port: u16,
    },
    ToolCall {
        task_id: TaskId,
        #[serde(flatten)]
        call: Tool,
    },
    /// A shell command the model ran (`capabilities.shell.allow`) started in its jail.
    ShellStart {
        task_id: TaskId,
        work_id: WorkId,
        /// Its keeper's pid.
        pid: i32,
        /// The program that runs it, as a path.
        binary: String,
        /// What the model wrote, cut to 200 characters followed by `…`.
        command: String,
        /// Started in the background at the model's asking.
        background: bool,
    },
    /// A foreground command moved to the background, where it goes on.
    ShellBackground {
        task_id: TaskId,
        work_id: WorkId,
        why: Backgrounded,
    },
    /// A shell command ended, and everything it started with it.
    ShellEnd {
        task_id: TaskId,
        work_id: WorkId,
        /// Its exit status, or `null` when a signal ended it or it never ran.
        exit_code: Option<i32>,
        signal: Option<i32>,
        /// Ended by the session's end rather than on its own.
        killed: bool,
        duration_ms: u64,
        /// Bytes it wrote on stdout and stderr together.
        output_bytes: u64,
    },
    /// A command the model asked for that was not run, with the refusal's code.
    ShellRefused {
        task_id: TaskId,
        command: String,
        reason: &'static str,
    },
    /// A message this capsule sent another door, once that door answered it. `task_id` and
    /// `context_id` are the peer's task, `null` when it took no task (it refused the message).
    A2aSend {
        /// `host:port` of the door.
        peer_url: String,
        message_id: String,
        task_id: Option<String>,
        context_id: Option<String>,
        /// The task of this capsule the message was sent for.
        caller_task_id: TaskId,
    },
    /// One `call-member`, once it has an outcome. `task_id` and `context_id` are the member's
    /// task, `null` when there was none; `reason` is `null` when it completed.
    MemberCall {
        member: String,
        status: CallStatus,
        caller_task_id: TaskId,
        task_id: Option<String>,
        context_id: Option<String>,
        duration_ms: u64,
        reason: Option<String>,
    },
    /// A destination the allow list refused: nothing was sent.
    NetworkRefused {
        caller_task_id: TaskId,
        /// `scheme://host:port` of what was asked for (`policy::shown`): never a path or query.
        destination: String,
        reason: String,
    },
    /// A sub-capsule started for `delegate-task`, as the supervisor answered: the residue's
    /// `delegation` item, with the task that delegated.
    DelegationStart {
        task_id: TaskId,
        delegation_id: DelegationId,
        capsule: String,
        version: String,
        child_session_id: String,
        #[serde(serialize_with = "lossy_path")]
        child_workdir: PathBuf,
    },
    /// A delegation is over: its completion came (`state` is the child's final state), or the
    /// delegating task stopped waiting and ended the child (`ended`), or the supervisor could
    /// not end it (`lost`).
    DelegationEnd {
        task_id: TaskId,
        delegation_id: DelegationId,
        capsule: String,
        state: DelegationState,
        duration_ms: u64,
    },
    /// A completion this door accepted and handed to the task awaiting it.
    CompletionReceived {
        task_id: TaskId,
        delegation_id: DelegationId,
        /// The child's final state, as its completion names it.
        state: DelegationState,
    },
    /// A sub-capsule's completion its parent did not accept: the refusal's message.
    DeliveryError {
        delegation_id: DelegationId,
        /// `host:port` of the parent's door.
        parent_url: String,
        reason: String,
    },
    /// Records the queue had no room for, counted and reported once there was room again.
    TraceRecordsLost {
        lost: u64,
    },
    /// One ended span (made by the telemetry module): what `mur trace show --otlp` turns into OTLP, with
    /// the ids the collector got. Never holds message content.
    Span(Box<super::SpanRecord>),
    /// Spans the exporter could not deliver: the first drop, then the session's total at its
    /// end. The task went on either way.
    SpansDropped {
        dropped: u64,
        reason: String,
        /// Where spans were being sent.
        endpoint: String,
    },
    /// Written by the supervisor into the trace of a formation member that died unexpectedly,
    /// after a `task_failed` and `task_end` for each task it left unfinished.
    CapsuleDied {
        formation: String,
        member: String,
        exit_status: i32,
    },
    /// The supervisor starts a member again after it ended (its formation's `restart`): the
    /// restart's number within the window, the wait before it, and why.
    MemberRestarted {
        formation: String,
        member: String,
        attempt: u32,
        backoff_ms: u64,
        exit_status: i32,
    },
}

/// What a cancel interrupted.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Interrupted {
    /// The task was still waiting in the queue: nothing ran.
    Queue,
    /// A harness attempt was running.
    Harness,
    /// An http capsule's loop was running: its inference call in flight was dropped.
    Inference,
    /// An http capsule's loop was running one of the model's tools (a member call, a
    /// request-input wait, …), which the cancel stopped.
    Tool,
}

/// Why a foreground shell command moved to the background.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Backgrounded {
    /// It still ran when the model's wait (`wait_secs`) was over.
    Waited,
    /// Its task was canceled, which ends no command.
    Canceled,
}

/// What the model gateway adds to an `inference` record.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct GatewayCall {
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    /// Dollars, when the model has a price.
    pub usd: Option<f64>,
    /// The provider's HTTP status.
    pub status: u16,
    /// From the request's arrival to the answer's headers.
    pub first_byte_ms: u64,
    /// Whether the provider reported the usage; an unmetered call counts as its `max_tokens`.
    pub metered: bool,
    /// What the ceilings counted.
    pub counted_tokens: u64,
}

/// How a task ended, in murmur's words.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum EndStatus {
    Completed,
    Failed,
    Canceled,
}

/// What a task that ran used.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ran {
    pub turns: u32,
    pub duration_ms: u64,
}

/// Whether a harness attempt starts fresh or resumes its context's harness session.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SessionMode {
    New,
    Resume,
}

/// The interrupt a driver sent a harness.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum InterruptSent {
    Sigint,
    Stdin,
    /// An in-band stream-json `control_request` line (subtype `interrupt`).
    ControlRequest,
    /// The driver declares no interrupt: the harness is killed at once.
    None,
}

/// Why a harness attempt ended.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ExitCause {
    /// It ended on its own.
    Exited,
    Canceled,
    /// It printed more turns than `inference.max_turns` allows and was stopped.
    MaxTurns,
    /// Its program could not be started.
    NotStarted,
    /// It ran `mur end-without-answer` and did not exit within the grace, so it was stopped.
    EndedWithoutAnswer,
    /// A spend ceiling refused one of its model calls, and it did not exit within the grace.
    SpendCeiling,
}

/// How one `call-member` ended: the `member_call` record's `status`, and the `status` of each
/// `noAnswerBelow` entry (agent-card.md "Task metadata"). Spelled here and nowhere else.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    /// The member's task completed with an answer.
    Completed,
    /// The member's task failed.
    Failed,
    /// The member's task was canceled (by this capsule, because its calling task was, or by
    /// someone else).
    Canceled,
    /// The member's door refused the message, or its task was rejected (busy or closing).
    Rejected,
    /// No answer within the call's timeout; the member's task was canceled.
    TimedOut,
    /// The member's door could not be reached, or could not say how its task stands while it
    /// ran (unreachable three times in a row, or a refusal).
    Unreachable,
    /// The member's task ended without an answer: it ran end-without-answer, completed with no
    /// response, or stopped to ask for input call-member cannot give.
    NoAnswer,
}

const CALL_STATUSES: [(CallStatus, &str); 7] = [
    (CallStatus::Completed, "completed"),
    (CallStatus::Failed, "failed"),
    (CallStatus::Canceled, "canceled"),
    (CallStatus::Rejected, "rejected"),
    (CallStatus::TimedOut, "timed_out"),
    (CallStatus::Unreachable, "unreachable"),
    (CallStatus::NoAnswer, "no_answer"),
];

impl CallStatus {
    pub fn as_str(self) -> &'static str {
        CALL_STATUSES
            .iter()
            .find(|(s, _)| *s == self)
            .map(|(_, w)| *w)
            .unwrap_or("")
    }

    pub fn parse(word: &str) -> Option<CallStatus> {
        CALL_STATUSES
            .iter()
            .find(|(_, w)| *w == word)
            .map(|(s, _)| *s)
    }
}

/// How a delegation ended: the child task's final state as its completion names it, or what
/// the delegating side saw when no completion came. Spelled here and in
/// `crate::delegation::completion`, and nowhere else.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum DelegationState {
    /// The child's task completed with a response.
    Completed,
    /// The child's task failed (or ended without an answer).
    Failed,
    /// The child's task was canceled.
    Canceled,
    /// The child's task was rejected (its door had no room).
    Rejected,
    /// The delegating task stopped waiting (it was canceled, or its attempt ended) and the
    /// supervisor ended the child.
    Ended,
    /// The delegating task stopped waiting, and the supervisor did not confirm the child's end
    /// in time (or its control socket was gone).
    Lost,
    /// The child gave no answer within the delegation's deadline, and was ended.
    TimedOut,
}

const DELEGATION_STATES: [(DelegationState, &str); 7] = [
    (DelegationState::Completed, "completed"),
    (DelegationState::Failed, "failed"),
    (DelegationState::Canceled, "canceled"),
    (DelegationState::Rejected, "rejected"),
    (DelegationState::Ended, "ended"),
    (DelegationState::Lost, "lost"),
    (DelegationState::TimedOut, "timed_out"),
];

impl DelegationState {
    pub fn as_str(self) -> &'static str {
        DELEGATION_STATES
            .iter()
            .find(|(s, _)| *s == self)
            .map(|(_, w)| *w)
            .unwrap_or("")
    }

    pub fn parse(word: &str) -> Option<DelegationState> {
        DELEGATION_STATES
            .iter()
            .find(|(_, w)| *w == word)
            .map(|(s, _)| *s)
    }
}

/// Who asked for a harness session to be dropped.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum RequestedBy {
    /// The message's `forgetSession`.
    A2a,
}

/// A helper a harness ran through its capsule, with what it asked.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(tag = "tool", rename_all = "kebab-case")]
pub enum Tool {
    RequestInput {
        question: String,
    },
    /// `mur send-message`: the destination as `policy::shown` names it (the text is not
    /// recorded).
    SendMessage {
        destination: String,
    },
    /// `mur call-member`: the member as named (the text is not recorded).
    CallMember {
        member: String,
    },
    EndWithoutAnswer {
        reason: String,
    },
    /// `mur delegate-task`: the capsule as named (the text is not recorded).
    DelegateTask {
        capsule: String,
    },
}

impl From<&Interrupt> for InterruptSent {
    fn from(i: &Interrupt) -> Self {
        match i {
            Interrupt::Sigint => InterruptSent::Sigint,
            Interrupt::Stdin(_) => InterruptSent::Stdin,
            Interrupt::ControlRequest => InterruptSent::ControlRequest,
            Interrupt::None => InterruptSent::None,
        }
    }
}

impl TraceEvent {
    /// The record's `event_type`.
    pub fn event_type(&self) -> &'static str {
        match self {
            TraceEvent::SessionStart { .. } => "session_start",
            TraceEvent::SessionEnd { .. } => "session_end",
            TraceEvent::A2aTaskReceived { .. } => "a2a_task_received",
            TraceEvent::TaskStart { .. } => "task_start",
            TraceEvent::TaskFailed { .. } => "task_failed",
            TraceEvent::TaskCanceled { .. } => "task_canceled",
            TraceEvent::TaskEnd { .. } => "task_end",
            TraceEvent::Inference { .. } => "inference",
            TraceEvent::SpendCeiling { .. } => "spend_ceiling",
            TraceEvent::HarnessStart { .. } => "harness_start",
            TraceEvent::HarnessInterrupt { .. } => "harness_interrupt",
            TraceEvent::HarnessExit { .. } => "harness_exit",
            TraceEvent::HarnessSessionForgotten { .. } => "harness_session_forgotten",
            TraceEvent::ApprovalAsked { .. } => "approval_asked",
            TraceEvent::ApprovalAnswered { .. } => "approval_answered",
            TraceEvent::EgressDenied { .. } => "egress_denied",
            TraceEvent::ToolCall { .. } => "tool_call",
            TraceEvent::ShellStart { .. } => "shell_start",
            TraceEvent::ShellBackground { .. } => "shell_background",
            TraceEvent::ShellEnd { .. } => "shell_end",
            TraceEvent::ShellRefused { .. } => "shell_refused",
            TraceEvent::A2aSend { .. } => "a2a_send",
            TraceEvent::MemberCall { .. } => "member_call",
            TraceEvent::NetworkRefused { .. } => "network_refused",
            TraceEvent::DelegationStart { .. } => "delegation_start",
            TraceEvent::DelegationEnd { .. } => "delegation_end",
            TraceEvent::CompletionReceived { .. } => "completion_received",
            TraceEvent::DeliveryError { .. } => "delivery_error",
            TraceEvent::TraceRecordsLost { .. } => "trace_records_lost",
            TraceEvent::Span(_) => "span",
            TraceEvent::SpansDropped { .. } => "spans_dropped",
            TraceEvent::CapsuleDied { .. } => "capsule_died",
            TraceEvent::MemberRestarted { .. } => "member_restarted",
        }
    }

    /// The end of a task; `status` and `exit_status` always agree.
    pub fn task_end(task_id: TaskId, status: EndStatus, ran: Option<Ran>) -> TraceEvent {
        TraceEvent::TaskEnd {
            task_id,
            status,
            exit_status: status,
            ran,
        }
    }

    /// The cancel of a task that never left the queue.
    pub fn canceled_in_queue(task_id: TaskId) -> TraceEvent {
        TraceEvent::TaskCanceled {
            task_id,
            interrupted: Interrupted::Queue,
            in_flight: Vec::new(),
            harness_killed: None,
        }
    }

    /// The cancel of an http capsule's task: the loop stopped where it was — its inference
    /// call in flight dropped, or the tool it was running stopped.
    pub fn canceled_in_loop(
        task_id: TaskId,
        interrupted: Interrupted,
        in_flight: Vec<Value>,
    ) -> TraceEvent {
        TraceEvent::TaskCanceled {
            task_id,
            interrupted,
            in_flight,
            harness_killed: None,
        }
    }

    /// The cancel of a task whose harness was interrupted (and killed, when `killed`), with the
    /// residue items that were in flight when the cancel was answered.
    pub fn canceled_in_harness(task_id: TaskId, killed: bool, in_flight: Vec<Value>) -> TraceEvent {
        TraceEvent::TaskCanceled {
            task_id,
            interrupted: Interrupted::Harness,
            in_flight,
            harness_killed: Some(killed),
        }
    }
}

/// The three keys every record starts with, then the event's own.
#[derive(Serialize)]
struct Line<'a> {
    event_type: &'static str,
    session_id: &'a SessionId,
    timestamp: String,
    #[serde(flatten)]
    event: &'a TraceEvent,
}

/// The record as written: one JSON object and its newline. The only place a record is spelled.
pub fn line(event: &TraceEvent, session_id: &SessionId, at: Millis) -> serde_json::Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec(&Line {
        event_type: event.event_type(),
        session_id,
        timestamp: at.rfc3339(),
        event,
    })?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// A path that is not UTF-8 is still recorded (lossily) rather than losing the record.
fn lossy_path<S: Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&p.to_string_lossy())
}

fn state_word<S: Serializer>(state: &Option<TaskState>, s: S) -> Result<S::Ok, S::Error> {
    match state {
        Some(state) => s.serialize_str(state.word()),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests;
