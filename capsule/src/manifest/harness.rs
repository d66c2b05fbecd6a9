//! Reading the `harness` block: what an agent CLI driven by a preset (`murmur/driver-claude-code`,
//! `murmur/driver-codex`) may do inside its capsule — one permission level, command prefixes it
//! may run beyond that level, and where the CLI keeps its state (DESIGN §8, docs/agent-clis.md).
//! The block is the manifest's one place for this; `crate::harness::preset` maps it to each
//! CLI's own flags. Checked here against the driver it applies to, so a capsule never starts with
//! a block its CLI would ignore.

use crate::manifest::builtin::Builtin;
use crate::manifest::error::{ErrorCode, ManifestError};
use crate::manifest::keypath::KeyPath;
use crate::manifest::model::{
    Artifact, HarnessPolicy, Inference, Permissions, StateHome, Transport, Wall,
};
use crate::manifest::reader::{Fields, Reader};
use serde_yaml::Value;

const KEYS: [&str; 13] = [
    "permissions",
    "allow_commands",
    "state",
    "env",
    "require",
    "read",
    "protect",
    "limits",
    "approvals",
    "approve",
    "deny",
    "approval_timeout_secs",
    "approvals_from",
];

/// The keys only the CLI presets read; `env` and `limits` serve every process driver.
const PRESET_KEYS: [&str; 8] = [
    "permissions",
    "allow_commands",
    "state",
    "approvals",
    "approve",
    "deny",
    "approval_timeout_secs",
    "approvals_from",
];

/// Characters a command prefix may not hold: each CLI matches prefixes word by word, and these
/// would make one command line several, or one word many.
const SHELL_SPECIALS: &[char] = &[
    ';', '|', '&', '$', '`', '(', ')', '<', '>', '*', '?', '[', ']', '{', '}', '\'', '"', '\\',
    '!', '#', '~', ',', ':',
];

/// The block as written, before `checked` holds it against the driver.
pub struct Written {
    policy: HarnessPolicy,
    /// Which of [`PRESET_KEYS`] the block writes.
    preset_keys: Vec<&'static str>,
}

/// The block as written; `checked` then holds it against the driver.
/// `key`'s list of strings (absent: empty), each read by `item` with its own key path.
fn list_of<T>(
    r: &Reader,
    f: &Fields,
    key: &str,
    example: &str,
    mut item: impl FnMut(KeyPath, String) -> Result<T, ManifestError>,
) -> Result<Vec<T>, ManifestError> {
    let Some(v) = f.get(key) else {
        return Ok(Vec::new());
    };
    let list_path = f.path(key);
    r.string_list(v, &list_path, example)?
        .into_iter()
        .enumerate()
        .map(|(i, text)| item(list_path.index(i), text))
        .collect()
}

pub fn read(
    r: &Reader,
    value: Option<&Value>,
    path: &KeyPath,
) -> Result<Option<Written>, ManifestError> {
    if value.is_none() {
        return Ok(None);
    }
    let f = r.mapping(value, path, &KEYS)?;
    let permissions = match f.get("permissions") {
        Some(v) => match r.choice(v, &f.path("permissions"), &["read", "edit", "full"])? {
            0 => Permissions::Read,
            1 => Permissions::Edit,
            _ => Permissions::Full,
        },
        None => Permissions::default(),
    };
    let example = "[\"cargo test\", \"git status\"]";
    let allow_commands = list_of(r, &f, "allow_commands", example, |at, text| {
        command_prefix(r, &at, text)
    })?;
    let state = match f.get("state") {
        Some(v) => match r.choice(v, &f.path("state"), &["capsule", "user"])? {
            0 => StateHome::Capsule,
            _ => StateHome::User,
        },
        None => StateHome::default(),
    };
    let env = list_of(r, &f, "env", "[SSH_AUTH_SOCK, NPM_TOKEN]", |at, name| {
        let plain = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !plain {
            return Err(r.error(
                ErrorCode::BadValue,
                &at,
                format!("{at} is {name:?}, which is not a variable name"),
                "name a variable, e.g. NPM_TOKEN: letters, digits and _, not starting with a \
                 digit (its value comes from murmur's own environment)",
            ));
        }
        Ok(name)
    })?;
    let mut require = Vec::new();
    if let Some(v) = f.get("require") {
        let list_path = f.path("require");
        let Value::Sequence(items) = v else {
            return Err(r.bad(
                &list_path,
                "a list of walls",
                v,
                "write e.g. require: [network, files]",
            ));
        };
        let names = Wall::ALL.map(|w| w.as_str());
        for (i, item) in items.iter().enumerate() {
            let wall = Wall::ALL[r.choice(item, &list_path.index(i), &names)?];
            if !require.contains(&wall) {
                require.push(wall);
            }
        }
    }
    let read = match f.get("read") {
        Some(v) => paths(r, v, &f.path("read"), PathKind::Home)?,
        None => Vec::new(),
    };
    let protect = match f.get("protect") {
        Some(v) => paths(r, v, &f.path("protect"), PathKind::Work)?,
        None => Vec::new(),
    };
    let limits = super::harness_limits::read(r, f.get("limits"), &f.path("limits"))?;
    let approvals = super::approvals::read(r, &f)?;
    Ok(Some(Written {
        policy: HarnessPolicy {
            permissions,
            allow_commands,
            state,
            env,
            require,
            read,
            protect,
            limits,
            approvals,
        },
        preset_keys: PRESET_KEYS.into_iter().filter(|k| f.contains(k)).collect(),
    }))
}

