//! This capsule as a client of other doors (DESIGN §7–8): `mur send-message` (the hand-wired
//! path: any door the allow list names) and `mur call-member` (a formation member, with the
//! `member:<self>` token its wiring holds). Both go through [`client`] — policy first, then the
//! policy's one connect — and through [`exchange`]: the message is sent with
//! `returnImmediately`, its task is followed with GetTask until it settles, and it is canceled
//! on the peer when this side stops waiting (a timeout, or its own task canceled or ended).
//! Calls run on tasks of their own, registered in the session's [`crate::errands`], so a
//! harness that goes away mid-call cannot leave one unrecorded or its peer's task running.

pub mod client;
pub mod deliver;
pub mod exchange;
pub mod member;
pub mod send;

use serde_json::{json, Map, Value};

use crate::ids::MessageId;

/// The longest a call may wait for its peer's task to settle, unless the helper asks for
/// another bound (`--timeout SECS`, 1 to [`MAX_WAIT_SECS`]).
pub const DEFAULT_WAIT_SECS: u64 = 1800;
pub const MAX_WAIT_SECS: u64 = 86_400;

/// A message to a peer: one text part, from the user role (a message to an agent is from its
/// user), in a context and continuing a task when asked.
pub fn message(text: &str, context_id: Option<&str>, task_id: Option<&str>) -> Value {
    let mut m = Map::new();
    m.insert(
        "messageId".into(),
        Value::from(MessageId::mint().to_string()),
    );
    m.insert("role".into(), Value::from("ROLE_USER"));
    m.insert("parts".into(), json!([{ "text": text }]));
    if let Some(c) = context_id {
        m.insert("contextId".into(), Value::from(c));
    }
    if let Some(t) = task_id {
        m.insert("taskId".into(), Value::from(t));
    }
    Value::Object(m)
}

/// A string member of a task (`id`, `contextId`), when it is one.
fn text_of(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_owned)
}

#[cfg(test)]
mod tests;
