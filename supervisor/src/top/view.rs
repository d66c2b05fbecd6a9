//! The viewer's side of `mur top`: what is selected, filtered and open, and what each key does
//! to it. A key either changes the view or asks for an action (cancel, stop, open a trace), which
//! the loop carries out; nothing here talks to a door.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::board::{Board, TaskView};
use super::cells;
use crate::approvals::{Decision, Open};
use crate::listing::Placed;
use crate::records::RunningCapsule;

/// The lines of an action's answer kept at the bottom of the screen.
const SAID_KEPT: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    Members,
    Tasks,
}

/// What is drawn over the board.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Overlay {
    Help,
    /// A session's trace as `mur trace show` prints it, scrolled to `top`.
    Trace {
        title: String,
        lines: Vec<String>,
        top: usize,
    },
    /// `s` asks before it stops anything.
    ConfirmStop {
        session: String,
        what: String,
    },
}

/// What a key asks the loop to do.
#[derive(Debug, Clone)]
pub enum Action {
    Cancel {
        rec: RunningCapsule,
        task: String,
    },
    /// `a` or `d`: answer the selected question.
    Answer {
        rec: RunningCapsule,
        question: Open,
        decision: Decision,
    },
    Stop(RunningCapsule),
    OpenTrace(RunningCapsule),
    Quit,
}

pub struct View {
    pub focus: Focus,
    /// The selected capsule and task, by id, so a reordering never moves the selection.
    pub member: Option<String>,
    pub task: Option<String>,
    pub filter: String,
    pub typing: bool,
    pub overlay: Option<Overlay>,
    pub said: Vec<String>,
    pub color: bool,
}

impl View {
    pub fn new(color: bool) -> Self {
        View {
            focus: Focus::Members,
            member: None,
            task: None,
            filter: String::new(),
            typing: false,
            overlay: None,
            said: Vec::new(),
            color,
        }
    }

    /// Keeps `lines` for the bottom of the screen, each one visible line: what an action
    /// answered holds the door's words (ids, residue commands).
    pub fn say(&mut self, lines: Vec<String>) {
        self.said
            .extend(lines.iter().map(|l| crate::terminal::field(l).into_owned()));
        let over = self.said.len().saturating_sub(SAID_KEPT);
        self.said.drain(..over);
    }

