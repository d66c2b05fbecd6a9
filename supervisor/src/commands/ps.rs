//! `mur ps`: the running capsules from `run/`, pruning records whose process is gone; a door
//! that does not answer its card is shown as unreachable. A formation is shown as a tree: one
//! line naming it, then its members in roster order. Every row keeps the `@N` that
//! `records::resolve_running` gives its session (newest first over all running capsules), so
//! `mur stop @2` names exactly the row marked `@2`. A sub-capsule is listed under the capsule
//! that delegated to it (`↳`), at every depth.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{json, Value};

use crate::client;
use crate::error::CliResult;
use crate::listing::{self, Entry, Placed};
use crate::records::{self, RunningCapsule};
use crate::terminal::field;

/// A door answers its card, and the card names a JSONRPC interface (a card without
/// supportedInterfaces comes from a runtime at v0.4.0 or earlier and names no session).
async fn reachable(url: &str) -> bool {
    client::card(url, Duration::from_secs(2))
        .await
        .is_ok_and(|card| card.get("supportedInterfaces").is_some())
}

pub async fn run(as_json: bool) -> CliResult<i32> {
    let all = records::running();
    let mut up = HashMap::new();
    for rec in &all {
        up.insert(rec.session_id.clone(), reachable(&rec.url).await);
    }
    let is_up = |rec: &RunningCapsule| up.get(&rec.session_id).copied().unwrap_or(false);
    if as_json {
        let list: Vec<Value> = all
            .iter()
            .enumerate()
            .map(|(i, rec)| json_entry(i + 1, rec, is_up(rec)))
            .collect();
        super::emit(&format!("{}\n", Value::Array(list)));
        return Ok(0);
    }
    if all.is_empty() {
        super::emit(&format!("no capsule is running\n{}", resumable()));
        return Ok(0);
    }
    let mut text = format!(
        "{:<4} {:<36} {:<20} {:<24} {:>8}  STATUS\n",
        "", "SESSION", "CAPSULE", "URL", "PID"
    );
    for entry in listing::list(all.clone()) {
        let line = match entry {
            Entry::Heading(heading) => format!("{:<4} {}", "", field(&heading)),
            Entry::Capsule(p) => capsule_line(&p, is_up(&p.rec)),
        };
        text.push_str(&line);
        text.push('\n');
    }
    text.push_str(&resumable());
    super::emit(&text);
    Ok(0)
}

/// The launches cut short (killed, or their machine went down), newest first, each with the
/// `@N` that `mur run --resume @N` takes; nothing when there is none.
fn resumable() -> String {
    let cut = crate::formation::resume::cut_short();
    if cut.is_empty() {
        return String::new();
    }
    let mut text =
        String::from("cut short, can be resumed (`mur run --resume @N`, or its session):\n");
    for (i, l) in cut.iter().enumerate() {
        let what = match &l.formation {
            Some(f) => format!("{} ({} members)", field(f), l.members.len()),
            None => l
                .members
                .first()
                .map(|m| field(&m.name).into_owned())
                .unwrap_or_default(),
        };
        text.push_str(&format!(
            "{:<4} {}  {what}, started {}\n",
            format!("@{}", i + 1),
            field(&l.entry),
            field(&l.started_at)
        ));
    }
    text
}

fn status(up: bool) -> &'static str {
    if up {
        "running"
    } else {
        "unreachable"
    }
}

/// One `--json` entry; `formation` and `member` are null for a lone capsule.
fn json_entry(n: usize, r: &RunningCapsule, up: bool) -> Value {
    json!({
        "address": format!("@{n}"), "session_id": r.session_id, "name": r.name,
        "version": r.version, "url": r.url, "pid": r.pid, "status": status(up),
        "started_at": r.started_at, "records": r.records,
        "formation": r.formation, "member": r.member,
        "restarts": r.restarts, "last_exit": r.last_exit,
        "parent": r.parent, "delegation_id": r.delegation_id,
    })
}

/// The line of one running capsule, its label in the CAPSULE column; a restarted formation
/// member says how often and how it last ended. The record's words (names from manifests and
/// peers, the URL) are shown one visible line each.
fn capsule_line(p: &Placed, up: bool) -> String {
    let mut line = format!(
        "{:<4} {:<36} {:<20} {:<24} {:>8}  {}",
        format!("@{}", p.n),
        field(&p.rec.session_id),
        field(&p.label),
        field(p.rec.url.trim_start_matches("http://")),
        p.rec.pid,
        status(up)
    );
    if p.rec.formation.is_some() && p.rec.parent.is_none() && p.rec.restarts > 0 {
        let last = p.rec.last_exit.map(|c| format!(", last exit {c}"));
        line.push_str(&format!(
            "  (restarts {}{})",
            p.rec.restarts,
            last.unwrap_or_default()
        ));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::terminal::{assert_forged_shown, FORGED};

    #[test]
    fn a_records_words_are_shown_on_its_row() {
        let rec: RunningCapsule = serde_json::from_value(json!({
            "pid": 10, "supervisor_pid": 1, "url": format!("http://localhost:1{FORGED}"),
            "name": FORGED, "version": FORGED, "session_id": FORGED, "records": "/nonexistent",
            "formation": null, "member": null, "started_at": "2026-12-01T10:00:00.000Z",
        }))
        .unwrap();
        let placed = Placed {
            n: 1,
            label: format!("{FORGED} {FORGED}"),
            rec,
        };
        let line = capsule_line(&placed, true);
        assert_forged_shown(&line);
        assert_eq!(line.lines().count(), 1, "{line}");
    }
}
