//! One `delegate-task` from the delegating side: ask the supervisor to start the sub-capsule,
//! keep it in the session's residue while it runs, and wait for its completion — or, when the
//! task stops waiting (it was canceled, or its attempt ended), have the supervisor end it and
//! wait (bounded) until it has, so the child is gone before the task's `task_end`.
//!
//! It holds an errands [`Ticket`] throughout: the ticket's stop is the cancel, and the ticket's
//! drop is what the closing agent waits for (`crate::errands`), exactly as a member call.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use rand::RngCore;
use serde_json::{Map, Value};

use crate::delegation::completion::Completion;
use crate::delegation::protocol::{Child, Op, Outcome};
use crate::delegation::supervisor::Supervisor;
use crate::errands::Ticket;
use crate::ids::{DelegationId, TaskId};
use crate::session::Session;
use crate::tasks::ResidueItem;
use crate::telemetry::{keys, Kind, Span, SpanContext};
use crate::trace::{DelegationState, TraceEvent};

/// How long the supervisor may take to start a sub-capsule (it waits for the child's card).
pub const START_WITHIN: Duration = Duration::from_secs(60);
/// How long the supervisor may take to end one: inside `errands::CLOSE_WITHIN`, so the
/// closing agent still sees the delegation's record before the task's end.
pub const END_WITHIN: Duration = Duration::from_secs(12);

/// How a delegation ended, as the helper is told.
#[derive(Debug, Clone, PartialEq)]
pub struct Delegated {
    pub delegation_id: DelegationId,
    pub capsule: String,
    /// `completed`, `failed`, `canceled`, `rejected` (the child's state, from its completion),
    /// or `canceled` when the delegating task was canceled and the child ended.
    pub status: DelegationState,
    pub child_session_id: Option<String>,
    pub response: Option<String>,
    pub reason: Option<String>,
}

impl Delegated {
    /// The control surface's answer: `delegation_id`, `capsule`, `status`, `child_session_id`,
    /// then `response` (completed) or `reason` (anything else).
    pub fn to_json(&self) -> Value {
        let mut v = Map::new();
        v.insert("delegation_id".into(), self.delegation_id.as_str().into());
        v.insert("capsule".into(), self.capsule.as_str().into());
        v.insert("status".into(), self.status.as_str().into());
        v.insert(
            "child_session_id".into(),
            self.child_session_id.clone().into(),
        );
        match (&self.response, self.status) {
            (Some(r), DelegationState::Completed) => v.insert("response".into(), r.as_str().into()),
            _ => v.insert(
                "reason".into(),
                self.reason.clone().unwrap_or_default().into(),
            ),
        };
        Value::Object(v)
    }
}

/// What the delegation asks for.
pub struct Request<'a> {
    pub task: &'a TaskId,
    /// The sub-capsule's `name`, and its manifest (from `capabilities.delegate.allow`).
    pub capsule: &'a str,
    pub manifest: PathBuf,
    pub text: &'a str,
    /// How long to wait for the child's answer; past it the child is ended.
    pub within: Duration,
}

/// The supervisor did not start the sub-capsule: why, in its words.
#[derive(Debug, Clone, PartialEq)]
pub struct NotStarted(pub String);

fn fresh_token() -> String {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("mur_dlg_{hex}")
}

/// Runs one delegation to its end. The ticket is let go only once its records are written and
/// the child (when it had to be ended) is gone. The delegation is one CLIENT span,
/// `delegate-task {capsule}`; the child's task continues it.
pub async fn run(
    session: &Session,
    link: &Supervisor,
    req: Request<'_>,
    ticket: Ticket,
) -> Result<Delegated, NotStarted> {
    let name = format!("delegate-task {}", req.capsule);
    let mut span = Span::start(name, Kind::Client, Some(&ticket.span));
    span.set(keys::A2A_METHOD, "SendMessage");
    span.set(keys::AGENT_NAME, req.capsule.to_owned());
    let under = span.context().clone();
    let outcome = run_under(session, link, req, ticket, &under).await;
    match &outcome {
        Ok(d) => {
            span.set(keys::DELEGATION, d.delegation_id.to_string());
            span.set(keys::CALL_STATUS, d.status.as_str());
            if d.status != DelegationState::Completed {
                span.fail(d.status.as_str(), d.status.as_str());
            }
        }
        Err(NotStarted(why)) => span.fail("delegation_not_started", why.clone()),
    }
    span.end(&session.trace);
    outcome
}

