//! What a running task's helpers leave for its ending (DESIGN §7–8): the peer calls it has in
//! flight (`call-member`, `send-message`), the members that gave it no answer, and an
//! `end-without-answer`. The agent opens a task's errands when its attempt starts and closes
//! them when the attempt ends. Closing stops whatever is still in flight — each call then
//! cancels its peer's task and writes its record — waits (bounded) until every call has, and
//! hands the agent what the task's ending needs: its noAnswer reason and noAnswerBelow. So a
//! canceled task's member calls are canceled, and recorded, before its `task_end`.
//!
//! Calls run on tasks of their own and hold a [`Ticket`] while they do; the ticket tells them
//! when to stop (the task was canceled, or its attempt ended) and its drop tells the closing
//! agent they are done. No lock here is held across an await.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, watch};

use crate::ids::TaskId;
pub mod below;

use crate::provenance::Trust;
use crate::telemetry::{KeyValue, SpanContext, SpanEvent};
use below::NoAnswer;

/// How long closing waits for calls in flight to cancel their peers' tasks and write their
/// records. Each cancel is itself bounded well within this (`peers::exchange::CANCEL_WITHIN`).
pub const CLOSE_WITHIN: Duration = Duration::from_secs(15);

/// The errands of every running task.
#[derive(Default)]
pub struct Errands {
    tasks: Mutex<HashMap<TaskId, Open>>,
}

struct Open {
    trust: Trust,
    /// The attempt's `invoke_agent` span: what its helpers' spans and calls continue.
    span: SpanContext,
    /// What befell the attempt (an egress refusal, a spend ceiling, a cancel), for its span.
    notes: Vec<SpanEvent>,
    /// The registry's cancel signal for the task.
    canceled: watch::Receiver<bool>,
    /// Set when calls in flight must stop: the attempt ended, or the task is ending without
    /// an answer.
    over: watch::Sender<bool>,
    /// Set by end-without-answer: the harness is to exit (see `harness::run`).
    wind_down: watch::Sender<bool>,
    no_answer: Option<String>,
    gave_no_answer: Vec<NoAnswer>,
    /// Cloned into each ticket; `None` once closing, so no call starts after.
    in_flight: Option<mpsc::Sender<()>>,
    /// Ends (answers `None`) once every ticket and `in_flight` are dropped.
    all_done: Option<mpsc::Receiver<()>>,
}

/// A call's licence to run: the trust class to stamp, when to stop, and (by being held) the
/// fact that it is still in flight.
pub struct Ticket {
    pub trust: Trust,
    pub stop: Stop,
    /// The span the call goes under: its attempt's, or the operation's that made it.
    pub span: SpanContext,
    _in_flight: mpsc::Sender<()>,
}

impl Ticket {
    /// The same ticket, for a call made under `span`.
    pub fn under(mut self, span: &SpanContext) -> Ticket {
        self.span = span.clone();
        self
    }
}

/// Fires when the task is canceled or its attempt ends.
#[derive(Clone)]
pub struct Stop {
    canceled: watch::Receiver<bool>,
    over: watch::Receiver<bool>,
}

impl Stop {
    /// Resolves once it has fired (at once if it already has).
    pub async fn fired(&mut self) {
        let canceled = async {
            // A task whose cancel signal is gone has ended: `over` says so in time.
            if self.canceled.wait_for(|c| *c).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let over = async {
            if self.over.wait_for(|o| *o).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            _ = canceled => {}
            _ = over => {}
        }
    }

    /// True when the task was canceled, as opposed to its attempt simply having ended.
    pub fn was_canceled(&self) -> bool {
        *self.canceled.borrow()
    }
}

/// Why a helper may not start a call or end the task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The task's attempt is not running (it ended, or never started).
    NotRunning,
    /// The task ran end-without-answer: it is ending.
    EndingWithoutAnswer,
}

impl Refused {
    pub fn message(self) -> &'static str {
        match self {
            Refused::NotRunning => "the task is no longer running",
            Refused::EndingWithoutAnswer => {
                "the task is ending without an answer (end-without-answer ran): exit now"
            }
        }
    }
}

/// What a task's errands leave for its ending.
#[derive(Debug, Default, PartialEq)]
pub struct Closed {
    /// The end-without-answer reason: the task fails with it as its status message.
    pub no_answer: Option<String>,
    /// `metadata.murmur.noAnswerBelow`; empty when every member call completed.
    pub no_answer_below: Vec<Value>,
    /// The attempt's span events, in the order they happened.
    pub notes: Vec<SpanEvent>,
}

