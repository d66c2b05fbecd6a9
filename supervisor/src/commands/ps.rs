//! `mur ps`: the running capsules from `run/`, pruning records whose process is gone; a door
//! that does not answer its card is shown as unreachable. A formation is shown as a tree: one
//! line naming it, then its members in roster order. Every row keeps the `@N` that
//! `records::resolve_running` gives its session (newest first over all running capsules), so
//! `mur stop @2` names exactly the row marked `@2`. A sub-capsule is listed under the capsule
//! that delegated to it (`↳`), at every depth.

use std::time::Duration;

use serde_json::{json, Value};

use crate::client;
use crate::error::CliResult;
use crate::records::{self, RunningCapsule};

/// A door answers its card, and the card names a JSONRPC interface (a card without
/// supportedInterfaces comes from a runtime at v0.4.0 or earlier and names no session).
async fn reachable(url: &str) -> bool {
    client::card(url, Duration::from_secs(2))
        .await
        .is_ok_and(|card| card.get("supportedInterfaces").is_some())
}

/// One running capsule as listed: its address number, its record, whether its door answers.
struct Row {
    n: usize,
    rec: RunningCapsule,
    up: bool,
}

/// What the listing shows, top-level item by top-level item (newest first).
enum Item {
    Lone(Box<Row>),
    /// One launch of a formation: its heading and its members, in roster order.
    Formation {
        heading: String,
        members: Vec<Row>,
    },
}

pub async fn run(as_json: bool) -> CliResult<i32> {
    let all = records::running();
    let mut rows = Vec::new();
    for (i, rec) in all.into_iter().enumerate() {
        let up = reachable(&rec.url).await;
        rows.push(Row { n: i + 1, rec, up });
    }
    if as_json {
        let list: Vec<Value> = rows.iter().map(json_entry).collect();
        super::emit(&format!("{}\n", Value::Array(list)));
        return Ok(0);
    }
    if rows.is_empty() {
        super::emit("no capsule is running\n");
        return Ok(0);
    }
    let mut text = format!(
        "{:<4} {:<36} {:<20} {:<24} {:>8}  STATUS\n",
        "", "SESSION", "CAPSULE", "URL", "PID"
    );
    // Sub-capsules are listed under the capsule that delegated to them, at every depth.
    let (children, top): (Vec<Row>, Vec<Row>) =
        rows.into_iter().partition(|r| r.rec.parent.is_some());
    for item in group(top) {
        for (line, session) in item_lines(&item) {
            text.push_str(&line);
            text.push('\n');
            for child in children_lines(&children, &session, 1) {
                text.push_str(&child);
                text.push('\n');
            }
        }
    }
    super::emit(&text);
    Ok(0)
}

fn status(up: bool) -> &'static str {
    if up {
        "running"
    } else {
        "unreachable"
    }
}

/// One `--json` entry; `formation` and `member` are null for a lone capsule.
fn json_entry(row: &Row) -> Value {
    let r = &row.rec;
    json!({
        "address": format!("@{}", row.n), "session_id": r.session_id, "name": r.name,
        "version": r.version, "url": r.url, "pid": r.pid, "status": status(row.up),
        "started_at": r.started_at, "records": r.records,
        "formation": r.formation, "member": r.member,
        "restarts": r.restarts, "last_exit": r.last_exit,
        "parent": r.parent, "delegation_id": r.delegation_id,
    })
}

/// Gathers each formation launch's rows into one item, placed where its newest member is.
fn group(rows: Vec<Row>) -> Vec<Item> {
    let mut items: Vec<Item> = Vec::new();
    for row in rows {
        if row.rec.formation.is_none() {
            items.push(Item::Lone(Box::new(row)));
            continue;
        }
        let joined = items.iter_mut().find_map(|item| match item {
            Item::Formation { members, .. } if records::same_launch(&members[0].rec, &row.rec) => {
                Some(members)
            }
            _ => None,
        });
        match joined {
            Some(members) => members.push(row),
            None => items.push(Item::Formation {
                heading: String::new(),
                members: vec![row],
            }),
        }
    }
    for item in &mut items {
        if let Item::Formation { heading, members } = item {
            *heading = order_members(members);
        }
    }
    items
}

/// Puts a formation's members in roster order and answers its heading:
/// `formation NAME VERSION (entry MEMBER)`, or `formation NAME` when its roster is unreadable.
fn order_members(members: &mut [Row]) -> String {
    let name = members[0].rec.formation.clone().unwrap_or_default();
    let roster = members
        .iter()
        .find_map(|m| records::roster(&m.rec.records).ok().flatten());
    let order = roster.as_ref().map(|r| r.sessions()).unwrap_or_default();
    members.sort_by_key(|m| records::roster_rank(&order, &m.rec.session_id));
    match roster {
        Some(r) => format!("formation {name} {} (entry {})", r.version, r.entry),
        None => format!("formation {name}"),
    }
}

/// The line of one running capsule; `capsule` fills the CAPSULE column.
fn row_line(row: &Row, capsule: &str) -> String {
    format!(
        "{:<4} {:<36} {:<20} {:<24} {:>8}  {}",
        format!("@{}", row.n),
        row.rec.session_id,
        capsule,
        row.rec.url.trim_start_matches("http://"),
        row.rec.pid,
        status(row.up)
    )
}

/// A lone capsule is one line, as it always was; a formation is its heading, then one line per
/// member whose CAPSULE column is the member's name on a branch of the tree. Each line comes
/// with the session it shows (empty for a heading), for its sub-capsules to follow it.
fn item_lines(item: &Item) -> Vec<(String, String)> {
    match item {
        Item::Lone(row) => vec![(
            row_line(row, &format!("{} {}", row.rec.name, row.rec.version)),
            row.rec.session_id.clone(),
        )],
        Item::Formation { heading, members } => {
            let mut lines = vec![(format!("{:<4} {heading}", ""), String::new())];
            for (i, row) in members.iter().enumerate() {
                let branch = if i + 1 == members.len() {
                    "└─"
                } else {
                    "├─"
                };
                let member = row.rec.member.as_deref().unwrap_or(&row.rec.name);
                let mut line = row_line(row, &format!("{branch} {member}"));
                if row.rec.restarts > 0 {
                    let last = row.rec.last_exit.map(|c| format!(", last exit {c}"));
                    line.push_str(&format!(
                        "  (restarts {}{})",
                        row.rec.restarts,
                        last.unwrap_or_default()
                    ));
                }
                lines.push((line, row.rec.session_id.clone()));
            }
            lines
        }
    }
}

/// The sub-capsules `parent` delegated to, each as `↳ NAME VERSION` indented by its depth, each
/// followed by its own.
fn children_lines(children: &[Row], parent: &str, depth: usize) -> Vec<String> {
    let mut lines = Vec::new();
    if parent.is_empty() || depth > 16 {
        return lines;
    }
    for row in children
        .iter()
        .filter(|r| r.rec.parent.as_deref() == Some(parent))
    {
        let name = format!(
            "{}↳ {} {}",
            "  ".repeat(depth - 1),
            row.rec.name,
            row.rec.version
        );
        lines.push(row_line(row, &name));
        lines.extend(children_lines(children, &row.rec.session_id, depth + 1));
    }
    lines
}
