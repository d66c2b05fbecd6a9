//! The registry proper: admission (capacity and closing), state changes, cancel and replies to
//! waiting tasks (listing is `list.rs`). Every change bumps one watch counter that held requests and the
//! worker wait on. It also owns the bound on what ended tasks cost: a running byte total of
//! every task it keeps, and the forgetting of the longest-ended tasks past [`RETAINED`].
//!
//! Over 600 lines: every state change under the registry's one lock, in one place; listing,
//! approvals and tests are apart.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Map, Value};
use tokio::sync::{oneshot, watch};

mod approvals;
mod list;

pub use list::{ListPage, ListQuery};

use super::approval::{By, Verdict};
use super::page_token;
use super::state::{StateFilter, TaskState};
use super::task::{Owner, Task, TaskInput, Viewer};
use crate::clock::Millis;
use crate::ids::{ContextId, TaskId};

/// The answer to a new task.
pub enum Admission {
    Accepted(TaskId, Value),
    /// Refused for room or closing: the TASK_STATE_REJECTED task, answered at once.
    Rejected(TaskId, Value),
}

/// Why a CancelTask changes nothing.
pub enum CancelRefusal {
    NotFound,
    NotCancelable(TaskState),
}

/// Why a message naming a task cannot continue it.
pub enum ReplyRefusal {
    NotFound,
    NotWaiting(TaskState),
    OtherContext,
    /// The task waits for an approval and the reply is no answer to it: the sentence says why
    /// and how to answer; the question stays open.
    NotAnAnswer(String),
}

/// A reply's content: its parts as the agent reads them, and its data parts as sent.
pub struct Reply<'m> {
    pub text: String,
    pub data: &'m [Value],
}

/// How a task attempt ended, as the worker reports it.
#[derive(Clone, Debug)]
pub enum Outcome {
    Completed(String),
    Failed(String),
    /// The attempt ended after a cancel; `Some` is the status sentence to record.
    CanceledEnded(Option<String>),
    /// The harness ran end-without-answer: the task fails with this reason as its status
    /// message and `metadata.murmur.noAnswer: true`, whatever the harness did after.
    NoAnswer(String),
}

/// What a terminal task's `metadata.murmur` says beyond its state (agent-card.md "Task
/// metadata"), each list absent from it when empty.
#[derive(Default, Debug)]
pub struct Notes {
    /// The members it called that gave it no answer.
    pub no_answer_below: Vec<Value>,
    /// The shell commands it moved to the background that still ran when it ended.
    pub running_commands: Vec<Value>,
}

/// A task handed to the worker.
pub struct Started {
    pub id: TaskId,
    pub context_id: String,
    /// Who started it: a context's conversation is its owner's alone.
    pub owner: Owner,
    pub input: TaskInput,
    pub canceled: watch::Receiver<bool>,
}

struct Control {
    cancel: watch::Sender<bool>,
    reply: Option<oneshot::Sender<String>>,
    /// An open approval's answer; dropped on cancel, which the asker reads as a denial.
    approval: Option<oneshot::Sender<Verdict>>,
}

/// Told of every change, under the registry's lock (so it sees changes in order).
pub type Observer = Arc<dyn Fn(&Task) + Send + Sync>;

/// What keeps the tasks beyond the process (the session's store): told of every change and
/// of every task forgotten, under the registry's lock, so it sees them in `seq` order and
/// [`Registry::newest`] never names a change it has not been handed.
pub trait Journal: Send + Sync {
    fn changed(&self, task: &Task);
    fn forgotten(&self, id: &TaskId);
}

struct Inner {
    observer: Option<Observer>,
    journal: Option<Arc<dyn Journal>>,
    retention: Retention,
    /// The sum of every kept task's [`Task::held`].
    bytes: usize,
    tasks: HashMap<TaskId, Task>,
    order: BTreeMap<u64, TaskId>,
    seq: u64,
    /// The newest change an answer must not leave before the journal keeps (see
    /// [`Registry::newest`]): every change but a task's rejection at the door.
    binding: u64,
    queue: VecDeque<TaskId>,
    running: Option<TaskId>,
    closing: bool,
    controls: HashMap<TaskId, Control>,
}

/// Every task of the session.
pub struct Registry {
    inner: Mutex<Inner>,
    changes: watch::Sender<u64>,
    /// The running slot plus the tasks allowed to wait behind it; 0 starts no task.
    slots: usize,
}

