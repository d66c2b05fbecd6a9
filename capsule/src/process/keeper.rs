//! `mur __contain`: the keeper of one harness attempt, `mur` re-executed by the capsule. In
//! namespace mode it enters a new user namespace (mapping the user's own uid and gid), mount
//! namespace (the running-capsule records hidden under an empty read-only tmpfs) and PID
//! namespace, and forks the namespace's init; the init mounts a /proc of its own, starts the
//! harness, forwards the interrupt to the harness's group and reaps. When the init ends the
//! kernel ends everything in the namespace, however it detached. In fallback mode the keeper is
//! itself that init, as a child subreaper that sweeps /proc before it exits.
//!
//! It speaks to the capsule through signals (SIGINT: interrupt the harness; SIGTERM: end
//! everything now) and one status line on descriptor 3 saying how the harness ended.

use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use nix::errno::Errno;
use nix::mount::{mount, MsFlags};
use nix::sched::{unshare, CloneFlags};
use nix::sys::signal::{kill, SigSet, SigmaskHow, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, getegid, geteuid, ForkResult, Pid};

use super::setup::{become_subreaper, ChildSetup};
use super::tree;

/// The hidden subcommand the capsule runs.
pub const SUBCOMMAND: &str = "__contain";
/// The descriptor the keeper writes its status line on.
/// The keeper's exit status when it could not set up containment.
const SETUP_FAILED: i32 = 125;
/// How long the fallback sweep may take before the keeper gives up on stragglers.
const SWEEP_LIMIT: Duration = Duration::from_secs(5);

/// The keeper's command line, built and read in this one place.
#[derive(Clone, Debug, Default)]
pub struct KeeperArgs {
    pub namespaces: bool,
    /// Set up the namespaces, then end without running anything (containment::detect).
    pub probe: bool,
    pub hide: Vec<PathBuf>,
    /// The descriptor the keeper reports on (see [`Report`]); the capsule leaves it open.
    pub status_fd: Option<RawFd>,
    /// The capsule's pid: the keeper arms its parent-death signal and checks the capsule did
    /// not die before it was armed (the capsule starts it with posix_spawn, so no code of the
    /// capsule's runs between fork and exec to do it there).
    pub parent: Option<i32>,
    pub program: OsString,
    pub args: Vec<OsString>,
}

impl KeeperArgs {
    /// `__contain [--namespaces] [--probe] [--hide DIR]... [--status-fd N] [--parent PID] --
    /// PROGRAM ARGS...`
    pub fn to_args(&self) -> Vec<OsString> {
        let mut out: Vec<OsString> = vec![SUBCOMMAND.into()];
        if self.namespaces {
            out.push("--namespaces".into());
        }
        if self.probe {
            out.push("--probe".into());
        }
        for dir in &self.hide {
            out.push("--hide".into());
            out.push(dir.into());
        }
        if let Some(fd) = self.status_fd {
            out.push("--status-fd".into());
            out.push(fd.to_string().into());
        }
        if let Some(pid) = self.parent {
            out.push("--parent".into());
            out.push(pid.to_string().into());
        }
        out.push("--".into());
        if !self.probe {
            out.push(self.program.clone());
            out.extend(self.args.iter().cloned());
        }
        out
    }

    /// Reads the arguments after the subcommand.
    pub fn parse(mut args: impl Iterator<Item = OsString>) -> Result<KeeperArgs, String> {
        let mut k = KeeperArgs::default();
        while let Some(arg) = args.next() {
            match arg.to_str() {
                Some("--namespaces") => k.namespaces = true,
                Some("--probe") => k.probe = true,
                Some("--hide") => {
                    let dir = args.next().ok_or("--hide needs a folder")?;
                    k.hide.push(dir.into());
                }
                Some("--status-fd") => k.status_fd = Some(number(args.next(), "--status-fd")?),
                Some("--parent") => k.parent = Some(number(args.next(), "--parent")?),
                Some("--") => {
                    if !k.probe {
                        k.program = args.next().ok_or("no program after --")?;
                        k.args = args.collect();
                    }
                    return Ok(k);
                }
                _ => return Err(format!("unexpected argument {arg:?}")),
            }
        }
        Err("no -- before the program".into())
    }
}

