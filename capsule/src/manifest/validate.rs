//! Building a `Manifest` from a parsed capsule manifest: every key of DESIGN §6 and the spec, in
//! file order, then the cross-checks (the driver against `inference.transport`, lifecycle
//! combinations). Artifacts are read in `artifacts.rs`, `network` in `network.rs`, the driver
//! choice in `driver.rs`; this file owns the other blocks and the order they are read in.

use crate::manifest::artifacts;
use crate::manifest::builtin::Builtin;
use crate::manifest::driver::{self, Draft};
use crate::manifest::error::{ErrorCode, ManifestError};
use crate::manifest::harness;
use crate::manifest::keypath::KeyPath;
use crate::manifest::model::{
    AfterTask, Artifact, Capabilities, ContextLimits, Exports, HarnessPolicy, Inference, Lifecycle,
    Manifest, TaskAcceptance, Transport,
};
use crate::manifest::network;
use crate::manifest::paths;
use crate::manifest::reader::is_plain_name;
use crate::manifest::reader::Reader;
use crate::manifest::spend;
use serde_yaml::Value;
use std::path::{Path, PathBuf};

/// The top-level keys of a capsule manifest.
pub const TOP_KEYS: [&str; 11] = [
    "name",
    "version",
    "artifacts",
    "network",
    "inference",
    "lifecycle",
    "exports",
    "capabilities",
    "context",
    "harness",
    "spend",
];

/// The most tasks `lifecycle.queue_depth` may keep waiting behind the running one. The queue is
/// held in memory and every waiting task holds a sender; a bound keeps a typo (or 4294967295)
/// from promising what no capsule can serve.
pub const MAX_QUEUE_DEPTH: u64 = 1000;

/// The capsule manifest `root`, read from `r.file`; `path` is its absolute path.
pub fn manifest(r: &Reader, root: &Value, path: PathBuf) -> Result<Manifest, ManifestError> {
    let top = KeyPath::default();
    if root.get("formation").is_some() {
        return Err(r.error(
            ErrorCode::Formation,
            &top.key("formation"),
            "is a formation manifest (it has a top-level formation: key), not a capsule manifest",
            "name a capsule manifest here: formations cannot be members of formations or \
             sub-capsules",
        ));
    }
    let dir = path
        .parent()
        .map_or_else(|| PathBuf::from("/"), Path::to_path_buf);
    let f = r.mapping(Some(root), &top, &TOP_KEYS)?;
    let name = name(r, f.get("name"), &f.path("name"), "name: my-worker")?;
    let version = match f.get("version") {
        Some(v) => r.text(v, &f.path("version"), "write version: \"0.1.0\"")?,
        None => return Err(r.missing(&f.path("version"), "add version: \"0.1.0\"")),
    };
    let artifacts = artifacts::read(r, f.get("artifacts"), &f.path("artifacts"), &dir)?;
    let network = network::read(r, f.get("network"), &f.path("network"))?;
    let draft = inference(r, f.get("inference"), &f.path("inference"))?;
    let lifecycle = lifecycle(r, f.get("lifecycle"), &f.path("lifecycle"))?;
    let exports = exports(r, f.get("exports"), &f.path("exports"))?;
    let capabilities = capabilities(r, f.get("capabilities"), &f.path("capabilities"), &dir)?;
    let context = context(r, f.get("context"), &f.path("context"))?;
    let harness = harness::read(r, f.get("harness"), &f.path("harness"))?;
    let inference = driver::resolve(r, draft, &artifacts, &lifecycle)?;
    let harness = harness::checked(r, harness, &inference, &artifacts)?;
    let harness = shell_for_harness(r, &capabilities, &inference, &artifacts, harness)?;
    let spend = spend::read(
        r,
        f.get("spend"),
        &f.path("spend"),
        inference.model.as_deref(),
    )?;
    Ok(Manifest {
        path,
        dir,
        name,
        version,
        artifacts,
        network,
        inference,
        lifecycle,
        exports,
        capabilities,
        context,
        harness,
        spend,
    })
}

