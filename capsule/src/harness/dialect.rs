//! Reading a harness's stdout: `text` (stdout is the answer), Claude Code's `stream-json`, and
//! Codex's `exec --json` events. Each line-oriented dialect yields the harness session, turns
//! and the final answer.

use std::collections::VecDeque;

use serde_json::Value;

/// What stdout said, as far as it got.
#[derive(Default, Debug)]
pub struct Transcript {
    pub answer: Option<String>,
    /// The harness session to resume on the context's next task.
    pub session: Option<String>,
    pub turns: u32,
    /// The harness reported an error result (stream-json `is_error`, Codex `turn.failed`).
    pub error: Option<String>,
    /// Raw stdout, kept for the text dialect.
    pub raw: String,
    /// A stream-json `result` line has ended the turn (a stream-json input harness then waits
    /// for more input, so its stdin is closed).
    pub turn_ended: bool,
    /// Codex app-server: the file changes of the turn by item id, which a patch approval names
    /// without carrying them.
    pub changes: VecDeque<(String, Value)>,
}

/// What a line said that the attempt acts on beyond the transcript.
#[derive(Debug, PartialEq)]
pub enum Heard {
    /// An assistant turn's text, which streams carry as a `text` frame.
    Text(String),
    /// Claude Code asks whether it may run a tool (`control_request`, subtype `can_use_tool`,
    /// under `--permission-prompt-tool stdio`); it waits for a `control_response` naming
    /// `request_id`.
    Ask(Ask),
    /// It gives up the question of this request id (`control_cancel_request`).
    Withdrawn(Value),
    /// Codex app-server: the thread is started (or resumed); the turn can go in.
    ThreadReady(String),
    /// Codex app-server: a request murmur does not serve, to be refused so the turn goes on.
    Unanswerable { id: Value, method: String },
}

/// How a question is answered: the protocol the CLI asked in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// Claude Code's `control_response` line.
    ClaudeControl,
    /// Codex app-server's JSON-RPC response.
    CodexRpc,
}

/// A question: Claude Code's `can_use_tool` request, or a Codex approval request.
#[derive(Debug, PartialEq)]
pub struct Ask {
    /// The CLI's id of the question, as it wrote it (a string for Claude Code, a number for
    /// Codex): its answer names it.
    pub request_id: Value,
    pub protocol: Protocol,
    pub tool: String,
    pub input: Value,
}

