//! Writing a stream: `text/event-stream` with one `data: <JSON-RPC response>` per event, the
//! request's id on each, `id:` lines on numbered events, replay from Last-Event-ID (a `gap`
//! frame first when the buffer cannot supply it), a `lagged` frame for a client that fell
//! behind, a heartbeat comment every 15 s, and a bounded buffer per stream.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Frame;
use serde_json::{json, Value};
use tokio::sync::{broadcast, mpsc};

use super::{frame_metadata, Event};
use crate::ids::MessageId;
use crate::session::Session;

const HEARTBEAT: Duration = Duration::from_secs(15);
/// Chunks a stream may hold for a slow client before its writer waits.
const BUFFERED: usize = 64;

/// What one stream carries.
pub struct StreamSpec {
    /// The JSON-RPC id every event answers.
    pub request_id: Value,
    /// Unnumbered events written first (the opening task, a connection-ack).
    pub opening: Vec<Value>,
    /// Follow one task (ending after its terminal status), or every task (`None`).
    pub task: Option<String>,
    /// Replay buffered events after this id first.
    pub last_event_id: Option<u64>,
    /// Only events after this id are live (they were already in the opening snapshot).
    pub live_after: u64,
    /// Frames are written (the stream extension is active).
    pub frames: bool,
    /// Ends at once after the opening events (a rejected task's stream of one event).
    pub only_opening: bool,
}

/// A frame's StreamResponse `result`: an agent message whose one text part names the frame.
pub fn frame_result(text: &str, meta: Value) -> Value {
    json!({ "message": {
        "messageId": MessageId::mint().as_str(),
        "role": "ROLE_AGENT",
        "parts": [{"mediaType": "text/plain", "text": text}],
        "metadata": frame_metadata(meta),
    }})
}

fn data(request_id: &Value, result: &str, id: Option<u64>) -> Bytes {
    let head = match id {
        Some(n) => format!("id: {n}\n"),
        None => String::new(),
    };
    Bytes::from(format!(
        "{head}data: {{\"jsonrpc\":\"2.0\",\"id\":{request_id},\"result\":{result}}}\n\n"
    ))
}

fn is_frame(e: &Event) -> bool {
    e.result.starts_with("{\"message\"")
}

pub type SseBody = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// Opens the stream: the body a response carries, fed by a writer task.
pub fn open(session: Arc<Session>, spec: StreamSpec) -> SseBody {
    let (tx, rx) = mpsc::channel::<Bytes>(BUFFERED);
    // Subscribed before the writer starts, so nothing recorded from now on is missed.
    let live = session.events.subscribe();
    tokio::spawn(write(session, spec, live, tx));
    BodyExt::boxed(ChannelBody(rx))
}

/// A response body fed by the stream's writer; it ends when the writer does.
struct ChannelBody(mpsc::Receiver<Bytes>);

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
    }
}

async fn write(
    session: Arc<Session>,
    spec: StreamSpec,
    mut live: broadcast::Receiver<Arc<Event>>,
    tx: mpsc::Sender<Bytes>,
) {
    let id = &spec.request_id;
    for opening in &spec.opening {
        if tx.send(data(id, &opening.to_string(), None)).await.is_err() {
            return;
        }
    }
    if spec.only_opening {
        return;
    }
    let wanted = |e: &Event| {
        spec.task.as_deref().is_none_or(|t| t == e.task_id) && (spec.frames || !is_frame(e))
    };
    let mut last = spec.live_after;
    if let Some(after) = spec.last_event_id {
        let (gap, events) = session.events.replay_after(after);
        if gap {
            let frame = frame_result("gap", json!({"frame": "gap", "after": after}));
            if tx.send(data(id, &frame.to_string(), None)).await.is_err() {
                return;
            }
        }
        for e in events.iter().filter(|e| wanted(e)) {
            if tx.send(data(id, &e.result, Some(e.id))).await.is_err() {
                return;
            }
            last = last.max(e.id);
            if e.ends_task && spec.task.is_some() {
                return;
            }
        }
        last = last.max(after);
    }
    let going_down = session.going_down();
    tokio::pin!(going_down);
    let mut beat = tokio::time::interval(HEARTBEAT);
    beat.tick().await;
    loop {
        let chunk = tokio::select! {
            got = live.recv() => match got {
                Ok(e) if e.id > last && wanted(&e) => {
                    last = e.id;
                    let chunk = data(id, &e.result, Some(e.id));
                    if e.ends_task && spec.task.is_some() {
                        let _ = tx.send(chunk).await;
                        return;
                    }
                    chunk
                }
                Ok(_) => continue,
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    let meta = json!({"frame": "lagged", "skipped": n});
                    data(id, &frame_result("lagged", meta).to_string(), None)
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = beat.tick() => Bytes::from_static(b": heartbeat\n\n"),
            _ = &mut going_down => {
                let meta = json!({"frame": "capsule-closed"});
                let _ = tx.send(data(id, &frame_result("capsule-closed", meta).to_string(), None)).await;
                return;
            }
        };
        if tx.send(chunk).await.is_err() {
            return;
        }
    }
}
