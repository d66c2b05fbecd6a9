//! The harness's stdin: the prompt, then what the driver sends while the attempt runs (its
//! interrupt bytes, or a stream-json `control_request`), written by a task of its own so that a
//! harness that never reads its stdin cannot delay a cancel or anything else.

use serde::Serialize;
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio::sync::{mpsc, oneshot, watch};

use super::watched::signalled;

/// Claude Code's stream-json input lines, in the key order its SDK writes them.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum InputLine<'a> {
    User {
        message: UserMessage<'a>,
    },
    ControlRequest {
        request_id: &'a str,
        request: ControlRequest,
    },
    ControlResponse {
        response: ControlResponse<'a>,
    },
}

#[derive(Serialize)]
struct ControlResponse<'a> {
    subtype: &'static str,
    request_id: &'a str,
    response: Permission<'a>,
}

/// The answer to a `can_use_tool` request, in the shape Claude Code's SDK writes it.
#[derive(Serialize)]
#[serde(tag = "behavior", rename_all = "snake_case")]
pub(super) enum Permission<'a> {
    Allow {
        /// The input as asked: the CLI runs what the person approved, not an edit of it.
        #[serde(rename = "updatedInput")]
        updated_input: &'a serde_json::Value,
    },
    Deny {
        message: &'a str,
    },
}

#[derive(Serialize)]
struct UserMessage<'a> {
    role: &'static str,
    content: &'a str,
}

#[derive(Serialize)]
struct ControlRequest {
    subtype: &'static str,
}