/// Feeds one stream-json line (Claude Code's `--output-format stream-json`).
pub fn stream_json_line(t: &mut Transcript, line: &str) -> Option<Heard> {
    let Ok(v) = serde_json::from_str::<Value>(line) else {
        return None;
    };
    let str_of = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    match v.get("type").and_then(Value::as_str) {
        Some("control_request")
            if v.pointer("/request/subtype").and_then(Value::as_str) == Some("can_use_tool") =>
        {
            let request = v.get("request")?;
            return Some(Heard::Ask(Ask {
                request_id: Value::String(str_of("request_id")?),
                protocol: Protocol::ClaudeControl,
                tool: request.get("tool_name").and_then(Value::as_str)?.to_owned(),
                input: request.get("input").cloned().unwrap_or(Value::Null),
            }));
        }
        Some("control_cancel_request") => {
            return str_of("request_id").map(|r| Heard::Withdrawn(Value::String(r)))
        }
        Some("system") if str_of("subtype").as_deref() == Some("init") => {
            if let Some(s) = str_of("session_id") {
                t.session = Some(s);
            }
        }
        Some("assistant") => {
            t.turns += 1;
            let text: Vec<&str> = v
                .pointer("/message/content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|c| c.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|c| c.get("text").and_then(Value::as_str))
                .collect();
            return (!text.is_empty()).then(|| Heard::Text(text.join("\n")));
        }
        // After an interrupt the result line may carry no `result` key (and `is_error`): the
        // attempt is then canceled, which the harness's caller decides from why it ended.
        Some("result") => {
            t.turn_ended = true;
            if let Some(s) = str_of("session_id") {
                t.session = Some(s);
            }
            let is_error = v.get("is_error").and_then(Value::as_bool).unwrap_or(false);
            let text = str_of("result");
            if is_error {
                t.error =
                    Some(text.unwrap_or_else(|| {
                        str_of("subtype").unwrap_or_else(|| "error".to_owned())
                    }));
            } else {
                t.answer = text;
            }
        }
        _ => {}
    }
    None
}

/// Feeds one `codex exec --json` event line; answers the text of an agent message.
pub fn codex_line(t: &mut Transcript, line: &str) -> Option<String> {
    let Ok(v) = serde_json::from_str::<Value>(line) else {
        return None;
    };
    match v.get("type").and_then(Value::as_str) {
        Some("thread.started") => {
            if let Some(s) = v.get("thread_id").and_then(Value::as_str) {
                t.session = Some(s.to_owned());
            }
        }
        Some("turn.completed") => t.turns += 1,
        Some("item.completed") => {
            let item = v.get("item");
            let kind = item.and_then(|i| i.get("type")).and_then(Value::as_str);
            if kind == Some("agent_message") {
                if let Some(text) = item.and_then(|i| i.get("text")).and_then(Value::as_str) {
                    t.answer = Some(text.to_owned());
                    return Some(text.to_owned());
                }
            }
        }
        Some("turn.failed") | Some("error") => {
            let msg = v
                .pointer("/error/message")
                .or_else(|| v.get("message"))
                .and_then(Value::as_str)
                .unwrap_or("the harness reported an error");
            t.error = Some(msg.to_owned());
        }
        _ => {}
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_json_keeps_session_turns_and_result() {
        let mut t = Transcript::default();
        for line in [
            r#"{"type":"system","subtype":"init","session_id":"s-1"}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"text","text":"hi"}]}}"#,
            r#"{"type":"assistant","message":{}}"#,
            r#"{"type":"result","subtype":"success","is_error":false,"result":"four","session_id":"s-1"}"#,
        ] {
            stream_json_line(&mut t, line);
        }
        assert_eq!(
            (t.session.as_deref(), t.turns, t.answer.as_deref()),
            (Some("s-1"), 2, Some("four"))
        );
    }

    #[test]
    fn an_interrupted_result_ends_the_turn_without_an_answer() {
        let mut t = Transcript::default();
        for line in [
            r#"{"type":"system","subtype":"init","session_id":"s-2"}"#,
            r#"{"type":"result","subtype":"error_during_execution","is_error":true,"session_id":"s-2"}"#,
        ] {
            stream_json_line(&mut t, line);
        }
        assert!(t.turn_ended);
        assert_eq!(t.answer, None);
        assert_eq!(t.error.as_deref(), Some("error_during_execution"));
    }

    #[test]
    fn a_can_use_tool_request_is_heard_as_an_ask_and_its_cancel_as_withdrawn() {
        let mut t = Transcript::default();
        let ask = r#"{"type":"control_request","request_id":"r-1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"touch a"},"permission_suggestions":[],"tool_use_id":"tu"}}"#;
        assert_eq!(
            stream_json_line(&mut t, ask),
            Some(Heard::Ask(Ask {
                request_id: "r-1".into(),
                protocol: Protocol::ClaudeControl,
                tool: "Bash".into(),
                input: serde_json::json!({"command": "touch a"}),
            }))
        );
        assert_eq!(
            stream_json_line(
                &mut t,
                r#"{"type":"control_cancel_request","request_id":"r-1"}"#
            ),
            Some(Heard::Withdrawn("r-1".into()))
        );
        let other = r#"{"type":"control_request","request_id":"r-2","request":{"subtype":"hook_callback"}}"#;
        assert_eq!(stream_json_line(&mut t, other), None);
        assert_eq!(t.turns, 0);
    }

    #[test]
    fn codex_events() {
        let mut t = Transcript::default();
        for line in [
            r#"{"type":"thread.started","thread_id":"th-9"}"#,
            r#"{"type":"item.completed","item":{"id":"i","type":"agent_message","text":"done"}}"#,
            r#"{"type":"turn.completed","usage":{}}"#,
        ] {
            codex_line(&mut t, line);
        }
        assert_eq!(
            (t.session.as_deref(), t.turns, t.answer.as_deref()),
            (Some("th-9"), 1, Some("done"))
        );
    }
}
