//! Drawing `mur top` with ratatui: the capsules as a tree, the calls and delegations beside the
//! alerts, the selected capsule's tasks, the selected task's output, and a line for what an
//! action answered. Colour only marks; with `NO_COLOR` the marks are bold and reversed text.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Clear, Paragraph, Row, Table, Wrap};
use ratatui::Frame;

use super::board::{Board, Link};
use super::cells::{self, Mark};
use super::view::{Focus, Overlay, View};
use crate::listing::Entry;

/// Below this the board cannot be read; the screen says so instead.
pub const MIN_WIDTH: u16 = 60;
pub const MIN_HEIGHT: u16 = 16;

pub const HELP: &[&str] = &[
    "↑ ↓ j k   move in the focused list",
    "Tab       switch between capsules and tasks",
    "Enter     focus the selected capsule's tasks",
    "c         cancel the selected task (capsules focused: the newest live one)",
    "a d       approve or deny the selected question (the selected task's, else the oldest)",
    "s         stop the selected session (its whole formation), after y",
    "t         open the session's trace (↑ ↓ PgUp PgDn, q closes)",
    "/         filter capsules and tasks (Enter keeps, Esc clears)",
    "q         quit (Ctrl-C too)",
    "?         this help (any key closes)",
];

pub fn draw(f: &mut Frame, board: &Board, view: &View, now_ms: i64) {
    let area = f.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        let text = vec![
            Line::from(format!(
                "terminal too small: mur top needs {MIN_WIDTH}×{MIN_HEIGHT}"
            )),
            Line::from(format!("(this one is {}×{})", area.width, area.height)),
        ];
        f.render_widget(Paragraph::new(text).wrap(Wrap { trim: true }), area);
        return;
    }
    let members = view.members(board).len() + headings(board);
    let top_rows = (members as u16 + 3).min(area.height * 2 / 5).max(4);
    // Open questions take a pane of their own, only while there are any.
    let asked = board.questions().len() as u16;
    let question_rows = if asked == 0 { 0 } else { (asked + 2).min(6) };
    let [title, top, questions, calls, alerts, tasks, tail, said] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(top_rows),
        Constraint::Length(question_rows),
        Constraint::Length(4),
        Constraint::Length(4),
        Constraint::Min(4),
        Constraint::Length(7),
        Constraint::Length(2),
    ])
    .areas(area);
    f.render_widget(title_line(board, view, now_ms), title);
    draw_members(f, top, board, view, now_ms);
    if asked > 0 {
        draw_questions(f, questions, board, view);
    }
    draw_calls(f, calls, board, view.color);
    draw_alerts(f, alerts, board, view);
    draw_tasks(f, tasks, board, view, now_ms);
    draw_tail(f, tail, board, view);
    f.render_widget(said_line(view), said);
    if let Some(overlay) = &view.overlay {
        draw_overlay(f, area, overlay);
    }
}

fn headings(board: &Board) -> usize {
    board
        .entries
        .iter()
        .filter(|e| matches!(e, Entry::Heading(_)))
        .count()
}

fn title_line(board: &Board, view: &View, now_ms: i64) -> Paragraph<'static> {
    let clock = capsule::clock::Millis(now_ms).rfc3339();
    let running = board
        .capsules()
        .filter(|p| {
            board
                .session(&p.rec.session_id)
                .is_some_and(|v| v.link != Link::Ended)
        })
        .count();
    let mut text = format!(
        "mur top  {} UTC  {running} running  ? help  q quit",
        clock.get(11..19).unwrap_or(""),
    );
    if view.typing || !view.filter.is_empty() {
        let cursor = if view.typing { "▏" } else { "" };
        text.push_str(&format!("  filter: {}{cursor}", view.filter));
    }
    Paragraph::new(text).style(Style::new().add_modifier(Modifier::BOLD))
}

fn block(title: &str, focused: bool) -> Block<'static> {
    let b = Block::new()
        .borders(Borders::TOP)
        .title(format!(" {title} "));
    if focused {
        b.title_style(Style::new().add_modifier(Modifier::BOLD | Modifier::UNDERLINED))
    } else {
        b
    }
}

fn selected_style() -> Style {
    Style::new().add_modifier(Modifier::REVERSED)
}

