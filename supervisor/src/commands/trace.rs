//! `mur trace show [ADDRESS] [--workdir D]`: a session's trace.jsonl rendered in sections
//! (Session, Tasks, Harness). Addresses count among the recorded sessions of the folder.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{CliError, CliResult, Code};
use crate::records;

fn rule(title: &str) -> String {
    let head = format!("── {title} ");
    let pad = 50usize.saturating_sub(head.chars().count());
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

pub fn run(address: Option<&str>, workdir: Option<&Path>) -> CliResult<i32> {
    let cwd = match workdir {
        Some(w) => w.to_path_buf(),
        None => std::env::current_dir().unwrap_or_default(),
    };
    let cwd = cwd.canonicalize().unwrap_or(cwd);
    let path = trace_path(address, &cwd)?;
    let text = std::fs::read_to_string(&path).map_err(|e| {
        CliError::new(
            Code::NoSuchSession,
            format!("cannot read {}: {e}", path.display()),
            "check the path",
        )
    })?;
    let events: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    print!("{}", render(&events));
    Ok(0)
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
                    "task {}  {}  turns: {turns}  {status}{secs}",
                    n + 1,
                    short(id)
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
    let harness: Vec<&Value> = events
        .iter()
        .filter(|e| s(e, "event_type").starts_with("harness_"))
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
                other => other.to_owned(),
            };
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}