fn json_line(line: &InputLine) -> Vec<u8> {
    // Serialising these plain structs cannot fail; an empty line would be ignored, not crash.
    let mut bytes = serde_json::to_vec(line).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

/// `{"type":"user","message":{"role":"user","content":"<text>"}}` and a newline.
pub(super) fn user_line(text: &str) -> Vec<u8> {
    json_line(&InputLine::User {
        message: UserMessage {
            role: "user",
            content: text,
        },
    })
}

/// `{"type":"control_request","request_id":"<id>","request":{"subtype":"interrupt"}}` and a
/// newline. Claude Code silently ignores an interrupt that is not wrapped this way.
pub(super) fn interrupt_line(request_id: &str) -> Vec<u8> {
    json_line(&InputLine::ControlRequest {
        request_id,
        request: ControlRequest {
            subtype: "interrupt",
        },
    })
}

/// `{"type":"control_response","response":{"subtype":"success","request_id":"<id>",
/// "response":{"behavior":"allow","updatedInput":{…}}}}` (or `"behavior":"deny","message":…`)
/// and a newline: the answer to the `can_use_tool` request `request_id`.
pub(super) fn permission_line(request_id: &str, permission: Permission) -> Vec<u8> {
    json_line(&InputLine::ControlResponse {
        response: ControlResponse {
            subtype: "success",
            request_id,
            response: permission,
        },
    })
}

/// A request id no earlier interrupt used: the harness answers by it.
pub(super) fn fresh_request_id() -> String {
    format!("int_{}", uuid::Uuid::now_v7().simple())
}

/// What becomes of the harness's stdin once the prompt is in.
pub(super) enum Hold {
    /// It closes: the harness reads to end of input.
    Close,
    /// It stays open until the attempt ends, for the driver's interrupt bytes.
    ForInterrupts,
    /// `input: stream-json`: it stays open for an interrupt line until the harness's `result`
    /// line ends the turn (the value turns true), then closes, since a stream-json harness
    /// waits for further messages until end of input.
    UntilTurnEnds(watch::Receiver<bool>),
}

/// How many lines may wait for the writer: interrupts and approval answers are a handful a turn.
const QUEUED_LINES: usize = 64;

/// The harness's stdin, written by a task of its own so that a harness that never reads it
/// cannot delay anything else: the prompt goes in, then stdin is held as [`Hold`] says, and
/// every line sent meanwhile (interrupt bytes, a stream-json `control_response`) is written in
/// order; interrupt bytes cut short a prompt still being written. Dropping the feed tells the
/// writer the attempt is over, which closes stdin.
pub(super) struct StdinFeed {
    lines: Option<mpsc::Sender<Vec<u8>>>,
    /// Dropped with the feed: the writer's sign that the attempt is over, whoever else still
    /// holds a [`StdinFeed::lines`] sender.
    _over: Option<oneshot::Sender<()>>,
}

impl StdinFeed {
    pub(super) fn start(
        stdin: Option<ChildStdin>,
        prompt: Option<Vec<u8>>,
        hold: Hold,
    ) -> StdinFeed {
        let closed = StdinFeed {
            lines: None,
            _over: None,
        };
        let Some(stdin) = stdin else {
            return closed;
        };
        if matches!(hold, Hold::Close) {
            tokio::spawn(feed_and_close(stdin, prompt));
            return closed;
        }
        let (tx, rx) = mpsc::channel(QUEUED_LINES);
        let (over_tx, over) = oneshot::channel();
        tokio::spawn(feed(stdin, prompt, hold, rx, over));
        StdinFeed {
            lines: Some(tx),
            _over: Some(over_tx),
        }
    }

    /// Queues interrupt bytes; a feed that closes stdin after the prompt takes none.
    pub(super) fn interrupt(&self, bytes: Vec<u8>) {
        if let Some(tx) = &self.lines {
            let _ = tx.try_send(bytes);
        }
    }

    /// A sender of lines to write while the attempt runs; `None` when stdin closes after the
    /// prompt.
    pub(super) fn lines(&self) -> Option<mpsc::Sender<Vec<u8>>> {
        self.lines.clone()
    }
}

async fn feed_and_close(mut stdin: ChildStdin, prompt: Option<Vec<u8>>) {
    if let Some(prompt) = prompt {
        // A harness that exits without reading its prompt closes the pipe: not our failure.
        let _ = stdin.write_all(&prompt).await;
        let _ = stdin.flush().await;
    }
}

async fn feed(
    mut stdin: ChildStdin,
    prompt: Option<Vec<u8>>,
    hold: Hold,
    mut lines: mpsc::Receiver<Vec<u8>>,
    mut over: oneshot::Receiver<()>,
) {
    let turn_over = match hold {
        Hold::UntilTurnEnds(rx) => Some(rx),
        _ => None,
    };
    if let Some(prompt) = prompt {
        tokio::select! {
            _ = async { let _ = stdin.write_all(&prompt).await; let _ = stdin.flush().await; } => {}
            bytes = lines.recv() => {
                // Half a user line cannot be followed by a control line: under stream-json the
                // input simply ends, which stops a harness that has not begun its turn (SIGINT
                // follows if it does not).
                if let (Some(bytes), None) = (bytes, &turn_over) {
                    write_each(stdin, Some(bytes), lines, over, None).await;
                }
                return;
            }
            _ = &mut over => return,
        }
    }
    write_each(stdin, None, lines, over, turn_over).await;
}

/// Writes `first` and then each line as it comes, until the attempt is over or, under
/// stream-json, the turn has ended: a stream-json harness ends its turn with a `result` line and
/// then waits for input, and closing stdin is what lets it exit. Until then stdin stays open,
/// since closing it is not the interrupt the driver declared.
async fn write_each(
    mut stdin: ChildStdin,
    first: Option<Vec<u8>>,
    mut lines: mpsc::Receiver<Vec<u8>>,
    mut over: oneshot::Receiver<()>,
    turn_over: Option<watch::Receiver<bool>>,
) {
    let turn_ended = async {
        match turn_over {
            Some(mut rx) => signalled(&mut rx, |over| *over).await,
            None => std::future::pending::<()>().await,
        }
    };
    tokio::pin!(turn_ended);
    let mut next = first;
    loop {
        if let Some(bytes) = next.take() {
            tokio::select! {
                _ = async { let _ = stdin.write_all(&bytes).await; let _ = stdin.flush().await; } => {}
                _ = &mut over => return,
                _ = &mut turn_ended => return,
            }
        }
        tokio::select! {
            bytes = lines.recv() => match bytes {
                Some(bytes) => next = Some(bytes),
                None => return,
            },
            _ = &mut over => return,
            _ = &mut turn_ended => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_json_input_lines() {
        assert_eq!(
            String::from_utf8(user_line("say \"hi\"\nthen stop")).unwrap(),
            "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"say \\\"hi\\\"\\nthen stop\"}}\n"
        );
        assert_eq!(
            String::from_utf8(interrupt_line("int_1")).unwrap(),
            "{\"type\":\"control_request\",\"request_id\":\"int_1\",\"request\":{\"subtype\":\"interrupt\"}}\n"
        );
        assert_ne!(fresh_request_id(), fresh_request_id());
        let input = serde_json::json!({"command": "touch a"});
        assert_eq!(
            String::from_utf8(permission_line("r-1", Permission::Allow { updated_input: &input }))
                .unwrap(),
            "{\"type\":\"control_response\",\"response\":{\"subtype\":\"success\",\"request_id\":\"r-1\",\"response\":{\"behavior\":\"allow\",\"updatedInput\":{\"command\":\"touch a\"}}}}\n"
        );
        assert_eq!(
            String::from_utf8(permission_line("r-2", Permission::Deny { message: "no" })).unwrap(),
            "{\"type\":\"control_response\",\"response\":{\"subtype\":\"success\",\"request_id\":\"r-2\",\"response\":{\"behavior\":\"deny\",\"message\":\"no\"}}}\n"
        );
    }
}
