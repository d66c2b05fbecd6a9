//! Words a harness or a peer shapes reach the operator's terminal shown, never obeyed, through
//! the real `mur`: an answer, an egress host, a task id, a residue command or a capsule's name
//! holding ESC, BEL, CR, LF and a forged line is printed on the one line it belongs to, its
//! controls made visible, by `mur watch`, `mur trace show`, `mur top --once`, `mur ps`,
//! `mur cancel` and `mur stop`. The forged line never appears as a line of its own.
//!
//! The fixture harness echoes what it is sent, which covers what a harness says; a door of the
//! test's own, named by a running-capsule record the test writes, answers what a hostile peer
//! would (ids, residue, refusals), since a real capsule mints its ids itself.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};
use support::*;

const LONG: Duration = Duration::from_secs(30);

/// An OSC that retitles the window, BEL, CR, LF, then a line murmur never wrote.
const FORGED: &str = "x\u{1b}]0;PWNED\u{7}x\r\ntsk_forged completed";
/// [`FORGED`] as `mur` shows it.
const FORGED_SHOWN: &str = "x^[]0;PWNED^Gx^M^Jtsk_forged completed";

/// Asserts `out` holds [`FORGED_SHOWN`] and none of its controls, and that no line of it is the
/// forged one.
fn assert_shown(out: &str, what: &str) {
    assert!(out.contains(FORGED_SHOWN), "{what}: not shown: {out:?}");
    assert!(
        !out.contains(['\u{1b}', '\u{7}', '\r']),
        "{what}: a control reached the terminal: {out:?}"
    );
    assert!(
        !out.lines()
            .any(|l| l.trim_start().starts_with("tsk_forged")),
        "{what}: a forged line: {out}"
    );
}

