//! The one place that starts and ends OS processes (DESIGN §2, §3): children set up with their
//! own group and a parent-death signal, harness attempts run under a keeper in the containment
//! the kernel allows, and /proc sweeps where the kernel does not end a tree by itself. Both the
//! supervisor (capsule processes) and the harness transport (attempts) go through here.

mod contained;
pub mod containment;
pub mod files;
pub mod keeper;
mod keeper_args;
pub mod keeper_exe;
pub mod limits;
mod lockdown;
mod masks;
pub mod netns;
mod order;
pub mod ready;
mod seccomp;
mod setup;
pub mod tree;
pub mod zygote;

pub use contained::{Contained, Exit, Spec};
pub use containment::{Containment, Mode};
pub use setup::{become_subreaper, parent_is_gone, set_inheritable, settle_spawned, ChildSetup};

/// How murmur starts itself again (keepers, the containment probe): the binary this process
/// runs, whatever has become of the path it was started by.
pub const SELF_EXE: &str = "/proc/self/exe";

/// Held while a process is started with descriptors it inherits. A keeper inherits its status
/// pipe (a capsule its listener and control socket) because close-on-exec is lifted for its
/// spawn; any other spawn in that moment would inherit them too, and hold them open for as long
/// as it lived. Held for a spawn only, never across an await.
static SPAWNING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Takes [`SPAWNING`] for one spawn.
pub fn spawning() -> std::sync::MutexGuard<'static, ()> {
    SPAWNING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// True inside a harness attempt: its task token is in the environment, or one of its
/// ancestors is a keeper (which a harness cannot leave: orphans land on the keeper).
pub fn inside_harness() -> bool {
    if std::env::var_os("MURMUR_TASK_TOKEN").is_some_and(|t| !t.is_empty()) {
        return true;
    }
    let mut pid = std::process::id() as i32;
    for _ in 0..64 {
        let Some(parent) = tree::parent_pid(pid).filter(|p| *p > 0) else {
            return false;
        };
        if is_keeper(parent) {
            return true;
        }
        if parent == 1 {
            return false;
        }
        pid = parent;
    }
    false
}

fn is_keeper(pid: i32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| c.split(|b| *b == 0).nth(1) == Some(keeper::SUBCOMMAND.as_bytes()))
        .unwrap_or(false)
}
