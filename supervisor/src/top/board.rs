//! What `mur top` knows, and nothing about how it learned it or how it is drawn: the listing of
//! running capsules in scope, and per session its tasks, the calls and delegations it has in
//! flight, and the alerts (refusals and failures) as they happened. Updated from WatchSession
//! events, ListTasks answers and trace records; read by the screen and the snapshot alike. No
//! I/O here, so every rule is tested directly. Everything it holds is bounded.
//!
//! Over 600 lines: one model fed by three sources, whose updates must agree; its tests are apart.

use std::collections::{HashMap, VecDeque};

use capsule::tasks::TaskState;
use serde_json::Value;

use crate::approvals::Open;
use crate::listing::{self, Entry, Placed};
use crate::records::RunningCapsule;

/// The tasks kept per session: the newest; an ended task gives way before a live one.
pub const TASKS_KEPT: usize = 50;
/// The lines of output kept per task.
pub const TAIL_LINES: usize = 40;
/// The alerts kept, newest last.
pub const ALERTS_KEPT: usize = 50;
/// The ended sessions kept in view, newest last.
pub const ENDED_KEPT: usize = 30;
/// A line of output or text is cut to this many characters.
const LINE_CHARS: usize = 240;

/// What `mur top` was asked to show.
#[derive(Debug, Clone)]
pub enum Scope {
    Everything,
    /// The launch of one session (its whole formation for a member), and below it every
    /// sub-capsule it delegated to.
    LaunchOf(Box<RunningCapsule>),
}

/// How the view is connected to a session's stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    Connecting,
    Live,
    Lost(String),
    /// Its capsule is no longer running; kept in view so its last answer can be read.
    Ended,
}

#[derive(Debug, Clone)]
pub struct TaskView {
    pub id: String,
    pub state: TaskState,
    /// The first and the latest status timestamps seen, in ms since the epoch.
    pub since_ms: Option<i64>,
    pub changed_ms: Option<i64>,
    pub turns: u32,
    /// Tokens in and out, summed over the task's model calls (http capsules).
    pub tokens: Option<(u64, u64)>,
    /// The last text frame or status message.
    pub last_text: String,
    /// Its output as it streamed: text, tool progress, then the answer.
    pub tail: VecDeque<String>,
    /// What it waits for an answer to, while it waits for an approval.
    pub question: Option<Open>,
}

/// A call-member (or send-message) in flight: the caller's task, whom it called, the task the
/// callee runs for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub caller_task: String,
    pub callee: String,
    pub callee_task: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delegation {
    pub task: String,
    pub id: String,
    pub capsule: String,
}

/// A refusal or failure, as it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alert {
    /// `HH:MM:SS` UTC, from the record.
    pub at: String,
    pub session: String,
    pub task: String,
    pub what: String,
}

#[derive(Debug, Clone)]
pub struct SessionView {
    pub link: Link,
    pub tasks: Vec<TaskView>,
    pub calls: Vec<Call>,
    pub delegations: Vec<Delegation>,
    /// The members this one may call, from its roster.
    pub callees: Vec<String>,
    /// What its model calls used, from its `inference` records.
    pub spent: Spent,
    /// Its formation's ceilings on all members together, from its roster.
    pub ceiling: Option<crate::records::RosterSpend>,
}

/// Tokens and dollars a session's calls used; whether a spend ceiling refused one.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spent {
    pub tokens: u64,
    /// `None` while no call was priced.
    pub usd: Option<f64>,
    pub stopped: bool,
}

impl SessionView {
    fn new() -> Self {
        SessionView {
            link: Link::Connecting,
            tasks: Vec::new(),
            calls: Vec::new(),
            delegations: Vec::new(),
            callees: Vec::new(),
            spent: Spent::default(),
            ceiling: None,
        }
    }

    fn count(&self, states: &[TaskState]) -> usize {
        self.tasks
            .iter()
            .filter(|t| states.contains(&t.state))
            .count()
    }

    /// Tasks waiting for the harness, and tasks being worked on (or waiting for input).
    pub fn queued(&self) -> usize {
        self.count(&[TaskState::Submitted])
    }

    pub fn running(&self) -> usize {
        self.count(&[TaskState::Working, TaskState::InputRequired])
    }

