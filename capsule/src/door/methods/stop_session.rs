//! murmur.StopSession: cancels every live task and reports what the session leaves running.
//! Ends no process and keeps the door open; a second call answers an empty `canceled`.

use serde_json::json;

use crate::door::card::DOOR_URI;
use crate::door::error::RpcError;
use crate::door::{Answer, Door};
use crate::tasks::TaskState;

/// `params` is `{}` and is not read.
pub fn apply(door: &Door) -> Result<Answer, RpcError> {
    let session = &door.session;
    let canceled = session.registry.cancel_all();
    for (id, was) in &canceled {
        if *was == TaskState::Submitted {
            session.trace_canceled_in_queue(id);
        }
    }
    let ids: Vec<&str> = canceled.iter().map(|(id, _)| id.as_str()).collect();
    let residue = session.residue.all();
    Ok(Answer::Result(
        json!({"session_id": session.id.as_str(), "canceled": ids, "residue": residue}),
        Some(DOOR_URI.to_owned()),
    ))
}
