//! `mur ps`: the running capsules from `run/`, pruning records whose process is gone; a door
//! that does not answer its card is shown as unreachable. A formation is shown as a tree: one
//! line naming it, then its members in roster order. Every row keeps the `@N` that
//! `records::resolve_running` gives its session (newest first over all running capsules), so
//! `mur stop @2` names exactly the row marked `@2`.

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
    for item in group(rows) {
        for line in item_lines(&item) {
            text.push_str(&line);
            text.push('\n');
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
/// member whose CAPSULE column is the member's name on a branch of the tree.
fn item_lines(item: &Item) -> Vec<String> {
    match item {
        Item::Lone(row) => vec![row_line(
            row,
            &format!("{} {}", row.rec.name, row.rec.version),
        )],
        Item::Formation { heading, members } => {
            let mut lines = vec![format!("{:<4} {heading}", "")];
            for (i, row) in members.iter().enumerate() {
                let branch = if i + 1 == members.len() {
                    "└─"
                } else {
                    "├─"
                };
                let member = row.rec.member.as_deref().unwrap_or(&row.rec.name);
                lines.push(row_line(row, &format!("{branch} {member}")));
            }
            lines
        }
    }
}
