//! The process tree as /proc shows it: who descends from whom, and ending a whole subtree —
//! process groups and the descendants that moved to sessions of their own (agent CLIs are known
//! to leave shells behind that way). Used wherever the kernel's own containment is not there to
//! end things (the fallback mode, and the supervisor's last sweep).

use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{kill, killpg, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

/// Every live descendant of `root` (parents before children). Where the kernel lists each
/// thread's children (`/proc/PID/task/TID/children`), the walk reads only the tree below
/// `root`: its cost follows what the attempt left, not how many processes the machine runs (a
/// scan of all of /proc cost a few milliseconds on every attempt's end). Elsewhere, every
/// process's parent is read from /proc.
pub fn descendants(root: i32) -> Vec<i32> {
    if !children_listed() {
        return scanned_descendants(root);
    }
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        for kid in children(found[i]) {
            // A pid listed twice (it moved threads mid-read) is walked once.
            if !found.contains(&kid) {
                found.push(kid);
            }
        }
        i += 1;
    }
    found.remove(0);
    found
}

/// Whether this kernel lists a thread's children (CONFIG_PROC_CHILDREN), asked once.
fn children_listed() -> bool {
    static LISTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *LISTED.get_or_init(|| std::path::Path::new("/proc/thread-self/children").exists())
}

/// The children of every thread of `pid` (a child belongs to the thread that started it, and
/// moves to another of its process's threads when that one ends). Empty when `pid` is gone.
fn children(pid: i32) -> Vec<i32> {
    let Ok(threads) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for thread in threads.flatten() {
        let mut path = thread.path();
        path.push("children");
        if let Ok(list) = std::fs::read_to_string(&path) {
            out.extend(
                list.split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
        }
    }
    out
}

/// [`descendants`] from every process's parent, read from all of /proc.
fn scanned_descendants(root: i32) -> Vec<i32> {
    let mut parent_of = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<i32>().ok())
            else {
                continue;
            };
            if let Some(ppid) = parent_pid(pid) {
                parent_of.push((pid, ppid));
            }
        }
    }
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(parent_of.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    found.remove(0);
    found
}

/// The parent pid from `/proc/PID/stat` (the field after the parenthesised command name).
pub fn parent_pid(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

/// Sends `signal` to the process group `pgid`.
pub fn signal_group(pgid: i32, signal: Signal) {
    let _ = killpg(Pid::from_raw(pgid), signal);
}

/// Sends `signal` to one process.
pub fn signal_process(pid: i32, signal: Signal) {
    let _ = kill(Pid::from_raw(pid), signal);
}

/// SIGKILL to each of `pids` and to the groups they lead.
fn kill_each(pids: &[i32]) {
    for &p in pids {
        let pid = Pid::from_raw(p);
        let _ = kill(pid, Signal::SIGKILL);
        if nix::unistd::getpgid(Some(pid)).ok() == Some(pid) {
            let _ = killpg(pid, Signal::SIGKILL);
        }
    }
}

/// Kills every process below `root` and reaps the ones that are its children (orphans land on
/// a subreaper, so after a few rounds that is all of them). Bounded by `limit`; answers whether
/// nothing was left.
pub fn sweep_below(root: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        let left = descendants(root);
        if left.is_empty() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        kill_each(&left);
        for &p in &left {
            if parent_pid(p) == Some(root) {
                reap(p);
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Collects one child that has ended (or is about to: it was just killed), without waiting long.
fn reap(pid: i32) {
    for _ in 0..100 {
        match waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => std::thread::sleep(Duration::from_millis(1)),
            Err(Errno::EINTR) => {}
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    /// The walk over children lists finds what the full scan finds: a shell's child.
    #[test]
    fn both_walks_find_the_same_tree() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .process_group(0)
            .spawn()
            .expect("sh starts");
        let pid = child.id() as i32;
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut walked = descendants(pid);
        while walked.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
            walked = descendants(pid);
        }
        let scanned = scanned_descendants(pid);
        let parent = walked.first().and_then(|p| parent_pid(*p));
        signal_group(pid, Signal::SIGKILL);
        let _ = child.wait();
        assert_eq!(walked.len(), 1, "{walked:?}");
        assert_eq!(walked, scanned);
        assert_eq!(parent, Some(pid));
    }
}
