//! One keeper kept ready (issue 21): most of a jailed attempt's start is the keeper's own — its
//! exec, its namespaces, its walls — and none of it depends on the task. So as soon as an
//! attempt has its keeper, the next attempt's keeper is started, builds fresh namespaces and
//! walls while this attempt runs, and its init waits on a pipe for the program, arguments and environment (the task token
//! among them: the `Order`). A task takes it if its walls are the ones it was built with, and
//! hands the order over; anything else (no ready keeper, other walls, a keeper that died) starts
//! one the ordinary way. A ready keeper is used once: every attempt still gets namespaces of its
//! own. It is no task, holds no token, and dies with the capsule (its parent-death signal), or
//! when its order pipe closes unsent.

use std::ffi::OsString;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use super::contained::{Contained, Spec, Walls};
use super::containment::{Containment, Mode};

impl Contained {
    /// Starts `spec` under a keeper in `containment`, with piped stdin, stdout and stderr. In
    /// namespace mode the ready keeper (`ready`) is taken when it was built with these walls,
    /// and the next attempt's is started as soon as this one has its own: it builds its walls
    /// while this attempt runs, and waits through the idle time after it.
    ///
    /// The keeper's parent-death signal fires when the *thread* that started it ends, so this
    /// must run on a thread that lives as long as the capsule (a runtime worker), never in
    /// `spawn_blocking`, whose idle threads exit and would take their keepers with them.
    pub fn spawn(containment: &Containment, spec: Spec) -> std::io::Result<Contained> {
        let namespaces = containment.mode == Mode::Namespaces;
        let walls = Walls {
            cwd: spec.cwd.clone(),
            jail: spec.jail.clone().filter(|_| namespaces),
            files: spec.files.clone().filter(|_| namespaces),
            hide: containment.hidden.clone(),
            limits: spec.limits.clone().map(|mut l| {
                l.tmp = l.tmp.filter(|_| namespaces);
                l
            }),
            env: between_tasks(&spec.env),
        };
        if namespaces {
            if let Some(mut keeper) = take(&walls) {
                match keeper.hand_over(&spec) {
                    Ok(()) => {
                        prepare_soon(walls);
                        return Ok(keeper);
                    }
                    Err(_) => keeper.discard(),
                }
            }
        }
        let program = (
            spec.program.into(),
            spec.args.into_iter().map(Into::into).collect(),
        );
        let keeper = Contained::start(namespaces, &walls, &spec.env, Some(program))?;
        if namespaces {
            prepare_soon(walls);
        }
        Ok(keeper)
    }
}

/// Of a task's environment, what a keeper made ready before it may hold: all but the
/// `MURMUR_` variables, which name the task (its token among them), and `TRACEPARENT` /
/// `TRACESTATE`, which name its span. The init swaps it for the
/// task's whole environment at hand-over; this much is what `/proc/1/environ` shows in the
/// namespace, as the same variables did before.
pub(super) fn between_tasks(env: &[(String, OsString)]) -> Vec<(String, OsString)> {
    env.iter()
        .filter(|(k, _)| !k.starts_with("MURMUR_") && k != "TRACEPARENT" && k != "TRACESTATE")
        .cloned()
        .collect()
}

/// The one ready keeper, and the walls it was built with.
static READY: Mutex<Option<(Walls, Contained)>> = Mutex::new(None);
/// Set when the capsule is ending: no keeper is made ready any more.
static CLOSED: AtomicBool = AtomicBool::new(false);

fn slot() -> std::sync::MutexGuard<'static, Option<(Walls, Contained)>> {
    READY
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The ready keeper, if it was built with `walls` and is still waiting; any other is ended.
pub(super) fn take(walls: &Walls) -> Option<Contained> {
    let (built, mut keeper) = slot().take()?;
    if built == *walls && keeper.waiting() {
        return Some(keeper);
    }
    keeper.discard();
    None
}

/// Starts the next attempt's keeper with `walls`, to wait for its task. Called on a runtime
/// worker (the parent-death signal follows the thread that started the keeper). A keeper that
/// cannot be started is no error: the next task starts its own.
pub(super) fn prepare(walls: Walls) {
    if CLOSED.load(Ordering::SeqCst) {
        return;
    }
    let Ok(keeper) = Contained::ready(&walls) else {
        return;
    };
    let old = slot().replace((walls, keeper));
    if let Some((_, old)) = old {
        old.discard();
    }
}

/// [`prepare`], once the caller has yielded: the attempt just started goes first.
pub(super) fn prepare_soon(walls: Walls) {
    tokio::spawn(async move { prepare(walls) });
}

/// Ends the ready keeper, and makes no other: the capsule is ending. Resolves once it is
/// reaped and its cgroup removed (bounded: a keeper that does not end is killed).
pub async fn close() {
    CLOSED.store(true, Ordering::SeqCst);
    let keeper = slot().take();
    if let Some((_, keeper)) = keeper {
        keeper.discard_now().await;
    }
    super::limits::close();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ready_keeper_holds_nothing_that_names_a_task() {
        let env = |pairs: &[&str]| -> Vec<(String, OsString)> {
            pairs
                .iter()
                .map(|k| (k.to_string(), OsString::from("v")))
                .collect()
        };
        let task = env(&[
            "PATH",
            "MURMUR_TASK_TOKEN",
            "TRACEPARENT",
            "TRACESTATE",
            "HOME",
        ]);
        assert_eq!(between_tasks(&task), env(&["PATH", "HOME"]));
    }
}
