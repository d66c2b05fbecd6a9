//! Reading `params.message` (and `params.configuration`) of SendMessage and
//! SendStreamingMessage: the eleven checks of agent-card.md "Messages", in order, the first
//! failure answering. A refused message starts nothing and reaches nothing.

use serde_json::{Map, Value};

use super::card::DOOR_URI;
use super::error::RpcError;
use super::parts::{self, Kind};
use crate::manifest::{Manifest, Transport};

/// A message the door read in full.
#[derive(Debug, Default)]
pub struct Incoming {
    pub message_id: String,
    /// The task the message continues; `""` reads as none.
    pub task_id: Option<String>,
    /// The context the message names; `""` reads as none.
    pub context_id: Option<String>,
    /// Distinct ids in first-occurrence order.
    pub reference_task_ids: Vec<String>,
    pub forget_session: bool,
    /// `message.metadata` holds the door extension's URI: the answer names it.
    pub uses_door_extension: bool,
    pub return_immediately: bool,
    /// The text and data parts as the agent reads them, joined by newlines.
    pub text: String,
    /// Each data part's `data`, as sent: an approval's answer is read from it.
    pub data: Vec<Value>,
    pub images: Vec<(String, Vec<u8>)>,
}

const MAX_REFERENCES: usize = 16;

fn invalid(msg: impl Into<String>) -> RpcError {
    RpcError::InvalidParams(msg.into())
}

pub fn read(params: &Map<String, Value>, manifest: &Manifest) -> Result<Incoming, RpcError> {
    // 1. params.message is an object.
    let Some(Value::Object(msg)) = params.get("message") else {
        return Err(invalid(
            "Invalid params: params.message must be an object (an A2A Message)",
        ));
    };
    // 2. messageId, role, then parts.
    let message_id = match msg.get("messageId") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => {
            return Err(invalid(
                "Invalid params: message.messageId must be a non-empty string",
            ))
        }
    };
    if msg.get("role").and_then(Value::as_str) != Some("ROLE_USER") {
        return Err(invalid(
            "Invalid params: message.role must be ROLE_USER; a message to this agent is from the user",
        ));
    }
    let parts_list = match msg.get("parts") {
        Some(Value::Array(p)) if !p.is_empty() => p,
        _ => {
            return Err(invalid(
                "Invalid params: message.parts must be a non-empty array of parts",
            ))
        }
    };

    let mut out = Incoming {
        message_id,
        ..Incoming::default()
    };

    // 3. Every part sets exactly one of text, raw, url and data.
    let mut parts = Vec::with_capacity(parts_list.len());
    for (i, part) in parts_list.iter().enumerate() {
        match part.as_object().and_then(|p| parts::kind(p).map(|k| (p, k))) {
            Some(pk) => parts.push(pk),
            None => {
                return Err(invalid(format!(
                    "Invalid params: message.parts[{i}] must set exactly one of text, raw, url and data"
                )))
            }
        }
    }

    // 4. text, raw, url, mediaType and filename are strings where present.
    for (i, (part, _)) in parts.iter().enumerate() {
        for key in ["text", "raw", "url", "mediaType", "filename"] {
            if part.get(key).is_some_and(|v| !v.is_string()) {
                return Err(invalid(format!(
                    "Invalid params: message.parts[{i}].{key} must be a string"
                )));
            }
        }
    }

    // 5. taskId and contextId, then referenceTaskIds.
    for (key, slot) in [
        ("taskId", &mut out.task_id),
        ("contextId", &mut out.context_id),
    ] {
        match msg.get(key) {
            None => {}
            Some(Value::String(s)) => *slot = Some(s.clone()),
            Some(_) => {
                return Err(invalid(format!(
                    "Invalid params: message.{key} must be a string"
                )))
            }
        }
    }
    // "" is ProtoJSON's unset string: it names no task, and no context either (a task in
    // context "" could never be found by ListTasks, where contextId "" means every context).
    out.task_id = out.task_id.filter(|t| !t.is_empty());
    out.context_id = out.context_id.filter(|c| !c.is_empty());
    if let Some(refs) = msg.get("referenceTaskIds") {
        out.reference_task_ids = read_references(refs)?;
    }

    // 6. The door extension's key in metadata, then its forgetSession.
    if let Some(Value::Object(meta)) = msg.get("metadata") {
        if let Some(door) = meta.get(DOOR_URI) {
            out.uses_door_extension = true;
            let Value::Object(door) = door else {
                return Err(invalid(format!(
                    "Invalid params: message.metadata[\"{DOOR_URI}\"] must be an object"
                )));
            };
            match door.get("forgetSession") {
                None => {}
                Some(Value::Bool(b)) => out.forget_session = *b,
                Some(_) => {
                    return Err(invalid(format!(
                        "Invalid params: message.metadata[\"{DOOR_URI}\"].forgetSession must be a boolean"
                    )))
                }
            }
            if let (true, Some(task)) = (out.forget_session, &out.task_id) {
                return Err(invalid(format!(
                    "Invalid params: forgetSession starts a new conversation, so it goes on a message that starts a task, not on one that continues task {task}"
                )));
            }
        }
    }

    // 7. configuration.returnImmediately.
    let config = params.get("configuration").and_then(Value::as_object);
    match config.and_then(|c| c.get("returnImmediately")) {
        None | Some(Value::Null) => {}
        Some(Value::Bool(b)) => out.return_immediately = *b,
        Some(_) => return Err(invalid("configuration.returnImmediately must be a boolean")),
    }

    // 8. The first url part, or raw part that is not an image.
    for (i, (part, kind)) in parts.iter().enumerate() {
        let media = part.get("mediaType").and_then(Value::as_str);
        let refused = match kind {
            Kind::Url => Some("a url part".to_owned()),
            Kind::Raw if !parts::is_image_type(media) => Some(match media {
                Some(m) => format!("a raw part of media type {m}"),
                None => "a raw part with no media type".to_owned(),
            }),
            _ => None,
        };
        if let Some(what) = refused {
            return Err(RpcError::ContentType(
                format!("message.parts[{i}] is {what}; this agent reads text parts, data parts and image raw parts only"),
                i,
                media.map(str::to_owned),
            ));
        }
    }

    // 9. Push notifications.
    if config
        .and_then(|c| c.get("taskPushNotificationConfig"))
        .is_some_and(|v| !v.is_null())
    {
        return Err(RpcError::PushNotSupported);
    }

    // 10. forgetSession reaches only a process capsule.
    if out.forget_session && manifest.inference.transport != Transport::Process {
        return Err(invalid("forgetSession asks this capsule to forget the harness session this context names, and only a capsule on inference.transport: process has one"));
    }

    // 11. Image parts, in order.
    out.images = read_images(&parts, &out, manifest)?;

    // Joined into one buffer sized once: the text is copied out of the request exactly once.
    let rendered: Vec<_> = parts
        .iter()
        .filter_map(|(part, _)| parts::render(part))
        .collect();
    out.text = rendered.join("\n");
    out.data = parts
        .iter()
        .filter(|(_, kind)| *kind == Kind::Data)
        .filter_map(|(part, _)| part.get("data").cloned())
        .collect();
    Ok(out)
}