    fn task(&mut self, id: &str) -> &mut TaskView {
        if let Some(i) = self.tasks.iter().position(|t| t.id == id) {
            return &mut self.tasks[i];
        }
        if self.tasks.len() >= TASKS_KEPT {
            let oldest_ended = self.tasks.iter().position(|t| t.state.is_terminal());
            self.tasks.remove(oldest_ended.unwrap_or(0));
        }
        self.tasks.push(TaskView {
            id: id.to_owned(),
            state: TaskState::Submitted,
            since_ms: None,
            changed_ms: None,
            turns: 0,
            tokens: None,
            last_text: String::new(),
            tail: VecDeque::new(),
            question: None,
        });
        let last = self.tasks.len() - 1;
        &mut self.tasks[last]
    }
}

pub struct Board {
    scope: Scope,
    pub entries: Vec<Entry>,
    sessions: HashMap<String, SessionView>,
    pub alerts: VecDeque<Alert>,
    /// Sessions shown before whose capsule has ended, listed last under an `ended` heading.
    ended: VecDeque<Placed>,
}

/// The heading the ended sessions are listed under.
pub const ENDED_HEADING: &str = "ended";

/// The sessions a change of records started and ended showing.
#[derive(Debug, Default)]
pub struct Changed {
    pub added: Vec<RunningCapsule>,
    pub removed: Vec<String>,
    /// Sessions whose capsule is another process than before (a restart): their stream is
    /// read again from the start.
    pub restarted: Vec<RunningCapsule>,
}

impl Board {
    pub fn new(scope: Scope) -> Self {
        Board {
            scope,
            entries: Vec::new(),
            sessions: HashMap::new(),
            alerts: VecDeque::new(),
            ended: VecDeque::new(),
        }
    }

    pub fn session(&self, id: &str) -> Option<&SessionView> {
        self.sessions.get(id)
    }

    /// Every open question of the sessions shown, in listing order, oldest task first.
    pub fn questions(&self) -> Vec<(&Placed, &Open)> {
        let mut out = Vec::new();
        for p in self.capsules() {
            let Some(view) = self.sessions.get(&p.rec.session_id) else {
                continue;
            };
            if view.link == Link::Ended {
                continue;
            }
            out.extend(
                view.tasks
                    .iter()
                    .filter_map(|t| t.question.as_ref())
                    .map(|q| (p, q)),
            );
        }
        out
    }

    /// The capsules shown, in listing order.
    pub fn capsules(&self) -> impl Iterator<Item = &Placed> {
        self.entries.iter().filter_map(|e| match e {
            Entry::Capsule(p) => Some(&**p),
            Entry::Heading(_) => None,
        })
    }

    pub fn placed(&self, session: &str) -> Option<&Placed> {
        self.capsules().find(|p| p.rec.session_id == session)
    }

    /// The running capsules as `records::running()` answers them now.
    pub fn set_records(&mut self, all: Vec<RunningCapsule>) -> Changed {
        let shown: Vec<String> = all
            .iter()
            .filter(|r| self.in_scope(r, &all))
            .map(|r| r.session_id.clone())
            .collect();
        let before: Vec<Placed> = self.live().cloned().collect();
        let mut entries = keep_shown(listing::list(all), &shown);
        let mut changed = Changed::default();
        for entry in &entries {
            let Entry::Capsule(p) = entry else { continue };
            match before.iter().find(|b| b.rec.session_id == p.rec.session_id) {
                None => changed.added.push(p.rec.clone()),
                Some(b) if b.rec.pid != p.rec.pid => changed.restarted.push(p.rec.clone()),
                Some(_) => {}
            }
        }
        for gone in before
            .into_iter()
            .filter(|b| !shown.contains(&b.rec.session_id))
        {
            changed.removed.push(gone.rec.session_id.clone());
            self.end(gone);
        }
        for rec in &changed.added {
            self.ended.retain(|e| e.rec.session_id != rec.session_id);
            let mut view = SessionView::new();
            view.callees = callees(rec);
            view.ceiling = crate::records::roster(&rec.records)
                .ok()
                .flatten()
                .and_then(|r| r.spend);
            self.sessions.insert(rec.session_id.clone(), view);
        }
        if !self.ended.is_empty() {
            entries.push(Entry::Heading(ENDED_HEADING.into()));
            entries.extend(
                self.ended
                    .iter()
                    .cloned()
                    .map(|p| Entry::Capsule(Box::new(p))),
            );
        }
        self.entries = entries;
        changed
    }

