//! Reading `artifacts`: names (built-in `murmur/` names checked against `builtin.rs`), the
//! `gateway` of http drivers and the `process` block of process drivers, with the rules for which
//! artifact may carry which block. Preset process drivers get their preset's definition here;
//! only a declared `process.command` has its relative paths resolved (`paths::resolve_command`).

use crate::manifest::builtin::Builtin;
use crate::manifest::error::{ErrorCode, ManifestError};
use crate::manifest::keypath::KeyPath;
use crate::manifest::model::{
    Artifact, Gateway, InputDialect, Interrupt, ModelApi, OutputDialect, ProcessDriver, PromptMode,
};
use crate::manifest::paths;
use crate::manifest::reader::Reader;
use crate::manifest::suggest::nearest;
use serde_yaml::Value;
use std::path::Path;

const ARTIFACT_KEYS: [&str; 5] = ["name", "version", "runtime", "gateway", "process"];
const PROCESS_KEYS: [&str; 6] = [
    "command",
    "prompt",
    "input",
    "output",
    "resume",
    "interrupt",
];

/// The `artifacts` list (absent reads as empty). `dir` resolves relative commands.
pub fn read(
    r: &Reader,
    value: Option<&Value>,
    path: &KeyPath,
    dir: &Path,
) -> Result<Vec<Artifact>, ManifestError> {
    let items = match value {
        None => return Ok(Vec::new()),
        Some(Value::Sequence(items)) => items,
        Some(other) => {
            return Err(r.bad(
                path,
                "a list of artifacts",
                other,
                "write each artifact as a list item: - { name: ..., runtime: driver }",
            ))
        }
    };
    let mut artifacts: Vec<Artifact> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let artifact = one(r, item, &path.index(i), dir)?;
        if let Some(first) = artifacts.iter().position(|a| a.name == artifact.name) {
            let at = path.index(i).key("name");
            return Err(r.error(
                ErrorCode::BadValue,
                &at,
                format!(
                    "{at} {} is already declared by {path}[{first}]",
                    artifact.name
                ),
                "declare each artifact once",
            ));
        }
        artifacts.push(artifact);
    }
    Ok(artifacts)
}

fn one(r: &Reader, value: &Value, path: &KeyPath, dir: &Path) -> Result<Artifact, ManifestError> {
    let f = r.mapping(Some(value), path, &ARTIFACT_KEYS)?;
    let name_path = f.path("name");
    let name = match f.get("name") {
        Some(v) => r.text(v, &name_path, "write name: murmur/driver-anthropic")?,
        None => return Err(r.missing(&name_path, "add name: murmur/driver-anthropic, or your own")),
    };
    let version = match f.get("version") {
        Some(v) => Some(r.text(v, &f.path("version"), "write version: \"0.1.0\"")?),
        None => None,
    };
    let runtime = match f.get("runtime") {
        Some(v) => {
            r.choice(v, &f.path("runtime"), &["driver"])?;
            "driver".to_string()
        }
        None => return Err(r.missing(&f.path("runtime"), "add runtime: driver")),
    };
    let builtin = match (Builtin::parse(&name), name.starts_with("murmur/")) {
        (Some(b), _) => Some(b),
        (None, false) => None,
        (None, true) => {
            let names = Builtin::ALL.map(|b| b.name());
            let listing = format!("the built-in artifacts are {}", names.join(", "));
            let hint = match nearest(&name, &names) {
                Some(near) => format!("did you mean {near}? {listing}"),
                None => listing,
            };
            return Err(r.error(
                ErrorCode::Driver,
                &name_path,
                format!("{name_path} {name} is not a built-in murmur artifact"),
                hint,
            ));
        }
    };
    let gateway = match f.get("gateway") {
        Some(v) => Some(gateway(r, v, &f.path("gateway"))?),
        None => None,
    };
    let declared_process = match f.get("process") {
        Some(v) => Some(process(r, v, &f.path("process"), dir)?),
        None => None,
    };
    let refuse = |key: &str, why: String, hint: &str| {
        let at = f.path(key);
        r.error(
            ErrorCode::BadValue,
            &at,
            format!("{at} is not accepted: {why}"),
            hint,
        )
    };
    let process = match builtin {
        Some(b) if b.is_http() => {
            if declared_process.is_some() {
                let why = format!("{name} is an http driver");
                return Err(refuse(
                    "process",
                    why,
                    "remove process; an http driver takes gateway",
                ));
            }
            if gateway.is_none() {
                return Err(r.missing(&f.path("gateway"), gateway_hint(b)));
            }
            if gateway.as_ref().is_some_and(|g| g.api.is_some()) {
                let why = format!("{name} is an http driver, which speaks its provider's API");
                return Err(refuse("gateway", why, "remove gateway.api"));
            }
            None
        }
        Some(b) => {
            let hint = "remove it; to run the CLI another way, declare your own artifact \
                        (e.g. local/driver-claude) with a process block";
            if declared_process.is_some() {
                let why = format!("{name} is a preset that carries its own process definition");
                return Err(refuse("process", why, hint));
            }
            if gateway.as_ref().is_some_and(|g| g.api.is_some()) {
                let why = format!("{name} is a preset that knows the API its CLI speaks");
                return Err(refuse("gateway", why, "remove gateway.api"));
            }
            b.preset()
        }
        None => {
            if let (Some(g), Some(_)) = (&gateway, &declared_process) {
                if g.api.is_none() {
                    let at = f.path("gateway").key("api");
                    return Err(r.missing(
                        &at,
                        "add api: anthropic, openai-responses or openai-chat: the API the \
                         process's CLI speaks, which the capsule's model gateway forwards",
                    ));
                }
            }
            declared_process
        }
    };
    Ok(Artifact {
        name,
        version,
        runtime,
        builtin,
        gateway,
        process,
    })
}