async fn run_under(
    session: &Session,
    link: &Supervisor,
    req: Request<'_>,
    mut ticket: Ticket,
    under: &SpanContext,
) -> Result<Delegated, NotStarted> {
    let began = Instant::now();
    let id = DelegationId::mint();
    // The child holds no door token: it presents this one, which admits its completion and
    // nothing else, on every door — a public door too takes a completion only with it. Only
    // its digest stays here.
    let token = fresh_token();
    let mut arrived = session.delegations.expect(&id, req.task, Some(&token));
    let op = Op::Delegate {
        delegation_id: id.to_string(),
        parent_task: req.task.to_string(),
        manifest: req.manifest.clone(),
        text: req.text.to_owned(),
        completion_token: Some(token),
        traceparent: crate::telemetry::propagation::headers_of(under)
            .into_iter()
            .find(|(k, _)| *k == crate::telemetry::propagation::TRACEPARENT)
            .map(|(_, v)| v),
    };
    let started = tokio::select! {
        answer = link.request(op, START_WITHIN) => answer,
        _ = ticket.stop.fired() => {
            // Stopped while the child starts: the supervisor ends it once it runs (or never
            // starts it); nothing was entered, so there is nothing to take out.
            session.delegations.ending(&id);
            let state = end(link, &id).await;
            session.delegations.forget(&id);
            trace_end(session, &req, &id, state, began);
            return Ok(stopped(&id, req.capsule, None, ticket.stop.was_canceled()));
        }
    };
    let child = match started {
        Ok(Outcome::Started(child)) => child,
        Ok(Outcome::Error(why)) => {
            session.delegations.forget(&id);
            return Err(NotStarted(why));
        }
        Ok(Outcome::Ended {}) => {
            session.delegations.forget(&id);
            return Err(NotStarted(
                "the supervisor answered the delegation with `ended`".into(),
            ));
        }
        Err(e) => {
            session.delegations.forget(&id);
            // A start that timed out may still come up: it must not outlive the task.
            let _ = end(link, &id).await;
            return Err(NotStarted(e.to_string()));
        }
    };
    let item = residue_item(&id, &child);
    session.residue.enter(req.task, item.clone());
    session.trace.event(TraceEvent::DelegationStart {
        task_id: req.task.clone(),
        delegation_id: id.clone(),
        capsule: child.capsule.clone(),
        version: child.version.clone(),
        child_session_id: child.child_session_id.clone(),
        child_workdir: child.child_workdir.clone(),
    });
    let child_session = Some(child.child_session_id.clone());
    let delegated = tokio::select! {
        completion = &mut arrived => match completion {
            Ok(c) => completed(&id, req.capsule, child_session, c),
            // Its entry went away without a completion: only an ending does that.
            Err(_) => stopped(&id, req.capsule, child_session, ticket.stop.was_canceled()),
        },
        _ = ticket.stop.fired() => {
            session.delegations.ending(&id);
            let state = end(link, &id).await;
            session.residue.remove(&item);
            session.delegations.forget(&id);
            trace_end(session, &req, &id, state, began);
            return Ok(stopped(&id, req.capsule, child_session, ticket.stop.was_canceled()));
        }
        _ = tokio::time::sleep(req.within) => {
            // No answer in time: the child is ended as a cancel would end it, and said so.
            session.delegations.ending(&id);
            let _ = end(link, &id).await;
            session.residue.remove(&item);
            session.delegations.forget(&id);
            trace_end(session, &req, &id, DelegationState::TimedOut, began);
            return Ok(timed_out(&id, req.capsule, child_session, req.within));
        }
    };
    // The child ends itself once its completion is answered; the supervisor sees it go.
    session.residue.remove(&item);
    session.delegations.forget(&id);
    trace_end(session, &req, &id, delegated.status, began);
    Ok(delegated)
}

/// Asks the supervisor to end the child and waits (bounded) until it has.
async fn end(link: &Supervisor, id: &DelegationId) -> DelegationState {
    let op = Op::End {
        delegation_id: id.to_string(),
    };
    match link.request(op, END_WITHIN).await {
        Ok(Outcome::Ended {}) => DelegationState::Ended,
        _ => DelegationState::Lost,
    }
}

fn residue_item(id: &DelegationId, child: &Child) -> ResidueItem {
    ResidueItem::Delegation {
        delegation_id: id.to_string(),
        capsule: child.capsule.clone(),
        version: child.version.clone(),
        child_session_id: child.child_session_id.clone(),
        child_workdir: child.child_workdir.to_string_lossy().into_owned(),
    }
}

fn trace_end(
    session: &Session,
    req: &Request<'_>,
    id: &DelegationId,
    state: DelegationState,
    began: Instant,
) {
    session.trace.event(TraceEvent::DelegationEnd {
        task_id: req.task.clone(),
        delegation_id: id.clone(),
        capsule: req.capsule.to_owned(),
        state,
        duration_ms: began.elapsed().as_millis() as u64,
    });
}

fn completed(
    id: &DelegationId,
    capsule: &str,
    child_session: Option<String>,
    c: Completion,
) -> Delegated {
    Delegated {
        delegation_id: id.clone(),
        capsule: capsule.to_owned(),
        status: c.state,
        child_session_id: child_session,
        response: c.response,
        reason: c.reason,
    }
}

/// The deadline passed without an answer: the child was ended.
fn timed_out(
    id: &DelegationId,
    capsule: &str,
    child_session: Option<String>,
    within: Duration,
) -> Delegated {
    Delegated {
        delegation_id: id.clone(),
        capsule: capsule.to_owned(),
        status: DelegationState::TimedOut,
        child_session_id: child_session,
        response: None,
        reason: Some(format!(
            "sub-capsule {capsule} gave no answer within {} s; it was ended",
            within.as_secs()
        )),
    }
}

/// The task stopped waiting: canceled (the helper fails with `canceled`), or its attempt ended.
fn stopped(
    id: &DelegationId,
    capsule: &str,
    child_session: Option<String>,
    canceled: bool,
) -> Delegated {
    let reason = match canceled {
        true => format!("the task was canceled; sub-capsule {capsule} was ended"),
        false => format!("the task's attempt ended; sub-capsule {capsule} was ended"),
    };
    Delegated {
        delegation_id: id.clone(),
        capsule: capsule.to_owned(),
        status: match canceled {
            true => DelegationState::Canceled,
            false => DelegationState::Ended,
        },
        child_session_id: child_session,
        response: None,
        reason: Some(reason),
    }
}