    /// The capsules shown that are running.
    fn live(&self) -> impl Iterator<Item = &Placed> {
        self.capsules().filter(|p| {
            self.sessions
                .get(&p.rec.session_id)
                .is_some_and(|v| v.link != Link::Ended)
        })
    }

    /// Keeps an ended session in view, its tasks as they last were.
    fn end(&mut self, mut gone: Placed) {
        if let Some(view) = self.sessions.get_mut(&gone.rec.session_id) {
            view.link = Link::Ended;
            view.calls.clear();
            view.delegations.clear();
        }
        gone.n = 0;
        self.ended.push_back(gone);
        while self.ended.len() > ENDED_KEPT {
            if let Some(old) = self.ended.pop_front() {
                self.sessions.remove(&old.rec.session_id);
            }
        }
    }

    fn in_scope(&self, rec: &RunningCapsule, all: &[RunningCapsule]) -> bool {
        let Scope::LaunchOf(of) = &self.scope else {
            return true;
        };
        let mut at = rec;
        for _ in 0..16 {
            let same = if of.formation.is_some() {
                crate::records::same_launch(at, of)
            } else {
                at.session_id == of.session_id
            };
            if same {
                return true;
            }
            match at
                .parent
                .as_ref()
                .and_then(|p| all.iter().find(|r| &r.session_id == p))
            {
                Some(parent) => at = parent,
                None => return false,
            }
        }
        false
    }

    pub fn set_link(&mut self, session: &str, link: Link) {
        if let Some(view) = self
            .sessions
            .get_mut(session)
            .filter(|v| v.link != Link::Ended)
        {
            view.link = link;
        }
    }

    /// A restarted capsule holds none of the tasks of the process before it; what it held
    /// ended with that process and its trace says so.
    pub fn forget_tasks(&mut self, session: &str) {
        if let Some(view) = self.sessions.get_mut(session) {
            view.tasks.retain(|t| t.state.is_terminal());
            view.calls.clear();
        }
    }

    /// A task as GetTask, ListTasks or a stream's opening event answers it.
    pub fn apply_task(&mut self, session: &str, task: &Value) {
        let (Some(view), Some(id)) = (self.sessions.get_mut(session), task["id"].as_str()) else {
            return;
        };
        let status = &task["status"];
        update_status(view.task(id), status, task["contextId"].as_str());
    }

    /// One StreamResponse `result` from the session's WatchSession.
    pub fn apply_event(&mut self, session: &str, result: &Value) {
        let Some(view) = self.sessions.get_mut(session) else {
            return;
        };
        if let Some(s) = result.get("statusUpdate") {
            if let Some(id) = s["taskId"].as_str() {
                update_status(view.task(id), &s["status"], s["contextId"].as_str());
            }
        } else if let Some(a) = result.get("artifactUpdate") {
            if let Some(id) = a["taskId"].as_str() {
                let task = view.task(id);
                for part in a["artifact"]["parts"].as_array().into_iter().flatten() {
                    if let Some(text) = part["text"].as_str() {
                        push_lines(task, text);
                    }
                }
            }
        } else if let Some(m) = result.get("message") {
            apply_frame(view, m);
        } else if let Some(t) = result.get("task") {
            if let Some(id) = t["id"].as_str() {
                update_status(view.task(id), &t["status"], t["contextId"].as_str());
            }
        }
    }