/// A number argument's value.
fn number(value: Option<OsString>, flag: &str) -> Result<i32, String> {
    value
        .as_deref()
        .and_then(|v| v.to_str())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("{flag} needs a number"))
}

/// How the harness ended, as the keeper reports it: one line on the status descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Report {
    Exited(i32),
    Signaled(i32),
    SpawnFailed(String),
    SetupFailed(String),
}

impl Report {
    fn line(&self) -> String {
        let one_line = |s: &str| s.replace('\n', " ");
        match self {
            Report::Exited(c) => format!("exited {c}\n"),
            Report::Signaled(s) => format!("signaled {s}\n"),
            Report::SpawnFailed(why) => format!("spawn-failed {}\n", one_line(why)),
            Report::SetupFailed(why) => format!("setup-failed {}\n", one_line(why)),
        }
    }

    pub fn parse(line: &str) -> Option<Report> {
        let (word, rest) = line.trim_end().split_once(' ')?;
        match word {
            "exited" => rest.parse().ok().map(Report::Exited),
            "signaled" => rest.parse().ok().map(Report::Signaled),
            "spawn-failed" => Some(Report::SpawnFailed(rest.to_owned())),
            "setup-failed" => Some(Report::SetupFailed(rest.to_owned())),
            _ => None,
        }
    }
}

/// The status descriptor the capsule named, when it is open; close-on-exec so the harness
/// never holds it.
fn status_channel(fd: RawFd) -> Option<File> {
    // SAFETY: fcntl on a descriptor number; F_GETFD fails harmlessly when it is not open.
    let open = unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0;
    if !open {
        return None;
    }
    // SAFETY: as above; the capsule left the status pipe here and nothing else owns it.
    unsafe {
        libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        Some(File::from_raw_fd(fd))
    }
}

/// What the capsule's fork used to do before exec, done here: the parent-death signal, checked
/// against a capsule that died before it was armed, and nothing else this process inherited
/// beyond stdio going further than this process (marked close-on-exec, not closed).
fn settle_in(parent: Option<i32>) -> Result<(), String> {
    // SAFETY: close_range only sets flags on this process's own descriptors.
    unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        );
    }
    let Some(parent) = parent else {
        return Ok(());
    };
    nix::sys::prctl::set_pdeathsig(Signal::SIGTERM)
        .map_err(|e| format!("cannot arm the parent-death signal: {e}"))?;
    if nix::unistd::getppid().as_raw() != parent {
        return Err("the capsule ended before its keeper started".into());
    }
    Ok(())
}

fn report(status: &mut Option<File>, r: Report) {
    if let Some(f) = status.as_mut() {
        let _ = f.write_all(r.line().as_bytes());
    }
}

fn waited_signals() -> SigSet {
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    set.add(Signal::SIGCHLD);
    set
}

/// The keeper's entry point: the arguments after the subcommand; answers the exit status.
pub fn main(args: impl Iterator<Item = OsString>) -> i32 {
    let args = match KeeperArgs::parse(args) {
        Ok(a) => a,
        Err(why) => {
            eprintln!("error: mur {SUBCOMMAND}: {why} (it is started by a capsule, not by hand)");
            return SETUP_FAILED;
        }
    };
    let mut status = args.status_fd.and_then(status_channel);
    if let Err(why) = settle_in(args.parent) {
        report(&mut status, Report::SetupFailed(why));
        return SETUP_FAILED;
    }
    // Signals are taken with sigwait, so they are never lost between checks.
    if let Err(e) =
        nix::sys::signal::sigprocmask(SigmaskHow::SIG_BLOCK, Some(&waited_signals()), None)
    {
        eprintln!("error: mur {SUBCOMMAND}: cannot block signals: {e}");
        return SETUP_FAILED;
    }
    if !args.namespaces {
        become_subreaper();
        return supervise(&args, &mut status, Ending::Sweep);
    }
    if let Err(why) = enter_namespaces(&args.hide) {
        eprintln!("{why}");
        report(&mut status, Report::SetupFailed(why));
        return SETUP_FAILED;
    }
    keep_init(&args, status)
}

