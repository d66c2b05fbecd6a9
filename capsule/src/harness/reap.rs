//! Ending a harness for good: its process group and every descendant, including the ones that
//! moved to sessions of their own (agent CLIs are known to leave shells behind that way).

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;

/// Every live descendant of `root`, read from /proc (parents before children).
pub fn descendants(root: i32) -> Vec<i32> {
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

/// SIGKILL to the group `pgid`, then to each of `pids` and the groups they lead.
pub fn kill_all(pgid: i32, pids: &[i32]) {
    let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
    for &p in pids {
        let pid = Pid::from_raw(p);
        let _ = kill(pid, Signal::SIGKILL);
        if nix::unistd::getpgid(Some(pid)).ok() == Some(pid) {
            let _ = killpg(pid, Signal::SIGKILL);
        }
    }
}

pub fn interrupt_group(pgid: i32) {
    let _ = killpg(Pid::from_raw(pgid), Signal::SIGINT);
}
