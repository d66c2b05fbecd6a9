//! Formation manifests (DESIGN §7): a file with a top-level `formation:` key naming members, each
//! a capsule manifest. The whole formation is validated before anything starts: member manifests
//! load (their own errors propagate unchanged), `entry` and `calls` name members, no two members
//! are pinned to one port, and every called member accepts peer tasks.

use crate::manifest::error::{ErrorCode, ManifestError};
use crate::manifest::keypath::KeyPath;
use crate::manifest::model::{AfterTask, Lifecycle, Manifest, TaskAcceptance};
use crate::manifest::paths::normalize;
use crate::manifest::reader::Reader;
use crate::manifest::suggest::nearest;
use crate::manifest::validate::name;
use serde_yaml::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A validated formation manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Formation {
    /// Absolute path of the file (lexically normalized).
    pub path: PathBuf,
    /// Its folder: member manifests resolve here.
    pub dir: PathBuf,
    /// `formation.name`.
    pub name: String,
    /// `formation.version`.
    pub version: String,
    /// `formation.entry`: the member that takes `mur run --task`; always one of `members`.
    pub entry: String,
    /// `formation.members`, in declared order.
    pub members: Vec<Member>,
    /// `formation.on_member_failure`: what the launch does when a member dies unexpectedly.
    pub on_member_failure: OnMemberFailure,
    /// The top-level `spend:` beside `formation:`: ceilings on every member and sub-capsule
    /// together, and prices they all use.
    pub spend: Box<super::SpendPolicy>,
    /// The top-level `telemetry:` beside `formation:`: where every member's spans go.
    pub telemetry: Box<super::telemetry::Telemetry>,
}

/// `formation.on_member_failure`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnMemberFailure {
    /// Stop every member cleanly and end the launch, leaving nothing running (the default).
    #[default]
    Stop,
    /// Keep the other members running; calls to the dead member answer `unreachable`.
    Continue,
}

impl Formation {
    /// The member called `name`.
    pub fn member(&self, name: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.name == name)
    }

    /// The entry member.
    pub fn entry_member(&self) -> Option<&Member> {
        self.member(&self.entry)
    }
}

/// One of `formation.members`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The member's name (the key under `members`); its callers hold credential `member:<name>`.
    pub name: String,
    /// `manifest`, absolute (resolved against the formation's folder, normalized).
    pub manifest: PathBuf,
    /// `calls`: the members it may call, declared order, duplicates dropped.
    pub calls: Vec<String>,
    /// `port`: the formation's pin for this member, as declared.
    pub port: Option<u16>,
    /// `restart`, `max_restarts`, `restart_window`: whether the member comes back when it ends.
    pub restart: Restart,
    /// The member's capsule manifest, loaded and validated.
    pub capsule: Manifest,
}

/// When a member that ended is started again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RestartPolicy {
    /// Its end is final (the default): a crash is what `on_member_failure` says.
    #[default]
    Never,
    /// After a non-zero exit (a crash, a kill).
    OnFailure,
    /// After any exit.
    Always,
}

/// A member's restart policy and its cap: at most `max` restarts within `window`, past which the
/// member's end is final.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Restart {
    pub policy: RestartPolicy,
    pub max: u32,
    pub window: std::time::Duration,
}

/// The cap when the manifest names none: 3 restarts within 60 s.
pub const MAX_RESTARTS: u32 = 3;
pub const RESTART_WINDOW_SECS: u64 = 60;

impl Default for Restart {
    fn default() -> Self {
        Restart {
            policy: RestartPolicy::Never,
            max: MAX_RESTARTS,
            window: std::time::Duration::from_secs(RESTART_WINDOW_SECS),
        }
    }
}

impl Member {
    /// The port this member is pinned to: the formation's `port:`, else its manifest's
    /// `network.internal_port`; `None` means the OS assigns one.
    pub fn pinned_port(&self) -> Option<u16> {
        self.port.or(self.capsule.network.internal_port)
    }
}

