//! SendMessage: reads the message, then starts a new task or delivers a reply to a task waiting
//! for input, and answers at once or once the task settles (`configuration.returnImmediately`).

use serde_json::{json, Map, Value};

use crate::door::card::DOOR_URI;
use crate::door::check::Inbound;
use crate::door::error::RpcError;
use crate::door::message::{self, Incoming};
use crate::door::{Answer, Door};
use crate::tasks::{Admission, Reply, ReplyRefusal, TaskInput, Viewer};

pub fn parse(door: &Door, params: &Map<String, Value>) -> Result<Incoming, RpcError> {
    message::read(params, &door.session.manifest)
}

pub async fn apply(door: &Door, req: &Inbound) -> Result<Answer, RpcError> {
    let mut msg = parse(door, &req.params)?;
    let extensions = msg.uses_door_extension.then(|| DOOR_URI.to_owned());
    let viewer = req.viewer();
    let registry = &door.session.registry;
    // The task as the door took it: TASK_STATE_SUBMITTED when new, WORKING for a reply, even
    // when the worker moved it on before this answer.
    let (task_id, as_taken) = match &msg.task_id {
        Some(task) => continue_task(door, &msg, task, &viewer)?,
        None => match admit_task(door, &mut msg, req) {
            Ok(taken) => taken,
            Err(rejected) => return Ok(Answer::Result(json!({ "task": rejected }), extensions)),
        },
    };
    let task = if msg.return_immediately {
        Some(as_taken)
    } else {
        registry.wait_settled(&task_id).await
    };
    let task = task.ok_or_else(|| RpcError::Internal("the task left the registry".into()))?;
    Ok(Answer::Result(json!({ "task": task }), extensions))
}

/// A new task: accepted (SUBMITTED) or rejected for room or closing, answered at once.
pub(super) fn start_task(
    door: &Door,
    msg: &mut Incoming,
    req: &Inbound,
) -> Result<crate::ids::TaskId, Value> {
    admit_task(door, msg, req).map(|(id, _)| id)
}

/// [`start_task`], also answering the task as it was accepted. The message's text moves into
/// the task: a message of many megabytes is not copied.
fn admit_task(
    door: &Door,
    msg: &mut Incoming,
    req: &Inbound,
) -> Result<(crate::ids::TaskId, Value), Value> {
    let viewer = &req.viewer();
    let (origin, trust) = crate::provenance::of_request(&req.headers, req.sent_by_member());
    let registry = &door.session.registry;
    let mut text = std::mem::take(&mut msg.text);
    if !msg.reference_task_ids.is_empty() {
        text.push_str("\n\n");
        text.push_str(&registry.describe_references(&msg.reference_task_ids, viewer));
    }
    let input = TaskInput {
        text,
        message_id: msg.message_id.clone(),
        reference_task_ids: msg.reference_task_ids.clone(),
        forget_session: msg.forget_session,
        trust,
        images: std::mem::take(&mut msg.images),
        parent: req.parent.clone(),
    };
    let admission = door
        .session
        .admit(msg.context_id.clone(), viewer.as_owner(), input, origin);
    match admission {
        Admission::Accepted(id, task) => Ok((id, task)),
        Admission::Rejected(_, task) => Err(task),
    }
}

/// A message naming a task: the reply to a task waiting in TASK_STATE_INPUT_REQUIRED.
pub(super) fn continue_task(
    door: &Door,
    msg: &Incoming,
    task: &str,
    viewer: &Viewer,
) -> Result<(crate::ids::TaskId, Value), RpcError> {
    let registry = &door.session.registry;
    registry
        .reply(
            task,
            viewer,
            msg.context_id.as_deref(),
            Reply {
                text: msg.text.clone(),
                data: &msg.data,
            },
        )
        .map_err(|refusal| match refusal {
            ReplyRefusal::NotFound => RpcError::TaskNotFound(task.to_owned()),
            ReplyRefusal::NotWaiting(state) => RpcError::Unsupported(
                format!(
                    "task {task} is {}; a task takes a message only while it waits in TASK_STATE_INPUT_REQUIRED. Send a new message without taskId, in the same contextId, to start a new task",
                    state.wire()
                ),
                vec![("taskId", task.to_owned()), ("state", state.wire().to_owned())],
            ),
            ReplyRefusal::OtherContext => RpcError::InvalidParams(format!(
                "Invalid params: message.contextId names another context than task {task}'s; a reply goes in the context of the task it continues"
            )),
            ReplyRefusal::NotAnAnswer(why) => RpcError::InvalidParams(why),
        })
}
