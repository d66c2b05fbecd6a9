//! SubscribeToTask: the rest of one live task the caller sees, as a stream that opens with the
//! task as GetTask answers it and ends after its terminal status.

use serde_json::json;

use super::{last_event_id, required_id, stream_extension_requested};
use crate::door::check::Inbound;
use crate::door::error::RpcError;
use crate::door::method::Method;
use crate::door::{Answer, Door, STREAM_URI};
use crate::stream::{self, StreamSpec};

pub fn apply(door: &Door, req: &Inbound) -> Result<Answer, RpcError> {
    let id = required_id(&req.params, Method::SubscribeToTask)?;
    let session = &door.session;
    // The snapshot and the newest event id are read together, so no change is lost or repeated.
    let snapshot = session.registry.read(&id, &req.viewer(), |t| {
        (t.state, t.to_json(None), session.events.last_id())
    });
    let Some((state, task, newest)) = snapshot else {
        return Err(RpcError::TaskNotFound(id));
    };
    if state.is_terminal() {
        return Err(RpcError::Unsupported(
            format!(
                "task {id} has ended ({}); there is nothing left to subscribe to",
                state.wire()
            ),
            vec![("taskId", id), ("state", state.wire().to_owned())],
        ));
    }
    let frames = stream_extension_requested(req);
    let spec = StreamSpec {
        request_id: req.id.clone(),
        opening: vec![json!({ "task": task })],
        task: Some(id),
        last_event_id: last_event_id(req),
        live_after: newest,
        frames,
        only_opening: false,
        ends_at_pause: false,
        keeper: session.keeper(),
    };
    let body = stream::open(session.events.clone(), session.shutdown.subscribe(), spec);
    Ok(Answer::Stream(body, frames.then(|| STREAM_URI.to_owned())))
}
