//! Starting capsule processes and making sure nothing outlives the launch: listeners bound
//! before anything is spawned, each capsule in its own process group with a parent-death
//! signal, the supervisor a child subreaper that reaps and finally sweeps every descendant.

use std::io::ErrorKind;
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, killpg, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use capsule::runtime::{CapsuleConfig, CONFIG_ENV};

use crate::error::{CliError, CliResult, Code};

/// The fd a capsule finds its listener on.
pub const LISTEN_FD: i32 = 3;
pub const LISTEN_FD_ENV: &str = "MURMUR_LISTEN_FD";

/// Binds 127.0.0.1 on the pinned port, or on one the OS assigns.
pub fn bind(port: Option<u16>) -> CliResult<TcpListener> {
    TcpListener::bind(("127.0.0.1", port.unwrap_or(0))).map_err(|e| match (port, e.kind()) {
        (Some(p), ErrorKind::AddrInUse) => CliError::new(
            Code::PortInUse,
            format!("port {p} is already in use"),
            format!("stop whatever listens on {p} (`ss -ltnp 'sport = :{p}'` shows it), or remove network.internal_port to let the OS assign a port"),
        ),
        (p, _) => CliError::new(
            Code::BindFailed,
            format!("cannot listen on 127.0.0.1:{}: {e}", p.unwrap_or(0)),
            "check the port and the machine's network settings",
        ),
    })
}

/// Makes this process the reaper of every orphaned descendant, so none can escape the sweep.
pub fn become_subreaper() {
    let _ = nix::sys::prctl::set_child_subreaper(true);
}

/// Re-executes `mur` as a capsule on `listener`, in its own process group. Its stdout is piped
/// (the launch relays it after announcing); stderr is shared.
pub fn spawn_capsule(listener: &TcpListener, config: &CapsuleConfig) -> CliResult<Child> {
    let exe = std::env::current_exe().map_err(|e| {
        CliError::new(
            Code::CapsuleDidNotStart,
            format!("cannot find the mur binary: {e}"),
            "reinstall mur",
        )
    })?;
    let json = serde_json::to_string(config).map_err(|e| {
        CliError::new(
            Code::CapsuleDidNotStart,
            format!("cannot encode the capsule config: {e}"),
            "report this bug",
        )
    })?;
    let fd = listener.as_raw_fd();
    let parent = std::process::id() as i32;
    let mut cmd = Command::new(exe);
    cmd.arg("__capsule")
        .env(CONFIG_ENV, json)
        .env(LISTEN_FD_ENV, LISTEN_FD.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .process_group(0);
    // SAFETY: only async-signal-safe libc calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if fd == LISTEN_FD {
                let flags = libc::fcntl(fd, libc::F_GETFD);
                libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC);
            } else if libc::dup2(fd, LISTEN_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    cmd.spawn().map_err(|e| {
        CliError::new(
            Code::CapsuleDidNotStart,
            format!("cannot start the capsule process: {e}"),
            "check that mur's binary is executable",
        )
    })
}

/// Reaps every child (the supervisor is a subreaper, so orphans come here too) and reports the
/// capsule's own exit status.
pub fn start_reaper(capsule_pid: i32) -> mpsc::Receiver<i32> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || loop {
        match waitpid(Pid::from_raw(-1), None) {
            Ok(WaitStatus::Exited(pid, code)) if pid.as_raw() == capsule_pid => {
                let _ = tx.send(code);
            }
            Ok(WaitStatus::Signaled(pid, sig, _)) if pid.as_raw() == capsule_pid => {
                let _ = tx.send(128 + sig as i32);
            }
            Ok(_) => {}
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    });
    rx
}

pub fn terminate_group(pgid: i32, signal: Signal) {
    let _ = killpg(Pid::from_raw(pgid), signal);
}

/// Kills every process still below this one and waits until none is left (bounded).
pub fn sweep() {
    let me = std::process::id() as i32;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = capsule::harness::descendants(me);
        if left.is_empty() || Instant::now() > deadline {
            return;
        }
        for &p in &left {
            let pid = Pid::from_raw(p);
            let _ = kill(pid, Signal::SIGKILL);
            if nix::unistd::getpgid(Some(pid)).ok() == Some(pid) {
                let _ = killpg(pid, Signal::SIGKILL);
            }
        }
        // The reaper thread collects them; give it a moment.
        while waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG))
            .is_ok_and(|s| s != WaitStatus::StillAlive)
        {}
        std::thread::sleep(Duration::from_millis(20));
    }
}