impl Errands {
    fn lock(&self) -> MutexGuard<'_, HashMap<TaskId, Open>> {
        self.tasks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Opens a task's errands as its attempt starts; answers the signal end-without-answer
    /// sets.
    pub fn open(
        &self,
        task: &TaskId,
        trust: Trust,
        canceled: watch::Receiver<bool>,
        span: SpanContext,
    ) -> watch::Receiver<bool> {
        let (in_flight, all_done) = mpsc::channel(1);
        let (wind_down, winding) = watch::channel(false);
        self.lock().insert(
            task.clone(),
            Open {
                trust,
                span,
                notes: Vec::new(),
                canceled,
                over: watch::channel(false).0,
                wind_down,
                no_answer: None,
                gave_no_answer: Vec::new(),
                in_flight: Some(in_flight),
                all_done: Some(all_done),
            },
        );
        winding
    }

    /// A call the task's harness asked for is starting.
    pub fn begin(&self, task: &TaskId) -> Result<Ticket, Refused> {
        let tasks = self.lock();
        let open = tasks.get(task).ok_or(Refused::NotRunning)?;
        if open.no_answer.is_some() {
            return Err(Refused::EndingWithoutAnswer);
        }
        let in_flight = open.in_flight.clone().ok_or(Refused::NotRunning)?;
        if *open.canceled.borrow() {
            return Err(Refused::NotRunning);
        }
        Ok(Ticket {
            trust: open.trust,
            span: open.span.clone(),
            stop: Stop {
                canceled: open.canceled.clone(),
                over: open.over.subscribe(),
            },
            _in_flight: in_flight,
        })
    }

    /// The running attempt's span, which a helper's span continues; `None` once it ended.
    pub fn span_of(&self, task: &TaskId) -> Option<SpanContext> {
        self.lock().get(task).map(|o| o.span.clone())
    }

    /// Notes an event on the running attempt's span (nothing once it ended).
    pub fn note(&self, task: &TaskId, name: &'static str, attributes: Vec<KeyValue>) {
        if let Some(open) = self.lock().get_mut(task) {
            open.notes.push(SpanEvent::now(name, attributes));
        }
    }

    /// True once the task ran end-without-answer: it waits for nothing more.
    pub fn is_ending(&self, task: &TaskId) -> bool {
        self.lock().get(task).is_some_and(|o| o.no_answer.is_some())
    }

    /// A member call of the task gave no answer: it goes into the task's noAnswerBelow.
    pub fn gave_no_answer(&self, task: &TaskId, call: NoAnswer) {
        if let Some(open) = self.lock().get_mut(task) {
            open.gave_no_answer.push(call);
        }
    }

    /// end-without-answer: the task will fail with `reason` and noAnswer, whatever its harness
    /// does next. Calls in flight stop now; the harness is to exit.
    pub fn end_without_answer(&self, task: &TaskId, reason: String) -> Result<(), Refused> {
        let mut tasks = self.lock();
        let open = tasks.get_mut(task).ok_or(Refused::NotRunning)?;
        if open.no_answer.is_some() {
            return Err(Refused::EndingWithoutAnswer);
        }
        if open.in_flight.is_none() || *open.canceled.borrow() {
            return Err(Refused::NotRunning);
        }
        open.no_answer = Some(reason);
        let _ = open.over.send_replace(true);
        let _ = open.wind_down.send_replace(true);
        Ok(())
    }