#[test]
fn a_harness_answer_and_egress_host_are_shown_by_watch_trace_show_and_top() {
    let home = Home::new();
    let run = start_fixture(&home, "murmur.yaml", &Fixture::default(), &[]);
    let (mut watch, lines) = watch_lines(&home, &run.session);
    assert!(wait_until(LONG, || lines
        .lock()
        .unwrap()
        .iter()
        .any(|l| l == "[connection-ack]")));
    // What the harness answers (`@echo` answers the task's text as it is).
    run.send(&format!("@echo {FORGED}"), false);
    // What the jail's proxy records when the harness asks it for a host of its making.
    let trace = home.records(&run.session).join("trace.jsonl");
    let refusal = json!({"event_type": "egress_denied", "session_id": run.session,
        "timestamp": "2026-12-02T10:00:00.000Z", "task_id": "tsk_0123456789abcdef",
        "host": FORGED, "port": 443});
    assert!(wait_until(LONG, || home
        .trace(&run.session)
        .iter()
        .any(|e| e["event_type"] == "task_end")));
    std::fs::OpenOptions::new()
        .append(true)
        .open(&trace)
        .and_then(|mut f| f.write_all(format!("{refusal}\n").as_bytes()))
        .unwrap();
    let refused = format!("tsk_01234567  egress refused  {FORGED_SHOWN}:443");
    let seen = wait_until(LONG, || {
        let lines = lines.lock().unwrap();
        lines
            .iter()
            .any(|l| l.contains(&format!("response: @echo {FORGED_SHOWN}")))
            && lines.contains(&refused)
    });
    let _ = watch.kill();
    let _ = watch.wait();
    let watched = lines.lock().unwrap().join("\n");
    assert!(seen, "{watched}");
    assert_shown(&watched, "mur watch");

    let (code, shown, err) = home.run(&["trace", "show", trace.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_shown(&shown, "mur trace show");
    assert!(
        shown.lines().any(|l| l == refused),
        "no line {refused:?} in {shown}"
    );

    let (code, top, err) = home.run(&["top", "--once"]);
    assert_eq!(code, 0, "{err}");
    assert_shown(&top, "mur top --once");
    assert!(
        top.lines()
            .any(|l| l.ends_with(&format!("egress refused {FORGED_SHOWN}:443"))),
        "{top}"
    );
}

#[test]
fn a_trace_written_by_a_hostile_harness_forges_no_line_of_trace_show() {
    let home = Home::new();
    let records = [
        json!({"event_type": "session_start", "session_id": "ses_x", "capsule": "c", "version": "1", "url": "http://localhost:1"}),
        json!({"event_type": "a2a_task_received", "task_id": "tsk_0123456789abcdef"}),
        json!({"event_type": "harness_start", "task_id": "tsk_0123456789abcdef", "pid": 7, "session_mode": "fresh"}),
        json!({"event_type": "egress_denied", "task_id": "tsk_0123456789abcdef", "host": FORGED, "port": 443}),
        json!({"event_type": "task_failed", "task_id": "tsk_0123456789abcdef", "cause": FORGED}),
        json!({"event_type": "member_call", "caller_task_id": "tsk_0123456789abcdef", "member": FORGED, "status": "failed", "reason": FORGED}),
    ];
    let text: String = records.iter().map(|r| format!("{r}\n")).collect();
    let trace = home.write("hostile/trace.jsonl", &text);
    let (code, out, err) = home.run(&["trace", "show", trace.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_shown(&out, "mur trace show");
    assert!(
        out.lines()
            .any(|l| l == format!("tsk_01234567  egress refused  {FORGED_SHOWN}:443")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l == format!("        failed: {FORGED_SHOWN}")),
        "{out}"
    );
}

/// What the test's door answers a JSON-RPC method: its result, or its error.
type Answer = fn(&str, &Value) -> Result<Value, Value>;

/// A door of the test's own on a port the OS picks: the agent card on GET, else `answer` for
/// each JSON-RPC call, one request a connection. Its threads end with the test process.
fn door(answer: Answer) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming().map_while(Result::ok) {
            std::thread::spawn(move || serve(conn, answer));
        }
    });
    port
}

fn serve(conn: TcpStream, answer: Answer) {
    let _ = conn.set_read_timeout(Some(LONG));
    let Ok(mut writer) = conn.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(conn);
    let mut head = String::new();
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let reply = if head.starts_with("GET /.well-known/agent-card.json") {
        json!({"name": "hostile", "supportedInterfaces": [{"url": "http://localhost", "protocolBinding": "JSONRPC"}]})
    } else {
        let call: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        match answer(call["method"].as_str().unwrap_or(""), &call["params"]) {
            Ok(result) => json!({"jsonrpc": "2.0", "id": call["id"], "result": result}),
            Err(error) => json!({"jsonrpc": "2.0", "id": call["id"], "error": error}),
        }
    };
    let reply = reply.to_string();
    let _ = write!(
        writer,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
        reply.len()
    );
}

/// What a hostile peer answers: ids, messages and residue of its making.
fn hostile(method: &str, params: &Value) -> Result<Value, Value> {
    let residue =
        json!({"kind": "detached_shell", "command": FORGED, "work_id": FORGED, "binary": FORGED});
    match method {
        "ListTasks" => Ok(json!({"tasks": [{"id": FORGED, "contextId": "ctx_1",
            "status": {"state": "TASK_STATE_WORKING", "timestamp": "2026-12-02T10:00:00.000Z",
                "message": {"role": "ROLE_AGENT", "parts": [{"text": FORGED}]}}}]})),
        "CancelTask" if params["id"] == "tsk_refused" => {
            Err(json!({"code": -32603, "message": FORGED}))
        }
        "CancelTask" => Ok(json!({"id": FORGED, "artifacts": [{"artifactId": "residue",
            "parts": [{"data": residue}]}]})),
        "murmur.StopSession" => Ok(json!({"canceled": [FORGED], "residue": [residue]})),
        _ => Err(json!({"code": -32601, "message": "Method not found"})),
    }
}

/// The process a hostile record names: killed and reaped when dropped.
struct Sleeper(Child);

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A running-capsule record naming the hostile door, its words forged; its process is a
/// `sleep` of the test's, which `mur stop` may signal.
fn hostile_record(home: &Home, port: u16) -> (Sleeper, String) {
    let sleeper = Sleeper(
        Command::new("sleep")
            .arg("60")
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let session = "ses_0000000000007000800000000000f0rg".to_owned();
    let records = home.root.join("hostile");
    std::fs::create_dir_all(&records).unwrap();
    let alert = json!({"event_type": "shell_refused", "timestamp": "2026-12-02T10:00:00.000Z",
        "task_id": FORGED, "command": FORGED, "reason": FORGED});
    std::fs::write(records.join("trace.jsonl"), format!("{alert}\n")).unwrap();
    let rec = json!({"pid": sleeper.0.id(), "supervisor_pid": 0, "url": format!("http://localhost:{port}"),
        "name": FORGED, "version": "0.1.0", "session_id": session, "records": records,
        "formation": null, "member": null, "started_at": "2026-12-02T10:00:00.000Z"});
    let run = home.home.join("run");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join(format!("{session}.json")), rec.to_string()).unwrap();
    (sleeper, session)
}

#[test]
fn what_a_hostile_door_answers_is_shown_by_ps_top_cancel_and_stop() {
    let home = Home::new();
    let port = door(hostile);
    let (mut sleeper, session) = hostile_record(&home, port);

    let (code, ps, err) = home.run(&["ps"]);
    assert_eq!(code, 0, "{err}");
    assert_shown(&ps, "mur ps");
    assert!(
        ps.lines()
            .any(|l| l.starts_with("@1") && l.ends_with("running")),
        "{ps}"
    );

    let (code, top, err) = home.run(&["top", "--once"]);
    assert_eq!(code, 0, "{err}");
    assert_shown(&top, "mur top --once");

    let (code, out, err) = home.run(&["cancel", "@1", "tsk_0123456789abcdef"]);
    assert_eq!(code, 0, "{err}");
    assert_shown(&out, "mur cancel");
    assert_eq!(
        out,
        format!(
            "canceled: {FORGED_SHOWN}\nrunning: {FORGED_SHOWN} ({FORGED_SHOWN}: {FORGED_SHOWN})\n"
        )
    );

    let (code, out, err) = home.run(&["cancel", "@1", "tsk_refused"]);
    assert_eq!(code, 1, "{out}");
    assert_shown(&err, "mur cancel, refused");
    assert_eq!(
        err,
        format!("error[E-CLI-011]: the door at http://localhost:{port} answered -32603: {FORGED_SHOWN}\n  hint: see the error codes under Errors in the agent card reference\n")
    );

    let (code, out, err) = home.run(&["stop", "@1"]);
    assert_eq!(code, 0, "{err}");
    assert_shown(&out, "mur stop");
    assert_eq!(
        out,
        format!("canceled: {FORGED_SHOWN}\nrunning: {FORGED_SHOWN} ({FORGED_SHOWN}: {FORGED_SHOWN})\nstopped: {session}\n")
    );
    // `mur stop` returned once the process it signalled was gone.
    assert!(sleeper.0.try_wait().unwrap().is_some());
}
