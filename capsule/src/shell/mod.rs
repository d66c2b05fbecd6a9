//! The http agent's shell (`capabilities.shell.allow`; spec agent-card.md "runningCommands",
//! "Residue items"; a2a-messaging-guide.md "What the cancel names"). The model runs a command
//! with the `bash` tool ([`tool`]); it runs in the jail a harness attempt runs in (same walls,
//! egress proxy and environment list), in the foreground until the model's wait is over, then in
//! the background with a `wrk_` handle. This module owns the session's table of those commands:
//! - a foreground command is moved to the background when its wait ends, or at once when its
//!   task is canceled ([`demote_task`]), and is then a `detached_shell` residue item;
//! - a task that ends while its background commands run lists them as `runningCommands`
//!   ([`Commands::running_of`]);
//! - a background command's result, when it ends on its own, is a task of the session's own in
//!   the command's context, so the model reads it in the same conversation;
//! - the session's end ends every command and all it started ([`end_all`]).

mod line;
mod output;
mod run;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::watch;

use crate::clock::Millis;
use crate::ids::{TaskId, WorkId};
use crate::session::Session;
use crate::tasks::{Residue, ResidueItem};
use crate::trace::{Backgrounded, TraceEvent};

pub use output::Output;
pub use run::{spec, tool, Call, Shell, TOOL};

/// How much of the model's command text names a command in the residue, the trace and
/// `runningCommands`, in characters (`…` follows a cut).
const COMMAND_CHARS: usize = 200;

/// How long the session's end waits for its commands to be ended.
const END_WITHIN: Duration = Duration::from_secs(10);

/// What the model wrote, cut as the spec writes it: 200 characters followed by `…`.
pub fn cut(text: &str) -> String {
    match text.char_indices().nth(COMMAND_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// One command the model started, from its start until it ended.
pub struct Command {
    pub work_id: WorkId,
    pub task: TaskId,
    pub context_id: String,
    /// The program that runs it, as a path.
    pub binary: String,
    /// What the model wrote, [`cut`].
    pub command: String,
    pub started_at: Millis,
    started: Instant,
    /// Its tool call, whose frames carry its output while it runs in the foreground.
    pub call_id: String,
    pub turn: u32,
    pub output: Mutex<Output>,
    /// Bytes of its output sent as frames so far.
    streamed: std::sync::atomic::AtomicUsize,
    /// Set when it moves to the background: the waiting tool call answers then.
    moved: watch::Sender<bool>,
    /// Set by the session's end: the command is ended.
    end: watch::Sender<bool>,
    /// Its ending, once it ended.
    ended: watch::Sender<Option<Ended>>,
}

/// How a command ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ended {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// Ended by the session's end.
    pub killed: bool,
    /// Why it never ran, when it did not.
    pub not_started: Option<String>,
}

impl Command {
    fn residue(&self) -> ResidueItem {
        ResidueItem::DetachedShell {
            work_id: self.work_id.to_string(),
            binary: self.binary.clone(),
            command: self.command.clone(),
            started_at_ms: self.started_at.0,
        }
    }

    pub fn output(&self) -> MutexGuard<'_, Output> {
        self.output.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn in_background(&self) -> bool {
        *self.moved.borrow()
    }

    fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

/// Where a running command is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// Its tool call waits for it.
    Foreground,
    /// It runs on its own: a residue item.
    Background,
}

struct Entry {
    command: Arc<Command>,
    place: Place,
}

/// The session's running commands, oldest first.
#[derive(Default)]
pub struct Commands {
    entries: Mutex<Vec<Entry>>,
}

impl Commands {
    fn entries(&self) -> MutexGuard<'_, Vec<Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn add(&self, command: Arc<Command>, place: Place, residue: &Residue) {
        if place == Place::Background {
            residue.enter(&command.task, command.residue());
        }
        self.entries().push(Entry { command, place });
    }

    /// Moves `work_id` to the background when it still runs in the foreground: it becomes a
    /// residue item, and its tool call is woken. False when it had ended first.
    fn to_background(&self, work_id: &WorkId, residue: &Residue) -> bool {
        let mut entries = self.entries();
        let Some(e) = entries
            .iter_mut()
            .find(|e| &e.command.work_id == work_id && e.place == Place::Foreground)
        else {
            return false;
        };
        e.place = Place::Background;
        residue.enter(&e.command.task, e.command.residue());
        let _ = e.command.moved.send_replace(true);
        true
    }

    /// The commands `task` leaves running as it ends, as `runningCommands` (oldest first, each
    /// `runningMs` from its start to now).
    pub fn running_of(&self, task: &TaskId) -> Vec<Value> {
        self.entries()
            .iter()
            .filter(|e| &e.command.task == task)
            .map(|e| {
                let c = &e.command;
                json!({"workId": c.work_id.as_str(), "binary": c.binary, "command": c.command,
                       "runningMs": c.elapsed().as_millis() as u64})
            })
            .collect()
    }

    /// The command ended: out of the table, and of the residue. Answers whether it ran in the
    /// background (its tool call no longer waits for it).
    fn finish(&self, work_id: &WorkId, residue: &Residue) -> bool {
        let mut entries = self.entries();
        let Some(at) = entries.iter().position(|e| &e.command.work_id == work_id) else {
            return false;
        };
        let e = entries.remove(at);
        drop(entries);
        let background = e.place == Place::Background;
        if background {
            residue.remove(&e.command.residue());
        }
        background
    }

    fn foreground_of(&self, task: &TaskId) -> Vec<WorkId> {
        self.entries()
            .iter()
            .filter(|e| &e.command.task == task && e.place == Place::Foreground)
            .map(|e| e.command.work_id.clone())
            .collect()
    }

    fn all(&self) -> Vec<Arc<Command>> {
        self.entries().iter().map(|e| e.command.clone()).collect()
    }

    /// How many commands run.
    pub fn len(&self) -> usize {
        self.entries().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Moves `work_id` to the background, and records why. False when it had ended first.
fn background(session: &Session, command: &Command, why: Backgrounded) -> bool {
    let moved = session
        .commands
        .to_background(&command.work_id, &session.residue);
    if moved {
        session.trace.event(TraceEvent::ShellBackground {
            task_id: command.task.clone(),
            work_id: command.work_id.clone(),
            why,
        });
    }
    moved
}

/// A cancel of `task` ends none of its commands: those in the foreground move to the
/// background at once, before the cancel's answer reads the residue, so it names them.
pub fn demote_task(session: &Session, task: &TaskId) {
    for work_id in session.commands.foreground_of(task) {
        let command = session
            .commands
            .all()
            .into_iter()
            .find(|c| c.work_id == work_id);
        if let Some(command) = command {
            background(session, &command, Backgrounded::Canceled);
        }
    }
}

/// The session ends: every command is ended with all it started, and its end recorded, before
/// the trace closes.
pub async fn end_all(session: &Session) {
    let commands = session.commands.all();
    for c in &commands {
        let _ = c.end.send_replace(true);
    }
    let all_ended = async {
        for c in &commands {
            let mut ended = c.ended.subscribe();
            let _ = ended.wait_for(Option::is_some).await;
        }
    };
    let _ = tokio::time::timeout(END_WITHIN, all_ended).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_is_cut_at_200_characters_followed_by_an_ellipsis() {
        assert_eq!(cut("sleep 30"), "sleep 30");
        let long = "é".repeat(250);
        let c = cut(&long);
        assert_eq!(c.chars().count(), 201);
        assert!(c.ends_with('…'));
        assert_eq!(cut(&"x".repeat(200)), "x".repeat(200));
    }
}
