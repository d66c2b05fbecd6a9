//! The words of `mur top`'s rows, one place for both the screen and the `--once` snapshot:
//! a member's state, pid, port, uptime, restarts and task counts; a task's state, turns, tokens
//! and elapsed time; the calls, delegations and alerts as lines.

use capsule::tasks::TaskState;

use super::board::{millis, Board, Link, SessionView, TaskView};
use crate::listing::Placed;
use crate::records::RunningCapsule;
use crate::terminal::field;

/// A member's name (else its capsule's) as a cell shows it: one visible line.
pub fn name_of(rec: &RunningCapsule) -> String {
    field(super::board::name_of(rec)).into_owned()
}

/// The member table's columns, after the address.
pub const MEMBER_COLUMNS: [&str; 9] = [
    "CAPSULE", "STATE", "PID", "PORT", "UP", "RESTARTS", "QUEUED", "RUNNING", "SPENT",
];

/// The task table's columns.
pub const TASK_COLUMNS: [&str; 6] = ["TASK", "STATE", "TURNS", "TOKENS", "ELAPSED", "LAST"];

/// How a session's link reads in the STATE column.
pub fn link_word(view: Option<&SessionView>) -> &'static str {
    match view.map(|v| &v.link) {
        Some(Link::Live) => "running",
        Some(Link::Connecting) | None => "connecting",
        Some(Link::Lost(_)) => "unreachable",
        Some(Link::Ended) => "ended",
    }
}

/// A member's cells, in [`MEMBER_COLUMNS`] order.
pub fn member(p: &Placed, view: Option<&SessionView>, now_ms: i64) -> [String; 9] {
    let ended = view.is_some_and(|v| v.link == Link::Ended);
    let up = millis(&p.rec.started_at)
        .filter(|_| !ended)
        .map(|t| duration(now_ms - t))
        .unwrap_or_else(duration_of_nothing);
    let restarts = match (p.rec.restarts, p.rec.last_exit) {
        (0, _) => "0".to_owned(),
        (n, Some(code)) => format!("{n} (exit {code})"),
        (n, None) => n.to_string(),
    };
    [
        field(&p.label).into_owned(),
        link_word(view).to_owned(),
        p.rec.pid.to_string(),
        port(&p.rec.url),
        up,
        restarts,
        view.map_or(0, SessionView::queued).to_string(),
        view.map_or(0, SessionView::running).to_string(),
        view.map_or_else(|| "-".to_owned(), |v| spent(&v.spent)),
    ]
}

/// `3000 tok $0.0225`, `stopped` once a ceiling refused a call; `-` before any call.
fn spent(s: &super::board::Spent) -> String {
    if s.tokens == 0 && !s.stopped {
        return "-".to_owned();
    }
    let mut out = format!("{} tok", s.tokens);
    if let Some(usd) = s.usd {
        out.push_str(&format!(" ${usd:.4}"));
    }
    if s.stopped {
        out.push_str(" stopped");
    }
    out
}

/// Whether a spend ceiling stopped the member (its row is marked).
pub fn stopped(view: Option<&SessionView>) -> bool {
    view.is_some_and(|v| v.spent.stopped)
}

/// Each formation's total spend against its ceiling, and whether the ceiling is reached:
/// `formation team: 3000 tokens of 2500 (ceiling reached)`. Formations without a ceiling show
/// their total alone.
pub fn spend(board: &Board) -> Vec<(String, bool)> {
    let mut totals: Vec<(
        String,
        u64,
        Option<f64>,
        Option<crate::records::RosterSpend>,
    )> = Vec::new();
    for p in board.capsules() {
        let (Some(formation), Some(view)) =
            (p.rec.formation.as_deref(), board.session(&p.rec.session_id))
        else {
            continue;
        };
        let at = match totals.iter().position(|t| t.0 == formation) {
            Some(i) => i,
            None => {
                totals.push((formation.to_owned(), 0, None, view.ceiling));
                totals.len() - 1
            }
        };
        let t = &mut totals[at];
        t.3 = t.3.or(view.ceiling);
        t.1 += view.spent.tokens;
        if let Some(usd) = view.spent.usd {
            t.2 = Some(t.2.unwrap_or(0.0) + usd);
        }
    }
    totals
        .into_iter()
        .filter(|t| t.1 > 0 || t.3.is_some())
        .map(|(name, tokens, usd, ceiling)| {
            let mut line = format!("formation {}: {tokens} tokens", field(&name));
            if let Some(usd) = usd {
                line.push_str(&format!(", ${usd:.4}"));
            }
            let c = ceiling.unwrap_or_default();
            let mut reached = false;
            if let Some(max) = c.max_tokens {
                reached |= tokens >= max;
                line.push_str(&format!(" of {max} tokens"));
            }
            if let Some(max) = c.max_usd {
                reached |= usd.unwrap_or(0.0) >= max;
                line.push_str(&format!(" of ${max:.4}"));
            }
            if reached {
                line.push_str(" (ceiling reached)");
            }
            (line, reached)
        })
        .collect()
}

