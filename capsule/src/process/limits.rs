//! Bounds on one attempt's processes (DESIGN §8, docs/containment.md "Limits"): how many it may
//! run, how much memory they may hold together, and how much its private tmp may take. The
//! keeper puts itself — and so the init, the harness and everything they start — in a cgroup of
//! its own before it builds anything else, under the capsule's own cgroup:
//! - cgroup v2, where the capsule's cgroup delegates `pids` and `memory` to its children (its
//!   `cgroup.subtree_control` lists them);
//! - else cgroup v1's `pids` and `memory` hierarchies, each where it is writable;
//! - else, for what neither gives, rlimits: `RLIMIT_NPROC` (counted per user in the attempt's
//!   user namespace, so namespace mode only; root is not held by it) and `RLIMIT_DATA` (per
//!   process, not per attempt). Reaching an rlimit is not counted anywhere murmur can read.
//!
//! The tmp bound is a tmpfs of that size mounted over the private tmp in the attempt's mount
//! namespace (namespace mode only): it starts empty and goes with the attempt.
//!
//! The capsule names each keeper's cgroup (`murmur-<capsule pid>-<n>`, a [`Slot`]) and, once
//! the keeper is gone, reads from its counters whether a limit was reached since it last
//! looked. An empty cgroup goes back to the capsule's pool for a later keeper: making and
//! removing a v1 memory cgroup per attempt cost about a millisecond of a 2-core machine's time
//! a task (BENCHMARKS.md), moving a keeper into one costs next to nothing. The capsule removes
//! its pool when it ends; what a killed capsule left is removed by the next capsule's first
//! attempt, once nothing is in it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::mount::{mount, MsFlags};

/// Where the kernel's cgroup file systems are mounted.
const CGROUP_ROOT: &str = "/sys/fs/cgroup";
/// The prefix of every cgroup an attempt is given.
const PREFIX: &str = "murmur-";
/// How long the capsule retries removing a cgroup whose last process is still being reaped.
const REMOVE_WITHIN: Duration = Duration::from_millis(200);

/// One attempt's bounds, as the keeper is told them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Processes (and threads) at once, the keeper's own included.
    pub pids: u64,
    /// Bytes of memory the attempt's processes hold together.
    pub memory: u64,
    /// The private tmp as a tmpfs of this many bytes (`None`: left as it is).
    pub tmp: Option<Tmp>,
}

/// The private tmp's bound.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tmp {
    pub dir: PathBuf,
    pub bytes: u64,
}

/// A limit an attempt reached, as its cgroup counted it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reached {
    /// A fork or clone was refused at `pids`.
    Pids,
    /// The kernel killed one of its processes at `memory`.
    Memory,
}

/// A cgroup controller murmur bounds an attempt with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Controller {
    Pids,
    Memory,
}

impl Controller {
    const BOTH: [Controller; 2] = [Controller::Pids, Controller::Memory];

    fn name(self) -> &'static str {
        match self {
            Controller::Pids => "pids",
            Controller::Memory => "memory",
        }
    }
}