    /// One record of the session's trace.jsonl.
    pub fn apply_trace(&mut self, session: &str, rec: &Value) {
        let kind = rec["event_type"].as_str().unwrap_or("");
        let task = rec["task_id"].as_str().unwrap_or("").to_owned();
        let callee_name = self.member_at(rec["peer_url"].as_str().unwrap_or(""));
        let Some(view) = self.sessions.get_mut(session) else {
            return;
        };
        match kind {
            "inference" => {
                let t = view.task(&task);
                let (i, o) = t.tokens.unwrap_or((0, 0));
                t.tokens = Some((
                    i + rec["input_tokens"].as_u64().unwrap_or(0),
                    o + rec["output_tokens"].as_u64().unwrap_or(0),
                ));
                t.turns = t.turns.max(rec["turn"].as_u64().unwrap_or(0) as u32);
                // The gateway says what it counted; an http capsule's loop counts in and out.
                view.spent.tokens += rec["counted_tokens"].as_u64().unwrap_or_else(|| {
                    rec["input_tokens"].as_u64().unwrap_or(0)
                        + rec["output_tokens"].as_u64().unwrap_or(0)
                });
                if let Some(usd) = rec["usd"].as_f64() {
                    view.spent.usd = Some(view.spent.usd.unwrap_or(0.0) + usd);
                }
            }
            "spend_ceiling" => view.spent.stopped = true,
            "task_end" => {
                if let Some(state) = ended_state(rec["status"].as_str().unwrap_or("")) {
                    let t = view.task(&task);
                    if !t.state.is_terminal() {
                        t.state = state;
                    }
                    t.turns = t.turns.max(rec["turns"].as_u64().unwrap_or(0) as u32);
                }
            }
            "a2a_send" => {
                let caller_task = rec["caller_task_id"].as_str().unwrap_or("").to_owned();
                view.calls.push(Call {
                    caller_task,
                    callee: callee_name,
                    callee_task: rec["task_id"].as_str().map(str::to_owned),
                });
            }
            "member_call" => {
                let callee_task = rec["task_id"].as_str();
                let caller = rec["caller_task_id"].as_str().unwrap_or("");
                let member = rec["member"].as_str().unwrap_or("");
                let at = view.calls.iter().position(|c| {
                    c.caller_task == caller
                        && (c.callee_task.as_deref() == callee_task || c.callee == member)
                });
                if let Some(i) = at {
                    view.calls.remove(i);
                }
            }
            "delegation_start" => view.delegations.push(Delegation {
                task: task.clone(),
                id: rec["delegation_id"].as_str().unwrap_or("").to_owned(),
                capsule: rec["capsule"].as_str().unwrap_or("").to_owned(),
            }),
            "delegation_end" => {
                let id = rec["delegation_id"].as_str().unwrap_or("");
                view.delegations.retain(|d| d.id != id);
            }
            _ => {}
        }
        if let Some(what) = alert_text(kind, rec) {
            let caller = rec["caller_task_id"].as_str().unwrap_or("");
            self.alerts.push_back(Alert {
                at: clock_of(rec["timestamp"].as_str().unwrap_or("")),
                session: session.to_owned(),
                task: if task.is_empty() {
                    caller.to_owned()
                } else {
                    task
                },
                what: cut(&what),
            });
            while self.alerts.len() > ALERTS_KEPT {
                self.alerts.pop_front();
            }
        }
    }

    /// The member (or capsule) whose door is at `url`, else the URL as written.
    fn member_at(&self, url: &str) -> String {
        let port = |u: &str| {
            u.rsplit(':')
                .next()
                .map(|p| p.trim_end_matches('/').to_owned())
        };
        self.capsules()
            .find(|p| !url.is_empty() && port(&p.rec.url) == port(url))
            .map(|p| name_of(&p.rec).to_owned())
            .unwrap_or_else(|| url.to_owned())
    }
}

/// A member's name, else its capsule's.
pub fn name_of(rec: &RunningCapsule) -> &str {
    rec.member.as_deref().unwrap_or(&rec.name)
}

/// The listing with only the shown capsules, and a formation's heading only above shown members.
fn keep_shown(entries: Vec<Entry>, shown: &[String]) -> Vec<Entry> {
    let mut kept = Vec::new();
    let mut heading = None;
    for entry in entries {
        match entry {
            Entry::Heading(h) => heading = Some(h),
            Entry::Capsule(p) if shown.contains(&p.rec.session_id) => {
                if p.rec.parent.is_none() {
                    if let Some(h) = heading.take() {
                        kept.push(Entry::Heading(h));
                    }
                }
                kept.push(Entry::Capsule(p));
            }
            Entry::Capsule(_) => {}
        }
    }
    kept
}

/// The members a formation member may call, from the roster in its session folder.
fn callees(rec: &RunningCapsule) -> Vec<String> {
    match (crate::records::roster(&rec.records), &rec.member) {
        (Ok(Some(roster)), Some(member)) => roster.calls_of(member),
        _ => Vec::new(),
    }
}

