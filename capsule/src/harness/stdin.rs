//! The harness's stdin: the prompt, then what the driver sends while the attempt runs (its
//! interrupt bytes, or a stream-json `control_request`), written by a task of its own so that a
//! harness that never reads its stdin cannot delay a cancel or anything else.

use serde::Serialize;
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio::sync::{mpsc, watch};

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

/// The harness's stdin, written by a task of its own so that a harness that never reads it
/// cannot delay anything else: the prompt goes in, then stdin is held as [`Hold`] says;
/// interrupt bytes cut short a prompt still being written. Dropping the feed tells the writer
/// the attempt is over, which closes stdin.
pub(super) struct StdinFeed {
    /// Dropped with the feed, which tells the writer the attempt is over.
    interrupts: Option<mpsc::Sender<Vec<u8>>>,
}

impl StdinFeed {
    pub(super) fn start(
        stdin: Option<ChildStdin>,
        prompt: Option<Vec<u8>>,
        hold: Hold,
    ) -> StdinFeed {
        let Some(stdin) = stdin else {
            return StdinFeed { interrupts: None };
        };
        if matches!(hold, Hold::Close) {
            tokio::spawn(feed_and_close(stdin, prompt));
            return StdinFeed { interrupts: None };
        }
        let (tx, rx) = mpsc::channel(1);
        tokio::spawn(feed(stdin, prompt, hold, rx));
        StdinFeed {
            interrupts: Some(tx),
        }
    }

    /// Queues interrupt bytes; a feed that closes stdin after the prompt takes none.
    pub(super) fn interrupt(&self, bytes: Vec<u8>) {
        if let Some(tx) = &self.interrupts {
            let _ = tx.try_send(bytes);
        }
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
    mut interrupts: mpsc::Receiver<Vec<u8>>,
) {
    let mut turn_over = match hold {
        Hold::UntilTurnEnds(rx) => Some(rx),
        _ => None,
    };
    if let Some(prompt) = prompt {
        tokio::select! {
            _ = async { let _ = stdin.write_all(&prompt).await; let _ = stdin.flush().await; } => {}
            bytes = interrupts.recv() => {
                // Half a user line cannot be followed by a control line: under stream-json the
                // input simply ends, which stops a harness that has not begun its turn (SIGINT
                // follows if it does not).
                if let (Some(bytes), None) = (bytes, turn_over) {
                    write_then_hold(stdin, bytes, interrupts).await;
                }
                return;
            }
        }
    }
    let turn_ended = async {
        match turn_over.as_mut() {
            Some(rx) => signalled(rx, |over| *over).await,
            None => std::future::pending::<()>().await,
        }
    };
    tokio::pin!(turn_ended);
    tokio::select! {
        _ = &mut turn_ended => {}
        bytes = interrupts.recv() => if let Some(bytes) = bytes {
            tokio::select! {
                _ = write_then_hold(stdin, bytes, interrupts) => {}
                // After a control line the harness ends its turn with a `result` line and then
                // waits for input: closing stdin is what lets it exit.
                _ = &mut turn_ended => {}
            }
        },
    }
}

/// Writes the interrupt bytes and keeps stdin open until the attempt ends: closing it is not the
/// interrupt the driver declared.
async fn write_then_hold(
    mut stdin: ChildStdin,
    bytes: Vec<u8>,
    mut interrupts: mpsc::Receiver<Vec<u8>>,
) {
    tokio::select! {
        _ = async { let _ = stdin.write_all(&bytes).await; let _ = stdin.flush().await; } => {}
        _ = async { while interrupts.recv().await.is_some() {} } => return,
    }
    while interrupts.recv().await.is_some() {}
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
    }
}
