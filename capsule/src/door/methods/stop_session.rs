//! murmur.StopSession: cancels every live task and reports what the session leaves running.
//! Ends no process and keeps the door open; a second call answers an empty `canceled`.

use serde_json::json;

use crate::door::card::DOOR_URI;
use crate::door::error::RpcError;
use crate::door::{Answer, Door};

/// `params` is `{}` and is not read.
pub async fn apply(door: &Door) -> Result<Answer, RpcError> {
    let session = &door.session;
    let canceled = session.cancel_all().await;
    let ids: Vec<&str> = canceled.iter().map(|(id, _)| id.as_str()).collect();
    // Each canceled task keeps what it left in flight, as a CancelTask of it would have.
    for (id, _) in &canceled {
        let left = session.residue.after_cancel(id);
        if !left.is_empty() {
            session.registry.set_residue(id, left);
        }
    }
    let residue = session.residue.all();
    Ok(Answer::Result(
        json!({"session_id": session.id.as_str(), "canceled": ids, "residue": residue}),
        Some(DOOR_URI.to_owned()),
    ))
}