fn update_status(task: &mut TaskView, status: &Value, context: Option<&str>) {
    if let Some(state) = status["state"].as_str().and_then(TaskState::from_wire) {
        // A replayed or late event never takes an ended task back.
        if !task.state.is_terminal() || state.is_terminal() {
            task.state = state;
        }
        // Only the status that asks shows the question; any later one has answered it.
        let asking = serde_json::json!({"id": task.id, "contextId": context, "status": status});
        task.question = Open::of(&asking).filter(|_| task.state == state);
    }
    // Events may come in any order (a task list, then a replay): the span is the earliest
    // to the latest status seen.
    if let Some(ms) = status["timestamp"].as_str().and_then(millis) {
        task.since_ms = Some(task.since_ms.map_or(ms, |s| s.min(ms)));
        task.changed_ms = Some(task.changed_ms.map_or(ms, |c| c.max(ms)));
    }
    if let Some(text) = status
        .pointer("/message/parts/0/text")
        .and_then(Value::as_str)
    {
        task.last_text = one_line(text);
    }
}

fn apply_frame(view: &mut SessionView, m: &Value) {
    let uri = capsule::stream::STREAM_URI;
    let meta = &m["metadata"][uri];
    let Some(id) = m["taskId"].as_str() else {
        return;
    };
    let frame = meta["frame"].as_str().unwrap_or("");
    let text = m
        .pointer("/parts/0/text")
        .and_then(Value::as_str)
        .unwrap_or("");
    let task = view.task(id);
    if let Some(turn) = meta["turn"].as_u64() {
        task.turns = task.turns.max(turn as u32);
    }
    match frame {
        "text" => {
            task.last_text = one_line(text);
            push_lines(task, text);
        }
        "tool-call-started" => push_lines(task, &format!("[{text}]")),
        "tool-call-progress" => push_lines(task, text),
        _ => {}
    }
}

/// Appends `text` to the task's tail, line by line, keeping the last [`TAIL_LINES`].
fn push_lines(task: &mut TaskView, text: &str) {
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        task.tail.push_back(cut(line));
        while task.tail.len() > TAIL_LINES {
            task.tail.pop_front();
        }
    }
}

fn one_line(text: &str) -> String {
    cut(text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or(""))
}

/// A line as the screen may show it: one visible line (`terminal::field`), never obeyed, and
/// cut.
fn cut(line: &str) -> String {
    let line = crate::terminal::field(&line.replace('\t', "    ")).into_owned();
    match line.char_indices().nth(LINE_CHARS) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

fn ended_state(status: &str) -> Option<TaskState> {
    match status {
        "completed" => Some(TaskState::Completed),
        "failed" => Some(TaskState::Failed),
        "canceled" => Some(TaskState::Canceled),
        _ => None,
    }
}

/// The trace records shown as alerts, and what each says.
fn alert_text(kind: &str, rec: &Value) -> Option<String> {
    let s = |k: &str| rec[k].as_str().unwrap_or("").to_owned();
    Some(match kind {
        "egress_denied" => format!("egress refused {}:{}", s("host"), rec["port"]),
        "network_refused" => format!("refused {}: {}", s("destination"), s("reason")),
        "shell_refused" => format!("shell refused `{}`: {}", s("command"), s("reason")),
        "task_failed" => format!("task failed: {}", s("cause")),
        "capsule_died" => format!("member {} died (exit {})", s("member"), rec["exit_status"]),
        "member_restarted" => format!(
            "member {} restarted (attempt {}, exit {})",
            s("member"),
            rec["attempt"],
            rec["exit_status"]
        ),
        "delivery_error" => format!("completion not delivered: {}", s("reason")),
        "spend_ceiling" => format!(
            "spend ceiling {} ({}): used {}, ceiling {}",
            s("key"),
            s("scope"),
            s("used"),
            s("ceiling")
        ),
        _ => return None,
    })
}

/// `2026-11-30T15:53:01.123Z` → `15:53:01`.
fn clock_of(ts: &str) -> String {
    ts.get(11..19).unwrap_or("").to_owned()
}

/// An RFC 3339 timestamp in ms since the epoch.
pub fn millis(ts: &str) -> Option<i64> {
    capsule::clock::parse_rfc3339_nanos(ts).map(|n| (n / 1_000_000) as i64)
}

#[cfg(test)]
mod tests;