/// How much the registry keeps: at most `tasks` tasks, holding at most `bytes` between them
/// (see [`Task::held_bytes`]). Past either, the task that ended longest ago is forgotten
/// (answered -32001 from then on). Live tasks are never forgotten, nor the task that just
/// changed, so a held request always reads the ending it waited for.
#[derive(Clone, Copy, Debug)]
pub struct Retention {
    pub tasks: usize,
    pub bytes: usize,
}

/// The bound on a capsule that runs for weeks: far above what any session reads back, and small
/// beside a harness's own memory. 64 MiB holds eight tasks with the largest response a harness
/// can give (8 MiB) and still thousands of ordinary ones.
pub const RETAINED: Retention = Retention {
    tasks: 10_000,
    bytes: 64 << 20,
};

pub const BUSY: &str = "task rejected: capsule is busy";
pub const CLOSING: &str = "task rejected: the session is closing";

impl Inner {
    /// Records a change: a new timestamp, the front of the ListTasks order, and what the task
    /// now holds in the byte total. Every change of a task goes through here, so the total
    /// cannot drift from what the tasks hold; then the retention bound is enforced.
    fn touch(&mut self, id: &TaskId) {
        self.seq += 1;
        let seq = self.seq;
        if let Some(task) = self.tasks.get_mut(id) {
            self.order.remove(&task.seq);
            task.seq = seq;
            task.changed_at = Millis::now();
            // A rejected task changes once, at the door, and is terminal in that very answer:
            // nothing waits for its record (docs/store.md says what a crash can lose).
            if task.state != TaskState::Rejected {
                self.binding = seq;
            }
            let held = task.held_bytes();
            self.bytes = self.bytes - task.held + held;
            task.held = held;
            self.order.insert(seq, id.clone());
            if let Some(observe) = &self.observer {
                observe(task);
            }
            if let Some(journal) = &self.journal {
                journal.changed(task);
            }
        }
        self.forget_beyond(id);
    }

    /// Forgets the tasks that ended longest ago while more tasks or bytes are kept than the
    /// retention allows; never a live task, nor `changed` (the task whose change this is).
    fn forget_beyond(&mut self, changed: &TaskId) {
        while self.tasks.len() > self.retention.tasks || self.bytes > self.retention.bytes {
            let oldest_ended = self
                .order
                .iter()
                .find(|(_, id)| {
                    *id != changed && self.tasks.get(*id).is_some_and(|t| t.state.is_terminal())
                })
                .map(|(seq, id)| (*seq, id.clone()));
            let Some((seq, id)) = oldest_ended else {
                return;
            };
            self.order.remove(&seq);
            if let Some(task) = self.tasks.remove(&id) {
                self.bytes -= task.held;
            }
            if let Some(journal) = &self.journal {
                journal.forgotten(&id);
            }
        }
    }

    /// The task as GetTask answers it (`null` for an id the registry never held).
    fn json_of(&self, id: &TaskId) -> Value {
        self.tasks
            .get(id)
            .map(|t| t.to_json(None))
            .unwrap_or_default()
    }

    fn visible(&self, id: &str, viewer: &Viewer) -> Option<&Task> {
        self.tasks
            .get(&TaskId::from_wire(id))
            .filter(|t| viewer.sees(&t.owner))
    }

    fn set_state(&mut self, id: &TaskId, state: TaskState) {
        if let Some(task) = self.tasks.get_mut(id) {
            task.state = state;
        }
        self.touch(id);
    }

    /// Moves a live task to CANCELED and signals whoever runs it.
    fn cancel_live(&mut self, id: &TaskId) {
        self.end_live(id, None);
    }

    /// Signals whoever runs a live task to stop, and moves it to CANCELED, or with `failed`
    /// to FAILED saying why (its attempt's end then keeps that).
    fn end_live(&mut self, id: &TaskId, failed: Option<&str>) {
        self.queue.retain(|q| q != id);
        if let Some(control) = self.controls.get_mut(id) {
            control.reply = None;
            control.approval = None;
            let _ = control.cancel.send_replace(true);
        }
        if let Some(task) = self.tasks.get_mut(id) {
            task.prompt = None;
            task.approval = None;
            task.input = None;
            if let Some(why) = failed {
                task.status_text = Some(why.to_owned());
            }
        }
        let state = match failed {
            Some(_) => TaskState::Failed,
            None => TaskState::Canceled,
        };
        self.set_state(id, state);
    }
}

