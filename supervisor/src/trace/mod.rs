//! A session's trace.jsonl as text: the sections `mur trace show` prints (Session, Tasks,
//! Harness, Shell, Spend, Peers, Delegations), and with [`formation`] every member's trace interleaved
//! by time. Read by `mur trace show` and by `mur top`'s trace pane, so both say the same.
//!
//! Over 600 lines with its unit tests (the sections alone are under 530).

pub mod formation;
pub mod otlp;
mod spend;

use std::path::Path;

use serde_json::Value;

use crate::terminal;

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

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// The records of a trace.jsonl, as they may be shown: every string in them (keys included)
/// through [`terminal::field`], so a host, a command or an id a harness shaped can never break
/// the line it is printed in. A line that is not JSON (a record cut short by a crash) is
/// skipped rather than hiding the rest.
pub fn parse(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .map(displayable)
        .collect()
}

/// `v` with every string in it, keys included, one visible line.
fn displayable(v: Value) -> Value {
    let one_line = |t: String| match terminal::field(&t) {
        std::borrow::Cow::Borrowed(_) => t,
        std::borrow::Cow::Owned(shown) => shown,
    };
    match v {
        Value::String(t) => Value::String(one_line(t)),
        Value::Array(items) => Value::Array(items.into_iter().map(displayable).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .map(|(k, v)| (one_line(k), displayable(v)))
                .collect(),
        ),
        other => other,
    }
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
    out.push_str(&approvals(events));
    out.push_str(&shell(events, !has_harness));
    out.push_str(&spend::section(events));
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
    section("Shell", lines)
}

/// The Approvals section: each question a CLI asked (`harness.approvals: ask`), what it asked
/// and how it was answered, by whom; `(open)` while nobody has. Empty when none was asked.
fn approvals(events: &[Value]) -> String {
    let asked: Vec<&Value> = events
        .iter()
        .filter(|e| s(e, "event_type") == "approval_asked")
        .collect();
    if asked.is_empty() {
        return String::new();
    }
    let mut out = rule("Approvals");
    out.push('\n');
    for q in asked {
        let id = s(q, "approval_id");
        let what = capsule::tasks::approval::summary(s(q, "tool"), &q["input"]);
        let answer = events
            .iter()
            .find(|e| s(e, "event_type") == "approval_answered" && s(e, "approval_id") == id);
        let how = match answer {
            None => "(open)".to_owned(),
            Some(a) => {
                let rule = a.get("rule").and_then(Value::as_str);
                let reason = a.get("reason").and_then(Value::as_str);
                format!(
                    "{} by {}{}{}",
                    s(a, "decision"),
                    s(a, "by"),
                    rule.map(|r| format!(" ({r})")).unwrap_or_default(),
                    reason.map(|r| format!(": {r}")).unwrap_or_default()
                )
            }
        };
        out.push_str(&format!(
            "{}  {id} {}: {}: {how}\n",
            short(s(q, "task_id")),
            s(q, "tool"),
            cut(&what.replace(['\n', '\r'], " "), 200)
        ));
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
        let child = parse(&std::fs::read_to_string(&trace).unwrap_or_default());
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
    section("Peers", lines)
}

/// A section of lines under its rule; nothing when there is no line.
fn section(title: &str, lines: Vec<String>) -> String {
    if lines.is_empty() {
        return String::new();
    }
    let mut out = rule(title);
    out.push('\n');
    for line in lines {
        out.push_str(&line);
        out.push('\n');
    }
    out
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
        // The span's name, kind, and where it hangs: `mur trace show --otlp` has the rest.
        "span" => vec![
            field("name"),
            field("kind"),
            labelled("span", s(e, "span_id")),
            labelled("under", s(e, "parent_span_id")),
            labelled("status", s(e, "status").trim_start_matches("unset")),
        ],
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
    fn a_span_record_reads_as_its_name_kind_and_place() {
        let root = json!({"event_type": "span", "name": "invoke_agent lead", "kind": "internal",
            "trace_id": "a1610182270dc7c1b3a36d7f49027081", "span_id": "7aad2cb9ff0f3ed4",
            "parent_span_id": null, "start_ns": 1, "end_ns": 2, "status": "unset",
            "attributes": {}, "events": []});
        assert_eq!(
            detail(&root),
            "invoke_agent lead  internal  span 7aad2cb9ff0f3ed4"
        );
        let mut failed = root.clone();
        failed["parent_span_id"] = json!("83e8fdbf747d822e");
        failed["status"] = json!("error");
        assert_eq!(
            detail(&failed),
            "invoke_agent lead  internal  span 7aad2cb9ff0f3ed4  under 83e8fdbf747d822e  status error"
        );
    }

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

    fn event(ts: &str, kind: &str, task: &str) -> Value {
        json!({"event_type": kind, "session_id": "ses_x", "timestamp": ts, "task_id": task})
    }

    #[test]
    fn a_field_a_harness_shaped_is_shown_on_its_own_line_never_obeyed() {
        use crate::terminal::{assert_forged_shown, FORGED};
        let records = [
            json!({"event_type": "session_start", "session_id": "ses_x", "capsule": FORGED, "version": "1", "url": FORGED}),
            json!({"event_type": "a2a_task_received", "task_id": FORGED}),
            json!({"event_type": "task_end", "task_id": FORGED, "status": FORGED}),
            json!({"event_type": "task_failed", "task_id": FORGED, "cause": FORGED}),
            json!({"event_type": "harness_start", "task_id": "tsk_1", "pid": 7, "session_mode": FORGED}),
            json!({"event_type": "harness_interrupt", "task_id": "tsk_1", "interrupt": FORGED}),
            json!({"event_type": "egress_denied", "task_id": "tsk_1", "host": FORGED, "port": 443}),
            json!({"event_type": "harness_session_forgotten", "context_id": FORGED, "harness_session": FORGED}),
            json!({"event_type": "shell_start", "task_id": "tsk_1", "work_id": FORGED, "binary": FORGED, "command": FORGED}),
            json!({"event_type": "shell_refused", "task_id": "tsk_1", "reason": FORGED, "command": FORGED}),
            json!({"event_type": "a2a_send", "caller_task_id": "tsk_1", "peer_url": FORGED, "task_id": FORGED}),
            json!({"event_type": "member_call", "caller_task_id": "tsk_1", "member": FORGED, "status": FORGED, "reason": FORGED}),
            json!({"event_type": "network_refused", "caller_task_id": "tsk_1", "destination": FORGED, "reason": FORGED}),
            json!({"event_type": "delegation_start", "task_id": "tsk_1", "delegation_id": FORGED, "capsule": FORGED, "version": FORGED, "child_workdir": FORGED}),
            json!({"event_type": "tool_call", "task_id": "tsk_1", "tool": FORGED, FORGED: FORGED}),
        ];
        let text: String = records.iter().map(|r| format!("{r}\n")).collect();
        let events = parse(&text);
        let out = render(&events);
        assert_forged_shown(&out);
        // Every line but the rules and the section's own is one a record made: none is extra.
        assert_eq!(
            out.lines().count(),
            render(&parse(&text.replace(FORGED, "plain")))
                .lines()
                .count(),
            "{out}"
        );
        for e in &events {
            assert_forged_shown(&detail(e));
        }
        let unknown = parse(&format!(
            "{}\n",
            json!({"event_type": FORGED, FORGED: FORGED})
        ));
        assert_forged_shown(&detail(&unknown[0]));
    }
}