/// Enters new user, mount and PID namespaces (the PID namespace takes effect for the children)
/// and hides `hide` under empty read-only tmpfs mounts.
fn enter_namespaces(hide: &[PathBuf]) -> Result<(), String> {
    let (uid, gid) = (geteuid(), getegid());
    unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWPID)
        .map_err(|e| format!("unshare(user, mount, pid): {e}"))?;
    // Without setgroups denied an unprivileged process may not write its gid map.
    match std::fs::write("/proc/self/setgroups", "deny") {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(format!("/proc/self/setgroups: {e}"))
        }
        _ => {}
    }
    std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1\n"))
        .map_err(|e| format!("/proc/self/uid_map: {e}"))?;
    std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1\n"))
        .map_err(|e| format!("/proc/self/gid_map: {e}"))?;
    // Nothing mounted here may propagate back to the user's own mount namespace.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| format!("making / private: {e}"))?;
    for dir in hide.iter().filter(|d| d.is_dir()) {
        mount(
            Some("tmpfs"),
            dir,
            Some("tmpfs"),
            MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            Some("mode=0500,size=4k"),
        )
        .map_err(|e| format!("hiding {}: {e}", dir.display()))?;
    }
    Ok(())
}

/// Namespace mode: forks the namespace's init and stays as its link to the capsule, forwarding
/// the interrupt and ending it on SIGTERM (or when the capsule dies: the parent-death signal).
fn keep_init(args: &KeeperArgs, mut status: Option<File>) -> i32 {
    // The init's way to learn, race-free, that this keeper died before it armed its own
    // parent-death signal: the write end closes.
    let (alive_r, alive_w) = match nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) {
        Ok(p) => p,
        Err(e) => {
            report(&mut status, Report::SetupFailed(format!("pipe: {e}")));
            return SETUP_FAILED;
        }
    };
    // SAFETY: this process is single-threaded (no runtime was started), so the child may run
    // ordinary code after the fork.
    match unsafe { fork() } {
        Err(e) => {
            report(&mut status, Report::SetupFailed(format!("fork: {e}")));
            SETUP_FAILED
        }
        Ok(ForkResult::Child) => {
            drop(alive_w);
            std::process::exit(run_init(args, &mut status, alive_r))
        }
        Ok(ForkResult::Parent { child }) => {
            drop(alive_r);
            drop(status);
            null_stdio();
            let code = relay_to_init(child);
            drop(alive_w);
            code
        }
    }
}

/// PID 1 of the attempt's namespace.
fn run_init(args: &KeeperArgs, status: &mut Option<File>, keeper_alive: OwnedFd) -> i32 {
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    if writer_gone(&keeper_alive) {
        return 1;
    }
    drop(keeper_alive);
    let proc_flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    if let Err(e) = mount(
        Some("proc"),
        "/proc",
        Some("proc"),
        proc_flags,
        None::<&str>,
    ) {
        let why = format!("mounting the namespace's own /proc: {e}");
        eprintln!("{why}");
        report(status, Report::SetupFailed(why));
        return SETUP_FAILED;
    }
    if args.probe {
        return 0;
    }
    supervise(args, status, Ending::Namespace)
}

/// True when every write end of the pipe `fd` reads from is closed.
fn writer_gone(fd: &OwnedFd) -> bool {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd on a descriptor this process owns, no waiting.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n > 0 && p.revents & libc::POLLHUP != 0
}

/// The keeper's loop in namespace mode; answers the init's exit status as its own.
fn relay_to_init(init: Pid) -> i32 {
    let signals = waited_signals();
    loop {
        match signals.wait() {
            Ok(Signal::SIGINT) => {
                let _ = kill(init, Signal::SIGINT);
            }
            Ok(Signal::SIGTERM) => {
                let _ = kill(init, Signal::SIGKILL);
                let _ = waitpid(init, None);
                return 143;
            }
            _ => match waitpid(init, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(_, code)) => return code,
                Ok(WaitStatus::Signaled(_, sig, _)) => return 128 + sig as i32,
                Err(Errno::ECHILD) => return 1,
                _ => {}
            },
        }
    }
}

/// How the rest of an attempt's tree is ended once the harness is gone.
#[derive(Clone, Copy)]
enum Ending {
    /// This process is PID 1 of the attempt's namespace: everything else in it goes.
    Namespace,
    /// This process is a subreaper: every descendant, found in /proc.
    Sweep,
}

