//! ListTasks: one page of the tasks the caller sees, most recently changed first. Params are
//! read in the spec's order and the first refused one answers, naming it.

use serde_json::{json, Map, Value};

use crate::clock::parse_rfc3339_nanos;
use crate::door::check::Inbound;
use crate::door::error::RpcError;
use crate::door::{Answer, Door};
use crate::tasks::{ListQuery, StateFilter};

const DEFAULT_PAGE: usize = 50;
const MAX_PAGE: usize = 100;

fn invalid(msg: &str) -> RpcError {
    RpcError::InvalidParams(msg.to_owned())
}

pub fn parse(door: &Door, params: &Map<String, Value>) -> Result<ListQuery, RpcError> {
    let context_id = match params.get("contextId") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()).filter(|s| !s.is_empty()),
        Some(_) => return Err(invalid("Invalid params: contextId must be a string")),
    };
    let state = match params.get("status") {
        None => StateFilter::Any,
        Some(v) => v.as_str().and_then(StateFilter::parse).ok_or_else(|| {
            invalid("Invalid params: status must be a task state name such as TASK_STATE_WORKING")
        })?,
    };
    let page_size = match params.get("pageSize") {
        None => DEFAULT_PAGE,
        Some(v) => match v.as_u64().filter(|n| *n >= 1) {
            Some(n) => (n as usize).min(MAX_PAGE),
            None => {
                return Err(invalid(
                    "Invalid params: pageSize must be an integer from 1",
                ))
            }
        },
    };
    let after_seq = match params.get("pageToken") {
        None => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => {
            Some(door.session.registry.decode_page_token(s).ok_or_else(|| {
                invalid(
                    "Invalid params: pageToken must be \"\" or a nextPageToken this door answered",
                )
            })?)
        }
        Some(_) => {
            return Err(invalid(
                "Invalid params: pageToken must be \"\" or a nextPageToken this door answered",
            ))
        }
    };
    let since_nanos = match params.get("statusTimestampAfter") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_str().and_then(parse_rfc3339_nanos).ok_or_else(|| {
            invalid(
                "statusTimestampAfter must be an RFC 3339 timestamp, such as 2026-10-13T09:00:00Z",
            )
        })?),
    };
    let include_artifacts = match params.get("includeArtifacts") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            return Err(invalid(
                "Invalid params: includeArtifacts must be a boolean",
            ))
        }
    };
    Ok(ListQuery {
        context_id,
        state,
        page_size,
        after_seq,
        since_nanos,
        include_artifacts,
    })
}

pub fn apply(door: &Door, req: &Inbound) -> Result<Answer, RpcError> {
    let query = parse(door, &req.params)?;
    let page = door.session.registry.list(&query, &req.viewer());
    Ok(Answer::Result(
        json!({
            "tasks": page.tasks,
            "nextPageToken": page.next_page_token,
            "pageSize": page.page_size,
            "totalSize": page.total_size,
        }),
        None,
    ))
}
