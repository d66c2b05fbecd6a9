//! What an attempt is started with (DESIGN §8): its command line with the placeholders filled,
//! its environment (an allow list, the helpers' variables, the gateway's placeholder, W3C trace
//! context), its walls (the files wall, the forwarded ports) and its limits.

use std::path::Path;

use super::{env, preset, protect, route, Attempt, Driver, Given};
use crate::egress::Grant;
use crate::manifest::harness_limits::shown_size;
use crate::manifest::PromptMode;
use crate::process::files::FilesWall;
use crate::process::limits::{Limits, Reached, Tmp};
use crate::process::{Containment, Spec};
use crate::session::Session;

/// Fills a command's placeholders: `{session}`, `{guide}` (the guide's path), `{guide_text}`
/// (its text) and `{guide_toml}` (its text as a TOML string, for Codex's `-c key=value`).
pub(super) fn expand(arg: &str, a: &Attempt, guide_text: &str) -> String {
    let mut out = arg
        .replace("{session}", a.resume.as_deref().unwrap_or(""))
        .replace("{guide_text}", guide_text)
        .replace("{guide}", &a.guide.to_string_lossy());
    if out.contains("{guide_toml}") {
        // A JSON string is a TOML basic string: the same quotes and escapes.
        out = out.replace(
            "{guide_toml}",
            &serde_json::Value::from(guide_text).to_string(),
        );
    }
    out
}

/// The folder of the session's records that is a harness's private tmp (`TMPDIR`).
pub const TMP_DIR: &str = "harness-tmp";

/// The variable that names, for a whole run, more folders every harness may write (absolute
/// paths separated by `:`), as `harness.env`'s run-wide twin `MURMUR_HARNESS_ENV` does for
/// variables.
pub const WRITABLE_ENV: &str = "MURMUR_HARNESS_WRITABLE";