    /// Closes a task's errands as its attempt ends: calls in flight stop, and each is waited
    /// for (at most [`CLOSE_WITHIN`]) until it has canceled its peer's task and written its
    /// record. Answers what the task's ending needs.
    pub async fn close(&self, task: &TaskId) -> Closed {
        let all_done = {
            let mut tasks = self.lock();
            let Some(open) = tasks.get_mut(task) else {
                return Closed::default();
            };
            let _ = open.over.send_replace(true);
            open.in_flight = None;
            open.all_done.take()
        };
        if let Some(mut all_done) = all_done {
            let _ = tokio::time::timeout(CLOSE_WITHIN, all_done.recv()).await;
        }
        let Some(open) = self.lock().remove(task) else {
            return Closed::default();
        };
        Closed {
            no_answer: open.no_answer,
            no_answer_below: below::no_answer_below(&open.gave_no_answer),
            notes: open.notes,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Instant;

    use super::*;
    use crate::trace::CallStatus;

    fn opened(errands: &Errands) -> (TaskId, watch::Sender<bool>, watch::Receiver<bool>) {
        let task = TaskId::mint();
        let (cancel, canceled) = watch::channel(false);
        let span = crate::telemetry::Span::start("t", crate::telemetry::Kind::Internal, None);
        let winding = errands.open(&task, Trust::Untrusted, canceled, span.context().clone());
        (task, cancel, winding)
    }

    #[tokio::test]
    async fn closing_stops_calls_in_flight_and_waits_for_their_records() {
        let errands = Arc::new(Errands::default());
        let (task, _cancel, _) = opened(&errands);
        let ticket = errands.begin(&task).unwrap();
        assert_eq!(ticket.trust, Trust::Untrusted);
        let call = {
            let errands = errands.clone();
            let task = task.clone();
            tokio::spawn(async move {
                let mut ticket = ticket;
                ticket.stop.fired().await;
                // The call's own cleanup (cancelling its peer's task) takes a while.
                tokio::time::sleep(Duration::from_millis(200)).await;
                errands.gave_no_answer(
                    &task,
                    NoAnswer {
                        member: "coder".into(),
                        status: CallStatus::Canceled,
                        reported: vec![],
                    },
                );
            })
        };
        let began = Instant::now();
        let closed = errands.close(&task).await;
        assert!(began.elapsed() >= Duration::from_millis(200), "it waited");
        assert_eq!(
            closed.no_answer_below,
            vec![serde_json::json!({"member": "coder", "status": "canceled"})]
        );
        assert!(call.await.is_ok());
        assert_eq!(errands.begin(&task).err(), Some(Refused::NotRunning));
    }

    #[tokio::test]
    async fn a_cancel_fires_every_calls_stop_and_no_call_starts_after_it() {
        let errands = Errands::default();
        let (task, cancel, _) = opened(&errands);
        let mut ticket = errands.begin(&task).unwrap();
        let _ = cancel.send_replace(true);
        tokio::time::timeout(Duration::from_secs(1), ticket.stop.fired())
            .await
            .expect("the stop fired");
        assert!(ticket.stop.was_canceled());
        assert_eq!(errands.begin(&task).err(), Some(Refused::NotRunning));
    }

    #[tokio::test]
    async fn end_without_answer_winds_down_once_and_refuses_further_calls() {
        let errands = Errands::default();
        let (task, _cancel, mut winding) = opened(&errands);
        let mut ticket = errands.begin(&task).unwrap();
        assert_eq!(
            errands.end_without_answer(&task, "q gave no answer".into()),
            Ok(())
        );
        assert!(*winding.borrow_and_update());
        tokio::time::timeout(Duration::from_secs(1), ticket.stop.fired())
            .await
            .expect("calls in flight stop");
        assert!(!ticket.stop.was_canceled());
        assert_eq!(
            errands.end_without_answer(&task, "again".into()),
            Err(Refused::EndingWithoutAnswer)
        );
        assert_eq!(
            errands.begin(&task).err(),
            Some(Refused::EndingWithoutAnswer)
        );
        assert!(errands.is_ending(&task));
        drop(ticket);
        let closed = errands.close(&task).await;
        assert_eq!(closed.no_answer.as_deref(), Some("q gave no answer"));
        assert!(closed.no_answer_below.is_empty());
    }

    #[tokio::test]
    async fn a_task_without_errands_refuses_and_closes_empty() {
        let errands = Errands::default();
        let task = TaskId::mint();
        assert_eq!(errands.begin(&task).err(), Some(Refused::NotRunning));
        assert_eq!(
            errands.end_without_answer(&task, "r".into()),
            Err(Refused::NotRunning)
        );
        assert_eq!(errands.close(&task).await, Closed::default());
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_that_never_ends_holds_the_close_only_so_long() {
        let errands = Errands::default();
        let (task, _cancel, _) = opened(&errands);
        let stuck = errands.begin(&task).unwrap();
        let closing = errands.close(&task);
        let closed = tokio::time::timeout(CLOSE_WITHIN + Duration::from_secs(1), closing).await;
        assert!(closed.is_ok(), "close is bounded");
        drop(stuck);
    }
}