/// One attempt's cgroup folders: one in v2, or one per v1 hierarchy (each with what it bounds).
#[derive(Debug, Default)]
struct Cgroup {
    dirs: Vec<(Vec<Controller>, Version, PathBuf)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

/// The name of the capsule `capsule`'s cgroup number `n`: `murmur-<pid>-<start>-<n>`, where
/// `start` is when the capsule's process started (`/proc/<pid>/stat`, in clock ticks since
/// boot). PIDs come round again (`pid_max` is often 32768): a cgroup an ended capsule left must
/// never be taken, limits and counts as they were, by a new capsule given the same PID.
fn name(capsule: i32, start: u64, n: u32) -> String {
    format!("{PREFIX}{capsule}-{start}-{n}")
}

/// When process `pid` started, in clock ticks since boot (field 22 of `/proc/<pid>/stat`);
/// `None` for a process that is not there.
fn started(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold anything: count after it.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// When this capsule's process started, read once.
fn own_start() -> u64 {
    static START: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *START.get_or_init(|| started(std::process::id() as i32).unwrap_or(0))
}

/// The capsule a cgroup name belongs to, as its PID and start.
fn owner_of(name: &str) -> Option<(i32, u64)> {
    let mut parts = name.strip_prefix(PREFIX)?.split('-');
    let pid = parts.next()?.parse().ok()?;
    let start = parts.next()?.parse().ok()?;
    Some((pid, start))
}

/// What the attempt's cgroup bounds; the rest is left to rlimits ([`Bounded::hold_rest`]).
#[derive(Clone, Debug, Default)]
pub struct Bounded {
    limits: Option<Limits>,
    by_cgroup: Vec<Controller>,
}

/// In the keeper, first thing: the cgroup `cgroup` the capsule named, with `limits`. Never
/// fails the attempt: what no cgroup bounds, [`Bounded::hold_rest`] bounds with rlimits.
pub fn enter(limits: Option<&Limits>, cgroup: Option<&str>) -> Bounded {
    let Some(limits) = limits else {
        return Bounded::default();
    };
    Bounded {
        limits: Some(limits.clone()),
        by_cgroup: cgroup.map(|c| join_cgroup(limits, c)).unwrap_or_default(),
    }
}

impl Bounded {
    /// Rlimits for what the cgroup does not bound: `RLIMIT_DATA` for memory, and, inside the
    /// attempt's user namespace only (`in_namespace`), `RLIMIT_NPROC` for pids. Set after the
    /// namespace is entered: the kernel holds the namespace's creator to the `RLIMIT_NPROC` it
    /// had when it made it, counting every process of the user, so a limit set before would
    /// count the user's other processes too. Outside a namespace it would, so none is set.
    pub fn hold_rest(&self, in_namespace: bool) {
        let Some(limits) = &self.limits else {
            return;
        };
        if in_namespace && !self.by_cgroup.contains(&Controller::Pids) {
            set_rlimit(libc::RLIMIT_NPROC, limits.pids);
        }
        if !self.by_cgroup.contains(&Controller::Memory) {
            set_rlimit(libc::RLIMIT_DATA, limits.memory);
        }
    }
}

/// Makes the attempt's cgroup `leaf` (or takes it as a keeper before left it) and moves this
/// process into it; answers what it bounds.
fn join_cgroup(limits: &Limits, leaf: &str) -> Vec<Controller> {
    let parents = parents();
    let mut bounded: Vec<Controller> = Vec::new();
    if let Some(dir) = &parents.v2 {
        if make(&dir.join(leaf), Version::V2, &Controller::BOTH, limits).is_ok() {
            bounded.extend(Controller::BOTH);
        }
    }
    if bounded.is_empty() {
        for (c, parent) in &parents.v1 {
            if make(&parent.join(leaf), Version::V1, &[*c], limits).is_ok() {
                bounded.push(*c);
            }
        }
    }
    bounded
}

/// Makes the cgroup `dir` with `limits` for `controllers`, and moves this process into it; a
/// cgroup that cannot be completed is removed again.
fn make(
    dir: &Path,
    v: Version,
    controllers: &[Controller],
    limits: &Limits,
) -> std::io::Result<()> {
    // A cgroup a keeper before left goes back to the pool as it is, its limits set (a capsule's
    // attempts all have the same): taken again, it is only joined.
    let fresh = match std::fs::create_dir(dir) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
        Err(e) => return Err(e),
    };
    let filled = (|| {
        for c in controllers.iter().filter(|_| fresh) {
            match (c, v) {
                (Controller::Pids, _) => write(dir, "pids.max", limits.pids)?,
                (Controller::Memory, Version::V2) => {
                    write(dir, "memory.max", limits.memory)?;
                    // Swap would let the attempt hold more than its memory.
                    let _ = write(dir, "memory.swap.max", 0);
                }
                (Controller::Memory, Version::V1) => {
                    // memsw may never be below the limit, and a new cgroup's are unlimited: the
                    // limit first, then memsw (where swap is accounted) to match it.
                    write(dir, "memory.limit_in_bytes", limits.memory)?;
                    let _ = write(dir, "memory.memsw.limit_in_bytes", limits.memory);
                }
            }
        }
        write(dir, join_file(v), 0)
    })();
    if filled.is_err() && fresh {
        let _ = std::fs::remove_dir(dir);
    }
    filled
}

/// The file a process writes 0 to to join a cgroup. In v1, `tasks`: it moves the calling thread
/// alone, which the kernel does without its global threadgroup lock, whereas `cgroup.procs` takes
/// that lock for writing and so waits for an RCU grace period each time the lock has been idle
/// for one: 5–17 ms on a busy 2-core machine against 0.4 ms (BENCHMARKS.md). The keeper is
/// single-threaded when it joins (it unshares a user namespace next, which requires it), so its
/// one thread is the whole process. v2's `cgroup.threads` would need a threaded cgroup.
fn join_file(v: Version) -> &'static str {
    match v {
        Version::V1 => "tasks",
        Version::V2 => "cgroup.procs",
    }
}

