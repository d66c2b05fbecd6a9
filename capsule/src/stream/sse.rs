//! Writing a stream: `text/event-stream` with one `data: <JSON-RPC response>` per event, the
//! request's id on each, `id:` lines on numbered events, replay from Last-Event-ID (a `gap`
//! frame first when the buffer cannot supply it), a `lagged` frame for a client that fell
//! behind the buffer, and a heartbeat comment every 15 s. A stream holds at most two written
//! events of its own (one queued for its body, one being written by hyper): it reads the
//! session's buffer at its own pace and writes an event only once there is room for it.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Frame;
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};

use super::{frame_metadata, Event, EventLog, Keeper};
use crate::ids::MessageId;

const HEARTBEAT: Duration = Duration::from_secs(15);
/// Written events a stream may queue for its body: one, so a slow client makes its writer wait
/// rather than the capsule hold what the client has not read.
const QUEUED: usize = 1;
/// Events taken from the session's buffer at a time: one, so a stream waiting on a slow client
/// keeps alive at most the one event it is writing, whatever the buffer has let go of since.
const BATCH: usize = 1;

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
    /// A task's stream ends after its TASK_STATE_INPUT_REQUIRED status too (SendStreamingMessage;
    /// SubscribeToTask stays open through it).
    pub ends_at_pause: bool,
    /// The session's store: each event waits until the change it reports is kept. `None`:
    /// a capsule without a store.
    pub keeper: Option<Arc<dyn Keeper>>,
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

/// Opens the stream on the session's event log: the body a response carries, fed by a writer
/// task. `closing` turns true when the capsule goes down (the stream then ends with a
/// `capsule-closed` frame).
pub fn open(events: Arc<EventLog>, closing: watch::Receiver<bool>, spec: StreamSpec) -> SseBody {
    let (tx, rx) = mpsc::channel::<Bytes>(QUEUED);
    // Subscribed before the writer starts, so nothing recorded from now on is missed.
    let live = events.subscribe();
    tokio::spawn(write(events, closing, spec, live, tx));
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

/// Sends one chunk once the body has room for it; `false` when the client is gone. The chunk
/// is made only then, so a waiting writer holds no written event.
async fn send(tx: &mpsc::Sender<Bytes>, chunk: impl FnOnce() -> Bytes) -> bool {
    match tx.reserve().await {
        Ok(permit) => {
            permit.send(chunk());
            true
        }
        Err(_) => false,
    }
}

fn frame_chunk(request_id: &Value, name: &str, meta: Value) -> Bytes {
    data(request_id, &frame_result(name, meta).to_string(), None)
}

async fn write(
    events: Arc<EventLog>,
    mut closing: watch::Receiver<bool>,
    spec: StreamSpec,
    mut newest: watch::Receiver<u64>,
    tx: mpsc::Sender<Bytes>,
) {
    let id = &spec.request_id;
    for opening in &spec.opening {
        if !send(&tx, || data(id, &opening.to_string(), None)).await {
            return;
        }
    }
    if spec.only_opening {
        return;
    }
    let wanted = |e: &Event| {
        spec.task.as_deref().is_none_or(|t| t == e.task_id) && (spec.frames || !is_frame(e))
    };
    // The stream's position: a reconnect replays what the buffer holds after Last-Event-ID;
    // otherwise it goes on from the opening snapshot.
    let mut last = spec.last_event_id.unwrap_or(spec.live_after);
    // Events lost before the first read are a gap in a replay; lost later, the stream lagged.
    let mut replaying = spec.last_event_id;
    // The guard wait_for answers is dropped inside, so the writer stays Send.
    let going_down = async move {
        let _ = closing.wait_for(|down| *down).await.map(|_| ());
    };
    tokio::pin!(going_down);
    let mut beat = tokio::time::interval(HEARTBEAT);
    beat.tick().await;
    loop {
        newest.borrow_and_update();
        loop {
            let batch = events.after(last, BATCH);
            if batch.lost > 0 {
                let frame = match replaying {
                    Some(after) => frame_chunk(id, "gap", json!({"frame": "gap", "after": after})),
                    None => frame_chunk(
                        id,
                        "lagged",
                        json!({"frame": "lagged", "skipped": batch.lost}),
                    ),
                };
                if !send(&tx, || frame).await {
                    return;
                }
            }
            replaying = None;
            let Some(newest_read) = batch.events.last().map(|e| e.id) else {
                break;
            };
            for e in batch.events.iter().filter(|e| wanted(e)) {
                if let (Some(keeper), true) = (&spec.keeper, e.seq > 0) {
                    keeper.kept(e.seq).await;
                }
                if !send(&tx, || data(id, &e.result, Some(e.id))).await {
                    return;
                }
                if spec.task.is_some() && (e.ends_task || (e.pauses_task && spec.ends_at_pause)) {
                    return;
                }
            }
            last = newest_read;
        }
        // Biased: events recorded before the capsule began to close (a task's answer and its
        // end) are written before `capsule-closed`, never raced past by it.
        let chunk = tokio::select! {
            biased;
            changed = newest.changed() => match changed {
                Ok(()) => continue,
                Err(_) => return,
            },
            _ = beat.tick() => Bytes::from_static(b": heartbeat\n\n"),
            _ = &mut going_down => {
                let meta = json!({"frame": "capsule-closed"});
                let _ = send(&tx, || frame_chunk(id, "capsule-closed", meta)).await;
                return;
            }
        };
        if !send(&tx, || chunk).await {
            return;
        }
    }
}
