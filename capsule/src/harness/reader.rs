//! Reading a harness while its attempt runs: stdout in its dialect (turns, `text` frames, the
//! answer, and what the CLI asks, handed to the answering), the tail of stderr, both bounded and
//! stopped shortly after the attempt ends.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::watch;

use super::codex_rpc;
use super::dialect::{self, Transcript};
use crate::manifest::OutputDialect;
use crate::stream::EventLog;

/// The most of stdout kept; a harness printing more has the rest dropped.
const STDOUT_CAP: usize = 8 << 20;
const STDERR_TAIL: usize = 64 << 10;
/// How long readers keep reading after the attempt ended.
pub(super) const DRAIN: Duration = Duration::from_secs(2);

/// What a reader task read. A reader stops on its own shortly after the attempt ends (see
/// [`DRAIN`]) and always answers what it read.
pub(super) async fn joined<T: Default>(h: Option<tokio::task::JoinHandle<T>>) -> T {
    match h {
        Some(h) => h.await.unwrap_or_default(),
        None => T::default(),
    }
}

/// Resolves [`DRAIN`] after the attempt has ended: by then the containment has ended every
/// writer, so this only bounds a reader against the unforeseen.
async fn drained(mut ended: watch::Receiver<bool>) {
    let _ = ended.wait_for(|e| *e).await;
    tokio::time::sleep(DRAIN).await;
}

/// Where what the reader hears goes: the turn count, the turn's end, `text` frames, and the
/// CLI's questions.
pub(super) struct Heeded {
    pub(super) turns: watch::Sender<u32>,
    pub(super) turn_over: watch::Sender<bool>,
    pub(super) frames: TurnFrames,
    pub(super) asks: Option<tokio::sync::mpsc::Sender<dialect::Heard>>,
    /// Codex app-server: where the turn and the refusals of what murmur does not serve go.
    pub(super) rpc: Option<Rpc>,
}

/// What the reader of a Codex app-server writes back itself: the task's turn once its thread
/// is ready, and a refusal of each request murmur does not serve.
pub(super) struct Rpc {
    pub(super) lines: tokio::sync::mpsc::Sender<Vec<u8>>,
    pub(super) task: String,
}

/// Where a harness's turns go as `text` frames.
pub(super) struct TurnFrames {
    pub(super) events: Arc<EventLog>,
    pub(super) task_id: String,
    pub(super) context_id: String,
}

pub(super) async fn read_stdout(
    mut out: impl AsyncRead + Unpin,
    dialect: OutputDialect,
    heeded: Heeded,
    ended: watch::Receiver<bool>,
) -> Transcript {
    let Heeded {
        turns,
        turn_over,
        frames,
        asks,
        rpc,
    } = heeded;
    let mut t = Transcript::default();
    let mut buf = vec![0u8; 64 << 10];
    let mut line: Vec<u8> = Vec::new();
    let mut kept = 0usize;
    let deadline = drained(ended);
    tokio::pin!(deadline);
    loop {
        let n = tokio::select! {
            r = out.read(&mut buf) => match r {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            },
            _ = &mut deadline => break,
        };
        if dialect == OutputDialect::Text {
            let room = STDOUT_CAP.saturating_sub(kept);
            let take = n.min(room);
            t.raw.push_str(&String::from_utf8_lossy(&buf[..take]));
            kept += take;
            continue;
        }
        for &b in &buf[..n] {
            if b == b'\n' {
                match feed_line(&mut t, dialect, &line) {
                    Some(dialect::Heard::Text(text)) => {
                        let meta = json!({"turn": t.turns});
                        frames.events.frame_for(
                            &frames.task_id,
                            &frames.context_id,
                            "text",
                            &text,
                            meta,
                        );
                    }
                    Some(dialect::Heard::ThreadReady(thread)) => {
                        if let Some(rpc) = &rpc {
                            let _ = rpc.lines.send(codex_rpc::turn(&thread, &rpc.task)).await;
                        }
                    }
                    Some(dialect::Heard::Unanswerable { id, method }) => {
                        if let Some(rpc) = &rpc {
                            let _ = rpc.lines.try_send(codex_rpc::refuse(&id, &method));
                        }
                    }
                    Some(heard) => {
                        if let Some(asks) = &asks {
                            let _ = asks.send(heard).await;
                        }
                    }
                    None => {}
                }
                line.clear();
                let _ = turns.send(t.turns);
                if t.turn_ended {
                    let _ = turn_over.send_replace(true);
                }
            } else if line.len() < STDOUT_CAP {
                line.push(b);
            }
        }
    }
    if !line.is_empty() {
        let _ = feed_line(&mut t, dialect, &line);
    }
    if dialect == OutputDialect::Text {
        let answer = t.raw.trim_end().to_owned();
        t.answer = (!answer.trim().is_empty()).then_some(answer);
    }
    t
}

fn feed_line(t: &mut Transcript, dialect: OutputDialect, line: &[u8]) -> Option<dialect::Heard> {
    let text = String::from_utf8_lossy(line);
    match dialect {
        OutputDialect::StreamJson => dialect::stream_json_line(t, &text),
        OutputDialect::CodexJson => dialect::codex_line(t, &text).map(dialect::Heard::Text),
        OutputDialect::CodexAppServer => codex_rpc::heard(t, &text),
        OutputDialect::Text => None,
    }
}

pub(super) async fn read_tail(
    mut err: impl AsyncRead + Unpin,
    ended: watch::Receiver<bool>,
) -> String {
    let mut tail: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 16 << 10];
    let deadline = drained(ended);
    tokio::pin!(deadline);
    loop {
        let read = tokio::select! {
            r = err.read(&mut buf) => r,
            _ = &mut deadline => break,
        };
        match read {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                tail.extend_from_slice(&buf[..n]);
                if tail.len() > STDERR_TAIL {
                    tail.drain(..tail.len() - STDERR_TAIL);
                }
            }
        }
    }
    String::from_utf8_lossy(&tail).into_owned()
}