impl Ending {
    fn end_all(self) {
        match self {
            Ending::Namespace => {
                // From a namespace's init, -1 means every other process in the namespace.
                let _ = kill(Pid::from_raw(-1), Signal::SIGKILL);
                while !matches!(waitpid(Pid::from_raw(-1), None), Err(Errno::ECHILD)) {}
            }
            Ending::Sweep => {
                tree::sweep_below(std::process::id() as i32, SWEEP_LIMIT);
            }
        }
    }
}

/// Starts the harness, forwards the interrupt to its group, and when it ends (or SIGTERM asks)
/// ends everything else it started and reports how it ended.
fn supervise(args: &KeeperArgs, status: &mut Option<File>, ending: Ending) -> i32 {
    let mut cmd = Command::new(&args.program);
    cmd.args(&args.args);
    ChildSetup {
        own_group: true,
        death_signal: Some(Signal::SIGKILL),
        fds: Vec::new(),
    }
    .apply(&mut cmd);
    let harness = match cmd.spawn() {
        Ok(child) => child.id() as i32,
        Err(e) => {
            let program = args.program.to_string_lossy();
            report(
                status,
                Report::SpawnFailed(format!("the harness {program} could not start: {e}")),
            );
            return 127;
        }
    };
    // Only the harness's tree holds the capsule's pipes from here, so their ends mean its end.
    null_stdio();
    let signals = waited_signals();
    loop {
        match signals.wait() {
            Ok(Signal::SIGINT) => tree::signal_group(harness, Signal::SIGINT),
            Ok(Signal::SIGTERM) => {
                ending.end_all();
                return 143;
            }
            _ => {
                if let Some(ended) = reap_all(harness) {
                    ending.end_all();
                    report(status, ended);
                    return 0;
                }
            }
        }
    }
}

/// Reaps every child that has ended; answers how the harness ended if it was among them.
fn reap_all(harness: i32) -> Option<Report> {
    let mut ended = None;
    loop {
        match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) if pid.as_raw() == harness => {
                ended = Some(Report::Exited(code))
            }
            Ok(WaitStatus::Signaled(pid, sig, _)) if pid.as_raw() == harness => {
                ended = Some(Report::Signaled(sig as i32))
            }
            Ok(WaitStatus::StillAlive) | Err(_) => return ended,
            Ok(_) => {}
        }
    }
}

/// Points stdin and stdout at /dev/null.
fn null_stdio() {
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        let _ = nix::unistd::dup2(null.as_raw_fd(), 0);
        let _ = nix::unistd::dup2(null.as_raw_fd(), 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_round_trip() {
        let k = KeeperArgs {
            namespaces: true,
            probe: false,
            hide: vec!["/home/me/.murmur/run".into()],
            status_fd: Some(7),
            parent: Some(4242),
            program: "python3".into(),
            args: vec!["harness.py".into(), "--".into(), "--hide".into()],
        };
        let argv = k.to_args();
        assert_eq!(argv[0], SUBCOMMAND);
        let back = KeeperArgs::parse(argv.into_iter().skip(1)).unwrap();
        assert!(back.namespaces && !back.probe);
        assert_eq!(back.hide, k.hide);
        assert_eq!((back.status_fd, back.parent), (Some(7), Some(4242)));
        assert_eq!(back.program, k.program);
        assert_eq!(back.args, k.args);
    }

    #[test]
    fn reports_round_trip() {
        for r in [
            Report::Exited(0),
            Report::Exited(130),
            Report::Signaled(9),
            Report::SpawnFailed("the harness nope could not start: No such file".into()),
            Report::SetupFailed("unshare: EPERM".into()),
        ] {
            assert_eq!(Report::parse(&r.line()), Some(r));
        }
        assert_eq!(Report::parse("nonsense"), None);
        assert_eq!(Report::parse("exited x"), None);
    }

    #[test]
    fn malformed_args_are_refused() {
        let parse = |v: &[&str]| KeeperArgs::parse(v.iter().map(OsString::from));
        assert!(parse(&["--bogus"]).is_err());
        assert!(parse(&["--hide"]).is_err());
        assert!(parse(&["--status-fd", "x", "--"]).is_err());
        assert!(parse(&["--parent"]).is_err());
        assert!(parse(&["--namespaces"]).is_err());
        assert!(parse(&["--"]).is_err());
        assert!(parse(&["--probe", "--"]).is_ok());
    }
}
