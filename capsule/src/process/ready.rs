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
use std::fs::File;
use std::io::Read;
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use super::contained::Contained;
use super::files::FilesWall;
use super::keeper::KeeperArgs;

/// What a keeper builds before any task: everything a ready keeper must match to be taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Walls {
    /// The work folder (the keeper starts in it; the files wall is built around it).
    pub cwd: PathBuf,
    /// The loopback ports forwarded into the network namespace (`None`: not jailed).
    pub jail: Option<Vec<u16>>,
    pub files: Option<FilesWall>,
    pub hide: Vec<PathBuf>,
    /// The attempt's bounds (its cgroup is made with them, its tmp mounted with them).
    pub limits: Option<super::limits::Limits>,
    /// The environment the keeper itself runs with (`between_tasks`).
    pub env: Vec<(String, OsString)>,
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

/// What a ready keeper is sent when its task arrives.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Order {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
}

impl Order {
    /// Each field NUL-terminated (none can hold a NUL: exec refuses them): the program, the
    /// number of arguments, the arguments, then `KEY=VALUE` for each variable.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut field = |bytes: &[u8]| {
            out.extend_from_slice(bytes);
            out.push(0);
        };
        field(self.program.as_bytes());
        field(self.args.len().to_string().as_bytes());
        for a in &self.args {
            field(a.as_bytes());
        }
        for (k, v) in &self.env {
            let mut pair = k.as_bytes().to_vec();
            pair.push(b'=');
            pair.extend_from_slice(v.as_bytes());
            field(&pair);
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Option<Order> {
        let body = bytes.strip_suffix(&[0])?;
        let mut fields = body.split(|b| *b == 0);
        let text = |b: &[u8]| OsString::from_vec(b.to_vec());
        let program = text(fields.next().filter(|p| !p.is_empty())?);
        let count: usize = std::str::from_utf8(fields.next()?).ok()?.parse().ok()?;
        let args = (0..count)
            .map(|_| fields.next().map(text))
            .collect::<Option<Vec<_>>>()?;
        let env = fields
            .map(|pair| {
                let at = pair.iter().position(|b| *b == b'=').filter(|at| *at > 0)?;
                Some((text(&pair[..at]), text(&pair[at + 1..])))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Order { program, args, env })
    }

    /// In the init: reads the order to its end (the capsule closes its end once written).
    /// `None` when the pipe closed unsent or the order is malformed.
    pub fn receive(fd: RawFd) -> Option<Order> {
        // SAFETY: the keeper was started with this descriptor for this one read; nothing else
        // in this process owns it.
        let mut pipe = unsafe { File::from_raw_fd(fd) };
        let mut bytes = Vec::new();
        pipe.read_to_end(&mut bytes).ok()?;
        Order::decode(&bytes)
    }

    /// Takes the order on: this process's environment becomes the program's (the harness
    /// inherits it, and its program is looked up on its PATH), and the keeper's arguments name
    /// the program. The init is single-threaded, so changing the environment is sound.
    pub fn apply(self, args: &KeeperArgs) -> KeeperArgs {
        for (key, _) in std::env::vars_os() {
            std::env::remove_var(key);
        }
        for (key, value) in &self.env {
            std::env::set_var(key, value);
        }
        KeeperArgs {
            program: self.program,
            args: self.args,
            ..args.clone()
        }
    }
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

    #[test]
    fn orders_round_trip() {
        let order = Order {
            program: "python3".into(),
            args: vec!["-c".into(), "print(1)\n=x".into(), "".into()],
            env: vec![
                ("MURMUR_TASK_TOKEN".into(), "tok=en".into()),
                ("EMPTY".into(), "".into()),
            ],
        };
        assert_eq!(Order::decode(&order.encode()), Some(order));
    }

    #[test]
    fn malformed_orders_are_refused() {
        for bad in [
            &b""[..],
            b"prog",
            b"\x000\x00",
            b"prog\x00x\x00",
            b"prog\x002\x00one\x00",
            b"prog\x000\x00NOEQUALS\x00",
            b"prog\x000\x00=v\x00",
        ] {
            assert_eq!(Order::decode(bad), None, "{bad:?}");
        }
    }
}