fn gateway_hint(builtin: Builtin) -> String {
    let (endpoint, key) = match builtin {
        Builtin::OpenAi => ("https://api.openai.com/v1", "OPENAI_API_KEY"),
        Builtin::DeepSeek => ("https://api.deepseek.com", "DEEPSEEK_API_KEY"),
        _ => ("https://api.anthropic.com", "ANTHROPIC_API_KEY"),
    };
    format!("add gateway: {{ endpoint: {endpoint}, api_key: ${{{key}}} }}")
}

fn gateway(r: &Reader, value: &Value, path: &KeyPath) -> Result<Gateway, ManifestError> {
    let f = r.mapping(Some(value), path, &["endpoint", "api_key", "api"])?;
    let endpoint_path = f.path("endpoint");
    let hint = "write endpoint: https://api.anthropic.com (or http://localhost:PORT/v1)";
    let endpoint = match f.get("endpoint") {
        Some(v) => r.text(v, &endpoint_path, hint)?,
        None => return Err(r.missing(&endpoint_path, hint)),
    };
    if !(endpoint.starts_with("https://") || endpoint.starts_with("http://")) {
        let expected = "an http:// or https:// URL";
        return Err(r.bad(&endpoint_path, expected, &Value::String(endpoint), hint));
    }
    let api_key = match f.get("api_key") {
        Some(v) => Some(r.string(v, &f.path("api_key"))?),
        None => None,
    };
    let api = match f.get("api") {
        Some(v) => {
            let names: Vec<&str> = ModelApi::NAMES.iter().map(|(n, _)| *n).collect();
            let index = r.choice(v, &f.path("api"), &names)?;
            Some(ModelApi::NAMES[index].1)
        }
        None => None,
    };
    Ok(Gateway {
        endpoint,
        api_key,
        api,
    })
}