/// A member as written, before its manifest is loaded.
struct Draft {
    name: String,
    written: PathBuf,
    manifest: PathBuf,
    calls: Vec<String>,
    port: Option<u16>,
    restart: Restart,
}

/// The formation `root`, read from `r.file` (absolute path `path`); member manifests are loaded
/// with `load_member`, given the member path joined to the folder of `r.file`.
pub fn read(
    r: &Reader,
    root: &Value,
    path: PathBuf,
    load_member: &dyn Fn(&Path) -> Result<Manifest, ManifestError>,
) -> Result<Formation, ManifestError> {
    let dir = path
        .parent()
        .map_or_else(|| PathBuf::from("/"), Path::to_path_buf);
    let top = r.mapping(
        Some(root),
        &KeyPath::default(),
        &["formation", "spend", "telemetry"],
    )?;
    let fpath = top.path("formation");
    let keys = ["name", "version", "entry", "members", "on_member_failure"];
    let f = r.mapping(top.get("formation"), &fpath, &keys)?;
    let name = name(r, f.get("name"), &f.path("name"), "name: review")?;
    let version = match f.get("version") {
        Some(v) => r.text(v, &f.path("version"), "write version: \"0.1.0\"")?,
        None => return Err(r.missing(&f.path("version"), "add version: \"0.1.0\"")),
    };
    let members_path = f.path("members");
    let example = "members: { lead: { manifest: lead/murmur.yaml } }";
    let Some(members_value) = f.get("members") else {
        return Err(r.missing(&members_path, format!("add {example}")));
    };
    let given_dir = r.file.parent().unwrap_or(Path::new(""));
    let mut drafts = Vec::new();
    for (member, v) in r.entries(Some(members_value), &members_path)? {
        drafts.push(draft(r, &member, v, &members_path, given_dir, &dir)?);
    }
    if drafts.is_empty() {
        return Err(r.error(
            ErrorCode::Formation,
            &members_path,
            format!("{members_path} is empty"),
            format!("declare at least one member, e.g. {example}"),
        ));
    }
    let names: Vec<&str> = drafts.iter().map(|d| d.name.as_str()).collect();
    let listing = format!("the members are {}", names.join(", "));
    let entry_path = f.path("entry");
    let entry = match f.get("entry") {
        Some(v) => r.text(v, &entry_path, "write entry: <member name>")?,
        None => {
            return Err(r.error(
                ErrorCode::Formation,
                &entry_path,
                format!("{entry_path} is missing"),
                format!("set entry to the member that takes mur run --task; {listing}"),
            ))
        }
    };
    if !names.contains(&entry.as_str()) {
        return Err(r.error(
            ErrorCode::Formation,
            &entry_path,
            format!("{entry_path} names {entry}, which is not a member"),
            did_you_mean(&entry, &names, &listing),
        ));
    }
    for d in &drafts {
        let calls_path = members_path.key(&d.name).key("calls");
        for (i, callee) in d.calls.iter().enumerate() {
            let at = calls_path.index(i);
            if callee == &d.name {
                return Err(r.error(
                    ErrorCode::Formation,
                    &at,
                    format!("{at}: member {} calls itself", d.name),
                    format!("remove {} from its own calls", d.name),
                ));
            }
            if !names.contains(&callee.as_str()) {
                let hint = format!(
                    "{}; declare {callee} under {members_path}, or remove it from calls",
                    did_you_mean(callee, &names, &listing)
                );
                return Err(r.error(
                    ErrorCode::Formation,
                    &at,
                    format!("{at} names {callee}, which is not a member of this formation"),
                    hint,
                ));
            }
        }
    }
    let mut members: Vec<Member> = Vec::with_capacity(drafts.len());
    let mut written = Vec::with_capacity(drafts.len());
    for d in drafts {
        let capsule = load_member(&d.written).map_err(|e| e.of_member(&d.name))?;
        written.push(d.written);
        let mut calls: Vec<String> = Vec::new();
        for callee in d.calls {
            if !calls.contains(&callee) {
                calls.push(callee);
            }
        }
        members.push(Member {
            name: d.name,
            manifest: d.manifest,
            calls,
            port: d.port,
            restart: d.restart,
            capsule,
        });
    }
    check_ports(r, &members, &members_path)?;
    if let Some(m) = members
        .iter()
        .find(|m| m.name == entry && m.restart.policy != RestartPolicy::Never)
    {
        let at = members_path.key(&m.name).key("restart");
        return Err(r.error(
            ErrorCode::Formation,
            &at,
            format!(
                "{at}: the entry member {} cannot restart: its end is the launch's end",
                m.name
            ),
            "remove restart from the entry; restart the members it calls",
        ));
    }
    check_peer_consent(r, &members, &written, &members_path, &entry)?;
    let on_member_failure = match f.get("on_member_failure") {
        Some(v) => match r.choice(v, &f.path("on_member_failure"), &["stop", "continue"])? {
            0 => OnMemberFailure::Stop,
            _ => OnMemberFailure::Continue,
        },
        None => OnMemberFailure::default(),
    };
    let spend = Box::new(super::spend::read(
        r,
        top.get("spend"),
        &top.path("spend"),
        None,
    )?);
    let telemetry = Box::new(super::telemetry::read(
        r,
        top.get("telemetry"),
        &top.path("telemetry"),
    )?);
    Ok(Formation {
        path,
        dir,
        name,
        version,
        entry,
        members,
        on_member_failure,
        spend,
        telemetry,
    })
}

