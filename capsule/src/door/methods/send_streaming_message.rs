//! SendStreamingMessage: the message is read and routed exactly as SendMessage's, then the
//! task's events stream until it settles: its terminal status, or TASK_STATE_INPUT_REQUIRED,
//! whose reply is a new message naming the task, with a stream of its own (as a2a-sdk servers
//! do, and as ADK waits for). Refusals are one JSON body; a task rejected for room or closing
//! is a stream of that one task.

use serde_json::json;

use super::send_message::{continue_task, parse, start_task};
use super::{last_event_id, stream_extension_requested};
use crate::door::check::Inbound;
use crate::door::error::RpcError;
use crate::door::{Answer, Door, DOOR_URI, STREAM_URI};
use crate::stream::{self, StreamSpec};

pub fn apply(door: &Door, req: &Inbound) -> Result<Answer, RpcError> {
    let mut msg = parse(door, &req.params)?;
    let frames = stream_extension_requested(req);
    let extensions: Vec<&str> = [
        msg.uses_door_extension.then_some(DOOR_URI),
        frames.then_some(STREAM_URI),
    ]
    .into_iter()
    .flatten()
    .collect();
    let extensions = (!extensions.is_empty()).then(|| extensions.join(", "));
    let viewer = req.viewer();
    let session = &door.session;
    // Events recorded from here on are live for this stream; the opening snapshot covers the rest.
    let before = session.events.last_id();
    let (task_id, rejected) = match &msg.task_id {
        Some(task) => (continue_task(door, &msg, task, &viewer)?.0, None),
        None => match start_task(door, &mut msg, req) {
            Ok(id) => (id, None),
            Err(rejected) => (crate::ids::TaskId::from_wire(""), Some(rejected)),
        },
    };
    let (opening, only_opening, live_after) = match rejected {
        Some(task) => (vec![json!({ "task": task })], true, before),
        None => {
            let snap = session.registry.read(task_id.as_str(), &viewer, |t| {
                (
                    t.to_json(None),
                    t.state.is_settled(),
                    session.events.last_id(),
                )
            });
            let Some((task, settled, newest)) = snap else {
                return Err(RpcError::Internal("the task left the registry".into()));
            };
            // Settled before the snapshot: the event that would end the stream is in it.
            (vec![json!({ "task": task })], settled, newest)
        }
    };
    let spec = StreamSpec {
        request_id: req.id.clone(),
        opening,
        task: Some(task_id.to_string()),
        last_event_id: last_event_id(req),
        live_after,
        frames,
        only_opening,
        ends_at_pause: true,
        keeper: session.keeper(),
    };
    Ok(Answer::Stream(
        stream::open(session.events.clone(), session.shutdown.subscribe(), spec),
        extensions,
    ))
}