fn write(dir: &Path, file: &str, value: u64) -> std::io::Result<()> {
    std::fs::write(dir.join(file), value.to_string())
}

fn set_rlimit(resource: libc::__rlimit_resource_t, value: u64) {
    let limit = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    // SAFETY: setrlimit reads the one struct it is given. Lowering a limit does not fail for a
    // process that holds it; if it did, the attempt would run with the limit it inherited.
    unsafe { libc::setrlimit(resource, &limit) };
}

/// Where this process makes its attempts' cgroups: its own v2 cgroup where it delegates both
/// controllers, and its cgroup in each v1 hierarchy that is mounted.
#[derive(Debug)]
struct Parents {
    v2: Option<PathBuf>,
    v1: Vec<(Controller, PathBuf)>,
}

/// [`Parents`], found once: a capsule's own cgroup stays where it was started, and settling an
/// attempt is on its task's path.
fn parents() -> &'static Parents {
    static PARENTS: std::sync::OnceLock<Parents> = std::sync::OnceLock::new();
    PARENTS.get_or_init(|| {
        let own = own_cgroups();
        Parents {
            v2: v2_parent(&own),
            v1: Controller::BOTH
                .iter()
                .filter_map(|c| Some((*c, v1_parent(&own, *c)?)))
                .collect(),
        }
    })
}

/// This process's cgroups, from /proc/self/cgroup: `(controllers, path)` per hierarchy
/// (empty controllers: v2's unified one).
fn own_cgroups() -> Vec<(String, String)> {
    let text = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            Some((controllers.to_owned(), path.to_owned()))
        })
        .collect()
}

/// The folder of this process's v2 cgroup, where it delegates both controllers to children.
fn v2_parent(own: &[(String, String)]) -> Option<PathBuf> {
    let (_, path) = own.iter().find(|(c, _)| c.is_empty())?;
    let root = Path::new(CGROUP_ROOT);
    // A pure v2 system mounts it at the root; a hybrid one under `unified`.
    let mount = [root.to_path_buf(), root.join("unified")]
        .into_iter()
        .find(|m| m.join("cgroup.controllers").is_file())?;
    let dir = mount.join(path.trim_start_matches('/'));
    let delegated = std::fs::read_to_string(dir.join("cgroup.subtree_control")).ok()?;
    let words: Vec<&str> = delegated.split_whitespace().collect();
    Controller::BOTH
        .iter()
        .all(|c| words.contains(&c.name()))
        .then_some(dir)
}

