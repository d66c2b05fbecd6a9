//! The agent card served at GET /.well-known/agent-card.json, and the extended card. Built once
//! at startup: the door serves the same bytes to every caller.

use serde_json::{json, Value};

use super::method::Method;
use crate::manifest::{Manifest, TaskAcceptance, Transport};

pub const DOOR_URI: &str = "https://docs.murmur.nexus/reference/agent-card/#murmur-door-v1";
pub const CAPSULE_URI: &str = "https://docs.murmur.nexus/reference/agent-card/#murmur-capsule-v1";
/// The stream extension's URI is the stream's own; the card names it.
pub use crate::stream::STREAM_URI;

const DOOR_DESCRIPTION: &str = "Every JSON-RPC method this door answers, A2A methods and murmur's own alike, the murmur ones named murmur.<Method>; whether it accepts tasks from peer capsules; and the forgetSession field a message's metadata may carry under this URI.";
const CAPSULE_DESCRIPTION: &str = "The session answering this address and what the capsule may do. Served only to authenticated callers once the door authenticates.";
const STREAM_DESCRIPTION: &str = "The murmur frames this capsule writes in addition to the A2A v1.0 events: sent on SendStreamingMessage and SubscribeToTask when the request's A2A-Extensions header names this URI, and always on murmur.WatchSession. Each is carried in a StreamResponse under metadata keyed by this URI.";

/// Which card to build.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum CardKind {
    /// The card every caller of a public door gets.
    Public,
    /// An authenticated door's public card: no capsule extension.
    AuthenticatedPublic,
    /// An authenticated door's extended card: the public one with the capsule extension.
    Extended,
}

pub struct CardInputs<'a> {
    pub manifest: &'a Manifest,
    pub url: &'a str,
    pub session_id: &'a str,
    pub methods: &'a [Method],
    /// Whether the capsule may reach anything: its network allow list or, for a formation
    /// member, its callees.
    pub network: bool,
}

fn frames(transport: Transport) -> Vec<&'static str> {
    let mut f = vec![
        "text",
        "thinking",
        "tool-call-started",
        "tool-call-progress",
        "artifact",
    ];
    if transport == Transport::Process {
        f.extend(["quota", "suggested-prompt"]);
    }
    f.extend(["gap", "lagged", "connection-ack", "capsule-closed"]);
    f
}

fn capsule_extension(i: &CardInputs) -> Value {
    let m = i.manifest;
    let tools: Vec<&str> = match m.inference.transport {
        // A harness's own tools are not installed artifacts the model calls through murmur.
        Transport::Process => vec![],
        // The tools the model is offered beyond the operations every capsule has.
        Transport::Http => {
            crate::agent::tools::offered_beyond_operations(&m.capabilities.shell_allow)
        }
    };
    let mut planes = Vec::new();
    if m.exports.files {
        planes.push("files");
    }
    if m.exports.peer_files {
        planes.push("peer_files");
    }
    json!({
        "uri": CAPSULE_URI,
        "description": CAPSULE_DESCRIPTION,
        "required": false,
        "params": {
            "sessionId": i.session_id,
            "tools": tools,
            "shell": !m.capabilities.shell_allow.is_empty(),
            "network": i.network,
            "planes": planes,
        }
    })
}

pub fn build(i: &CardInputs, kind: CardKind) -> Value {
    let m = i.manifest;
    let starts_tasks = m.lifecycle.task_acceptance != TaskAcceptance::None;
    let authenticated = kind != CardKind::Public;
    let door = json!({
        "uri": DOOR_URI,
        "description": DOOR_DESCRIPTION,
        "required": false,
        "params": {
            "methods": i.methods.iter().map(|m| m.name()).collect::<Vec<_>>(),
            "peerTasks": m.exports.peer_tasks_accept,
        }
    });
    let stream = json!({
        "uri": STREAM_URI,
        "description": STREAM_DESCRIPTION,
        "required": false,
        "params": {"frames": frames(m.inference.transport)}
    });
    let extensions = if kind == CardKind::AuthenticatedPublic {
        vec![door, stream]
    } else {
        vec![door, capsule_extension(i), stream]
    };
    let mut skill = json!({
        "id": "task",
        "name": "Run a task",
        "description": "Runs one task given as a text message and reports its outcome.",
        "tags": ["task"],
    });
    if authenticated {
        skill["securityRequirements"] = json!([
            {"schemes": {"bearer": {"list": ["SendMessage"]}}},
            {"schemes": {"bearer": {"list": ["SendStreamingMessage"]}}}
        ]);
    }
    let (schemes, requirements) = if authenticated {
        (
            json!({"bearer": {"httpAuthSecurityScheme": {
                "scheme": "Bearer",
                "description": "A token this capsule's runtime mints at launch and accepts until the session ends."
            }}}),
            json!([{"schemes": {"bearer": {"list": []}}}]),
        )
    } else {
        (json!({}), json!([]))
    };
    json!({
        "name": m.name,
        "description": format!("Murmur capsule {} {}", m.name, m.version),
        "version": m.version,
        "supportedInterfaces": [
            {"url": i.url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        "capabilities": {
            "streaming": i.methods.contains(&Method::SendStreamingMessage),
            "pushNotifications": false,
            "extendedAgentCard": authenticated,
            "extensions": extensions,
        },
        "securitySchemes": schemes,
        "securityRequirements": requirements,
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": if starts_tasks { vec![skill] } else { vec![] },
    })
}