    /// The capsules the filter lets through, in listing order.
    pub fn members<'a>(&self, board: &'a Board) -> Vec<&'a Placed> {
        board
            .capsules()
            .filter(|p| self.shows_member(board, p))
            .collect()
    }

    fn matches(&self, text: &str) -> bool {
        text.to_lowercase().contains(&self.filter.to_lowercase())
    }

    fn shows_member(&self, board: &Board, p: &Placed) -> bool {
        if self.filter.is_empty() {
            return true;
        }
        let r = &p.rec;
        let named = [&p.label, &r.name, &r.session_id, &r.url]
            .iter()
            .any(|s| self.matches(s));
        named || !self.tasks(board, &r.session_id).is_empty()
    }

    /// A session's tasks the filter lets through, newest first.
    pub fn tasks<'a>(&self, board: &'a Board, session: &str) -> Vec<&'a TaskView> {
        let Some(view) = board.session(session) else {
            return Vec::new();
        };
        let whole = self.filter.is_empty()
            || board.placed(session).is_some_and(|p| {
                [&p.label, &p.rec.name, &p.rec.session_id]
                    .iter()
                    .any(|s| self.matches(s))
            });
        view.tasks
            .iter()
            .rev()
            .filter(|t| {
                whole
                    || self.matches(&t.id)
                    || self.matches(t.state.word())
                    || self.matches(&t.last_text)
            })
            .collect()
    }

    /// The selected capsule: the one chosen if it is still shown, else the first.
    pub fn selected<'a>(&self, board: &'a Board) -> Option<&'a Placed> {
        let shown = self.members(board);
        shown
            .iter()
            .find(|p| Some(&p.rec.session_id) == self.member.as_ref())
            .or(shown.first())
            .copied()
    }

    /// The selected task of the selected capsule: the one chosen if still shown, else the newest.
    pub fn selected_task<'a>(&self, board: &'a Board) -> Option<&'a TaskView> {
        let p = self.selected(board)?;
        let tasks = self.tasks(board, &p.rec.session_id);
        tasks
            .iter()
            .find(|t| Some(&t.id) == self.task.as_ref())
            .or(tasks.first())
            .copied()
    }

    /// What `key` does; an action for the loop, if it asks for one.
    pub fn key(&mut self, key: KeyEvent, board: &Board) -> Option<Action> {
        if key.kind == KeyEventKind::Release {
            return None;
        }
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return Some(Action::Quit);
        }
        if self.typing {
            self.type_filter(key.code);
            return None;
        }
        if let Some(overlay) = self.overlay.take() {
            return self.key_over(overlay, key.code, board);
        }
        match key.code {
            KeyCode::Char('q') => return Some(Action::Quit),
            KeyCode::Esc if !self.filter.is_empty() => self.filter.clear(),
            KeyCode::Char('?') => self.overlay = Some(Overlay::Help),
            KeyCode::Char('/') => self.typing = true,
            KeyCode::Tab | KeyCode::BackTab => {
                self.focus = match self.focus {
                    Focus::Members => Focus::Tasks,
                    Focus::Tasks => Focus::Members,
                }
            }
            KeyCode::Enter => self.focus = Focus::Tasks,
            KeyCode::Up | KeyCode::Char('k') => self.step(board, -1),
            KeyCode::Down | KeyCode::Char('j') => self.step(board, 1),
            KeyCode::Char('c') => return self.cancel(board),
            KeyCode::Char('a') => return self.answer(board, Decision::Approve),
            KeyCode::Char('d') => return self.answer(board, Decision::Deny),
            KeyCode::Char('s') => self.ask_stop(board),
            KeyCode::Char('t') => {
                return self
                    .selected(board)
                    .map(|p| Action::OpenTrace(p.rec.clone()))
            }
            _ => {}
        }
        None
    }

    fn type_filter(&mut self, code: KeyCode) {
        match code {
            KeyCode::Enter => self.typing = false,
            KeyCode::Esc => {
                self.typing = false;
                self.filter.clear();
            }
            KeyCode::Backspace => {
                self.filter.pop();
            }
            KeyCode::Char(c) if self.filter.chars().count() < 64 => self.filter.push(c),
            _ => {}
        }
    }

    fn key_over(&mut self, overlay: Overlay, code: KeyCode, board: &Board) -> Option<Action> {
        match overlay {
            Overlay::Help => None,
            Overlay::ConfirmStop { session, .. } => {
                if code != KeyCode::Char('y') {
                    self.say(vec!["stop: not asked (press y to confirm)".into()]);
                    return None;
                }
                board.placed(&session).map(|p| Action::Stop(p.rec.clone()))
            }
            Overlay::Trace { title, lines, top } => {
                let page = 20;
                let last = lines.len().saturating_sub(1);
                let top = match code {
                    KeyCode::Char('q') | KeyCode::Esc | KeyCode::Char('t') => return None,
                    KeyCode::Up | KeyCode::Char('k') => top.saturating_sub(1),
                    KeyCode::Down | KeyCode::Char('j') => (top + 1).min(last),
                    KeyCode::PageUp => top.saturating_sub(page),
                    KeyCode::PageDown | KeyCode::Char(' ') => (top + page).min(last),
                    KeyCode::Home | KeyCode::Char('g') => 0,
                    KeyCode::End | KeyCode::Char('G') => last,
                    _ => top,
                };
                self.overlay = Some(Overlay::Trace { title, lines, top });
                None
            }
        }
    }

    fn step(&mut self, board: &Board, by: isize) {
        match self.focus {
            Focus::Members => {
                let shown = self.members(board);
                let at = self.selected(board).and_then(|s| {
                    shown
                        .iter()
                        .position(|p| p.rec.session_id == s.rec.session_id)
                });
                if let Some(p) = moved(&shown, at, by) {
                    self.member = Some(p.rec.session_id.clone());
                    self.task = None;
                }
            }
            Focus::Tasks => {
                let Some(p) = self.selected(board) else {
                    return;
                };
                let tasks = self.tasks(board, &p.rec.session_id);
                let at = self
                    .selected_task(board)
                    .and_then(|s| tasks.iter().position(|t| t.id == s.id));
                if let Some(t) = moved(&tasks, at, by) {
                    self.task = Some(t.id.clone());
                }
            }
        }
    }

    /// `c`: the selected task when the tasks have the focus, else the member's newest live one.
    fn cancel(&mut self, board: &Board) -> Option<Action> {
        let p = self.selected(board)?;
        let task = match self.focus {
            Focus::Tasks => self.selected_task(board),
            Focus::Members => self
                .tasks(board, &p.rec.session_id)
                .into_iter()
                .find(|t| cells::is_live(t)),
        };
        match task {
            Some(t) => Some(Action::Cancel {
                rec: p.rec.clone(),
                task: t.id.clone(),
            }),
            None => {
                let name = super::board::name_of(&p.rec).to_owned();
                self.say(vec![format!("cancel: {name} has no live task")]);
                None
            }
        }
    }

    /// The question `a` and `d` answer: the selected task's when it asks one, else the selected
    /// capsule's oldest, else the oldest shown.
    pub fn selected_question<'a>(&self, board: &'a Board) -> Option<(&'a Placed, &'a Open)> {
        let questions = board.questions();
        let member = self.selected(board).map(|p| p.rec.session_id.clone());
        let task = self.selected_task(board).map(|t| t.id.clone());
        let of_member = |(p, _): &&(&Placed, &Open)| Some(&p.rec.session_id) == member.as_ref();
        questions
            .iter()
            .find(|(p, q)| of_member(&&(*p, *q)) && Some(&q.task_id) == task.as_ref())
            .or_else(|| questions.iter().find(of_member))
            .or(questions.first())
            .copied()
    }

    fn answer(&mut self, board: &Board, decision: Decision) -> Option<Action> {
        match self.selected_question(board) {
            Some((p, q)) => Some(Action::Answer {
                rec: p.rec.clone(),
                question: q.clone(),
                decision,
            }),
            None => {
                self.say(vec![format!("{}: no question is open", decision.word())]);
                None
            }
        }
    }

    fn ask_stop(&mut self, board: &Board) {
        let Some(p) = self.selected(board) else {
            return;
        };
        let what = match (&p.rec.formation, &p.rec.parent) {
            (Some(f), None) => format!("formation {f}, every member of it"),
            _ => format!("{} {} ({})", p.rec.name, p.rec.version, p.rec.session_id),
        };
        let what = crate::terminal::field(&what).into_owned();
        self.overlay = Some(Overlay::ConfirmStop {
            session: p.rec.session_id.clone(),
            what,
        });
    }
}

