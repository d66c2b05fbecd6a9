//! Choosing the driver artifact (`inference.driver.artifact`, or the only artifact) and checking
//! that it fits `inference.transport`: http needs a built-in http driver, process needs a preset
//! or an artifact with a `process` block. Also infers the transport when it is not written.

use crate::manifest::builtin::Builtin;
use crate::manifest::error::{ErrorCode, ManifestError};
use crate::manifest::keypath::KeyPath;
use crate::manifest::model::{Artifact, Inference, Lifecycle, TaskAcceptance, Transport};
use crate::manifest::reader::Reader;
use crate::manifest::suggest::nearest;

/// `inference` as written, before the driver is resolved.
pub struct Draft {
    pub transport: Option<Transport>,
    pub model: Option<String>,
    pub driver: Option<String>,
    pub max_turns: u32,
    pub max_tokens: u32,
    pub max_total_tokens: Option<u64>,
}

/// Picks the driver artifact and checks it fits `inference.transport`.
pub fn resolve(
    r: &Reader,
    draft: Draft,
    artifacts: &[Artifact],
    lifecycle: &Lifecycle,
) -> Result<Inference, ManifestError> {
    let inference = KeyPath::default().key("inference");
    let driver_path = inference.key("driver").key("artifact");
    let declared: Vec<&str> = artifacts.iter().map(|a| a.name.as_str()).collect();
    let name = match (&draft.driver, artifacts) {
        (Some(name), _) => Some(name.clone()),
        (None, [only]) => Some(only.name.clone()),
        (None, _) if lifecycle.task_acceptance == TaskAcceptance::None => None,
        (None, []) => {
            return Err(r.missing(
                &KeyPath::default().key("artifacts"),
                "declare the driver that runs tasks, e.g. artifacts: [{ name: \
                 murmur/driver-anthropic, runtime: driver, gateway: { endpoint: \
                 https://api.anthropic.com, api_key: ${ANTHROPIC_API_KEY} } }]",
            ))
        }
        (None, _) => {
            return Err(r.missing(
                &driver_path,
                format!(
                    "name the artifact that runs tasks: one of {}",
                    declared.join(", ")
                ),
            ))
        }
    };
    let Some(name) = name else {
        return Ok(Inference {
            transport: draft.transport.unwrap_or(Transport::Http),
            model: draft.model,
            driver_artifact: None,
            max_turns: draft.max_turns,
            max_tokens: draft.max_tokens,
            max_total_tokens: draft.max_total_tokens,
        });
    };
    let Some(artifact) = artifacts.iter().find(|a| a.name == name) else {
        let hint = if Builtin::parse(&name).is_some() {
            format!("declare it under artifacts: - {{ name: {name}, runtime: driver }}")
        } else if name.starts_with("murmur/") {
            format!(
                "{name} is not a built-in either; the built-ins are {}",
                Builtin::names()
            )
        } else {
            match nearest(&name, &declared) {
                Some(near) => format!("did you mean {near}? declare {name} under artifacts"),
                None => format!("declare {name} under artifacts"),
            }
        };
        return Err(r.error(
            ErrorCode::Driver,
            &driver_path,
            format!("{driver_path} names {name}, which is not declared under artifacts"),
            hint,
        ));
    };
    let transport = draft.transport.unwrap_or(if artifact.is_process_driver() {
        Transport::Process
    } else {
        Transport::Http
    });
    let fits = match transport {
        Transport::Http => artifact.is_http_driver(),
        Transport::Process => artifact.is_process_driver(),
    };
    if !fits {
        let (message, hint) = driver_mismatch(transport, artifact);
        let at = if draft.transport.is_some() {
            inference.key("transport")
        } else {
            driver_path
        };
        return Err(r.error(ErrorCode::Driver, &at, message, hint));
    }
    if transport == Transport::Http && draft.model.is_none() {
        return Err(r.missing(
            &inference.key("model"),
            "name the provider's model, e.g. model: claude-sonnet-5",
        ));
    }
    Ok(Inference {
        transport,
        model: draft.model,
        driver_artifact: Some(name),
        max_turns: draft.max_turns,
        max_tokens: draft.max_tokens,
        max_total_tokens: draft.max_total_tokens,
    })
}

/// The sentence and hint for a driver that does not fit the transport.
fn driver_mismatch(transport: Transport, artifact: &Artifact) -> (String, String) {
    let name = &artifact.name;
    let http_list = "murmur/driver-anthropic, murmur/driver-openai, murmur/driver-deepseek";
    match transport {
        Transport::Process if artifact.is_http_driver() => (
            format!("inference.transport is process, but the driver {name} is an http driver"),
            "set inference.transport: http, or drive a process driver: murmur/driver-claude-code, \
             murmur/driver-codex or an artifact with a process block"
                .to_string(),
        ),
        Transport::Process => (
            format!("inference.transport is process, but the driver {name} has no process block"),
            format!(
                "add process: {{ command: [...] }} to the artifact {name}, or drive \
                 murmur/driver-claude-code or murmur/driver-codex"
            ),
        ),
        Transport::Http if artifact.is_process_driver() => (
            format!("inference.transport is http, but the driver {name} is a process driver"),
            "set inference.transport: process".to_string(),
        ),
        Transport::Http => (
            format!("inference.transport is http, but {name} is not an http driver"),
            format!("the http drivers are the built-ins {http_list}, each with a gateway"),
        ),
    }
}