/// The folder of this process's cgroup in the v1 hierarchy of `c`, where it is mounted.
fn v1_parent(own: &[(String, String)], c: Controller) -> Option<PathBuf> {
    let (_, path) = own
        .iter()
        .find(|(names, _)| names.split(',').any(|n| n == c.name()))?;
    let dir = Path::new(CGROUP_ROOT)
        .join(c.name())
        .join(path.trim_start_matches('/'));
    dir.join("cgroup.procs").is_file().then_some(dir)
}

/// What a cgroup's counters said when last read: forks refused at `pids.max`, processes the
/// kernel killed at the memory limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counts {
    pids_max: u64,
    oom_kills: u64,
}

/// One cgroup name of this capsule's, for one keeper at a time, and what its counters said
/// when it was handed out.
#[derive(Debug)]
pub struct Slot {
    name: String,
    seen: Counts,
}

/// This capsule's cgroups no keeper is in.
static FREE: Mutex<Vec<Slot>> = Mutex::new(Vec::new());
/// The number of the next cgroup this capsule names.
static NEXT: AtomicU32 = AtomicU32::new(0);

fn free() -> std::sync::MutexGuard<'static, Vec<Slot>> {
    FREE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Slot {
    /// A cgroup for the next keeper: one a keeper before left, or a new name (the keeper makes
    /// it).
    pub fn take() -> Slot {
        let reused = free().pop();
        reused.unwrap_or_else(|| Slot {
            name: name(
                std::process::id() as i32,
                own_start(),
                NEXT.fetch_add(1, Ordering::Relaxed),
            ),
            seen: Counts::default(),
        })
    }

    /// The name the keeper is told (`--cgroup`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Once its keeper is gone: the limit reached since the slot was handed out, if any. The
    /// cgroup goes back to the pool when nothing is left in it; one still holding a process is
    /// removed once that is gone (retried briefly on a blocking thread, else left for
    /// [`sweep`]).
    pub fn settle(mut self) -> Option<Reached> {
        let cgroup = Cgroup::named(&self.name);
        let now = cgroup.counts();
        let reached = if now.pids_max > self.seen.pids_max {
            Some(Reached::Pids)
        } else if now.oom_kills > self.seen.oom_kills {
            Some(Reached::Memory)
        } else {
            None
        };
        self.seen = now;
        if cgroup.empty() {
            free().push(self);
        } else {
            // A namespace's last processes are ended by the kernel just after its init: the
            // cgroup is most often empty a moment later, and goes back to the pool then (making
            // a new one costs a millisecond). One still busy past the bound is removed instead.
            let back = move || match cgroup.emptied_within(REMOVE_WITHIN) {
                true => free().push(self),
                false => cgroup.remove(),
            };
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => drop(rt.spawn_blocking(back)),
                Err(_) => back(),
            }
        }
        reached
    }
}

/// Removes this capsule's pool: it is ending, and no keeper will take one again.
pub fn close() {
    for slot in free().drain(..) {
        Cgroup::named(&slot.name).remove();
    }
}

impl Cgroup {
    /// In the capsule: the folders of its cgroup `leaf`, where a keeper made them.
    fn named(leaf: &str) -> Cgroup {
        let parents = parents();
        let mut dirs = Vec::new();
        if let Some(dir) = parents
            .v2
            .as_ref()
            .map(|d| d.join(leaf))
            .filter(|d| d.is_dir())
        {
            dirs.push((Controller::BOTH.to_vec(), Version::V2, dir));
        } else {
            for (c, parent) in &parents.v1 {
                let dir = parent.join(leaf);
                if dir.is_dir() {
                    dirs.push((vec![*c], Version::V1, dir));
                }
            }
        }
        Cgroup { dirs }
    }

