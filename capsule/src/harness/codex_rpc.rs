//! Codex's app-server protocol (`codex app-server`: JSON-RPC 2.0 objects, one per line, on
//! stdio), the Codex preset's transport under `harness.approvals: ask`, since `codex exec` never
//! asks. What murmur writes: the handshake (`initialize`, then `initialized`) and the thread
//! (`thread/start`, or `thread/resume` of the context's thread), then `turn/start` with the task
//! once the thread's id is known, and an answer to each approval request the server sends. What
//! it reads: the agent's messages (`item/completed`, type `agentMessage`), the turn's end
//! (`turn/completed`), the server's requests. Captured against Codex 0.171.0
//! (docs/agent-clis.md "Approvals").

use std::collections::VecDeque;
use std::path::Path;

use serde_json::{json, Value};

use super::dialect::{Ask, Heard, Protocol, Transcript};
use crate::tasks::approval::Decision;

/// Our request ids: the server's own requests count from 0 in a space of their own, so ours are
/// told from theirs by having no `method`.
const INITIALIZE: u64 = 0;
const THREAD: u64 = 1;
const TURN: u64 = 2;

/// File changes kept (by item id) for the approval that names them.
const CHANGES_KEPT: usize = 16;

fn line(v: Value) -> Vec<u8> {
    let mut bytes = v.to_string().into_bytes();
    bytes.push(b'\n');
    bytes
}

/// The handshake and the thread: a new one in `cwd` for `model`, or the context's `resume`.
pub(super) fn opening(resume: Option<&str>, cwd: &Path, model: Option<&str>) -> Vec<u8> {
    let mut out = line(json!({"id": INITIALIZE, "method": "initialize", "params": {
        "clientInfo": {"name": "murmur", "version": env!("CARGO_PKG_VERSION")}}}));
    out.extend(line(json!({"method": "initialized"})));
    // Ask before every command its rules do not let out (murmur's helpers, allow_commands).
    let mut params = json!({"cwd": cwd.to_string_lossy(), "approvalPolicy": "untrusted"});
    if let Some(m) = model {
        params["model"] = json!(m);
    }
    let thread = match resume {
        Some(thread) => {
            params["threadId"] = json!(thread);
            params["excludeTurns"] = json!(true);
            json!({"id": THREAD, "method": "thread/resume", "params": params})
        }
        None => json!({"id": THREAD, "method": "thread/start", "params": params}),
    };
    out.extend(line(thread));
    out
}

/// The task's turn on `thread`.
pub(super) fn turn(thread: &str, text: &str) -> Vec<u8> {
    line(json!({"id": TURN, "method": "turn/start", "params": {
        "threadId": thread,
        "input": [{"type": "text", "text": text, "text_elements": []}]}}))
}

/// The answer to approval request `id`: `accept` runs the command (or the patch), `decline`
/// tells the model it was rejected and the turn goes on.
pub(super) fn answer(id: &Value, decision: Decision) -> Vec<u8> {
    let word = match decision {
        Decision::Approve => "accept",
        Decision::Deny => "decline",
    };
    line(json!({"id": id, "result": {"decision": word}}))
}

/// A request murmur does not serve (a question for the user, an MCP elicitation): refused, so
/// the server gives up on it and the turn goes on rather than waiting for ever.
pub(super) fn refuse(id: &Value, method: &str) -> Vec<u8> {
    line(json!({"id": id, "error": {"code": -32601,
        "message": format!("murmur does not answer {method} from a headless Codex")}}))
}

/// What one line of the server says.
pub fn heard(t: &mut Transcript, text: &str) -> Option<Heard> {
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        return None;
    };
    let method = v.get("method").and_then(Value::as_str);
    let params = v.get("params").unwrap_or(&Value::Null);
    match (method, v.get("id")) {
        (Some(method), Some(id)) => Some(request(t, method, id, params)),
        (Some(method), None) => {
            notification(t, method, params);
            agent_text(method, params).map(Heard::Text)
        }
        (None, Some(id)) => response(t, id, &v),
        (None, None) => None,
    }
}

/// A response to one of ours: the thread's id, or why there is none.
fn response(t: &mut Transcript, id: &Value, v: &Value) -> Option<Heard> {
    let ours = id.as_u64();
    if let Some(error) = v.get("error") {
        if ours == Some(THREAD) || ours == Some(TURN) {
            let why = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("refused");
            t.error = Some(format!(
                "Codex refused the {}: {why}",
                if ours == Some(THREAD) {
                    "thread"
                } else {
                    "turn"
                }
            ));
            // Nothing more will come: stdin closes and the server exits.
            t.turn_ended = true;
        }
        return None;
    }
    if ours != Some(THREAD) {
        return None;
    }
    let thread = v.pointer("/result/thread/id").and_then(Value::as_str)?;
    t.session = Some(thread.to_owned());
    Some(Heard::ThreadReady(thread.to_owned()))
}

