//! murmur.WatchSession: the observer stream of every task of the session. A connection-ack
//! first, then the replay from Last-Event-ID, then live events until the capsule closes.
//! `params` is `{}` and is not read; the stream extension is always active here.

use serde_json::json;

use super::last_event_id;
use crate::door::check::Inbound;
use crate::door::{Answer, Door, DOOR_URI, STREAM_URI};
use crate::stream::{self, StreamSpec};

pub fn apply(door: &Door, req: &Inbound) -> Answer {
    let ack = stream::frame_result(
        "connection-ack",
        json!({"frame": "connection-ack", "role": "observer", "conversationMode": "stateless"}),
    );
    let spec = StreamSpec {
        request_id: req.id.clone(),
        opening: vec![ack],
        task: None,
        // Without Last-Event-ID the replay starts at the buffer's start.
        last_event_id: Some(last_event_id(req).unwrap_or(0)),
        live_after: 0,
        frames: true,
        only_opening: false,
        ends_at_pause: false,
        keeper: door.session.keeper(),
    };
    let body = stream::open(
        door.session.events.clone(),
        door.session.shutdown.subscribe(),
        spec,
    );
    Answer::Stream(body, Some(format!("{DOOR_URI}, {STREAM_URI}")))
}
