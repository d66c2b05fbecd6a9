//! The session's table of the shell commands the model started (the shell module runs them):
//! each command from its start until it ended, where it runs (in the foreground, its tool call
//! waiting, or in the background as a `detached_shell` residue item), and the moves between
//! the two. Below the session, which holds it, and the shell, which fills it.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::watch;

use super::output::Output;
use crate::clock::Millis;
use crate::ids::{TaskId, WorkId};
use crate::tasks::{Residue, ResidueItem};
use crate::trace::{Backgrounded, Trace, TraceEvent};

/// How much of the model's command text names a command in the residue, the trace and
/// `runningCommands`, in characters (`…` follows a cut).
const COMMAND_CHARS: usize = 200;

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
    pub(crate) started: Instant,
    /// Its tool call, whose frames carry its output while it runs in the foreground.
    pub call_id: String,
    pub turn: u32,
    pub output: Mutex<Output>,
    /// Bytes of its output sent as frames so far.
    pub(crate) streamed: std::sync::atomic::AtomicUsize,
    /// Set when it moves to the background: the waiting tool call answers then.
    pub(crate) moved: watch::Sender<bool>,
    /// Set by the session's end: the command is ended.
    pub(crate) end: watch::Sender<bool>,
    /// Its ending, once it ended.
    pub(crate) ended: watch::Sender<Option<Ended>>,
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

    pub(crate) fn in_background(&self) -> bool {
        *self.moved.borrow()
    }

    pub(crate) fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

/// Where a running command is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
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

    pub(crate) fn add(&self, command: Arc<Command>, place: Place, residue: &Residue) {
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
    pub(crate) fn finish(&self, work_id: &WorkId, residue: &Residue) -> bool {
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

    pub(crate) fn all(&self) -> Vec<Arc<Command>> {
        self.entries().iter().map(|e| e.command.clone()).collect()
    }

    /// Moves `command` to the background, and records why. False when it had ended first.
    pub fn background(
        &self,
        command: &Command,
        why: Backgrounded,
        residue: &Residue,
        trace: &Trace,
    ) -> bool {
        let moved = self.to_background(&command.work_id, residue);
        if moved {
            trace.event(TraceEvent::ShellBackground {
                task_id: command.task.clone(),
                work_id: command.work_id.clone(),
                why,
            });
        }
        moved
    }

    /// A cancel of `task` ends none of its commands: those in the foreground move to the
    /// background at once, before the cancel's answer reads the residue, so it names them.
    pub fn demote_task(&self, task: &TaskId, residue: &Residue, trace: &Trace) {
        for work_id in self.foreground_of(task) {
            let command = self.all().into_iter().find(|c| c.work_id == work_id);
            if let Some(command) = command {
                self.background(&command, Backgrounded::Canceled, residue, trace);
            }
        }
    }

    /// How many commands run.
    pub fn len(&self) -> usize {
        self.entries().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
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
