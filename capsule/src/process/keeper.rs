//! `mur __contain`: the keeper of one harness attempt, `mur` re-executed by the capsule. In
//! namespace mode it enters a new user namespace (mapping the user's own uid and gid), mount
//! namespace (the running-capsule records hidden under an empty read-only tmpfs; a hide whose
//! target is missing refuses the attempt), PID namespace and, for a jailed attempt, network
//! namespace (only loopback, its ways out handed to the capsule: `netns`), and forks the
//! namespace's init; the init mounts a /proc of its own, starts the
//! harness, forwards the interrupt to the harness's group and reaps. When the init ends the
//! kernel ends everything in the namespace, however it detached. In fallback mode the keeper is
//! itself that init, as a child subreaper that sweeps /proc before it exits.
//!
//! A ready keeper (`--order-fd`, `ready`) builds all of this before its task arrives, and its
//! init then waits on a pipe for the program and environment to run.
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

pub use super::keeper_args::{KeeperArgs, SUBCOMMAND};
use super::lockdown;
use super::setup::{become_subreaper, ChildSetup};
use super::tree;

/// The descriptor the keeper writes its status line on.
/// The keeper's exit status when it could not set up containment.
const SETUP_FAILED: i32 = 125;
/// How long the fallback sweep may take before the keeper gives up on stragglers.
const SWEEP_LIMIT: Duration = Duration::from_secs(5);

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
    super::setup::cloexec_from(3);
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

