//! `mur top --once`, and `mur top` with no terminal to draw on: one snapshot of the board as
//! plain text, for scripts and tests. The board is filled the way the live view fills it, but
//! once: each door's ListTasks and each session's trace, no stream.

use super::board::{Board, Link};
use super::{cells, feed};
use crate::follow::JsonLines;
use crate::listing::Entry;
use crate::terminal::field;

/// Reads every shown session once into `board`: each door is asked at the same time, so a
/// door that does not answer costs its own timeout once, not one per session.
pub async fn fill(board: &mut Board) {
    let mut asked = tokio::task::JoinSet::new();
    for rec in board.capsules().map(|p| p.rec.clone()) {
        asked.spawn(async move {
            let trace = rec.records.join("trace.jsonl");
            let records = JsonLines::from_last(&trace, feed::TRACE_BACK).read_new();
            (
                rec.session_id.clone(),
                records,
                feed::list_tasks(&rec).await,
            )
        });
    }
    while let Some(Ok((session, records, tasks))) = asked.join_next().await {
        for record in &records {
            board.apply_trace(&session, record);
        }
        match tasks {
            Ok(tasks) => {
                for task in tasks.iter().rev() {
                    board.apply_task(&session, task);
                }
                board.set_link(&session, Link::Live);
            }
            Err(e) => board.set_link(&session, Link::Lost(e.message().to_owned())),
        }
    }
}

/// The snapshot: a heading with the time, the capsules as `mur ps` draws them, then the open
/// questions, the calls, the delegations in flight, every shown task and the alerts.
pub fn text(board: &Board, now_ms: i64) -> String {
    let mut out = format!(
        "mur top  {}\n",
        capsule::clock::Millis(now_ms)
            .rfc3339()
            .get(..19)
            .unwrap_or("")
            .replace('T', " ")
            + " UTC"
    );
    if board.entries.is_empty() {
        out.push_str("no capsule is running\n");
        return out;
    }
    out.push_str(&members(board, now_ms));
    // A formation's spend, when any of its members made a model call or it has a ceiling.
    let spend: Vec<String> = cells::spend(board).into_iter().map(|(l, _)| l).collect();
    if !spend.is_empty() {
        section(&mut out, "Spend", spend);
    }
    // Questions waiting for the operator, when any task asks one.
    let questions = cells::questions(board);
    if !questions.is_empty() {
        section(&mut out, "Questions", questions);
    }
    section(&mut out, "Calls", cells::calls(board));
    section(&mut out, "Delegations", cells::delegations(board));
    section(&mut out, "Tasks", tasks(board, now_ms));
    section(&mut out, "Alerts", cells::alerts(board));
    out
}

fn members(board: &Board, now_ms: i64) -> String {
    let mut header = vec![String::new()];
    header.extend(cells::MEMBER_COLUMNS.iter().map(|c| c.to_string()));
    header.push("SESSION".into());
    let mut rows = vec![header];
    let mut headings = Vec::new();
    for entry in &board.entries {
        match entry {
            Entry::Heading(h) => headings.push((rows.len(), field(h).into_owned())),
            Entry::Capsule(p) => {
                let mut row = vec![cells::address(p)];
                row.extend(cells::member(p, board.session(&p.rec.session_id), now_ms));
                row.push(field(&p.rec.session_id).into_owned());
                rows.push(row);
            }
        }
    }
    let mut lines = table(&rows);
    let pad = lines
        .first()
        .and_then(|l| l.find("CAPSULE"))
        .unwrap_or_default();
    for (at, heading) in headings.into_iter().rev() {
        lines.insert(at, format!("{}{heading}", " ".repeat(pad)));
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}

fn tasks(board: &Board, now_ms: i64) -> Vec<String> {
    let mut header = vec!["MEMBER".to_owned()];
    header.extend(cells::TASK_COLUMNS.iter().map(|c| c.to_string()));
    let mut rows = vec![header];
    for p in board.capsules() {
        let Some(view) = board.session(&p.rec.session_id) else {
            continue;
        };
        for t in &view.tasks {
            let mut row = vec![cells::name_of(&p.rec)];
            row.extend(cells::task(t, now_ms));
            rows.push(row);
        }
    }
    if rows.len() == 1 {
        return Vec::new();
    }
    table(&rows)
}

fn section(out: &mut String, title: &str, lines: Vec<String>) {
    out.push_str(&format!("── {title} ──\n"));
    if lines.is_empty() {
        out.push_str("(none)\n");
    }
    for l in lines {
        out.push_str(&l);
        out.push('\n');
    }
}

/// Rows as columns padded to their widest cell, two spaces apart, with no trailing space.
pub fn table(rows: &[Vec<String>]) -> Vec<String> {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    rows.iter()
        .map(|r| {
            let line: Vec<String> = r
                .iter()
                .zip(&widths)
                .map(|(cell, w)| format!("{cell}{}", " ".repeat(w - cell.chars().count())))
                .collect();
            line.join("  ").trim_end().to_owned()
        })
        .collect()
}
