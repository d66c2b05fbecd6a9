//! GetTask: the task `params.id` names, running or finished, when the caller sees it.

use serde_json::{Map, Value};

use super::required_id;
use crate::door::check::Inbound;
use crate::door::error::RpcError;
use crate::door::method::Method;
use crate::door::{Answer, Door};

pub struct GetTask {
    pub id: String,
}

/// `historyLength` is accepted and ignored: a task carries no history.
pub fn parse(params: &Map<String, Value>) -> Result<GetTask, RpcError> {
    Ok(GetTask {
        id: required_id(params, Method::GetTask)?,
    })
}

pub fn apply(door: &Door, req: &Inbound) -> Result<Answer, RpcError> {
    let viewer = req.viewer();
    let req = parse(&req.params)?;
    door.session
        .registry
        .get(&req.id, &viewer)
        .map(|task| Answer::Text(task.into(), None))
        .ok_or(RpcError::TaskNotFound(req.id))
}