fn draft(
    r: &Reader,
    member: &str,
    value: &Value,
    members_path: &KeyPath,
    given_dir: &Path,
    dir: &Path,
) -> Result<Draft, ManifestError> {
    let path = members_path.key(member);
    name(r, Some(&Value::String(member.to_string())), &path, "coder")?;
    let f = r.mapping(
        Some(value),
        &path,
        &[
            "manifest",
            "calls",
            "port",
            "restart",
            "max_restarts",
            "restart_window",
        ],
    )?;
    let manifest_path = f.path("manifest");
    let written = match f.get("manifest") {
        Some(v) => r.text(v, &manifest_path, "write manifest: worker/murmur.yaml")?,
        None => {
            let hint = "add manifest: <path to its murmur.yaml, relative to this file>";
            return Err(r.missing(&manifest_path, hint));
        }
    };
    let calls = match f.get("calls") {
        Some(v) => r.string_list(v, &f.path("calls"), "[coder, reviewer]")?,
        None => Vec::new(),
    };
    let port = match f.get("port") {
        Some(v) => Some(r.port(v, &f.path("port"), "write port: 52222, or remove it")?),
        None => None,
    };
    let mut restart = Restart::default();
    if let Some(v) = f.get("restart") {
        restart.policy =
            match r.choice(v, &f.path("restart"), &["never", "on_failure", "always"])? {
                0 => RestartPolicy::Never,
                1 => RestartPolicy::OnFailure,
                _ => RestartPolicy::Always,
            };
    }
    if let Some(v) = f.get("max_restarts") {
        let n = r.number(
            v,
            &f.path("max_restarts"),
            (1, 100),
            "write max_restarts: 3",
        )?;
        restart.max = u32::try_from(n).unwrap_or(MAX_RESTARTS);
    }
    if let Some(v) = f.get("restart_window") {
        let secs = r.number(
            v,
            &f.path("restart_window"),
            (1, 86_400),
            "write restart_window: 60 (seconds)",
        )?;
        restart.window = std::time::Duration::from_secs(secs);
    }
    Ok(Draft {
        name: member.to_string(),
        written: normalize(&given_dir.join(&written)),
        manifest: normalize(&dir.join(&written)),
        calls,
        port,
        restart,
    })
}