/// A task's cells, in [`TASK_COLUMNS`] order.
pub fn task(t: &TaskView, now_ms: i64) -> [String; 6] {
    let elapsed = match (t.since_ms, t.changed_ms) {
        (Some(since), Some(changed)) if t.state.is_terminal() => duration(changed - since),
        (Some(since), _) => duration(now_ms - since),
        _ => duration_of_nothing(),
    };
    let tokens = t
        .tokens
        .map(|(i, o)| format!("{i}/{o}"))
        .unwrap_or_else(|| "-".into());
    [
        short(&t.id),
        t.state.word().to_owned(),
        t.turns.to_string(),
        tokens,
        elapsed,
        t.last_text.clone(),
    ]
}

/// Whether a task is still going (for colour and for `c`).
pub fn is_live(t: &TaskView) -> bool {
    !t.state.is_terminal()
}

/// `caller → callee` edges, each with its calls in flight: the formation's own `calls` first,
/// then any other destination a call is in flight to.
pub fn calls(board: &Board) -> Vec<String> {
    let mut lines = Vec::new();
    for p in board.capsules() {
        let Some(view) = board.session(&p.rec.session_id) else {
            continue;
        };
        let caller = name_of(&p.rec);
        let mut callees = view.callees.clone();
        for c in &view.calls {
            if !callees.contains(&c.callee) {
                callees.push(c.callee.clone());
            }
        }
        for callee in callees {
            let flying: Vec<String> = view
                .calls
                .iter()
                .filter(|c| c.callee == callee)
                .map(|c| {
                    let to = c
                        .callee_task
                        .as_deref()
                        .map(short)
                        .unwrap_or_else(|| "?".into());
                    format!("{} → {to}", short(&c.caller_task))
                })
                .collect();
            let state = match flying.len() {
                0 => "idle".to_owned(),
                n => format!("{n} in flight: {}", flying.join(", ")),
            };
            lines.push(format!("{caller} → {}  {state}", field(&callee)));
        }
    }
    lines
}

/// The delegations in flight: `capsule task → sub-capsule (dlg_…)`.
pub fn delegations(board: &Board) -> Vec<String> {
    let mut lines = Vec::new();
    for p in board.capsules() {
        let Some(view) = board.session(&p.rec.session_id) else {
            continue;
        };
        for d in &view.delegations {
            lines.push(format!(
                "{} {} → {} ({})",
                name_of(&p.rec),
                short(&d.task),
                field(&d.capsule),
                field(&d.id)
            ));
        }
    }
    lines
}

/// The alerts, oldest first: `HH:MM:SS  member  task  what`.
pub fn alerts(board: &Board) -> Vec<String> {
    board
        .alerts
        .iter()
        .map(|a| {
            let who = board
                .placed(&a.session)
                .map(|p| name_of(&p.rec))
                .unwrap_or_else(|| short(&a.session));
            let task = match a.task.as_str() {
                "" => String::new(),
                t => format!("{}  ", short(t)),
            };
            format!("{}  {who}  {task}{}", a.at, a.what)
        })
        .collect()
}

/// One line per open question: who asks, for which task, what (shown, never obeyed).
pub fn questions(board: &Board) -> Vec<String> {
    board
        .questions()
        .into_iter()
        .map(|(p, q)| format!("{}  {}  {}", name_of(&p.rec), short(&q.task_id), q.shown()))
        .collect()
}

/// How a task's row is marked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    Busy,
    Good,
    Bad,
    Ended,
}

/// The mark of a task state: `None` for a task still waiting its turn.
pub fn mark_of(state: TaskState) -> Option<Mark> {
    match state {
        TaskState::Working | TaskState::InputRequired => Some(Mark::Busy),
        TaskState::Completed => Some(Mark::Good),
        TaskState::Failed | TaskState::Rejected => Some(Mark::Bad),
        TaskState::Canceled => Some(Mark::Ended),
        TaskState::Submitted => None,
    }
}

/// A capsule's `@N`, which `mur stop @N` takes; an ended one has none.
pub fn address(p: &Placed) -> String {
    match p.n {
        0 => String::new(),
        n => format!("@{n}"),
    }
}

/// An id as the view shortens it: its kind and its last 8 characters (`tsk_…9f2a1c0d`), one
/// visible line (an id is the door's word). Ids are UUIDv7, whose first characters are the
/// time: tasks started together share them, so the end is what tells them apart.
pub fn short(id: &str) -> String {
    let end = id.get(id.len().saturating_sub(8)..);
    let shortened = match (id.split_once('_'), end) {
        (Some((kind, _)), Some(end)) if id.len() > 16 => format!("{kind}_…{end}"),
        _ => id.to_owned(),
    };
    field(&shortened).into_owned()
}

/// The port of a door URL, one visible line.
pub fn port(url: &str) -> String {
    url.rsplit(':')
        .next()
        .map(|p| field(p.trim_end_matches('/')).into_owned())
        .unwrap_or_default()
}

/// `0.4s`, `12s`, `3m05s`, `2h07m`, right-aligned in six characters so a table's columns keep
/// their places as the clocks run.
pub fn duration(ms: i64) -> String {
    format!("{:>6}", duration_word(ms))
}

/// A duration cell with nothing to measure.
fn duration_of_nothing() -> String {
    format!("{:>6}", "-")
}

fn duration_word(ms: i64) -> String {
    let ms = ms.max(0);
    let s = ms / 1000;
    match s {
        0..=9 => format!("{}.{}s", s, (ms % 1000) / 100),
        10..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        360_000.. => format!("{}h", s / 3600),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}