/// `capabilities.shell.allow` is the spec's one key for what a capsule's agent may run. On an
/// http capsule it gives the model its `bash` tool. On a harness capsule it lists what its CLI
/// (the Claude Code or Codex preset) runs without asking at any permission level: what
/// `harness.allow_commands` says, which stays as an alias; the two lists are joined.
fn shell_for_harness(
    r: &Reader,
    capabilities: &Capabilities,
    inference: &Inference,
    artifacts: &[Artifact],
    mut policy: HarnessPolicy,
) -> Result<HarnessPolicy, ManifestError> {
    if capabilities.shell_allow.is_empty() || inference.transport != Transport::Process {
        return Ok(policy);
    }
    let at = KeyPath::default()
        .key("capabilities")
        .key("shell")
        .key("allow");
    if harness::preset_of(inference, artifacts).is_none() {
        return Err(r.error(
            ErrorCode::BadValue,
            &at,
            format!(
                "{at} is not accepted: on a capsule that runs a harness it lists what the {} or \
                 {} CLI may run without asking, and this capsule's driver is neither",
                Builtin::ClaudeCode.name(),
                Builtin::Codex.name()
            ),
            "remove capabilities.shell; a process driver of your own passes its CLI's \
             permission flags in process.command",
        ));
    }
    for (i, entry) in capabilities.shell_allow.iter().enumerate() {
        let words = harness::command_prefix(r, &at.index(i), entry.clone())?;
        if !policy.allow_commands.contains(&words) {
            policy.allow_commands.push(words);
        }
    }
    Ok(policy)
}

/// A required plain name (capsule, formation or member name).
pub fn name(
    r: &Reader,
    value: Option<&Value>,
    path: &KeyPath,
    example: &str,
) -> Result<String, ManifestError> {
    let Some(value) = value else {
        return Err(r.missing(path, format!("add {example}")));
    };
    let text = r.text(value, path, &format!("write {example}"))?;
    if !is_plain_name(&text) {
        return Err(r.bad(
            path,
            "a name made of letters, digits, '.', '_' and '-'",
            &Value::String(text),
            format!("write e.g. {example}"),
        ));
    }
    Ok(text)
}

fn inference(r: &Reader, value: Option<&Value>, path: &KeyPath) -> Result<Draft, ManifestError> {
    let keys = [
        "transport",
        "model",
        "driver",
        "max_turns",
        "max_tokens",
        "max_total_tokens",
    ];
    let f = r.mapping(value, path, &keys)?;
    let transport = match f.get("transport") {
        Some(v) => Some(
            match r.choice(v, &f.path("transport"), &["http", "process"])? {
                0 => Transport::Http,
                _ => Transport::Process,
            },
        ),
        None => None,
    };
    let model = match f.get("model") {
        Some(v) => Some(r.text(v, &f.path("model"), "write model: claude-sonnet-5")?),
        None => None,
    };
    let driver_path = f.path("driver");
    let driver_value = f.get("driver");
    if let Some(Value::String(name)) = driver_value {
        let hint = format!("write driver: {{ artifact: {name} }}");
        return Err(r.bad(
            &driver_path,
            "a mapping",
            &Value::String(name.clone()),
            hint,
        ));
    }
    let df = r.mapping(driver_value, &driver_path, &["artifact"])?;
    let driver = match df.get("artifact") {
        Some(v) => Some(r.text(v, &df.path("artifact"), "name a declared artifact")?),
        None => None,
    };
    let turns = |key: &str, default: u32, hint: &str| -> Result<u32, ManifestError> {
        match f.get(key) {
            Some(v) => {
                let n = r.number(v, &f.path(key), (1, u64::from(u32::MAX)), hint)?;
                Ok(u32::try_from(n).unwrap_or(u32::MAX))
            }
            None => Ok(default),
        }
    };
    Ok(Draft {
        transport,
        model,
        driver,
        max_turns: turns("max_turns", 10, "write e.g. max_turns: 10")?,
        max_tokens: turns("max_tokens", 8192, "write e.g. max_tokens: 8192")?,
        max_total_tokens: match f.get("max_total_tokens") {
            Some(v) => Some(r.number(
                v,
                &f.path("max_total_tokens"),
                (1, u64::MAX),
                "write e.g. max_total_tokens: 200000",
            )?),
            None => None,
        },
    })
}

fn lifecycle(
    r: &Reader,
    value: Option<&Value>,
    path: &KeyPath,
) -> Result<Lifecycle, ManifestError> {
    let f = r.mapping(
        value,
        path,
        &["task_acceptance", "after_task", "queue_depth"],
    )?;
    let task_acceptance = match f.get("task_acceptance") {
        Some(v) => match r.choice(v, &f.path("task_acceptance"), &["none", "single", "queue"])? {
            0 => TaskAcceptance::None,
            1 => TaskAcceptance::Single,
            _ => TaskAcceptance::Queue,
        },
        None => TaskAcceptance::Single,
    };
    let after_task = match f.get("after_task") {
        Some(v) => match r.choice(v, &f.path("after_task"), &["sleep", "exit"])? {
            0 => AfterTask::Sleep,
            _ => AfterTask::Exit,
        },
        None if task_acceptance == TaskAcceptance::Single => AfterTask::Exit,
        None => AfterTask::Sleep,
    };
    let depth_path = f.path("queue_depth");
    let queue_depth = match (f.get("queue_depth"), task_acceptance) {
        (Some(v), TaskAcceptance::Queue) => {
            let hint = format!(
                "write e.g. queue_depth: 2 (the tasks waiting behind the running one, at most \
                 {MAX_QUEUE_DEPTH})"
            );
            let n = r.number(v, &depth_path, (0, MAX_QUEUE_DEPTH), &hint)?;
            usize::try_from(n).unwrap_or(usize::MAX)
        }
        (Some(_), other) => {
            let default = if f.contains("task_acceptance") {
                ""
            } else {
                " (the default)"
            };
            return Err(r.error(
                ErrorCode::BadValue,
                &depth_path,
                format!(
                    "{depth_path} is set, but lifecycle.task_acceptance is {}{default}",
                    other.as_str()
                ),
                "remove queue_depth, or set task_acceptance: queue (queue_depth counts the \
                 tasks waiting behind the running one)",
            ));
        }
        (None, TaskAcceptance::Queue) => 2,
        (None, _) => 0,
    };
    Ok(Lifecycle {
        task_acceptance,
        after_task,
        queue_depth,
    })
}

