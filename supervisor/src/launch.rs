//! Starting capsule processes and making sure nothing outlives the launch: listeners bound
//! before anything is spawned, each capsule in its own process group with a parent-death
//! signal, the supervisor a child subreaper that reaps and finally sweeps every descendant.

use std::io::ErrorKind;
use std::net::TcpListener;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use nix::sys::signal::Signal;
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::Pid;
use tokio::sync::mpsc::UnboundedReceiver;

use capsule::delegation::protocol::CONTROL_FD;
use capsule::process::zygote::Zygote;
use capsule::process::{self, tree};
use capsule::runtime::{CapsuleConfig, CONFIG_ENV};

use crate::error::{CliError, CliResult, Code};

/// The fd a capsule finds its listener on.
pub const LISTEN_FD: i32 = 3;
pub const LISTEN_FD_ENV: &str = "MURMUR_LISTEN_FD";
/// Where the capsule's control socket was inherited (it moves it to [`CONTROL_FD`]).
pub const CONTROL_FD_ENV: &str = "MURMUR_CONTROL_FD";
/// The supervisor's pid, which the capsule checks is still its parent once its parent-death
/// signal is armed.
pub const PARENT_ENV: &str = "MURMUR_SUPERVISOR_PID";

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
    process::become_subreaper();
}

/// Re-executes `mur` as a capsule on `listener`, in its own process group, with a parent-death
/// signal, and with `control` (its end of the supervisor's control socket) on
/// [`CONTROL_FD`]. Its stdout is piped (the launch relays it after announcing); stderr is
/// shared.
///
/// Started with posix_spawn (vfork and exec), not fork: a fork copies the supervisor's page
/// tables, which grow with every member it holds (a reader thread and pipes each), so a
/// formation's launch cost grew faster than its members (BENCHMARKS.md, "Formations"). No code
/// runs between fork and exec: the listener and the control socket are inherited where they
/// are (close-on-exec lifted for this spawn alone) and the capsule moves them to [`LISTEN_FD`]
/// and [`CONTROL_FD`], arms its parent-death signal and checks its parent itself
/// ([`take_inherited`]).
pub fn spawn_capsule(
    listener: &TcpListener,
    control: &StdUnixStream,
    config: &CapsuleConfig,
    zygote: Option<&Zygote>,
) -> CliResult<Spawned> {
    let json = serde_json::to_string(config).map_err(|e| {
        CliError::new(
            Code::CapsuleDidNotStart,
            format!("cannot encode the capsule config: {e}"),
            "report this bug",
        )
    })?;
    if let Some(zygote) = zygote.filter(|z| z.usable()) {
        // A zygote that fails (it was killed, say) is given up, and the spawn below does its
        // work from then on.
        match fork_capsule(zygote, listener, control, &json) {
            Ok(spawned) => return Ok(spawned),
            Err(e) => eprintln!(
                "mur: the zygote forking this launch's capsules failed ({e}); the rest are started one by one"
            ),
        }
    }
    let (listen_fd, control_fd) = (listener.as_raw_fd(), control.as_raw_fd());
    // This very binary, not the path it was started by: a harness running as the user may
    // have replaced that file before a sub-capsule starts.
    let mut cmd = Command::new(process::SELF_EXE);
    cmd.arg(crate::CAPSULE_SUBCOMMAND)
        .env(CONFIG_ENV, json)
        .env(LISTEN_FD_ENV, listen_fd.to_string())
        .env(CONTROL_FD_ENV, control_fd.to_string())
        .env(PARENT_ENV, std::process::id().to_string())
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let spawned = {
        let _alone = process::spawning();
        let inherited = [listen_fd, control_fd]
            .iter()
            .try_for_each(|fd| process::set_inheritable(*fd, true));
        let spawned = inherited.and_then(|()| cmd.spawn());
        for fd in [listen_fd, control_fd] {
            let _ = process::set_inheritable(fd, false);
        }
        spawned
    };
    let mut child = spawned.map_err(|e| {
        CliError::new(
            Code::CapsuleDidNotStart,
            format!("cannot start the capsule process: {e}"),
            "check that mur's binary is executable",
        )
    })?;
    Ok(Spawned {
        pid: child.id() as i32,
        stdout: child.stdout.take().map(OwnedFd::from),
    })
}