fn notification(t: &mut Transcript, method: &str, params: &Value) {
    match method {
        "item/started"
            if params.pointer("/item/type").and_then(Value::as_str) == Some("fileChange") =>
        {
            let item = &params["item"];
            if let Some(id) = item.get("id").and_then(Value::as_str) {
                if t.changes.len() >= CHANGES_KEPT {
                    t.changes.pop_front();
                }
                t.changes.push_back((
                    id.to_owned(),
                    item.get("changes").cloned().unwrap_or(Value::Null),
                ));
            }
        }
        "turn/completed" => {
            t.turns += 1;
            t.turn_ended = true;
            let turn = &params["turn"];
            if turn.get("status").and_then(Value::as_str) == Some("failed") {
                let why = turn
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("the turn failed");
                t.error = Some(why.to_owned());
            }
        }
        "error" if params.get("willRetry").and_then(Value::as_bool) != Some(true) => {
            if let Some(m) = params.pointer("/error/message").and_then(Value::as_str) {
                t.error = Some(m.to_owned());
            }
        }
        _ => {}
    }
    if let Some(text) = agent_text(method, params) {
        t.answer = Some(text);
    }
}

fn agent_text(method: &str, params: &Value) -> Option<String> {
    let item = params.get("item")?;
    (method == "item/completed" && item.get("type").and_then(Value::as_str) == Some("agentMessage"))
        .then(|| item.get("text").and_then(Value::as_str).map(str::to_owned))
        .flatten()
}

/// A request of the server's: an approval becomes a question; anything else is refused.
fn request(t: &Transcript, method: &str, id: &Value, params: &Value) -> Heard {
    let ask = |tool: &str, input: Value| {
        Heard::Ask(Ask {
            request_id: id.clone(),
            protocol: Protocol::CodexRpc,
            tool: tool.to_owned(),
            input,
        })
    };
    match method {
        "item/commandExecution/requestApproval" => {
            let mut input = json!({"command": command_of(params)});
            for key in ["cwd", "reason"] {
                if let Some(v) = params.get(key).filter(|v| !v.is_null()) {
                    input[key] = v.clone();
                }
            }
            ask("Bash", input)
        }
        "item/fileChange/requestApproval" => {
            let item = params
                .get("itemId")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let changes = changes_of(&t.changes, item);
            let mut input = json!({"changes": changes});
            for key in ["reason", "grantRoot"] {
                if let Some(v) = params.get(key).filter(|v| !v.is_null()) {
                    input[key] = v.clone();
                }
            }
            ask("Edit", input)
        }
        _ => Heard::Unanswerable {
            id: id.clone(),
            method: method.to_owned(),
        },
    }
}

fn changes_of(kept: &VecDeque<(String, Value)>, item: &str) -> Value {
    kept.iter()
        .rev()
        .find(|(id, _)| id == item)
        .map(|(_, c)| c.clone())
        .unwrap_or(Value::Null)
}