    /// What its counters say now (small cgroupfs reads, which do not block).
    fn counts(&self) -> Counts {
        let count = |dir: &Path, file: &str, key: &str| -> u64 {
            std::fs::read_to_string(dir.join(file))
                .ok()
                .and_then(|t| {
                    t.lines()
                        .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
                })
                .unwrap_or(0)
        };
        let mut counts = Counts::default();
        for (controllers, v, dir) in &self.dirs {
            for c in controllers {
                match (c, v) {
                    (Controller::Pids, _) => counts.pids_max = count(dir, "pids.events", "max "),
                    (Controller::Memory, Version::V2) => {
                        counts.oom_kills = count(dir, "memory.events", "oom_kill ")
                    }
                    (Controller::Memory, Version::V1) => {
                        counts.oom_kills = count(dir, "memory.oom_control", "oom_kill ")
                    }
                }
            }
        }
        counts
    }

    /// True when no process is in it.
    fn empty(&self) -> bool {
        self.dirs.iter().all(|(_, _, dir)| {
            std::fs::read_to_string(dir.join("cgroup.procs"))
                .map(|p| p.trim().is_empty())
                .unwrap_or(true)
        })
    }

    /// Whether it is empty, or becomes so within `bound` (looked at every millisecond).
    fn emptied_within(&self, bound: Duration) -> bool {
        let deadline = Instant::now() + bound;
        while !self.empty() {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }

    /// Removes it, once its last process is reaped (retried briefly; one still busy is left
    /// for [`sweep`]).
    fn remove(&self) {
        let deadline = Instant::now() + REMOVE_WITHIN;
        for (_, _, dir) in &self.dirs {
            while std::fs::remove_dir(dir).is_err() && dir.exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
}

/// Removes what attempts of capsules that are gone left: empty `murmur-<pid>-<start>-<n>`
/// cgroups whose capsule no longer runs (no process has that PID, or the one that has it started
/// at another time). Called once per capsule, at its first attempt.
pub fn sweep() {
    let found = parents();
    let v1 = found.v1.iter().map(|(_, dir)| dir);
    for parent in found.v2.iter().chain(v1) {
        let Ok(entries) = std::fs::read_dir(parent) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some((capsule, start)) = name.to_str().and_then(owner_of) else {
                continue;
            };
            // Its capsule is gone, or its PID is another process's now.
            if started(capsule) != Some(start) {
                // Refused while a process is still in it: then it is not a leftover yet.
                let _ = std::fs::remove_dir(entry.path());
            }
        }
    }
}

/// [`bound_tmp`] where the limits have a tmp bound.
pub fn bound_tmp_of(limits: Option<&Limits>) -> Result<(), String> {
    match limits.and_then(|l| l.tmp.as_ref()) {
        Some(tmp) => bound_tmp(tmp),
        None => Ok(()),
    }
}

/// In the keeper, in the attempt's mount namespace: the private tmp becomes a tmpfs of its
/// bound, writable by the harness alone.
pub fn bound_tmp(tmp: &Tmp) -> Result<(), String> {
    let options = format!(
        "size={},mode=0700,uid={},gid={}",
        tmp.bytes,
        nix::unistd::geteuid(),
        nix::unistd::getegid()
    );
    mount(
        Some("tmpfs"),
        &tmp.dir,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(options.as_str()),
    )
    .map_err(|e| format!("bounding the private tmp {}: {e}", tmp.dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cgroup_is_named_after_its_capsule_and_when_it_started() {
        assert_eq!(name(41, 9001, 7), "murmur-41-9001-7");
        assert_eq!(owner_of("murmur-41-9001-7"), Some((41, 9001)));
        assert_eq!(
            owner_of("murmur-41-7"),
            Some((41, 7)),
            "read as a start that matches nothing"
        );
        assert_eq!(owner_of("other-41-9001-7"), None);
        let me = std::process::id() as i32;
        assert!(started(me).is_some_and(|s| s > 0));
        assert_eq!(started(me), Some(own_start()));
        assert_eq!(started(i32::MAX), None);
    }
}