/// A session of its own, with no controlling terminal: nothing started below can open the
/// terminal `mur run` was typed in (`/dev/tty`) and push keystrokes into it for the user's shell
/// to run once `mur` exits (TIOCSTI; the system call filter refuses it too). The capsule starts
/// the keeper in its own group, not as a group leader, so `setsid` is possible; the new session
/// is also the keeper's own process group, as the capsule's sweeps expect.
fn leave_the_terminal() -> Result<(), String> {
    match nix::unistd::setsid() {
        Ok(_) => Ok(()),
        // Already a session leader: it holds no terminal it did not open itself.
        Err(Errno::EPERM) if nix::unistd::getsid(None).ok() == Some(nix::unistd::getpid()) => {
            Ok(())
        }
        Err(e) => Err(format!("cannot leave the terminal (setsid): {e}")),
    }
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
    if let Err(why) = leave_the_terminal().and_then(|()| settle_in(args.parent)) {
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
    // First, so the init, the harness and all they start are in the attempt's cgroup.
    let bounded = super::limits::enter(args.limits.as_ref(), args.cgroup.as_deref());
    if !args.namespaces {
        bounded.hold_rest(false);
        become_subreaper();
        return supervise(&args, &mut status, Ending::Sweep, None);
    }
    let jail = enter_namespaces(&args.hide, args.net)
        .map(|()| bounded.hold_rest(true))
        .and_then(|()| super::masks::own_dev())
        .and_then(|()| match &args.files {
            Some(wall) => super::files::raise(wall),
            None => Ok(()),
        })
        .and_then(|()| super::limits::bound_tmp_of(args.limits.as_ref()))
        .and_then(|()| open_ways_out(&args));
    let proxy = match jail {
        Ok(proxy) => proxy,
        Err(why) => {
            eprintln!("{why}");
            report(&mut status, Report::SetupFailed(why));
            return SETUP_FAILED;
        }
    };
    keep_init(&args, status, proxy)
}

/// In a jailed attempt's network namespace: loopback up, then the proxy and the forwarded
/// ports bound there and handed to the capsule. Answers the proxy's port (`None` unjailed).
fn open_ways_out(args: &KeeperArgs) -> Result<Option<u16>, String> {
    if !args.net {
        return Ok(None);
    }
    super::netns::loopback_up()?;
    let Some(sock) = args.jail_fd else {
        return Ok(None);
    };
    let (proxy, listeners) = super::netns::bind_listeners(&args.forward)?;
    super::netns::send_listeners(sock, &listeners)?;
    // The capsule holds them now; this process's copies close here.
    drop(listeners);
    // SAFETY: the capsule handed this descriptor over for this one message.
    unsafe { libc::close(sock) };
    Ok(Some(proxy))
}

/// Enters new user, mount, PID (taking effect for the children) and, with `net`, network
/// namespaces, and hides `hide` under empty read-only tmpfs mounts. A hide that cannot be made
/// (its target is not an absolute path to a folder) fails the attempt: a hide never fails open.
fn enter_namespaces(hide: &[PathBuf], net: bool) -> Result<(), String> {
    let (uid, gid) = (geteuid(), getegid());
    // IPC and UTS of its own: no SysV shared memory, semaphores or message queues of the
    // host's, and a hostname it cannot change for the host.
    let mut flags = CloneFlags::CLONE_NEWUSER
        | CloneFlags::CLONE_NEWNS
        | CloneFlags::CLONE_NEWPID
        | CloneFlags::CLONE_NEWIPC
        | CloneFlags::CLONE_NEWUTS;
    if net {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    unshare(flags).map_err(|e| match net {
        true => format!("unshare(user, mount, pid, ipc, uts, net): {e}"),
        false => format!("unshare(user, mount, pid, ipc, uts): {e}"),
    })?;
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
    for dir in hide {
        if !dir.is_absolute() || !dir.is_dir() {
            return Err(format!(
                "cannot hide {}: it is not an absolute path to a folder, and a harness must not \
                 see it",
                dir.display()
            ));
        }
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
fn keep_init(args: &KeeperArgs, mut status: Option<File>, proxy: Option<u16>) -> i32 {
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
            std::process::exit(run_init(args, &mut status, alive_r, proxy))
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
fn run_init(
    args: &KeeperArgs,
    status: &mut Option<File>,
    keeper_alive: OwnedFd,
    proxy: Option<u16>,
) -> i32 {
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
    if let Err(why) = super::masks::guard_proc_for_root() {
        eprintln!("{why}");
        report(status, Report::SetupFailed(why));
        return SETUP_FAILED;
    }
    if args.probe {
        return 0;
    }
    let Some(fd) = args.order_fd else {
        return supervise(args, status, Ending::Namespace, proxy);
    };
    // A ready keeper: everything above was built before the task; the program comes now.
    match super::order::Order::receive(fd) {
        Some(order) => {
            let args = order.apply(args);
            supervise(&args, status, Ending::Namespace, proxy)
        }
        // The capsule closed the order unsent: this keeper was not needed.
        None => 0,
    }
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
/// ends everything else it started and reports how it ended. In a jail, the harness is told
/// the egress proxy (`proxy`) and holds no capability (`lockdown`).
fn supervise(
    args: &KeeperArgs,
    status: &mut Option<File>,
    ending: Ending,
    proxy: Option<u16>,
) -> i32 {
    let mut extra: Vec<(&str, String)> = Vec::new();
    if let Some(port) = proxy {
        let url = format!("http://127.0.0.1:{port}");
        extra.extend(PROXY_VARS.iter().map(|var| (*var, url.clone())));
        // Loopback goes straight to the forwarded ports; a port not forwarded refuses.
        extra.push(("NO_PROXY", "localhost,127.0.0.1,::1".into()));
        extra.push(("no_proxy", "localhost,127.0.0.1,::1".into()));
    }
    let started = match ending {
        // The init holds itself to what the harness must run under, and the harness inherits
        // it through a posix_spawn (vfork and exec) rather than a fork of the init, whose page
        // tables an attempt paid to copy. No parent-death signal is needed: when the init
        // ends, the kernel ends its namespace.
        Ending::Namespace => match lockdown::lock_down_init() {
            Ok(()) => lockdown::spawn_harness(&args.program, &args.args, &extra),
            Err(e) => {
                let why = format!("dropping the init's capabilities: {e}");
                report(status, Report::SetupFailed(why));
                return SETUP_FAILED;
            }
        },
        Ending::Sweep => {
            let mut cmd = Command::new(&args.program);
            cmd.args(&args.args)
                .envs(extra.iter().map(|(k, v)| (*k, v)));
            ChildSetup {
                own_group: true,
                death_signal: Some(Signal::SIGKILL),
                fds: Vec::new(),
            }
            .apply(&mut cmd);
            cmd.spawn().map(|child| child.id() as i32)
        }
    };
    let harness = match started {
        Ok(pid) => pid,
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

/// The variables that point programs at the egress proxy, in both spellings tools read.
const PROXY_VARS: [&str; 6] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];

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
}