fn draw_members(f: &mut Frame, area: Rect, board: &Board, view: &View, now_ms: i64) {
    let shown = view.members(board);
    let selected = view.selected(board).map(|p| p.rec.session_id.clone());
    let mut rows = Vec::new();
    let mut pending_heading = None;
    for entry in &board.entries {
        match entry {
            Entry::Heading(h) => pending_heading = Some(h.clone()),
            Entry::Capsule(p) => {
                if !shown.iter().any(|s| s.rec.session_id == p.rec.session_id) {
                    continue;
                }
                if let Some(h) = pending_heading.take() {
                    // The tree's glyphs say it is a formation; its name, version and entry
                    // fit the column.
                    let h = h.strip_prefix("formation ").unwrap_or(&h);
                    let h = crate::terminal::field(h).into_owned();
                    rows.push(Row::new(vec![Cell::from(""), Cell::from(h)]));
                }
                let mut cells: Vec<Cell> = vec![Cell::from(cells::address(p))];
                let view_of = board.session(&p.rec.session_id);
                cells.extend(
                    cells::member(p, view_of, now_ms)
                        .into_iter()
                        .map(Cell::from),
                );
                let mut row = Row::new(cells);
                if selected.as_ref() == Some(&p.rec.session_id) {
                    row = row.style(selected_style());
                } else if cells::link_word(view_of) == "unreachable" || cells::stopped(view_of) {
                    row = row.style(mark(view.color, Color::Red));
                }
                rows.push(row);
            }
        }
    }
    let mut header = vec![""];
    header.extend(cells::MEMBER_COLUMNS);
    let widths = [
        Constraint::Length(4),
        Constraint::Min(14),
        Constraint::Length(11),
        Constraint::Length(8),
        Constraint::Length(6),
        Constraint::Length(7),
        Constraint::Length(12),
        Constraint::Length(6),
        Constraint::Length(7),
        Constraint::Min(10),
    ];
    let table = Table::new(rows, widths)
        .header(Row::new(header).style(Style::new().add_modifier(Modifier::BOLD)))
        .block(block("capsules", view.focus == Focus::Members));
    f.render_widget(table, area);
}

fn draw_calls(f: &mut Frame, area: Rect, board: &Board, color: bool) {
    // A formation's spend against its ceiling comes first; a ceiling reached is marked.
    let mut lines: Vec<Line> = cells::spend(board)
        .into_iter()
        .map(|(line, reached)| match reached {
            true => Line::from(Span::styled(line, mark(color, Color::Red))),
            false => Line::from(line),
        })
        .collect();
    lines.extend(cells::calls(board).into_iter().map(Line::from));
    let delegations = cells::delegations(board);
    if !delegations.is_empty() {
        lines.push(Line::from("delegations:"));
        lines.extend(
            delegations
                .into_iter()
                .map(|d| Line::from(format!("  {d}"))),
        );
    }
    if lines.is_empty() {
        lines.push(Line::from("(no calls)"));
    }
    f.render_widget(Paragraph::new(lines).block(block("calls", false)), area);
}

/// The questions waiting for an answer, the one `a` and `d` answer marked.
fn draw_questions(f: &mut Frame, area: Rect, board: &Board, view: &View) {
    let chosen = view
        .selected_question(board)
        .map(|(_, q)| q.approval_id.clone());
    let lines: Vec<Line> = board
        .questions()
        .iter()
        .zip(cells::questions(board))
        .map(|((_, q), text)| {
            let style = match chosen.as_deref() == Some(q.approval_id.as_str()) {
                true => selected_style(),
                false => mark(view.color, Color::Yellow),
            };
            Line::from(Span::styled(text, style))
        })
        .collect();
    f.render_widget(
        Paragraph::new(lines).block(block("questions: a approve, d deny", true)),
        area,
    );
}

fn draw_alerts(f: &mut Frame, area: Rect, board: &Board, view: &View) {
    let alerts = cells::alerts(board);
    let room = area.height.saturating_sub(1) as usize;
    let skip = alerts.len().saturating_sub(room);
    let lines: Vec<Line> = if alerts.is_empty() {
        vec![Line::from("(none)")]
    } else {
        alerts
            .into_iter()
            .skip(skip)
            .map(|a| Line::from(Span::styled(a, mark(view.color, Color::Red))))
            .collect()
    };
    f.render_widget(
        Paragraph::new(lines).block(block("refusals and failures", false)),
        area,
    );
}