fn did_you_mean(written: &str, names: &[&str], listing: &str) -> String {
    match nearest(written, names) {
        Some(near) => format!("did you mean {near}? {listing}"),
        None => listing.to_string(),
    }
}

/// Two members pinned to one port (by `port:` or their manifest's `network.internal_port`).
fn check_ports(
    r: &Reader,
    members: &[Member],
    members_path: &KeyPath,
) -> Result<(), ManifestError> {
    let mut taken: HashMap<u16, &str> = HashMap::new();
    for m in members {
        let Some(port) = m.pinned_port() else {
            continue;
        };
        if let Some(first) = taken.insert(port, &m.name) {
            let (at, source) = match m.port {
                Some(_) => (members_path.key(&m.name).key("port"), String::new()),
                None => (
                    members_path.key(&m.name),
                    format!(" (its manifest sets network.internal_port: {port})"),
                ),
            };
            return Err(r.error(
                ErrorCode::Formation,
                &at,
                format!(
                    "members {first} and {} are both pinned to port {port}{source}",
                    m.name
                ),
                format!(
                    "give {} its own port: (e.g. port: {}), or remove the pin to let the OS \
                     assign one",
                    m.name,
                    port.saturating_add(1)
                ),
            ));
        }
    }
    Ok(())
}

/// Why a member whose lifecycle is `l` cannot be one others call: the key that decides it, what
/// it does, and the fix. A member that takes no task, or that ends after its first one (its
/// callers would find its door gone), would leave its callers without an answer — unless it is
/// the entry (`ends_all`), whose end ends the whole formation.
fn cannot_be_called(
    l: &Lifecycle,
    ends_all: bool,
) -> Option<(&'static str, &'static str, &'static str)> {
    if l.task_acceptance == TaskAcceptance::None {
        return Some((
            "lifecycle.task_acceptance: none",
            "it takes no task",
            "set lifecycle.task_acceptance: queue",
        ));
    }
    if l.after_task == AfterTask::Exit && !ends_all {
        return Some((
            "lifecycle.after_task: exit (the default under task_acceptance: single)",
            "it would end after its first answer, and its callers find its door gone",
            "set lifecycle.after_task: sleep",
        ));
    }
    None
}

/// Every called member must declare `exports.peer_tasks.accept: true`. `written` holds each
/// member's manifest path as the user named it, for the message.
fn check_peer_consent(
    r: &Reader,
    members: &[Member],
    written: &[PathBuf],
    members_path: &KeyPath,
    entry: &str,
) -> Result<(), ManifestError> {
    for caller in members {
        for callee_name in &caller.calls {
            let Some(index) = members.iter().position(|m| &m.name == callee_name) else {
                continue;
            };
            let callee = &members[index];
            // The entry's end is the formation's: nobody is left waiting on its door.
            let ends_all = callee.name == entry;
            if let Some((key, why, fix)) = cannot_be_called(&callee.capsule.lifecycle, ends_all) {
                let at = members_path.key(&callee.name);
                let file = written[index].display();
                return Err(r.error(
                    ErrorCode::Formation,
                    &at,
                    format!(
                        "member {} is called by {}, but its manifest {file} sets {key}: {why}",
                        callee.name, caller.name
                    ),
                    format!(
                        "{fix} in {file}, or remove {} from the calls of {}",
                        callee.name, caller.name
                    ),
                ));
            }
            if callee.capsule.exports.peer_tasks_accept {
                continue;
            }
            let at = members_path.key(&callee.name);
            let file = written[index].display();
            return Err(r.error(
                ErrorCode::Formation,
                &at,
                format!(
                    "member {} is called by {}, but its manifest {file} does not set \
                     exports.peer_tasks.accept: true",
                    callee.name, caller.name
                ),
                format!(
                    "add `exports: {{ peer_tasks: {{ accept: true }} }}` to {file}, or remove {} \
                     from the calls of {}",
                    callee.name, caller.name
                ),
            ));
        }
    }
    Ok(())
}
