//! `send-message URL TEXT` (DESIGN §8, the hand-wired path): a message to any door the allow
//! list names — refused, with nothing sent, for one it does not — waited on until its task
//! settles. It answers the peer's task as it settled, whatever its state: the harness reads
//! the state, the response or the question from it. A door that is a formation member of this
//! capsule is called with the `member:<self>` token the wiring holds.

use std::time::Duration;

use serde_json::Value;

use super::client::{Failure, PeerDoor};
use super::exchange::{Ending, Exchange};
use super::{message, text_of};
use crate::errands::Ticket;
use crate::ids::TaskId;
use crate::policy::{self, Target};
use crate::session::Session;
use crate::telemetry::{keys, Kind, Span, SpanContext};
use crate::trace::TraceEvent;

/// What the harness asked to send.
pub struct Outbound<'a> {
    /// The destination as written: `http://host:port`, or `host:port`.
    pub url: &'a str,
    pub text: &'a str,
    /// Send in this context (a conversation with the peer so far).
    pub context_id: Option<&'a str>,
    /// Continue this task of the peer's: the reply to its question.
    pub task_id: Option<&'a str>,
    pub within: Duration,
}

/// Why there is no settled task to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotDelivered {
    /// The allow list refused the destination; nothing was sent.
    NotAllowed(String),
    /// The peer refused the message (an HTTP refusal, a JSON-RPC error, no task).
    Refused(String),
    /// The peer could not be reached, or stopped answering.
    Unreachable(String),
    /// No TLS to the peer: why, and what to check for that failure.
    NoTls { message: String, hint: String },
    /// The peer's task did not settle in time; it was canceled.
    TimedOut(String),
    /// This capsule's task was canceled or its attempt ended; the peer's task was canceled.
    Stopped(String),
}

impl NotDelivered {
    /// The control surface's `error` code.
    pub fn code(&self) -> &'static str {
        match self {
            NotDelivered::NotAllowed(_) => "not_allowed",
            NotDelivered::Refused(_) => "peer_refused",
            NotDelivered::Unreachable(_) | NotDelivered::NoTls { .. } => "peer_unreachable",
            NotDelivered::TimedOut(_) => "timed_out",
            NotDelivered::Stopped(_) => "task_stopped",
        }
    }

    pub fn message(&self) -> &str {
        match self {
            NotDelivered::NotAllowed(m)
            | NotDelivered::Refused(m)
            | NotDelivered::Unreachable(m)
            | NotDelivered::TimedOut(m)
            | NotDelivered::Stopped(m)
            | NotDelivered::NoTls { message: m, .. } => m,
        }
    }

    /// What to check, where the failure says more than its code does.
    pub fn hint(&self) -> Option<&str> {
        match self {
            NotDelivered::NoTls { hint, .. } => Some(hint),
            _ => None,
        }
    }
}

/// Sends for the task `caller`; answers the peer's task as it settled. The call is one CLIENT
/// span, `send-message {host:port}`, under the ticket's span.
pub async fn send(
    session: &Session,
    caller: &TaskId,
    out: Outbound<'_>,
    ticket: Ticket,
) -> Result<Value, NotDelivered> {
    let shown = policy::shown(out.url);
    let name = format!("send-message {shown}");
    let mut span = Span::start(name, Kind::Client, Some(&ticket.span));
    span.set(keys::A2A_METHOD, "SendMessage");
    span.set(keys::SERVER_ADDRESS, shown);
    let under = span.context().clone();
    let sent = send_under(session, caller, out, ticket, &under).await;
    match &sent {
        Ok(task) => {
            span.set_some(keys::A2A_TASK, text_of(task, "id"));
            span.set_some(keys::CONVERSATION, text_of(task, "contextId"));
            span.set_some(
                keys::A2A_STATE,
                super::exchange::state_of(task).map(|s| s.wire()),
            );
        }
        Err(not) => span.fail(not.code(), not.message().to_owned()),
    }
    span.end(&session.trace);
    sent
}

async fn send_under(
    session: &Session,
    caller: &TaskId,
    out: Outbound<'_>,
    mut ticket: Ticket,
    under: &SpanContext,
) -> Result<Value, NotDelivered> {
    let allowed = match policy::check(&session.allow, out.url) {
        Ok(allowed) => allowed,
        Err(refusal) => {
            session.trace.event(TraceEvent::NetworkRefused {
                caller_task_id: caller.clone(),
                destination: policy::shown(out.url),
                reason: refusal.reason.clone(),
            });
            return Err(NotDelivered::NotAllowed(refusal.reason));
        }
    };
    let token = member_token(session, allowed.target());
    let door = PeerDoor::new(allowed, token).traced(under);
    let peer = door.peer_url();
    let exchange = Exchange {
        trace: &session.trace,
        door: &door,
        caller,
        trust: ticket.trust,
        within: out.within,
    };
    let msg = message(out.text, out.context_id, out.task_id);
    let ending = exchange.run(msg, &mut ticket.stop).await;
    let id = |t: &Value| text_of(t, "id").unwrap_or_default();
    match ending {
        Ending::Settled(task) => Ok(task),
        Ending::NotSent(Failure::Unreachable(why)) => Err(NotDelivered::Unreachable(format!(
            "cannot reach {peer}: {why}"
        ))),
        Ending::NotSent(Failure::Tls(e)) => Err(NotDelivered::NoTls {
            message: format!("cannot reach {peer}: {e}"),
            hint: e.hint,
        }),
        Ending::NotSent(refused) => Err(NotDelivered::Refused(format!(
            "the peer at {peer} refused the message: {refused}"
        ))),
        Ending::Lost { task, why } => Err(NotDelivered::Unreachable(format!(
            "{peer} could not say how its task {} stands: {why}",
            id(&task)
        ))),
        Ending::TimedOut { task } => Err(NotDelivered::TimedOut(format!(
            "the peer's task {} did not settle within {} s; it was canceled",
            id(&task),
            out.within.as_secs()
        ))),
        Ending::Stopped { task } => Err(NotDelivered::Stopped(format!(
            "this task stopped, so the peer's task {} was canceled",
            id(&task)
        ))),
    }
}

/// The `member:<self>` token, when the destination is a callee's door.
fn member_token(session: &Session, target: &Target) -> Option<String> {
    let wiring = session.wiring.as_ref()?;
    wiring
        .callees
        .values()
        .find(|c| {
            Target::parse(&c.url)
                .is_ok_and(|t| t.authority() == target.authority() && t.scheme() == target.scheme())
        })
        .map(|c| c.token.clone())
}
