//! `mur run`: read the manifest (a capsule, or a formation of them), check that this release
//! can run every member, decide the containment, and hand the plan to `formation::start`, which
//! starts it, announces it and stops it cleanly (DESIGN §3, §7).

use std::path::{Path, PathBuf};

use capsule::manifest::TaskAcceptance;
use capsule::process::Containment;
use capsule::runtime::LaunchTask;

use crate::error::{CliError, CliResult, Code};
use crate::formation::{self, Plan};
use crate::records;

pub struct RunArgs {
    pub manifest: PathBuf,
    /// `--resume ADDRESS`: a kept launch to bring back instead of the manifest.
    pub resume: Option<String>,
    pub task: Option<String>,
    pub context: Option<String>,
    pub forget_session: bool,
    pub workdir: Option<PathBuf>,
    pub json: bool,
}

/// How the members' harness attempts (and http members' shell commands) will be contained
/// (DESIGN §3); `None` when no member starts a program.
fn contain(plan: &Plan) -> CliResult<Option<Containment>> {
    let runs_tasks = plan.members.iter().any(|m| m.manifest.runs_contained());
    if !runs_tasks {
        return Ok(None);
    }
    let exe = std::env::current_exe().unwrap_or_default();
    // The probe hides the folder as an attempt will, so it must exist to be tried.
    let run_dir = records::run_dir();
    let _ = capsule::private::create_dir_all(&run_dir);
    let containment = Containment::detect(&exe, vec![run_dir]).map_err(|why| {
        CliError::new(
            Code::Containment,
            why,
            "unset MURMUR_CONTAINMENT (or set it to auto) to use the fallback; `mur install` says which mode is in force",
        )
    })?;
    let walls = containment.walls();
    for m in &plan.members {
        if let Some((wall, state)) = walls.first_missing(&m.manifest.harness.require) {
            return Err(CliError::new(
                Code::Containment,
                format!(
                    "{} requires the {} wall (harness.require), which is {state}",
                    m.manifest.path.display(),
                    wall.as_str()
                ),
                "run it where the kernel grants unprivileged user, PID, mount and network namespaces (`mur install` lists the walls), or drop that wall from harness.require",
            ));
        }
    }
    Ok(Some(containment))
}

/// `--task` goes to the (entry) capsule: one that takes no task is refused before anything
/// starts, naming the key that decides it (the launch would otherwise wait for ever).
fn takes_the_task(plan: &Plan) -> CliResult<()> {
    let Some(entry) = plan.members.get(plan.entry) else {
        return Ok(());
    };
    if entry.manifest.lifecycle.task_acceptance != TaskAcceptance::None {
        return Ok(());
    }
    let who = match plan.is_formation() {
        true => format!(
            "the entry member {} ({})",
            entry.name,
            entry.manifest.path.display()
        ),
        false => entry.manifest.path.display().to_string(),
    };
    Err(CliError::new(
        Code::BadTask,
        format!("{who} sets lifecycle.task_acceptance: none: it takes no task, so --task has nowhere to go"),
        "set lifecycle.task_acceptance: single or queue, or launch it without --task",
    ))
}

fn task_text(task: &str) -> CliResult<String> {
    let path = Path::new(task);
    if path.is_file() {
        return std::fs::read_to_string(path).map_err(|e| {
            CliError::new(
                Code::BadTask,
                format!("cannot read the task file {task}: {e}"),
                "pass readable UTF-8 text, or the task itself",
            )
        });
    }
    Ok(task.to_owned())
}

fn workdir(dir: Option<&Path>) -> CliResult<PathBuf> {
    let dir = match dir {
        Some(d) => d.to_path_buf(),
        None => std::env::current_dir().map_err(|e| {
            CliError::new(
                Code::BadWorkdir,
                format!("cannot read the current folder: {e}"),
                "run mur from an existing folder",
            )
        })?,
    };
    dir.canonicalize()
        .ok()
        .filter(|d| d.is_dir())
        .ok_or_else(|| {
            CliError::new(
                Code::BadWorkdir,
                format!("--workdir {} is not a folder", dir.display()),
                "create it first, or pass an existing folder",
            )
        })
}

/// The formation's `telemetry:` block, as the OpenTelemetry variables `mur run`'s environment
/// leaves unset: every capsule and sub-capsule of the launch inherits them (docs/telemetry.md).
/// Then the settings in force are checked once, so a wrong endpoint stops the launch here
/// rather than each capsule at its start. Sound to set: `mur run`'s runtime is one thread, and
/// nothing has been started yet.
fn telemetry_from(plan: &Plan) -> CliResult<()> {
    if let Some(f) = &plan.formation {
        let block = capsule::telemetry::config::from_block(&f.telemetry, |k| std::env::var(k).ok());
        for (name, value) in block {
            std::env::set_var(name, value);
        }
    }
    let who = capsule::telemetry::Identity {
        session_id: "",
        capsule: "mur run",
        formation: plan
            .formation
            .as_ref()
            .map(|f| (f.name.as_str(), "mur run")),
    };
    // `mur run`'s own spans (a member's restart) go where its capsules' go; a drop is said on
    // stderr, and there is no trace of its own to count it in.
    capsule::telemetry::start(&who, std::sync::Arc::new(|_| {}))
        .map(|_| ())
        .map_err(|why| {
            CliError::new(
                Code::BadArgument,
                why,
                "fix the variable (or the formation's telemetry block), or unset it",
            )
        })
}

pub async fn run(args: RunArgs) -> CliResult<i32> {
    let resume = args
        .resume
        .as_deref()
        .map(formation::resume::resolve)
        .transpose()?;
    let manifest = resume
        .as_ref()
        .map_or(args.manifest.clone(), |k| k.manifest.clone());
    let plan = Plan::runnable(&manifest)?;
    telemetry_from(&plan)?;
    // Every capsule reads the daily ceilings; one that does not read stops the launch here,
    // before anything starts, rather than each capsule at its start.
    capsule::gateway::DailyCeiling::from_env()
        .map_err(|why| CliError::new(Code::BadArgument, why, "fix the variable, or unset it"))?;
    if args.task.is_some() {
        takes_the_task(&plan)?;
    }
    let containment = contain(&plan)?;
    let task = match &args.task {
        Some(t) => Some(LaunchTask {
            text: task_text(t)?,
            context_id: args.context.clone(),
            forget_session: args.forget_session,
            // `mur run` inside a traced job (a CI step, a harness) continues its trace.
            traceparent: std::env::var("TRACEPARENT").ok(),
            tracestate: std::env::var("TRACESTATE").ok(),
        }),
        None => None,
    };
    let workdir = match &resume {
        Some(kept) => workdir(Some(&kept.workdir))?,
        None => workdir(args.workdir.as_deref())?,
    };
    let options = formation::Options {
        task,
        resume,
        workdir,
        json: args.json,
        containment,
    };
    let ended = formation::start::run(plan, options).await;
    // Its own spans (restarts) go before it exits, within a bound.
    capsule::telemetry::flush(std::time::Duration::from_secs(3)).await;
    ended
}
