//! Interrupting an attempt (DESIGN §8 "Cancel"): the driver's interrupt (SIGINT to the group,
//! stdin bytes, or Claude Code's in-band `control_request` with SIGINT as its fallback), its
//! bound, then the end of the harness and everything it started.

use std::time::Duration;

use super::stdin::{fresh_request_id, interrupt_line, StdinFeed};
use super::{Attempt, Driver, GRACE};
use crate::ids::TaskId;
use crate::manifest::{Interrupt, CONTROL_REQUEST_BOUND};
use crate::process::{Contained, Exit};
use crate::session::Session;
use crate::trace::{InterruptSent, TraceEvent};

/// Sends the driver's interrupt, waits out its bound, and ends the harness and everything it
/// started if it is still there; an in-band `control_request` that brings no end within
/// [`CONTROL_REQUEST_BOUND`] is followed by SIGINT and the grace. Answers how it ended and
/// whether it had to be ended.
pub(super) async fn interrupt(
    session: &Session,
    d: &Driver,
    a: &Attempt<'_>,
    harness: &mut Contained,
    stdin: &StdinFeed,
) -> (Exit, bool) {
    let mut request_id = None;
    let bound = match &d.interrupt {
        Interrupt::Sigint => {
            harness.interrupt();
            GRACE
        }
        Interrupt::Stdin(bytes) => {
            stdin.interrupt(bytes.clone());
            GRACE
        }
        Interrupt::ControlRequest => {
            let id = fresh_request_id();
            stdin.interrupt(interrupt_line(&id));
            request_id = Some(id);
            CONTROL_REQUEST_BOUND
        }
        Interrupt::None => Duration::ZERO,
    };
    session.trace.event(TraceEvent::HarnessInterrupt {
        task_id: TaskId::from_wire(a.task_id),
        pid: harness.pid,
        interrupt: InterruptSent::from(&d.interrupt),
        grace_ms: bound.as_millis() as u64,
        request_id,
        fallback_for: None,
    });
    if d.interrupt == Interrupt::None {
        return (harness.end().await, true);
    }
    if tokio::time::timeout(bound, harness.exited()).await.is_ok() {
        return (harness.outcome().await, false);
    }
    if d.interrupt == Interrupt::ControlRequest {
        harness.interrupt();
        session.trace.event(TraceEvent::HarnessInterrupt {
            task_id: TaskId::from_wire(a.task_id),
            pid: harness.pid,
            interrupt: InterruptSent::Sigint,
            grace_ms: GRACE.as_millis() as u64,
            request_id: None,
            fallback_for: Some(InterruptSent::ControlRequest),
        });
        if tokio::time::timeout(GRACE, harness.exited()).await.is_ok() {
            return (harness.outcome().await, false);
        }
    }
    (harness.end().await, true)
}
