//! CancelTask: a live task moves to TASK_STATE_CANCELED at once and its attempt is interrupted;
//! an ended one is left unchanged and answered -32002.

use serde_json::{Map, Value};

use super::required_id;
use crate::door::check::Inbound;
use crate::door::error::RpcError;
use crate::door::method::Method;
use crate::door::{Answer, Door};
use crate::ids::TaskId;
use crate::tasks::CancelRefusal;

pub struct CancelTask {
    pub id: String,
}

pub fn parse(params: &Map<String, Value>) -> Result<CancelTask, RpcError> {
    Ok(CancelTask {
        id: required_id(params, Method::CancelTask)?,
    })
}

pub async fn apply(door: &Door, req: &Inbound) -> Result<Answer, RpcError> {
    let viewer = req.viewer();
    let req = parse(&req.params)?;
    match door.session.cancel(&req.id, &viewer).await {
        Ok((task, _)) => {
            // What the task leaves running rides as its residue artifact; nothing, no artifact.
            let id = TaskId::from_wire(&req.id);
            let residue = door.session.residue.after_cancel(&id);
            if residue.is_empty() {
                return Ok(Answer::Result(task, None));
            }
            Ok(Answer::Result(
                door.session.registry.set_residue(&id, residue),
                None,
            ))
        }
        Err(CancelRefusal::NotFound) => Err(RpcError::TaskNotFound(req.id)),
        Err(CancelRefusal::NotCancelable(state)) => Err(RpcError::TaskNotCancelable(req.id, state)),
    }
}