/// How a path list's entries are written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum PathKind {
    /// `harness.read`: absolute, or `~/` for the user's home.
    Home,
    /// `harness.protect`: absolute, or relative to the work folder (no `..`).
    Work,
}

/// `harness.read` or `harness.protect`: a list of paths, kept as written (`~/` and the work
/// folder are resolved where the attempt is built).
fn paths(
    r: &Reader,
    v: &Value,
    list_path: &KeyPath,
    kind: PathKind,
) -> Result<Vec<std::path::PathBuf>, ManifestError> {
    let example = match kind {
        PathKind::Home => "[~/.aws, /etc/ssl/private/dev.pem]",
        PathKind::Work => "[Makefile, scripts/deploy.sh]",
    };
    let mut out = Vec::new();
    for (i, text) in r
        .string_list(v, list_path, example)?
        .into_iter()
        .enumerate()
    {
        let at = list_path.index(i);
        let path = std::path::Path::new(&text);
        let (fine, hint) = match kind {
            PathKind::Home => (
                path.is_absolute() || text.starts_with("~/"),
                "write an absolute path or one starting with ~/ (the user's home), e.g. ~/.aws",
            ),
            PathKind::Work => (
                !text.is_empty()
                    && !path
                        .components()
                        .any(|c| c == std::path::Component::ParentDir),
                "write a path inside the work folder (relative to it, without ..) or an \
                 absolute one, e.g. scripts/deploy.sh",
            ),
        };
        if !fine || text.contains('\0') {
            return Err(r.error(
                ErrorCode::BadValue,
                &at,
                format!("{at} is {text:?}, which is not such a path"),
                hint,
            ));
        }
        out.push(path.to_path_buf());
    }
    Ok(out)
}

/// One `allow_commands` entry as its words: a program and the arguments it must start with.
pub(crate) fn command_prefix(
    r: &Reader,
    at: &KeyPath,
    text: String,
) -> Result<Vec<String>, ManifestError> {
    let words: Vec<String> = text.split_whitespace().map(str::to_owned).collect();
    if let Some(c) = text.chars().find(|c| SHELL_SPECIALS.contains(c)) {
        return Err(r.error(
            ErrorCode::BadValue,
            at,
            format!("{at} is {text:?}, which holds {c:?}: an entry is a command's first words, not a shell line"),
            "write the program and the arguments it starts with, e.g. \"cargo test\" (it then \
             allows `cargo test --release` too)",
        ));
    }
    Ok(words)
}

/// The CLI preset (Claude Code or Codex) the capsule's driver is, if it is one.
pub(crate) fn preset_of(inference: &Inference, artifacts: &[Artifact]) -> Option<Builtin> {
    artifacts
        .iter()
        .find(|a| Some(&a.name) == inference.driver_artifact.as_ref())
        .and_then(|a| a.builtin)
        .filter(|b| !b.is_http())
}

/// The block checked against the driver: it is read by the two CLI presets only. `written` is
/// `None` when the manifest has no `harness` key (the defaults then apply to a preset).
pub fn checked(
    r: &Reader,
    written: Option<Written>,
    inference: &Inference,
    artifacts: &[Artifact],
) -> Result<HarnessPolicy, ManifestError> {
    let Some(Written {
        policy,
        preset_keys: written_keys,
    }) = written
    else {
        return Ok(HarnessPolicy::default());
    };
    let path = KeyPath::default().key("harness");
    if inference.transport == Transport::Process && written_keys.is_empty() {
        // `env` and `limits` alone: every process driver reads them.
        return Ok(policy);
    }
    let preset = preset_of(inference, artifacts);
    if inference.transport != Transport::Process {
        return Err(r.error(
            ErrorCode::BadValue,
            &path,
            format!("{path} is not accepted: this capsule runs no harness (inference.transport is http)"),
            "remove harness; it describes the agent CLI of a capsule on inference.transport: \
             process",
        ));
    }
    let Some(preset) = preset else {
        let at = path.key(written_keys[0]);
        return Err(r.error(
            ErrorCode::BadValue,
            &at,
            format!(
                "{at} is not accepted: it is read by the {} and {} presets, and this capsule's \
                 driver is neither",
                Builtin::ClaudeCode.name(),
                Builtin::Codex.name()
            ),
            "remove it; a process driver of your own passes its CLI's permission flags in \
             process.command (harness.env serves every driver)",
        ));
    };
    // Codex runs murmur's helpers outside its own sandbox through a rule murmur writes into the
    // CLI's state folder; it writes nothing into the user's own ~/.codex.
    if preset == Builtin::Codex
        && policy.state == StateHome::User
        && policy.permissions != Permissions::Full
    {
        let at = path.key("state");
        return Err(r.error(
            ErrorCode::BadValue,
            &at,
            format!(
                "{at} is user with permissions: {}, which {} cannot serve: Codex's sandbox would \
                 keep murmur's helpers from reaching the capsule, and murmur writes no rule into \
                 your own Codex folder",
                policy.permissions.as_str(),
                Builtin::Codex.name()
            ),
            "write state: capsule (the default), or permissions: full",
        ));
    }
    Ok(policy)
}