/// A capsule just started: its pid (its process group's too) and its stdout's read end.
pub struct Spawned {
    pub pid: i32,
    pub stdout: Option<OwnedFd>,
}

/// A formation's many capsules: forked by the zygote (`capsule::process::zygote`), with the
/// same environment and descriptors a spawn gives. `None` for a launch of one capsule, which
/// an exec starts as cheaply as it would start the zygote.
pub fn zygote_for(members: usize) -> Option<Zygote> {
    (members > 1)
        .then(|| Zygote::start(&[crate::CAPSULE_SUBCOMMAND]))
        .and_then(Result::ok)
}

fn fork_capsule(
    zygote: &Zygote,
    listener: &TcpListener,
    control: &StdUnixStream,
    json: &str,
) -> std::io::Result<Spawned> {
    let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let parent = std::process::id().to_string();
    let pid = zygote.fork(
        &[(CONFIG_ENV, json), (PARENT_ENV, &parent)],
        write.as_fd(),
        &[
            (LISTEN_FD_ENV, listener.as_fd()),
            (CONTROL_FD_ENV, control.as_fd()),
        ],
    )?;
    Ok(Spawned {
        pid,
        stdout: Some(read),
    })
}

/// The capsule's side of [`spawn_capsule`], first thing in `mur __capsule`: its listener and
/// control socket moved to [`LISTEN_FD`] and [`CONTROL_FD`], everything else it inherited kept
/// from its own children, the parent-death signal armed (SIGTERM) and its parent checked.
/// Answers the listener's descriptor, or why the capsule cannot start.
pub fn take_inherited() -> Result<i32, String> {
    let number = |var: &str| {
        std::env::var(var)
            .ok()
            .and_then(|v| v.parse::<i32>().ok())
            .ok_or_else(|| format!("{var} is not set"))
    };
    let listen = number(LISTEN_FD_ENV)?;
    let control = number(CONTROL_FD_ENV)?;
    let parent = number(PARENT_ENV)?;
    for var in [LISTEN_FD_ENV, CONTROL_FD_ENV, PARENT_ENV] {
        std::env::remove_var(var);
    }
    process::settle_spawned(
        &[(listen, LISTEN_FD), (control, CONTROL_FD)],
        Signal::SIGTERM,
        parent,
    )?;
    Ok(LISTEN_FD)
}

/// Reaps every child (the supervisor is a subreaper, so orphans come here too) and reports each
/// exit as `(pid, status)`, a signal's death as 128 + its number.
pub fn start_reaper() -> UnboundedReceiver<(i32, i32)> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || loop {
        match waitpid(Pid::from_raw(-1), None) {
            Ok(WaitStatus::Exited(pid, code)) => {
                let _ = tx.send((pid.as_raw(), code));
            }
            Ok(WaitStatus::Signaled(pid, sig, _)) => {
                let _ = tx.send((pid.as_raw(), 128 + sig as i32));
            }
            Ok(_) => {}
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    });
    rx
}

/// A capsule's control socket: the supervisor's end (async) and the capsule's (to inherit).
pub fn control_pair() -> CliResult<(tokio::net::UnixStream, StdUnixStream)> {
    let failed = |e: std::io::Error| {
        CliError::new(
            Code::CapsuleDidNotStart,
            format!("cannot make a capsule's control socket: {e}"),
            "check the process's open-file limit (ulimit -n)",
        )
    };
    let (ours, theirs) = StdUnixStream::pair().map_err(failed)?;
    ours.set_nonblocking(true).map_err(failed)?;
    let ours = tokio::net::UnixStream::from_std(ours).map_err(failed)?;
    Ok((ours, theirs))
}