fn draw_tasks(f: &mut Frame, area: Rect, board: &Board, view: &View, now_ms: i64) {
    let Some(p) = view.selected(board) else {
        f.render_widget(
            Paragraph::new("no capsule is running").block(block("tasks", false)),
            area,
        );
        return;
    };
    let chosen = view.selected_task(board).map(|t| t.id.clone());
    let rows: Vec<Row> = view
        .tasks(board, &p.rec.session_id)
        .into_iter()
        .map(|t| {
            let mut row = Row::new(cells::task(t, now_ms).into_iter().map(Cell::from));
            if view.focus == Focus::Tasks && chosen.as_ref() == Some(&t.id) {
                row = row.style(selected_style());
            } else if let Some(m) = cells::mark_of(t.state) {
                row = row.style(mark_style(view.color, m));
            }
            row
        })
        .collect();
    let widths = [
        Constraint::Length(13),
        Constraint::Length(14),
        Constraint::Length(5),
        Constraint::Length(13),
        Constraint::Length(8),
        Constraint::Min(10),
    ];
    let title = format!("tasks of {} {}", cells::name_of(&p.rec), cells::address(p));
    let table = Table::new(rows, widths)
        .header(Row::new(cells::TASK_COLUMNS).style(Style::new().add_modifier(Modifier::BOLD)))
        .block(block(&title, view.focus == Focus::Tasks));
    f.render_widget(table, area);
}

fn draw_tail(f: &mut Frame, area: Rect, board: &Board, view: &View) {
    let Some(t) = view.selected_task(board) else {
        f.render_widget(Paragraph::new("").block(block("output", false)), area);
        return;
    };
    let room = area.height.saturating_sub(1) as usize;
    let skip = t.tail.len().saturating_sub(room);
    let lines: Vec<Line> = t
        .tail
        .iter()
        .skip(skip)
        .map(|l| Line::from(l.clone()))
        .collect();
    let title = format!("output of {}", cells::short(&t.id));
    f.render_widget(Paragraph::new(lines).block(block(&title, false)), area);
}

fn said_line(view: &View) -> Paragraph<'static> {
    let lines: Vec<Line> = view
        .said
        .iter()
        .rev()
        .take(2)
        .rev()
        .map(|l| Line::from(l.clone()))
        .collect();
    Paragraph::new(lines)
}

fn draw_overlay(f: &mut Frame, area: Rect, overlay: &Overlay) {
    let (title, lines, top): (String, Vec<String>, usize) = match overlay {
        Overlay::Help => (
            "keys".into(),
            HELP.iter().map(|l| l.to_string()).collect(),
            0,
        ),
        Overlay::ConfirmStop { what, .. } => (
            "stop".into(),
            vec![
                format!("Stop {what}?"),
                String::new(),
                "y stops it; any other key does not".into(),
            ],
            0,
        ),
        Overlay::Trace { title, lines, top } => (title.clone(), lines.clone(), *top),
    };
    let width = area.width.saturating_sub(4).min(120);
    let height = match overlay {
        Overlay::Trace { .. } => area.height.saturating_sub(2),
        _ => (lines.len() as u16 + 2).min(area.height),
    };
    let at = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    let shown: Vec<Line> = lines.into_iter().skip(top).map(Line::from).collect();
    f.render_widget(Clear, at);
    f.render_widget(
        Paragraph::new(shown).block(Block::bordered().title(format!(" {title} "))),
        at,
    );
}

fn mark(color: bool, c: Color) -> Style {
    if color {
        Style::new().fg(c)
    } else {
        Style::new().add_modifier(Modifier::BOLD)
    }
}

fn mark_style(color: bool, m: Mark) -> Style {
    match (color, m) {
        (false, Mark::Bad) => Style::new().add_modifier(Modifier::BOLD),
        (false, _) => Style::new(),
        (true, Mark::Busy) => Style::new().fg(Color::Yellow),
        (true, Mark::Good) => Style::new().fg(Color::Green),
        (true, Mark::Bad) => Style::new().fg(Color::Red),
        (true, Mark::Ended) => Style::new().fg(Color::DarkGray),
    }
}