impl Registry {
    /// `slots`: 0 under `task_acceptance: none`, 1 under single, 1 + queue_depth under queue.
    pub fn new(slots: usize) -> Self {
        Registry::with_retention(slots, RETAINED)
    }

    /// A registry keeping what `retention` allows (see [`RETAINED`]).
    pub fn with_retention(slots: usize, retention: Retention) -> Self {
        Registry {
            inner: Mutex::new(Inner {
                observer: None,
                journal: None,
                retention,
                bytes: 0,
                tasks: HashMap::new(),
                order: BTreeMap::new(),
                seq: 0,
                binding: 0,
                queue: VecDeque::new(),
                running: None,
                closing: false,
                controls: HashMap::new(),
            }),
            changes: watch::channel(0).0,
            slots,
        }
    }

    /// Tells `observer` of every change from now on.
    pub fn observed(self, observer: Observer) -> Self {
        self.lock().observer = Some(observer);
        self
    }

    /// Hands every change from now on to `journal` as well.
    pub fn journaled(self, journal: Arc<dyn Journal>) -> Self {
        self.lock().journal = Some(journal);
        self
    }

    /// The position of the newest change an answer must wait for: an answer rendered now says
    /// nothing a later change made, so once the journal has kept everything up to here, the
    /// answer may leave. A rejection at the door is not waited for: it never ran, and its
    /// answer is its whole story.
    pub fn newest(&self) -> u64 {
        self.lock().binding
    }

    /// Takes back the tasks a store kept (in any order), at the positions they had, before
    /// the door serves: GetTask and ListTasks answer them as they did, and the page tokens
    /// issued then still name their place. `newest` is the newest position the store saw. A
    /// task that was live when its process ended cannot go on (nothing runs it now): it fails
    /// with `why`, which the journal keeps like any change.
    pub fn restore(&self, tasks: Vec<Task>, newest: u64, why: &str) {
        let mut inner = self.lock();
        let mut live = Vec::new();
        for mut task in tasks {
            task.held = task.held_bytes();
            inner.bytes += task.held;
            inner.seq = inner.seq.max(task.seq);
            inner.order.insert(task.seq, task.id.clone());
            if !task.state.is_terminal() {
                live.push((task.seq, task.id.clone()));
            }
            inner.tasks.insert(task.id.clone(), task);
        }
        inner.seq = inner.seq.max(newest);
        inner.binding = inner.seq;
        // Failed in the order they last changed, so they keep that order among themselves.
        live.sort();
        for (_, id) in live {
            if let Some(task) = inner.tasks.get_mut(&id) {
                task.state = TaskState::Failed;
                task.status_text = Some(why.to_owned());
                task.prompt = None;
                task.approval = None;
            }
            inner.touch(&id);
        }
        // Kept within today's bounds, should they be smaller than the store's.
        if let Some(newest) = inner.order.values().next_back().cloned() {
            inner.forget_beyond(&newest);
        }
        drop(inner);
        self.changed();
    }