fn exports(r: &Reader, value: Option<&Value>, path: &KeyPath) -> Result<Exports, ManifestError> {
    let f = r.mapping(value, path, &["peer_tasks", "files", "peer_files"])?;
    let peer = r.mapping(f.get("peer_tasks"), &f.path("peer_tasks"), &["accept"])?;
    let peer_tasks_accept = match peer.get("accept") {
        Some(v) => r.boolean(v, &peer.path("accept"))?,
        None => false,
    };
    let plane = |key: &str| -> Result<bool, ManifestError> {
        match f.get(key) {
            None | Some(Value::Mapping(_)) => Ok(f.contains(key)),
            Some(other) => Err(r.bad(
                &f.path(key),
                "a mapping",
                other,
                format!("declare the plane with {key}: {{}}"),
            )),
        }
    };
    Ok(Exports {
        peer_tasks_accept,
        files: plane("files")?,
        peer_files: plane("peer_files")?,
    })
}

fn capabilities(
    r: &Reader,
    value: Option<&Value>,
    path: &KeyPath,
    dir: &Path,
) -> Result<Capabilities, ManifestError> {
    let f = r.mapping(value, path, &["network", "shell", "delegate"])?;
    let allow = |key: &str, example: &str| -> Result<Vec<String>, ManifestError> {
        let block = r.mapping(f.get(key), &f.path(key), &["allow"])?;
        match block.get("allow") {
            Some(v) => r.string_list(v, &block.path("allow"), example),
            None => Ok(Vec::new()),
        }
    };
    let network_allow = allow("network", "[localhost:52222]")?;
    // An entry that does not read would allow nothing: refused here rather than at the first
    // send, and rather than silently.
    let allow_path = f.path("network").key("allow");
    for (i, entry) in network_allow.iter().enumerate() {
        if let Err(why) = crate::policy::Entry::parse(entry) {
            let at = allow_path.index(i);
            return Err(r.error(
                ErrorCode::BadValue,
                &at,
                format!("{at} is {entry:?}, which is not a destination: {why}"),
                "write host, host:port or http://host:port (hosts match exactly; localhost and 127.0.0.1 are different hosts)",
            ));
        }
    }
    let shell_allow = allow("shell", "[bash, git]")?;
    let shell_path = f.path("shell").key("allow");
    for (i, entry) in shell_allow.iter().enumerate() {
        harness::command_prefix(r, &shell_path.index(i), entry.clone())?;
    }
    let delegate_allow = allow("delegate", "[../worker/murmur.yaml]")?
        .iter()
        .map(|p| paths::resolve(dir, p))
        .collect();
    Ok(Capabilities {
        network_allow,
        shell_allow,
        delegate_allow,
    })
}

fn context(
    r: &Reader,
    value: Option<&Value>,
    path: &KeyPath,
) -> Result<ContextLimits, ManifestError> {
    let f = r.mapping(value, path, &["images"])?;
    let images = r.mapping(
        f.get("images"),
        &f.path("images"),
        &["max_bytes", "max_per_turn"],
    )?;
    let mut limits = ContextLimits::default();
    if let Some(v) = images.get("max_bytes") {
        let hint = "write max_bytes: 5242880";
        limits.images_max_bytes = r.number(v, &images.path("max_bytes"), (1, u64::MAX), hint)?;
    }
    if let Some(v) = images.get("max_per_turn") {
        let hint = "write max_per_turn: 4 (0 refuses every image)";
        let n = r.number(
            v,
            &images.path("max_per_turn"),
            (0, u64::from(u32::MAX)),
            hint,
        )?;
        limits.images_max_per_turn = usize::try_from(n).unwrap_or(usize::MAX);
    }
    Ok(limits)
}
