//! `mur trace show [ADDRESS] [--workdir D] [--formation]`: a session's trace.jsonl rendered in
//! sections (Session, Tasks, Harness); with `--formation`, every trace of the addressed member's
//! formation interleaved by time, one line per event, so a call from one member to another reads
//! in the order it happened. Addresses count among the recorded sessions of the folder.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{CliError, CliResult, Code};
use crate::records;

/// How wide a section's rule is drawn, in characters. The guide's own example draws Session's
/// 49 wide and Tasks' 48 (a2a-messaging-guide, the trace after a delegation), so those two are
/// drawn exactly so; the sections it does not draw take [`RULE_WIDTH`].
const RULE_WIDTHS: &[(&str, usize)] = &[("Session", 49), ("Tasks", 48)];
const RULE_WIDTH: usize = 50;

fn rule(title: &str) -> String {
    let width = RULE_WIDTHS
        .iter()
        .find(|(t, _)| *t == title)
        .map_or(RULE_WIDTH, |(_, w)| *w);
    let head = format!("── {title} ");
    let pad = width.saturating_sub(head.chars().count());
    format!("{head}{}", "─".repeat(pad))
}

fn trace_path(address: Option<&str>, workdir: &Path) -> CliResult<PathBuf> {
    if let Some(a) = address {
        let p = Path::new(a);
        if a.ends_with(".jsonl") || a.contains('/') {
            return if p.is_file() {
                Ok(p.to_path_buf())
            } else {
                Err(CliError::new(
                    Code::NoSuchSession,
                    format!("{a} is not a trace file"),
                    "give the path of a session's trace.jsonl",
                ))
            };
        }
    }
    let sessions = records::recorded(workdir);
    let ids: Vec<String> = sessions.iter().map(|(id, _)| id.clone()).collect();
    if ids.is_empty() {
        return Err(CliError::new(
            Code::NoSuchSession,
            format!("no session was recorded in {}", workdir.display()),
            "run `mur trace show` in the folder `mur run` ran in, or pass --workdir",
        ));
    }
    let id = records::resolve(address.unwrap_or("@1"), &ids, "recorded sessions")?;
    let dir = sessions
        .iter()
        .find(|(s, _)| s == id)
        .map(|(_, d)| d.clone())
        .unwrap_or_default();
    Ok(dir.join("trace.jsonl"))
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

pub fn run(address: Option<&str>, workdir: Option<&Path>, formation: bool) -> CliResult<i32> {
    let cwd = match workdir {
        Some(w) => w.to_path_buf(),
        None => std::env::current_dir().unwrap_or_default(),
    };
    let cwd = cwd.canonicalize().unwrap_or(cwd);
    let path = trace_path(address, &cwd)?;
    if formation {
        super::emit(&formation_view(&path)?);
        return Ok(0);
    }
    let text = std::fs::read_to_string(&path).map_err(|e| {
        CliError::new(
            Code::NoSuchSession,
            format!("cannot read {}: {e}", path.display()),
            "check the path",
        )
    })?;
    super::emit(&render(&parse(&text)));
    Ok(0)
}

/// The records of a trace.jsonl; a line that is not JSON (a record cut short by a crash) is
/// skipped rather than hiding the rest.
fn parse(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

pub fn render(events: &[Value]) -> String {
    let mut out = String::new();
    let find = |t: &str| events.iter().find(|e| s(e, "event_type") == t);
    out.push_str(&rule("Session"));
    out.push('\n');
    if let Some(start) = find("session_start") {
        out.push_str(&format!("session:    {}\n", s(start, "session_id")));
        out.push_str(&format!(
            "capsule:    {} v{}\n",
            s(start, "capsule"),
            s(start, "version")
        ));
        out.push_str(&format!("url:        {}\n", s(start, "url")));
        out.push_str(&format!("started:    {}\n", s(start, "timestamp")));
    }
    match find("session_end") {
        Some(end) => out.push_str(&format!("ended:      {}\n", s(end, "timestamp"))),
        None => out.push_str("ended:      (still running)\n"),
    }
    out.push_str(&rule("Tasks"));
    out.push('\n');
    let received: Vec<&Value> = events
        .iter()
        .filter(|e| s(e, "event_type") == "a2a_task_received")
        .collect();
    for (n, r) in received.iter().enumerate() {
        let id = s(r, "task_id");
        let end = events
            .iter()
            .find(|e| s(e, "event_type") == "task_end" && s(e, "task_id") == id);
        let line = match end {
            Some(end) => {
                let status = match s(end, "status") {
                    "completed" => "ok",
                    other => other,
                };
                let secs = end
                    .get("duration_ms")
                    .and_then(Value::as_u64)
                    .map(|ms| format!("  {:.1}s", ms as f64 / 1000.0))
                    .unwrap_or_default();
                let turns = end.get("turns").and_then(Value::as_u64).unwrap_or(0);
                format!(
                    "task {}  {}  turns: {turns}  {}{status}{secs}",
                    n + 1,
                    short(id),
                    tokens(events, id)
                )
            }
            None => format!("task {}  {}  (not ended)", n + 1, short(id)),
        };
        out.push_str(&line);
        out.push('\n');
        if let Some(f) = events
            .iter()
            .find(|e| s(e, "event_type") == "task_failed" && s(e, "task_id") == id)
        {
            out.push_str(&format!("        failed: {}\n", s(f, "cause")));
        }
    }
    // An egress refusal is the harness's, or on an http capsule its shell commands'.
    let has_harness = events
        .iter()
        .any(|e| s(e, "event_type").starts_with("harness_"));
    let harness: Vec<&Value> = events
        .iter()
        .filter(|e| {
            let kind = s(e, "event_type");
            kind.starts_with("harness_") || (has_harness && kind == "egress_denied")
        })
        .collect();
    if !harness.is_empty() {
        out.push_str(&rule("Harness"));
        out.push('\n');
        for e in harness {
            let id = short(s(e, "task_id"));
            let line = match s(e, "event_type") {
                "harness_start" => format!(
                    "{id}  start  pid {}  session {}",
                    e["pid"],
                    s(e, "session_mode")
                ),
                "harness_interrupt" => format!("{id}  interrupt  {}", s(e, "interrupt")),
                "harness_exit" => format!(
                    "{id}  exit  cause {}  status {}{}",
                    s(e, "cause"),
                    e.get("exit_code")
                        .filter(|c| !c.is_null())
                        .or(e.get("signal"))
                        .unwrap_or(&Value::Null),
                    if e.get("killed").and_then(Value::as_bool) == Some(true) {
                        "  killed"
                    } else {
                        ""
                    }
                ),
                "harness_session_forgotten" => format!(
                    "{}  forgot harness session {}",
                    s(e, "context_id"),
                    s(e, "harness_session")
                ),
                "egress_denied" => format!("{id}  egress refused  {}:{}", s(e, "host"), e["port"]),
                other => other.to_owned(),
            };
            out.push_str(&line);
            out.push('\n');
        }
    }
    out.push_str(&shell(events, !has_harness));
    out.push_str(&peers(events));
    out.push_str(&delegations(events, 0));
    out
}

/// The Shell section: each command the model of an http capsule ran (start, move to the
/// background, end) or was refused, and the egress refusals when no harness took them. Empty
/// when there are none.
fn shell(events: &[Value], with_egress: bool) -> String {
    let lines: Vec<String> = events
        .iter()
        .filter_map(|e| {
            let id = short(s(e, "task_id"));
            let work = s(e, "work_id");
            Some(match s(e, "event_type") {
                "shell_start" => format!(
                    "{id}  {work}  start  {}  {}{}",
                    s(e, "binary"),
                    s(e, "command"),
                    if e["background"] == true {
                        "  (background)"
                    } else {
                        ""
                    }
                ),
                "shell_background" => format!("{id}  {work}  background  {}", s(e, "why")),
                "shell_end" => {
                    let status = match (e["exit_code"].as_i64(), e["signal"].as_i64()) {
                        (Some(c), _) => format!("status {c}"),
                        (None, Some(sig)) => format!("signal {sig}"),
                        (None, None) => "no status".to_owned(),
                    };
                    format!(
                        "{id}  {work}  exit  {status}  {} bytes  {:.1}s{}",
                        e["output_bytes"],
                        e["duration_ms"].as_u64().unwrap_or(0) as f64 / 1000.0,
                        if e["killed"] == true { "  killed" } else { "" }
                    )
                }
                "shell_refused" => {
                    format!("{id}  refused  {}  {}", s(e, "reason"), s(e, "command"))
                }
                "egress_denied" if with_egress => {
                    format!("{id}  egress refused  {}:{}", s(e, "host"), e["port"])
                }
                _ => return None,
            })
        })
        .collect();
    if lines.is_empty() {
        return String::new();
    }
    let mut out = rule("Shell");
    out.push('\n');
    for line in lines {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// How deep `trace show` follows delegations into their children's traces.
const FOLLOW_DEPTH: usize = 8;

/// The Delegations section: each sub-capsule a task delegated to, how it ended, and — followed
/// into its own trace (`children/<capsule>-<16 hex>/trace.jsonl`) — what it did, indented, at
/// every depth. Empty when the session delegated nothing.
fn delegations(events: &[Value], depth: usize) -> String {
    let started: Vec<&Value> = events
        .iter()
        .filter(|e| s(e, "event_type") == "delegation_start")
        .collect();
    if started.is_empty() || depth >= FOLLOW_DEPTH {
        return String::new();
    }
    let pad = "  ".repeat(depth);
    let mut out = format!("{pad}{}\n", rule("Delegations"));
    for d in started {
        let id = s(d, "delegation_id");
        let end = events
            .iter()
            .find(|e| s(e, "event_type") == "delegation_end" && s(e, "delegation_id") == id);
        let ended = match end {
            Some(e) => format!("{} after {}", s(e, "state"), seconds(e)),
            None => "still running".to_owned(),
        };
        out.push_str(&format!(
            "{pad}{}  delegated to {} {} ({id}): {ended}\n",
            short(s(d, "task_id")),
            s(d, "capsule"),
            s(d, "version"),
        ));
        let trace = Path::new(s(d, "child_workdir")).join("trace.jsonl");
        out.push_str(&format!("{pad}  trace: {}\n", trace.display()));
        let child: Vec<Value> = std::fs::read_to_string(&trace)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        for line in child_tasks(&child) {
            out.push_str(&format!("{pad}    {line}\n"));
        }
        out.push_str(&delegations(&child, depth + 1));
    }
    out
}

/// A child's tasks, one line each: id, status, time.
fn child_tasks(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| s(e, "event_type") == "task_end")
        .map(|e| {
            format!(
                "{}  {}  {}",
                short(s(e, "task_id")),
                s(e, "status"),
                seconds(e)
            )
        })
        .collect()
}

fn seconds(e: &Value) -> String {
    e.get("duration_ms")
        .and_then(Value::as_u64)
        .map(|ms| format!("{:.1}s", ms as f64 / 1000.0))
        .unwrap_or_else(|| "-".into())
}

/// The Peers section: what this session sent other doors, its member calls, and what its
/// allow list refused. Empty when it reached no peer.
fn peers(events: &[Value]) -> String {
    let lines: Vec<String> = events
        .iter()
        .filter_map(|e| {
            let caller = short(s(e, "caller_task_id"));
            Some(match s(e, "event_type") {
                "a2a_send" => format!(
                    "{caller}  sent to {}  task {}",
                    s(e, "peer_url"),
                    e.get("task_id")
                        .and_then(Value::as_str)
                        .unwrap_or("(refused)")
                ),
                "member_call" => {
                    let why = e.get("reason").and_then(Value::as_str);
                    format!(
                        "{caller}  called {}  {}{}",
                        s(e, "member"),
                        s(e, "status"),
                        why.map(|w| format!(": {w}")).unwrap_or_default()
                    )
                }
                "network_refused" => format!(
                    "{caller}  refused {}: {}",
                    s(e, "destination"),
                    s(e, "reason")
                ),
                _ => return None,
            })
        })
        .collect();
    if lines.is_empty() {
        return String::new();
    }
    let mut out = rule("Peers");
    out.push('\n');
    for line in lines {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// One member of the formation being shown: its roster name, its session, and its events
/// (`None` when its trace cannot be read: it never started, or its folder was removed).
struct MemberTrace {
    name: String,
    session: String,
    events: Option<Vec<Value>>,
}

/// The formation of the member whose trace is `trace`: its `formation.json` names every
/// member's session, whose folders are siblings of this one.
fn formation_view(trace: &Path) -> CliResult<String> {
    let dir = trace.parent().unwrap_or(Path::new("."));
    let session = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string());
    let roster = match records::roster(dir) {
        Ok(Some(roster)) => roster,
        Ok(None) => return Err(not_a_member(&session)),
        Err(why) => {
            return Err(CliError::new(
                Code::NotAFormationMember,
                format!("cannot read the formation of session {session}: {why}"),
                "`mur run` writes formation.json into each member's session folder; without it, show one member at a time with `mur trace show ADDRESS`",
            ))
        }
    };
    let siblings = dir.parent().unwrap_or(Path::new("."));
    let members = roster
        .members()
        .into_iter()
        .map(|(name, session)| {
            let events = is_session_id(&session)
                .then(|| std::fs::read_to_string(siblings.join(&session).join("trace.jsonl")))
                .and_then(Result::ok)
                .map(|text| parse(&text));
            MemberTrace {
                name,
                session,
                events,
            }
        })
        .collect::<Vec<_>>();
    Ok(render_formation(&roster, &members))
}

fn not_a_member(session: &str) -> CliError {
    CliError::new(
        Code::NotAFormationMember,
        format!("session {session} is not a formation member: it was launched as a lone capsule"),
        "--formation needs the session of a formation member (`mur run` prints each as `member NAME: … session ses_…`); drop --formation to show this session's own trace",
    )
}

/// A roster names sessions as `mur run` minted them; anything else (a path) is not followed.
fn is_session_id(s: &str) -> bool {
    s.starts_with("ses_") && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The width of the event-type column: the longest common type (`a2a_task_received`).
const TYPE_WIDTH: usize = 17;

/// The formation, its members, then every member's events merged by timestamp. The sort is
/// stable: events stamped in the same millisecond keep roster order, and each member's own
/// events keep the order of its file. Times are UTC, as the trace records them; a rule names
/// the date, again whenever it changes.
fn render_formation(roster: &records::Roster, members: &[MemberTrace]) -> String {
    let mut out = String::new();
    out.push_str(&rule("Formation"));
    out.push('\n');
    out.push_str(&format!(
        "formation:  {} {}\n",
        roster.formation, roster.version
    ));
    out.push_str(&format!("entry:      {}\n", roster.entry));
    let width = members.iter().map(|m| m.name.chars().count()).max();
    let width = width.unwrap_or(0);
    for m in members {
        let missing = if m.events.is_none() {
            "  (no trace)"
        } else {
            ""
        };
        out.push_str(&format!(
            "member:     {:<width$}  {}{missing}\n",
            m.name, m.session
        ));
    }
    let mut merged: Vec<(&str, &str, &Value)> = members
        .iter()
        .flat_map(|m| {
            m.events
                .iter()
                .flatten()
                .map(move |e| (s(e, "timestamp"), m.name.as_str(), e))
        })
        .collect();
    merged.sort_by(|a, b| a.0.cmp(b.0));
    if merged.is_empty() {
        out.push_str(&rule("Events"));
        out.push_str("\n(no events)\n");
        return out;
    }
    let mut date = None;
    for (ts, name, e) in merged {
        let (day, time) = split_timestamp(ts);
        if date != Some(day) {
            let title = match date {
                None => format!("Events, {day} UTC"),
                Some(_) => format!("{day} UTC"),
            };
            out.push_str(&rule(&title));
            out.push('\n');
            date = Some(day);
        }
        let line = format!(
            "{time:<12}  {name:<width$}  {:<TYPE_WIDTH$}  {}",
            s(e, "event_type"),
            detail(e)
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `2026-11-30T15:53:01.123Z` → (`2026-11-30`, `15:53:01.123`); anything else is shown whole.
fn split_timestamp(ts: &str) -> (&str, &str) {
    match (ts.get(..10), ts.get(11..23)) {
        (Some(day), Some(time)) if ts.len() == 24 && ts.ends_with('Z') => (day, time),
        _ => ("(no date)", ts),
    }
}

/// What an event says, after its type: its task first, then the few fields that tell it apart.
fn detail(e: &Value) -> String {
    let task = s(e, "task_id").to_owned();
    let field = |k: &str| s(e, k).to_owned();
    let parts: Vec<String> = match s(e, "event_type") {
        "session_start" => vec![
            format!("{} v{}", s(e, "capsule"), s(e, "version")),
            s(e, "url").trim_start_matches("http://").to_owned(),
        ],
        "session_end" => match s(e, "launch_task_state") {
            "" => Vec::new(),
            state => vec![format!("launch task {state}")],
        },
        "a2a_task_received" => vec![task, labelled("from", s(e, "origin"))],
        "task_start" => vec![task],
        "task_failed" => vec![task, field("cause")],
        "task_canceled" => vec![task, format!("interrupted {}", s(e, "interrupted"))],
        "task_end" => vec![task, field("status"), ran(e)],
        "harness_start" => vec![
            task,
            format!("pid {}", e["pid"]),
            format!("session {}", s(e, "session_mode")),
        ],
        "harness_interrupt" => vec![task, field("interrupt")],
        "harness_exit" => vec![task, format!("cause {}", s(e, "cause")), exited(e)],
        "tool_call" => vec![task, field("tool")],
        "capsule_died" => vec![format!("exit status {}", e["exit_status"])],
        _ => generic(e),
    };
    parts
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("  ")
}

/// `LABEL value`, or nothing when the value is absent.
fn labelled(label: &str, value: &str) -> String {
    match value {
        "" => String::new(),
        v => format!("{label} {v}"),
    }
}

/// `in: N  out: M  ` — the tokens an http capsule's task used, summed over its `inference`
/// records (as the guide's trace shows them); empty for a task that made no inference call.
fn tokens(events: &[Value], task: &str) -> String {
    let calls: Vec<&Value> = events
        .iter()
        .filter(|e| e["event_type"] == "inference" && e["task_id"] == task)
        .collect();
    if calls.is_empty() {
        return String::new();
    }
    let sum = |key: &str| -> u64 { calls.iter().filter_map(|e| e[key].as_u64()).sum() };
    format!(
        "in: {}  out: {}  ",
        sum("input_tokens"),
        sum("output_tokens")
    )
}

/// `turns N  1.2s` of a task that ran; empty for one canceled before it ran.
fn ran(e: &Value) -> String {
    match (
        e.get("turns").and_then(Value::as_u64),
        e.get("duration_ms").and_then(Value::as_u64),
    ) {
        (Some(turns), Some(ms)) => format!("turns {turns}  {:.1}s", ms as f64 / 1000.0),
        _ => String::new(),
    }
}

/// `exit N`, `signal N`, and `killed` when the harness had to be.
fn exited(e: &Value) -> String {
    let how = match (
        e.get("exit_code").and_then(Value::as_i64),
        e.get("signal").and_then(Value::as_i64),
    ) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(sig)) => format!("signal {sig}"),
        (None, None) => String::new(),
    };
    let killed = e.get("killed").and_then(Value::as_bool) == Some(true);
    match killed {
        true => format!("{how}  killed").trim().to_owned(),
        false => how,
    }
}

/// An event this renderer has no words for: its task, then each of its other plain fields as
/// `key=value`, long values cut, so a newer capsule's records still read.
fn generic(e: &Value) -> Vec<String> {
    const SKIP: [&str; 4] = ["event_type", "session_id", "timestamp", "task_id"];
    let mut parts = vec![s(e, "task_id").to_owned()];
    let Some(fields) = e.as_object() else {
        return parts;
    };
    for (k, v) in fields {
        if SKIP.contains(&k.as_str()) {
            continue;
        }
        let text = match v {
            Value::String(t) => t.clone(),
            Value::Number(_) | Value::Bool(_) => v.to_string(),
            _ => continue,
        };
        parts.push(format!("{k}={}", cut(&text, 60)));
    }
    parts
}

fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_guides_rules_are_drawn_as_it_draws_them() {
        // Copied from a2a-messaging-guide.md (the worker capsule's trace).
        assert_eq!(
            rule("Session"),
            "── Session ──────────────────────────────────────"
        );
        assert_eq!(
            rule("Tasks"),
            "── Tasks ───────────────────────────────────────"
        );
        assert_eq!(rule("Harness").chars().count(), RULE_WIDTH);
    }

    #[test]
    fn the_delegations_section_follows_each_child_into_its_trace() {
        let dir = std::env::temp_dir().join(format!("murmur-trace-follow-{}", std::process::id()));
        let child = dir.join("children/worker-0123456789abcdef");
        std::fs::create_dir_all(&child).unwrap();
        std::fs::write(
            child.join("trace.jsonl"),
            r#"{"event_type":"task_end","task_id":"tsk_child0123456","status":"completed","duration_ms":1500}"#,
        )
        .unwrap();
        let events = vec![
            json!({"event_type": "delegation_start", "task_id": "tsk_0123456789ab", "delegation_id": "dlg_1", "capsule": "worker", "version": "0.1.0", "child_workdir": child}),
            json!({"event_type": "delegation_end", "task_id": "tsk_0123456789ab", "delegation_id": "dlg_1", "state": "completed", "duration_ms": 2000}),
        ];
        let text = delegations(&events, 0);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("── Delegations "));
        assert_eq!(
            lines[1],
            "tsk_01234567  delegated to worker 0.1.0 (dlg_1): completed after 2.0s"
        );
        assert_eq!(
            lines[2],
            format!("  trace: {}", child.join("trace.jsonl").display())
        );
        assert_eq!(lines[3], "    tsk_child012  completed  1.5s");
        assert_eq!(delegations(&[], 0), "");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_peers_section_tells_sends_calls_and_refusals() {
        let events = vec![
            json!({"event_type": "a2a_send", "caller_task_id": "tsk_0123456789abcdef", "peer_url": "localhost:52222", "task_id": "tsk_9"}),
            json!({"event_type": "member_call", "caller_task_id": "tsk_0123456789abcdef", "member": "coder", "status": "timed_out", "reason": "no answer within 1 s"}),
            json!({"event_type": "member_call", "caller_task_id": "tsk_0123456789abcdef", "member": "reviewer", "status": "completed", "reason": null}),
            json!({"event_type": "network_refused", "caller_task_id": "tsk_0123456789abcdef", "destination": "http://localhost:9", "reason": "localhost:9 is not in capabilities.network.allow"}),
        ];
        let text = peers(&events);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("── Peers "));
        assert_eq!(
            &lines[1..],
            [
                "tsk_01234567  sent to localhost:52222  task tsk_9",
                "tsk_01234567  called coder  timed_out: no answer within 1 s",
                "tsk_01234567  called reviewer  completed",
                "tsk_01234567  refused http://localhost:9: localhost:9 is not in capabilities.network.allow",
            ]
        );
        assert_eq!(peers(&[event("t", "task_start", "tsk_1")]), "");
    }

    fn roster() -> records::Roster {
        serde_json::from_value(json!({
            "formation": "review", "version": "0.1.0", "member": "lead", "entry": "lead",
            "members": {"lead": "ses_b", "coder": "ses_a", "reviewer": "ses_c"},
        }))
        .unwrap()
    }

    fn event(ts: &str, kind: &str, task: &str) -> Value {
        json!({"event_type": kind, "session_id": "ses_x", "timestamp": ts, "task_id": task})
    }

    fn member(name: &str, session: &str, events: Option<Vec<Value>>) -> MemberTrace {
        MemberTrace {
            name: name.into(),
            session: session.into(),
            events,
        }
    }

    #[test]
    fn events_interleave_by_time_and_ties_keep_roster_then_file_order() {
        let members = [
            member(
                "lead",
                "ses_b",
                Some(vec![
                    event("2026-11-30T15:53:01.100Z", "task_start", "tsk_1"),
                    event("2026-11-30T15:53:01.300Z", "task_end", "tsk_1"),
                ]),
            ),
            member(
                "coder",
                "ses_a",
                Some(vec![
                    event("2026-11-30T15:53:01.100Z", "task_start", "tsk_2"),
                    event("2026-11-30T15:53:01.200Z", "a2a_task_received", "tsk_3"),
                    event("2026-11-30T15:53:01.200Z", "task_start", "tsk_3"),
                ]),
            ),
            member("reviewer", "ses_c", None),
        ];
        let out = render_formation(&roster(), &members);
        let expected = "\
── Formation ─────────────────────────────────────
formation:  review 0.1.0
entry:      lead
member:     lead      ses_b
member:     coder     ses_a
member:     reviewer  ses_c  (no trace)
── Events, 2026-11-30 UTC ────────────────────────
15:53:01.100  lead      task_start         tsk_1
15:53:01.100  coder     task_start         tsk_2
15:53:01.200  coder     a2a_task_received  tsk_3
15:53:01.200  coder     task_start         tsk_3
15:53:01.300  lead      task_end           tsk_1
";
        assert_eq!(out, expected);
    }

    #[test]
    fn a_new_day_gets_its_own_rule_and_unknown_events_show_their_fields() {
        let mut call = event("2026-12-01T00:00:00.001Z", "member_call", "tsk_9");
        call["member"] = json!("coder");
        call["status"] = json!("completed");
        call["answer"] = json!("x".repeat(80));
        let members = [member(
            "lead",
            "ses_b",
            Some(vec![
                event("2026-11-30T23:59:59.999Z", "task_start", "tsk_9"),
                call,
            ]),
        )];
        let out = render_formation(&roster(), &members);
        assert!(
            out.contains("── 2026-12-01 UTC ──"),
            "a rule names the new day: {out}"
        );
        let last = out.lines().last().unwrap();
        assert!(
            last.starts_with("00:00:00.001  lead  member_call        tsk_9  member=coder  status=completed  answer=xxx")
                && last.ends_with("x…"),
            "{last}"
        );
    }

    #[test]
    fn a_roster_never_leads_outside_the_records() {
        assert!(is_session_id("ses_01a22d2adc1377bb9510ba410a41c065"));
        assert!(!is_session_id("../../etc"));
        assert!(!is_session_id("ses_../x"));
    }
}