fn process(
    r: &Reader,
    value: &Value,
    path: &KeyPath,
    dir: &Path,
) -> Result<ProcessDriver, ManifestError> {
    let f = r.mapping(Some(value), path, &PROCESS_KEYS)?;
    let command_path = f.path("command");
    let example = "[\"python3\", \"harness.py\"]";
    let Some(command_value) = f.get("command") else {
        return Err(r.missing(&command_path, format!("add command: {example}")));
    };
    let command = r.string_list(command_value, &command_path, example)?;
    if command.is_empty() {
        let hint = format!("name the program and its arguments, e.g. command: {example}");
        return Err(r.bad(&command_path, "a non-empty list", command_value, hint));
    }
    let command = paths::resolve_command(dir, command);
    let prompt = match f.get("prompt") {
        Some(v) => match r.choice(v, &f.path("prompt"), &["stdin", "arg"])? {
            0 => PromptMode::Stdin,
            _ => PromptMode::Arg,
        },
        None => PromptMode::Stdin,
    };
    let input = match f.get("input") {
        Some(v) => match r.choice(v, &f.path("input"), &["text", "stream-json"])? {
            0 => InputDialect::Text,
            _ => InputDialect::StreamJson,
        },
        None => InputDialect::Text,
    };
    // A stream-json user line is the prompt; with the prompt as an argument there is none.
    if input == InputDialect::StreamJson && prompt == PromptMode::Arg {
        let prompt_value = f.get("prompt").unwrap_or(&Value::Null);
        return Err(r.bad(
            &f.path("prompt"),
            "stdin under input: stream-json",
            prompt_value,
            "input: stream-json writes the task as a user-message line on stdin; drop prompt: arg",
        ));
    }
    let output = match f.get("output") {
        Some(v) => match r.choice(v, &f.path("output"), &["text", "stream-json", "codex-json"])? {
            0 => OutputDialect::Text,
            1 => OutputDialect::StreamJson,
            _ => OutputDialect::CodexJson,
        },
        None => OutputDialect::Text,
    };
    let resume = match f.get("resume") {
        Some(v) => {
            let resume_path = f.path("resume");
            let args = r.string_list(v, &resume_path, "[\"--resume\", \"{session}\"]")?;
            if !args.iter().any(|a| a.contains("{session}")) {
                return Err(r.bad(
                    &resume_path,
                    "a list with a {session} placeholder",
                    v,
                    "write e.g. resume: [\"--resume\", \"{session}\"]; {session} becomes the \
                     harness session id",
                ));
            }
            Some(args)
        }
        None => None,
    };
    let interrupt = match f.get("interrupt") {
        Some(v) => interrupt(r, v, &f.path("interrupt"), input)?,
        // A stream-json harness has an in-band way to stop a turn: it is the default there.
        None if input == InputDialect::StreamJson => Interrupt::ControlRequest,
        None => Interrupt::Sigint,
    };
    Ok(ProcessDriver {
        command,
        prompt,
        input,
        output,
        resume,
        interrupt,
        model_args: None,
    })
}

fn interrupt(
    r: &Reader,
    value: &Value,
    path: &KeyPath,
    input: InputDialect,
) -> Result<Interrupt, ManifestError> {
    let hint = "write interrupt: sigint, interrupt: none, interrupt: control-request (with \
                input: stream-json), or interrupt: { stdin: \"\\u0003\" }";
    let expected = "sigint, none, control-request or { stdin: \"<bytes>\" }";
    match value {
        Value::String(_) => {
            let accepted = ["sigint", "none", "control-request"];
            let index = r.choice(value, path, &accepted).map_err(|err| {
                if err.code() == ErrorCode::BadValue {
                    r.bad(path, expected, value, hint)
                } else {
                    err
                }
            })?;
            match index {
                0 => Ok(Interrupt::Sigint),
                1 => Ok(Interrupt::None),
                // The control line is only understood by a harness reading stream-json input.
                _ if input != InputDialect::StreamJson => Err(r.bad(
                    path,
                    "control-request only under input: stream-json",
                    value,
                    "add input: stream-json (the harness must read stream-json on stdin), or \
                     write interrupt: sigint",
                )),
                _ => Ok(Interrupt::ControlRequest),
            }
        }
        Value::Mapping(_) => {
            let f = r.mapping(Some(value), path, &["stdin"])?;
            let stdin_path = f.path("stdin");
            let Some(bytes) = f.get("stdin") else {
                return Err(r.missing(&stdin_path, hint));
            };
            let text = r.string(bytes, &stdin_path)?;
            if text.is_empty() {
                return Err(r.bad(&stdin_path, "at least one byte", bytes, hint));
            }
            Ok(Interrupt::Stdin(text.into_bytes()))
        }
        other => Err(r.bad(path, expected, other, hint)),
    }
}