pub fn terminate_group(pgid: i32, signal: Signal) {
    tree::signal_group(pgid, signal);
}

/// Kills every process still below this one and waits until none is left (bounded).
pub fn sweep() {
    tree::sweep_below(std::process::id() as i32, Duration::from_secs(5));
}

/// Runs `program ARGS` to its end and answers its stdout (`mur install` asks a CLI its
/// version). A program still running after `bound` is killed: a probe never hangs the command.
pub fn probe_output(
    program: &std::path::Path,
    args: &[&str],
    bound: Duration,
) -> Result<String, String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot be run: {e}"))?;
    let deadline = std::time::Instant::now() + bound;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let mut out = String::new();
                if let Some(mut stdout) = child.stdout.take() {
                    let _ = std::io::Read::read_to_string(&mut stdout, &mut out);
                }
                return match status.success() {
                    true => Ok(out),
                    false => Err(format!("exited with {status}")),
                };
            }
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("gave no answer within {} s", bound.as_secs()));
            }
        }
    }
}

/// A capsule's stdout: its first line (the ready line) for whoever waits for it, then the
/// rest relayed to this process's stdout (the entry's answer) or drained. Read by a task on
/// the supervisor's runtime rather than a thread per capsule: a formation starts hundreds.
pub struct CapsuleStdout {
    pub first_line: std::sync::mpsc::Receiver<String>,
    /// `true`: relay to this process's stdout; `false`: drain.
    pub relay: tokio::sync::mpsc::UnboundedSender<bool>,
}

/// Reads a capsule's stdout pipe (see [`CapsuleStdout`]). Called on the runtime.
pub fn read_stdout(stdout: Option<std::os::fd::OwnedFd>) -> CapsuleStdout {
    use tokio::io::AsyncBufReadExt;
    let (line_tx, first_line) = std::sync::mpsc::channel();
    let (relay, mut go) = tokio::sync::mpsc::unbounded_channel::<bool>();
    let pipe = stdout.map(tokio::net::unix::pipe::Receiver::from_owned_fd);
    match pipe {
        Some(Ok(pipe)) => {
            tokio::spawn(async move {
                let mut reader = tokio::io::BufReader::new(pipe);
                let mut line = String::new();
                if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
                    return;
                }
                let _ = line_tx.send(line.trim_end().to_owned());
                let _ = match go.recv().await {
                    Some(true) => tokio::io::copy(&mut reader, &mut tokio::io::stdout()).await,
                    _ => tokio::io::copy(&mut reader, &mut tokio::io::sink()).await,
                };
            });
        }
        // Its waiter then hears that it ended before it was ready, and how it exited.
        Some(Err(e)) => eprintln!("warning: cannot read a capsule's output: {e}"),
        None => {}
    }
    CapsuleStdout { first_line, relay }
}

/// The checks a launch makes before anything starts: what this release can run.
pub fn check_runnable(m: &capsule::manifest::Manifest) -> CliResult<()> {
    // A door that starts no task never runs inference: any driver (or none) will do.
    if m.lifecycle.task_acceptance == capsule::manifest::TaskAcceptance::None {
        return Ok(());
    }
    if m.inference.transport == capsule::manifest::Transport::Http {
        return capsule::runtime::http_agent(m).map(|_| ()).map_err(|why| {
            CliError::new(
                Code::NotAvailable,
                format!("{}: {why}", m.path.display()),
                "give the http driver's artifact a gateway with an https:// endpoint (plain http:// only to 127.0.0.1 or localhost)",
            )
        });
    }
    if capsule::harness::driver_of(m).is_none() {
        return Err(CliError::new(
            Code::NotAvailable,
            format!("{}: inference.driver.artifact names no process driver", m.path.display()),
            "declare the artifact with a process block, or use murmur/driver-claude-code or murmur/driver-codex",
        ));
    }
    Ok(())
}