/// The command as the model wrote it: Codex wraps it as `/bin/bash -lc '<command>'` and parses
/// it back into `commandActions`; one action is the command itself.
fn command_of(params: &Value) -> String {
    let actions: Vec<&str> = params
        .get("commandActions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|a| a.get("command").and_then(Value::as_str))
        .collect();
    let raw = params
        .get("command")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match actions.as_slice() {
        [one] => (*one).to_owned(),
        _ => unwrapped(raw).unwrap_or_else(|| raw.to_owned()),
    }
}

/// `<shell> -lc '<command>'` → `<command>`, undoing the shell's `'\''` quoting; `None` for any
/// other shape.
fn unwrapped(raw: &str) -> Option<String> {
    let (_, quoted) = raw.split_once(" -lc '")?;
    let inner = quoted.strip_suffix('\'')?;
    Some(inner.replace("'\\''", "'"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(bytes: Vec<u8>) -> Vec<Value> {
        String::from_utf8(bytes)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn the_opening_is_the_handshake_then_the_thread() {
        let new = lines(opening(None, Path::new("/w"), Some("gpt-5")));
        assert_eq!(
            new,
            [
                json!({"id": 0, "method": "initialize", "params": {"clientInfo": {"name": "murmur", "version": env!("CARGO_PKG_VERSION")}}}),
                json!({"method": "initialized"}),
                json!({"id": 1, "method": "thread/start", "params": {"cwd": "/w", "approvalPolicy": "untrusted", "model": "gpt-5"}}),
            ]
        );
        let resumed = lines(opening(Some("th-1"), Path::new("/w"), None));
        assert_eq!(
            resumed[2],
            json!({"id": 1, "method": "thread/resume", "params": {"cwd": "/w", "approvalPolicy": "untrusted", "threadId": "th-1", "excludeTurns": true}})
        );
        assert_eq!(
            lines(turn("th-1", "do \"it\"")),
            [
                json!({"id": 2, "method": "turn/start", "params": {"threadId": "th-1",
                "input": [{"type": "text", "text": "do \"it\"", "text_elements": []}]}})
            ]
        );
    }

    #[test]
    fn a_session_is_read_as_codex_speaks_it() {
        let mut t = Transcript::default();
        let read = |t: &mut Transcript, l: &str| heard(t, l);
        assert_eq!(read(&mut t, r#"{"id":0,"result":{"userAgent":"x"}}"#), None);
        assert_eq!(
            read(&mut t, r#"{"id":1,"result":{"thread":{"id":"th-9"}}}"#),
            Some(Heard::ThreadReady("th-9".into()))
        );
        assert_eq!(t.session.as_deref(), Some("th-9"));
        let ask = r#"{"method":"item/commandExecution/requestApproval","id":0,"params":{"threadId":"th-9","turnId":"tu","itemId":"call_1","command":"/bin/bash -lc 'touch approved.txt'","cwd":"/w","commandActions":[{"type":"unknown","command":"touch approved.txt"}]}}"#;
        assert_eq!(
            read(&mut t, ask),
            Some(Heard::Ask(Ask {
                request_id: json!(0),
                protocol: Protocol::CodexRpc,
                tool: "Bash".into(),
                input: json!({"command": "touch approved.txt", "cwd": "/w"}),
            }))
        );
        let done = r#"{"method":"item/completed","params":{"item":{"type":"agentMessage","id":"m","text":"DONE"}}}"#;
        assert_eq!(read(&mut t, done), Some(Heard::Text("DONE".into())));
        assert!(!t.turn_ended);
        assert_eq!(
            read(
                &mut t,
                r#"{"method":"turn/completed","params":{"turn":{"id":"tu","status":"completed"}}}"#
            ),
            None
        );
        assert_eq!(
            (
                t.turns,
                t.turn_ended,
                t.answer.as_deref(),
                t.error.as_deref()
            ),
            (1, true, Some("DONE"), None)
        );
    }

    #[test]
    fn a_file_change_is_asked_with_its_diff_and_other_requests_are_refused() {
        let mut t = Transcript::default();
        heard(
            &mut t,
            r#"{"method":"item/started","params":{"item":{"type":"fileChange","id":"p1","changes":[{"path":"a.txt","kind":"add"}]}}}"#,
        );
        let ask = heard(
            &mut t,
            r#"{"method":"item/fileChange/requestApproval","id":3,"params":{"itemId":"p1","reason":null}}"#,
        );
        assert_eq!(
            ask,
            Some(Heard::Ask(Ask {
                request_id: json!(3),
                protocol: Protocol::CodexRpc,
                tool: "Edit".into(),
                input: json!({"changes": [{"path": "a.txt", "kind": "add"}]}),
            }))
        );
        assert_eq!(
            heard(
                &mut t,
                r#"{"method":"item/tool/requestUserInput","id":4,"params":{}}"#
            ),
            Some(Heard::Unanswerable {
                id: json!(4),
                method: "item/tool/requestUserInput".into()
            })
        );
        assert_eq!(
            lines(refuse(&json!(4), "item/tool/requestUserInput")),
            [
                json!({"id": 4, "error": {"code": -32601, "message": "murmur does not answer item/tool/requestUserInput from a headless Codex"}})
            ]
        );
        assert_eq!(
            lines(answer(&json!(3), Decision::Approve)),
            [json!({"id": 3, "result": {"decision": "accept"}})]
        );
        assert_eq!(
            lines(answer(&json!(3), Decision::Deny)),
            [json!({"id": 3, "result": {"decision": "decline"}})]
        );
    }

    #[test]
    fn a_refused_thread_or_a_failed_turn_ends_the_attempt_with_why() {
        let mut t = Transcript::default();
        heard(
            &mut t,
            r#"{"id":1,"error":{"code":-32600,"message":"no rollout found for thread id th-x"}}"#,
        );
        assert!(t.turn_ended);
        assert_eq!(
            t.error.as_deref(),
            Some("Codex refused the thread: no rollout found for thread id th-x")
        );
        let mut t = Transcript::default();
        heard(
            &mut t,
            r#"{"method":"turn/completed","params":{"turn":{"status":"failed","error":{"message":"stream disconnected"}}}}"#,
        );
        assert_eq!(t.error.as_deref(), Some("stream disconnected"));
    }

    #[test]
    fn a_wrapped_command_is_unwrapped_when_codex_gives_no_single_action() {
        assert_eq!(
            unwrapped("/bin/bash -lc 'echo '\\''hi'\\'''").as_deref(),
            Some("echo 'hi'")
        );
        assert_eq!(unwrapped("ls -la"), None);
        let params = json!({"command": "/bin/bash -lc 'a && b'", "commandActions": [{"command": "a"}, {"command": "b"}]});
        assert_eq!(command_of(&params), "a && b");
    }
}
