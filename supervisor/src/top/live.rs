//! The live `mur top`: one loop that takes what the feeds say, what the kernel says changed and
//! what the keys ask, applies it to the board, and redraws — at most every [`FRAME`] while
//! things change and once a second for the clocks, never more. Actions (a cancel, a stop) run
//! beside the loop and say their lines when done, so the screen never waits on a door. The
//! terminal is given back whatever ends the loop.

use std::time::{Duration, Instant};

use crossterm::event::Event;
use tokio::signal::unix::{self, SignalKind};
use tokio::sync::mpsc;

use super::board::{Board, Link};
use super::feed::{Feeds, Update};
use super::screen;
use super::view::{Action, Overlay, View};
use crate::error::{CliError, CliResult, Code};
use crate::records;
use crate::stopping::{self, Said};

/// The shortest time between two frames.
const FRAME: Duration = Duration::from_millis(100);
/// How many updates may wait for the loop; a stream that gets ahead waits for it.
const UPDATES: usize = 1024;

pub async fn run(mut board: Board, color: bool) -> CliResult<i32> {
    let (tx, mut rx) = mpsc::channel(UPDATES);
    let (mut feeds, wake) = Feeds::new(tx.clone())?;
    refresh(&mut board, &mut feeds);
    read_keys(tx.clone());
    let mut terminal = ratatui::try_init().map_err(|e| {
        CliError::new(
            Code::Unreachable,
            format!("cannot draw on this terminal: {e}"),
            "`mur top --once` prints one snapshot as text",
        )
    })?;
    let mut view = View::new(color);
    let mut clock = tokio::time::interval(Duration::from_secs(1));
    let mut dirty = true;
    let mut drawn = Instant::now()
        .checked_sub(FRAME)
        .unwrap_or_else(Instant::now);
    // A SIGTERM or a closed terminal ends the view like `q`, so the terminal is given back.
    let mut term = unix::signal(SignalKind::terminate()).ok();
    let mut hangup = unix::signal(SignalKind::hangup()).ok();
    let ended = loop {
        if dirty && drawn.elapsed() >= FRAME {
            let now = capsule::clock::Millis::now().0;
            if let Err(e) = terminal.draw(|f| screen::draw(f, &board, &view, now)) {
                break Err(e);
            }
            dirty = false;
            drawn = Instant::now();
        }
        let next_frame = FRAME.saturating_sub(drawn.elapsed());
        tokio::select! {
            update = rx.recv() => {
                let Some(update) = update else { break Ok(()) };
                match apply(update, &mut board, &mut view) {
                    Some(Action::Quit) => break Ok(()),
                    Some(action) => act(action, &mut view, &tx),
                    None => {}
                }
            }
            _ = wake.notify.notified() => {
                let changes = wake.take();
                if changes.records {
                    refresh(&mut board, &mut feeds);
                }
                for (session, records) in feeds.read_traces(&changes.traces) {
                    records.iter().for_each(|r| board.apply_trace(&session, r));
                }
            }
            _ = clock.tick() => {}
            Some(_) = async { term.as_mut()?.recv().await } => break Ok(()),
            Some(_) = async { hangup.as_mut()?.recv().await } => break Ok(()),
            _ = tokio::time::sleep(next_frame), if dirty => continue,
        }
        dirty = true;
    };
    ratatui::restore();
    ended.map(|_| 0).map_err(|e| {
        CliError::new(
            Code::Unreachable,
            format!("cannot draw on this terminal: {e}"),
            "`mur top --once` prints one snapshot as text",
        )
    })
}

/// Reads the records again and starts or stops following the sessions that came or went.
fn refresh(board: &mut Board, feeds: &mut Feeds) {
    let changed = board.set_records(records::running());
    for gone in &changed.removed {
        for record in feeds.unfollow(gone) {
            board.apply_trace(gone, &record);
        }
    }
    for rec in &changed.added {
        for record in feeds.follow(rec) {
            board.apply_trace(&rec.session_id, &record);
        }
    }
    for rec in &changed.restarted {
        board.forget_tasks(&rec.session_id);
        board.set_link(&rec.session_id, Link::Connecting);
        feeds.restart_stream(rec);
    }
}

fn apply(update: Update, board: &mut Board, view: &mut View) -> Option<Action> {
    match update {
        Update::Tasks { session, tasks } => {
            tasks
                .iter()
                .rev()
                .for_each(|t| board.apply_task(&session, t));
        }
        Update::Event { session, result } => board.apply_event(&session, &result),
        Update::Link { session, link } => board.set_link(&session, link),
        Update::Said(lines) => view.say(lines),
        Update::Input(Event::Key(key)) => return view.key(key, board),
        Update::Input(_) => {}
    }
    None
}

/// Carries out what a key asked, beside the loop.
fn act(action: Action, view: &mut View, tx: &mpsc::Sender<Update>) {
    let tx = tx.clone();
    match action {
        Action::Cancel { rec, task } => {
            view.say(vec![format!("cancel {task} …")]);
            tokio::spawn(async move {
                let lines = match stopping::cancel(&rec, &task).await {
                    Ok(lines) => lines,
                    Err(e) => vec![format!("cancel failed: {}", e.message())],
                };
                let _ = tx.send(Update::Said(lines)).await;
            });
        }
        Action::Answer {
            rec,
            question,
            decision,
        } => {
            view.say(vec![format!(
                "{} {} …",
                decision.word(),
                question.approval_id
            )]);
            tokio::spawn(async move {
                let line = match crate::approvals::answer(&rec, &question, decision, None).await {
                    Ok(()) => format!(
                        "{}: {} ({}) {}",
                        match decision {
                            crate::approvals::Decision::Approve => "approved",
                            crate::approvals::Decision::Deny => "denied",
                        },
                        question.approval_id,
                        question.task_id,
                        question.shown()
                    ),
                    Err(e) => format!("{} failed: {}", decision.word(), e.message()),
                };
                let _ = tx.send(Update::Said(vec![line])).await;
            });
        }
        Action::Stop(rec) => {
            view.say(vec![format!("stopping {} …", rec.session_id)]);
            tokio::spawn(async move {
                let mut lines = Vec::new();
                let stopped = stopping::stop(&rec, |said| match said {
                    Said::Line(l) | Said::Warning(l) => lines.push(l),
                })
                .await;
                if let Err(e) = stopped {
                    lines.push(format!("stop failed: {}", e.message()));
                }
                let _ = tx.send(Update::Said(lines)).await;
            });
        }
        Action::OpenTrace(rec) => {
            let path = rec.records.join("trace.jsonl");
            let lines = match std::fs::read_to_string(&path) {
                Ok(text) => crate::trace::render(&crate::trace::parse(&text))
                    .lines()
                    .map(|l| crate::terminal::shown(l).into_owned())
                    .collect(),
                Err(e) => vec![format!("cannot read {}: {e}", path.display())],
            };
            view.overlay = Some(Overlay::Trace {
                title: format!(
                    "trace of {} (q closes)",
                    crate::terminal::field(&rec.session_id)
                ),
                lines,
                top: 0,
            });
        }
        Action::Quit => {}
    }
}

/// The keyboard, read on a thread of its own (crossterm reads block) and handed to the loop.
fn read_keys(tx: mpsc::Sender<Update>) {
    std::thread::spawn(move || {
        while let Ok(event) = crossterm::event::read() {
            if tx.blocking_send(Update::Input(event)).is_err() {
                return;
            }
        }
    });
}