fn read_references(refs: &Value) -> Result<Vec<String>, RpcError> {
    let bad = || {
        invalid("Invalid params: message.referenceTaskIds must be an array of non-empty strings")
    };
    let list = refs.as_array().ok_or_else(bad)?;
    let mut ids: Vec<String> = Vec::new();
    for id in list {
        let id = id.as_str().filter(|s| !s.is_empty()).ok_or_else(bad)?;
        if !ids.iter().any(|k| k == id) {
            ids.push(id.to_owned());
        }
    }
    if ids.len() > MAX_REFERENCES {
        return Err(invalid(format!(
            "Invalid params: message.referenceTaskIds names {} distinct tasks; at most {MAX_REFERENCES} are allowed",
            ids.len()
        )));
    }
    Ok(ids)
}

fn read_images(
    parts: &[(&Map<String, Value>, Kind)],
    msg: &Incoming,
    manifest: &Manifest,
) -> Result<Vec<(String, Vec<u8>)>, RpcError> {
    let limits = &manifest.context;
    let mut images = Vec::new();
    for (i, (part, kind)) in parts.iter().enumerate() {
        if *kind != Kind::Raw {
            continue;
        }
        let media = part
            .get("mediaType")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let raw = part.get("raw").and_then(Value::as_str).unwrap_or_default();
        let refuse =
            |why: String| Err(invalid(format!("Invalid params: message.parts[{i}] {why}")));
        let Some(bytes) = parts::decode_base64(raw) else {
            return refuse(
                "is not base64: an image part carries its bytes base64-encoded in raw".into(),
            );
        };
        if !parts::has_magic(media, &bytes) {
            return refuse(format!("is not an image of its media type {media}"));
        }
        if bytes.len() as u64 > limits.images_max_bytes {
            return refuse(format!(
                "is {} bytes, larger than context.images.max_bytes ({})",
                bytes.len(),
                limits.images_max_bytes
            ));
        }
        if images.len() >= limits.images_max_per_turn {
            return refuse(format!(
                "is one image more than context.images.max_per_turn ({}) allows in one message",
                limits.images_max_per_turn
            ));
        }
        if let Some(task) = &msg.task_id {
            return refuse(format!(
                "is an image on a message that continues task {task}; images go on the message that starts a task"
            ));
        }
        if manifest.inference.transport == Transport::Process {
            return refuse("is an image, and this capsule runs on inference.transport: process, whose harness takes no images from the door".into());
        }
        images.push((media.to_owned(), bytes));
    }
    Ok(images)
}