/// The item `by` places from `at` (or the first), staying inside the list.
fn moved<'a, T>(items: &[&'a T], at: Option<usize>, by: isize) -> Option<&'a T> {
    if items.is_empty() {
        return None;
    }
    let from = at.unwrap_or(0) as isize;
    let to = (from + by).clamp(0, items.len() as isize - 1) as usize;
    Some(items[to])
}

#[cfg(test)]
mod tests {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use serde_json::json;

    use super::*;
    use crate::top::board::Scope;

    fn key(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
    }

    fn board() -> Board {
        let rec = serde_json::from_value(json!({
            "pid": 10, "supervisor_pid": 1, "url": "http://localhost:4001", "name": "worker",
            "version": "0.1.0", "session_id": "ses_a", "records": "/nonexistent",
            "formation": "split", "member": "left", "started_at": "2026-12-01T10:00:00.000Z",
        }))
        .unwrap();
        let mut b = Board::new(Scope::Everything);
        b.set_records(vec![rec]);
        b
    }

    #[test]
    fn cancel_with_no_live_task_says_so_and_asks_nothing() {
        let mut b = board();
        let mut view = View::new(false);
        assert!(view.key(key('c'), &b).is_none());
        assert_eq!(view.said, ["cancel: left has no live task"]);
        b.apply_task(
            "ses_a",
            &json!({"id": "tsk_1", "status": {"state": "TASK_STATE_WORKING"}}),
        );
        match view.key(key('c'), &b) {
            Some(Action::Cancel { task, .. }) => assert_eq!(task, "tsk_1"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_and_d_answer_the_selected_question_and_say_when_none_is_open() {
        let mut b = board();
        let mut view = View::new(false);
        assert!(view.key(key('a'), &b).is_none());
        assert_eq!(view.said, ["approve: no question is open"]);
        b.apply_task(
            "ses_a",
            &json!({"id": "tsk_1", "contextId": "ctx_1", "status": {
                "state": "TASK_STATE_INPUT_REQUIRED",
                "message": {"parts": [
                    {"text": "Claude Code asks to run Bash: touch a"},
                    {"data": {"kind": "approval", "approval_id": "apr_1", "tool": "Bash",
                              "input": {"command": "touch a"}}}]}}}),
        );
        match view.key(key('d'), &b) {
            Some(Action::Answer {
                question, decision, ..
            }) => {
                assert_eq!(
                    (question.approval_id.as_str(), question.context_id.as_str()),
                    ("apr_1", "ctx_1")
                );
                assert_eq!(decision, Decision::Deny);
            }
            other => panic!("{other:?}"),
        }
        // Answered: the next status has no question.
        b.apply_task(
            "ses_a",
            &json!({"id": "tsk_1", "status": {"state": "TASK_STATE_WORKING"}}),
        );
        assert!(view.key(key('a'), &b).is_none());
    }

    #[test]
    fn a_stop_is_asked_before_it_is_sent() {
        let b = board();
        let mut view = View::new(false);
        assert!(view.key(key('s'), &b).is_none());
        assert!(matches!(view.overlay, Some(Overlay::ConfirmStop { .. })));
        assert!(matches!(view.key(key('y'), &b), Some(Action::Stop(_))));
        assert!(view
            .key(key('q'), &b)
            .is_some_and(|a| matches!(a, Action::Quit)));
    }
}