/// The files wall of an attempt of `session` (namespace mode), or of a shell command it runs
/// (`crate::shell`): it writes only its work folder, its private tmp, its CLI's state folder and
/// what `MURMUR_HARNESS_WRITABLE` names; of the records it sees only this session's own.
/// `command` is what runs (its files named by absolute path stay in sight).
pub(crate) fn files_wall(
    session: &Session,
    containment: &Containment,
    command: &[String],
) -> FilesWall {
    let records = containment
        .hidden
        .first()
        .and_then(|run| run.parent())
        .map(|home| home.join("records"));
    // What the harness runs stays in sight whatever a cover (a private /tmp) hides: the
    // session's own records, the manifest's folder, the folder of every file the driver's
    // command names by path, and `mur`'s own folder (the helpers).
    let mut keep = vec![session.records_dir.clone(), session.manifest.dir.clone()];
    let named = command
        .iter()
        .map(Path::new)
        .filter(|p| p.is_absolute())
        .chain(std::iter::once(session.mur_exe.as_path()));
    for path in named {
        let dir = if path.is_dir() {
            Some(path)
        } else {
            path.parent()
        };
        if let Some(dir) = dir.filter(|d| d.is_dir() && !keep.iter().any(|k| k == d)) {
            keep.push(dir.to_path_buf());
        }
    }
    if records.as_ref().is_some_and(|r| {
        session.workdir.starts_with(r) && !session.workdir.starts_with(&session.records_dir)
    }) {
        keep.push(session.workdir.clone());
    }
    let mut writable = vec![session.workdir.clone(), session.records_dir.join(TMP_DIR)];
    let state = session.records_dir.join(preset::STATE_DIR);
    if state.is_dir() {
        writable.push(state);
    }
    writable.extend(
        std::env::var_os(WRITABLE_ENV)
            .map(|v| {
                std::env::split_paths(&v)
                    .filter(|p| !p.as_os_str().is_empty())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default(),
    );
    let home = records.as_deref().and_then(Path::parent);
    FilesWall {
        secrets: protect::secrets(session, home),
        protect: protect::protected(session, command, &writable),
        records,
        keep,
        writable,
    }
}

/// A contained program's `PATH`: `mur`'s folder first (a CLI whose shell is a login shell must
/// still find the helpers), then the capsule's own.
pub(crate) fn path_with_mur(session: &Session) -> std::ffi::OsString {
    let mut path = session
        .mur_exe
        .parent()
        .map(|p| p.as_os_str().to_owned())
        .unwrap_or_default();
    if let Some(old) = std::env::var_os("PATH") {
        path.push(":");
        path.push(old);
    }
    path
}

pub(super) fn build_spec(
    session: &Session,
    d: &Driver,
    a: &Attempt,
    given: &Given,
    grant: &Grant,
    files: FilesWall,
) -> Option<Spec> {
    let guide_text = a.guide_text;
    let (program, rest) = d.command.split_first()?;
    let mut args: Vec<String> = rest.iter().map(|s| expand(s, a, guide_text)).collect();
    args.extend(d.preset.args.iter().cloned());
    if let (Some(model_args), Some(model)) = (&d.model_args, &session.manifest.inference.model) {
        args.extend(model_args.iter().map(|s| s.replace("{model}", model)));
    }
    if let (Some(resume), Some(_)) = (&d.resume, &a.resume) {
        args.extend(resume.iter().map(|s| expand(s, a, guide_text)));
    }
    if d.prompt == PromptMode::Arg {
        args.push(a.prompt.to_owned());
    }
    let path = path_with_mur(session);
    let mut env = env::allowed(
        std::env::vars_os(),
        &d.preset.pass,
        &session.manifest.harness.env,
    );
    // The provider's real key and address never reach a CLI that calls through the gateway,
    // whatever an allow list says.
    // Nor any variable that holds the real key under another name (the one a gateway block's
    // `${VAR}` reads, handed on by a run-wide allow list).
    if let Some(route) = &d.preset.route {
        let real = route.key.as_ref().map(|(_, k)| k.expose().as_bytes());
        env.retain(|(k, v)| {
            let holds_key = real.is_some_and(|key| {
                !key.is_empty() && v.as_encoded_bytes().windows(key.len()).any(|w| w == key)
            });
            !holds_key
                && !route::WITHHELD.contains(&k.as_str())
                && !route.withheld.iter().any(|w| w == k)
        });
    }
    env.extend([
        ("PATH".into(), path),
        ("MURMUR_SESSION_ID".into(), session.id.as_str().into()),
        ("MURMUR_TASK_ID".into(), a.task_id.into()),
        ("MURMUR_CONTEXT_ID".into(), a.context_id.into()),
        ("MURMUR_MESSAGE_ID".into(), a.message_id.into()),
        ("MURMUR_DOOR_URL".into(), session.inside_url().into()),
        ("MURMUR_TASK_TOKEN".into(), a.token.into()),
        ("MURMUR_GUIDE".into(), a.guide.into()),
        ("TMPDIR".into(), session.records_dir.join(TMP_DIR).into()),
    ]);
    env.extend(d.preset.env.iter().cloned());
    if let (Some(route), Some(p)) = (&d.preset.route, given.placeholder) {
        env.extend(
            route
                .placeholder_env(&p.key)
                .into_iter()
                .map(|(k, v)| (k, v.into())),
        );
    }
    if let Some(s) = &a.resume {
        env.push(("MURMUR_HARNESS_SESSION".into(), s.into()));
    }
    // W3C Trace Context for a CLI that continues a trace from its environment.
    for (name, value) in crate::telemetry::propagation::headers_of(a.span) {
        env.push((name.to_ascii_uppercase(), value.into()));
    }
    Some(Spec {
        program: program.clone(),
        args,
        cwd: session.workdir.clone(),
        env,
        jail: Some(grant.ports()),
        files: Some(files),
        limits: Some(limits_of(session)),
    })
}

/// An attempt's bounds: the manifest's `harness.limits`, its tmp bound on the private tmp.
pub(super) fn limits_of(session: &Session) -> Limits {
    let written = &session.manifest.harness.limits;
    Limits {
        pids: written.pids,
        memory: written.memory,
        tmp: Some(Tmp {
            dir: session.records_dir.join(TMP_DIR),
            bytes: written.tmp,
        }),
    }
}

/// The task's status when its attempt reached a limit, naming the key that set it.
pub(super) fn limit_sentence(session: &Session, reached: Reached) -> String {
    let written = &session.manifest.harness.limits;
    match reached {
        Reached::Pids => format!(
            "the harness reached its pids limit (harness.limits.pids: {})",
            written.pids
        ),
        Reached::Memory => format!(
            "the harness reached its memory limit (harness.limits.memory: \"{}\")",
            shown_size(written.memory)
        ),
    }
}