    /// Reads a task the viewer sees, under the lock: consistent with the observer's record.
    pub fn read<T>(&self, id: &str, viewer: &Viewer, f: impl FnOnce(&Task) -> T) -> Option<T> {
        self.lock().visible(id, viewer).map(f)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic elsewhere while holding the lock leaves consistent data (each change is one
        // assignment); keep serving rather than poisoning the door.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver that wakes on every change, for held requests and the worker.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// What the kept tasks hold between them, in bytes (see [`Task::held_bytes`]).
    pub fn held_bytes(&self) -> usize {
        self.lock().bytes
    }

    /// Takes a new task, or rejects it when there is no room or the session is closing. A
    /// rejected task keeps only what GetTask shows: its input is dropped here.
    pub fn admit(&self, context_id: Option<String>, owner: Owner, input: TaskInput) -> Admission {
        self.admit_within(context_id, owner, input, true)
    }

    /// [`Registry::admit`] for a task the session starts itself: queued whatever the room,
    /// refused only when the session is closing (or when it starts no task at all).
    pub fn admit_beyond_room(
        &self,
        context_id: Option<String>,
        owner: Owner,
        input: TaskInput,
    ) -> Admission {
        self.admit_within(context_id, owner, input, false)
    }

    fn admit_within(
        &self,
        context_id: Option<String>,
        owner: Owner,
        input: TaskInput,
        room_counts: bool,
    ) -> Admission {
        let id = TaskId::mint();
        let context_id = context_id.unwrap_or_else(|| ContextId::mint().to_string());
        let mut inner = self.lock();
        let busy = inner.running.is_some() as usize + inner.queue.len();
        let refusal = if inner.closing {
            Some(CLOSING)
        } else if self.slots == 0 || (room_counts && busy >= self.slots) {
            Some(BUSY)
        } else {
            None
        };
        let state = if refusal.is_some() {
            TaskState::Rejected
        } else {
            TaskState::Submitted
        };
        let task = |context_id, input| Task {
            id: id.clone(),
            context_id,
            owner: owner.clone(),
            state,
            status_text: refusal.map(str::to_owned),
            changed_at: Millis::now(),
            seq: 0,
            response: None,
            prompt: None,
            approval: None,
            residue: Vec::new(),
            murmur_metadata: Map::new(),
            input,
            held: 0,
        };
        inner.tasks.insert(
            id.clone(),
            task(context_id.clone(), refusal.is_none().then_some(input)),
        );
        inner.touch(&id);
        let changed_at = inner.tasks.get(&id).map(|t| t.changed_at);
        if refusal.is_none() {
            inner.queue.push_back(id.clone());
            let (cancel, _) = watch::channel(false);
            inner.controls.insert(
                id.clone(),
                Control {
                    cancel,
                    reply: None,
                    approval: None,
                },
            );
        }
        drop(inner);
        self.changed();
        // The answer is rendered once the lock is released, from what was just recorded: every
        // admission takes this lock, and a JSON tree built under it is time other threads wait.
        let mut answer = task(context_id, None);
        answer.changed_at = changed_at.unwrap_or(answer.changed_at);
        let json = answer.to_json(None);
        match refusal {
            None => Admission::Accepted(id, json),
            Some(_) => Admission::Rejected(id, json),
        }
    }

    /// The task as GetTask answers it, as JSON text, when the viewer sees it. Rendered under
    /// the lock, but straight to bytes: no tree is built while other threads wait.
    pub fn get(&self, id: &str, viewer: &Viewer) -> Option<Vec<u8>> {
        self.lock().visible(id, viewer).map(Task::to_bytes)
    }

    /// The state of a task the viewer sees.
    pub fn state_of(&self, id: &str, viewer: &Viewer) -> Option<TaskState> {
        self.lock().visible(id, viewer).map(|t| t.state)
    }

    /// Waits until the task settles or the door closes, then answers it as it stands.
    pub async fn wait_settled(&self, id: &TaskId) -> Option<Value> {
        let mut rx = self.subscribe();
        loop {
            {
                let inner = self.lock();
                let task = inner.tasks.get(id)?;
                if task.state.is_settled() || inner.closing {
                    return Some(task.to_json(None));
                }
            }
            if rx.changed().await.is_err() {
                return self.lock().tasks.get(id).map(|t| t.to_json(None));
            }
        }
    }

    /// CancelTask: a live task moves to CANCELED at once; the worker stops its attempt.
    /// Answers the canceled task and the state it was in.
    pub fn cancel(&self, id: &str, viewer: &Viewer) -> Result<(Value, TaskState), CancelRefusal> {
        let mut inner = self.lock();
        let task = inner.visible(id, viewer).ok_or(CancelRefusal::NotFound)?;
        if task.state.is_terminal() {
            return Err(CancelRefusal::NotCancelable(task.state));
        }
        let (id, was) = (task.id.clone(), task.state);
        inner.cancel_live(&id);
        let json = inner.json_of(&id);
        drop(inner);
        self.changed();
        Ok((json, was))
    }

    /// murmur.StopSession: cancels every live task, answering their ids sorted, each with the
    /// state it was in.
    pub fn cancel_all(&self) -> Vec<(TaskId, TaskState)> {
        self.end_all(None)
    }

    /// Stops every live task and fails it saying `why` (the session ends without its stop:
    /// its supervisor is gone), answering their ids sorted, each with the state it was in.
    pub fn fail_all(&self, why: &str) -> Vec<(TaskId, TaskState)> {
        self.end_all(Some(why))
    }

    fn end_all(&self, failed: Option<&str>) -> Vec<(TaskId, TaskState)> {
        let mut inner = self.lock();
        let mut live: Vec<(TaskId, TaskState)> = inner
            .tasks
            .values()
            .filter(|t| !t.state.is_terminal())
            .map(|t| (t.id.clone(), t.state))
            .collect();
        live.sort_by(|a, b| a.0.cmp(&b.0));
        for (id, _) in &live {
            inner.end_live(id, failed);
        }
        drop(inner);
        if !live.is_empty() {
            self.changed();
        }
        live
    }

    /// The door is closing: new tasks are rejected and held requests answer as things stand.
    pub fn close(&self) {
        self.lock().closing = true;
        self.changed();
    }

    pub fn is_closing(&self) -> bool {
        self.lock().closing
    }

    /// True when no task runs or waits.
    pub fn is_idle(&self) -> bool {
        let inner = self.lock();
        inner.running.is_none() && inner.queue.is_empty()
    }

    /// Waits for the next queued task and gives it the running slot (TASK_STATE_WORKING).
    /// `None` once the door is closing.
    pub async fn next(&self) -> Option<Started> {
        let mut rx = self.subscribe();
        loop {
            {
                let mut inner = self.lock();
                if inner.closing {
                    return None;
                }
                if inner.running.is_none() {
                    if let Some(id) = inner.queue.pop_front() {
                        inner.running = Some(id.clone());
                        let canceled = inner.controls.get(&id).map(|c| c.cancel.subscribe());
                        // The input moves to the worker: the registry keeps no copy of it.
                        let input = inner.tasks.get_mut(&id).and_then(|t| t.input.take());
                        inner.set_state(&id, TaskState::Working);
                        let task = inner.tasks.get(&id);
                        let started = match (task, canceled) {
                            (Some(t), Some(canceled)) => Some(Started {
                                id: id.clone(),
                                context_id: t.context_id.clone(),
                                owner: t.owner.clone(),
                                input: input.unwrap_or_default(),
                                canceled,
                            }),
                            _ => None,
                        };
                        drop(inner);
                        self.changed();
                        if let Some(s) = started {
                            return Some(s);
                        }
                        continue;
                    }
                }
            }
            if rx.changed().await.is_err() {
                return None;
            }
        }
    }

    /// Records what a task left running when it was canceled (its residue artifact); answers
    /// the task as GetTask now shows it.
    pub fn set_residue(&self, id: &TaskId, residue: Vec<Value>) -> Value {
        let mut inner = self.lock();
        if let Some(task) = inner.tasks.get_mut(id) {
            task.residue = residue;
        }
        inner.json_of(id)
    }

    /// Records how an attempt ended. A task already canceled keeps its state; only its ending
    /// (the status sentence) is recorded, which still moves it to the front of the order.
    pub fn finish(&self, id: &TaskId, outcome: Outcome) {
        self.finish_with(id, outcome, Notes::default());
    }

    /// [`Registry::finish`], with what the task's `metadata.murmur` says of it (agent-card.md
    /// "Task metadata"); recorded on any terminal state, each key absent when empty.
    pub fn finish_with(&self, id: &TaskId, outcome: Outcome, notes: Notes) {
        let Notes {
            no_answer_below,
            running_commands,
        } = notes;
        let mut inner = self.lock();
        let Some(task) = inner.tasks.get_mut(id) else {
            return;
        };
        task.prompt = None;
        task.approval = None;
        task.input = None;
        match outcome {
            Outcome::Completed(answer) if !task.state.is_terminal() => {
                task.state = TaskState::Completed;
                task.status_text = Some("task completed".into());
                task.response = Some(answer);
            }
            Outcome::Failed(why) if !task.state.is_terminal() => {
                task.state = TaskState::Failed;
                task.status_text = Some(why);
            }
            // Failed as it was stopped (its supervisor went): the failure and its cause stand.
            Outcome::CanceledEnded(_) if task.state == TaskState::Failed => {}
            Outcome::CanceledEnded(text) => {
                task.state = TaskState::Canceled;
                if text.is_some() {
                    task.status_text = text;
                }
            }
            Outcome::NoAnswer(reason) if !task.state.is_terminal() => {
                task.state = TaskState::Failed;
                task.status_text = Some(reason);
                task.murmur_metadata
                    .insert("noAnswer".into(), Value::Bool(true));
            }
            // An attempt that finished as its cancel landed: the cancel stands.
            _ => {}
        }
        if !no_answer_below.is_empty() {
            task.murmur_metadata
                .insert("noAnswerBelow".into(), Value::Array(no_answer_below));
        }
        if !running_commands.is_empty() {
            task.murmur_metadata
                .insert("runningCommands".into(), Value::Array(running_commands));
        }
        inner.controls.remove(id);
        inner.touch(id);
        drop(inner);
        self.changed();
    }

    /// The worker is done with the running slot: the next queued task may start.
    pub fn release(&self, id: &TaskId) {
        let mut inner = self.lock();
        if inner.running.as_ref() == Some(id) {
            inner.running = None;
        }
        drop(inner);
        self.changed();
    }

    /// The harness asks a question: the task waits in TASK_STATE_INPUT_REQUIRED with a prompt
    /// artifact until a message names it. `None` when the task is no longer working.
    pub fn request_input(
        &self,
        id: &TaskId,
        question: String,
    ) -> Option<oneshot::Receiver<String>> {
        let mut inner = self.lock();
        let task = inner.tasks.get_mut(id)?;
        if task.state != TaskState::Working {
            return None;
        }
        task.prompt = Some(question);
        let (tx, rx) = oneshot::channel();
        inner.controls.get_mut(id)?.reply = Some(tx);
        inner.set_state(id, TaskState::InputRequired);
        drop(inner);
        self.changed();
        Some(rx)
    }

    /// A message naming a task: delivered as the reply when the task waits for input in the
    /// same context. The door's capacity is not consulted. A task waiting for an approval takes
    /// only an answer to it, and only from who may answer: the operator, or under
    /// `approvals_from: caller` the task's own caller; anyone else is told the task is not
    /// found, as for a task it does not see. Answers the task as the reply left it
    /// (TASK_STATE_WORKING).
    pub fn reply(
        &self,
        id: &str,
        viewer: &Viewer,
        context_id: Option<&str>,
        reply: Reply<'_>,
    ) -> Result<(TaskId, Value), ReplyRefusal> {
        let mut inner = self.lock();
        let task = inner.visible(id, viewer).ok_or(ReplyRefusal::NotFound)?;
        if task.state != TaskState::InputRequired {
            return Err(ReplyRefusal::NotWaiting(task.state));
        }
        if context_id.is_some_and(|c| c != task.context_id) {
            return Err(ReplyRefusal::OtherContext);
        }
        let answer = match &task.approval {
            None => None,
            Some(q) => {
                let by = match viewer {
                    Viewer::Everyone => By::Operator,
                    Viewer::Credential(_) if q.caller_may_answer => By::Caller,
                    Viewer::Credential(_) => return Err(ReplyRefusal::NotFound),
                };
                let (decision, reason) = q
                    .answer_of(&reply.text, reply.data)
                    .map_err(|wrong| ReplyRefusal::NotAnAnswer(q.how_to_answer(id, &wrong)))?;
                Some(Verdict {
                    decision,
                    by,
                    reason,
                })
            }
        };
        let id = task.id.clone();
        let (waiter, approval) = match inner.controls.get_mut(&id) {
            Some(c) => (c.reply.take(), c.approval.take()),
            None => (None, None),
        };
        if let Some(task) = inner.tasks.get_mut(&id) {
            task.prompt = None;
            task.approval = None;
        }
        inner.set_state(&id, TaskState::Working);
        let json = inner.json_of(&id);
        drop(inner);
        match (answer, approval, waiter) {
            (Some(verdict), Some(tx), _) => {
                let _ = tx.send(verdict);
            }
            (None, _, Some(w)) => {
                let _ = w.send(reply.text);
            }
            _ => {}
        }
        self.changed();
        Ok((id, json))
    }

    /// One line per referenced task, as it stands now (agent-card.md "Referenced tasks").
    pub fn describe_references(&self, ids: &[String], viewer: &Viewer) -> String {
        let inner = self.lock();
        let mut block = String::from("Referenced tasks:");
        for id in ids {
            block.push_str("\n- ");
            block.push_str(id);
            match inner.visible(id, viewer) {
                None => block.push_str(": not a task this capsule holds"),
                Some(t) => {
                    block.push_str(": ");
                    block.push_str(t.state.word());
                    match (t.state, &t.response, &t.status_text) {
                        (TaskState::Completed, Some(r), _) => {
                            block.push('\n');
                            block.push_str(&crate::text::fenced("response", r));
                        }
                        (s, _, Some(msg)) if s.is_terminal() && s != TaskState::Completed => {
                            block.push_str(": ");
                            block.push_str(&msg.replace(['\n', '\r'], " "));
                        }
                        _ => {}
                    }
                }
            }
        }
        block
    }
}

#[cfg(test)]
mod tests;
