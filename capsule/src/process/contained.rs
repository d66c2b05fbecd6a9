//! The capsule's side of a contained process: starts the keeper (`mur-keeper __contain`) with the
//! program's environment, folder and pipes, and tells it to interrupt, to end everything, or
//! is told by it how the program ended.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};

use super::files::FilesWall;
use super::keeper::{KeeperArgs, Report};
use super::limits::{self, Reached, Slot};
use super::order::Order;
use super::tree;

/// How long the keeper has to end everything after SIGTERM before it is killed outright.
const END_WITHIN: Duration = Duration::from_secs(3);

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

/// What to run, and how.
pub struct Spec {
    pub program: String,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    /// The program's whole environment (its keeper runs with it too: nothing of this
    /// process's own environment is inherited).
    pub env: Vec<(String, OsString)>,
    /// In namespace mode, jail the program's network: these loopback ports are forwarded into
    /// its namespace (`Contained::ways_out` hands over their listeners and the proxy's).
    pub jail: Option<Vec<u16>>,
    /// In namespace mode, the files wall around the program.
    pub files: Option<super::files::FilesWall>,
    /// The program's bounds (`limits`); its tmp bound applies in namespace mode only.
    pub limits: Option<super::limits::Limits>,
}

/// How the contained program ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Exit {
    Exited(i32),
    Signaled(i32),
    /// It never ran: the message says why.
    NotStarted(String),
    /// Its keeper was ended before it could say (the program went with it).
    Ended,
}

/// A running contained program: its keeper process and the program's pipes.
pub struct Contained {
    keeper: Child,
    /// The keeper's pid (the process this capsule started, and signals).
    pub pid: i32,
    pub stdin: Option<ChildStdin>,
    pub stdout: Option<ChildStdout>,
    pub stderr: Option<ChildStderr>,
    status: Option<tokio::task::JoinHandle<String>>,
    /// The capsule's end of the socket a jailed keeper hands its listeners over.
    jail: Option<OwnedFd>,
    /// The keeper's namespaces: an attempt of its own (namespace mode).
    namespaces: bool,
    /// A ready keeper's order pipe, until its order is sent (`ready`).
    order: Option<OwnedFd>,
    /// Why the capsule ended this attempt before it could run as contained (`ways_out`).
    refused: Option<String>,
    /// The cgroup the keeper was given with its bounds, read and handed back once it ends.
    slot: Option<Slot>,
    /// The limit the program reached, read from its cgroup once it ended.
    reached: Option<Reached>,
}

/// A program and its arguments.
type Program = (OsString, Vec<OsString>);

impl Contained {
    /// A keeper for the next attempt, built with `walls` and waiting for its order.
    pub(super) fn ready(walls: &Walls) -> std::io::Result<Contained> {
        Contained::start(true, walls, &walls.env, None)
    }

    /// Starts a keeper in `env` (nothing of this process's environment is inherited): with
    /// `program`, or (`None`) ready, with an order pipe to send it on later.
    ///
    /// The keeper is started with posix_spawn (vfork and exec), not fork: a fork of the capsule
    /// copies its page tables and write-protects its whole heap, so every page the door's
    /// threads write afterwards takes a copy-on-write fault (the profile in BENCHMARKS.md). That
    /// is why no code runs between fork and exec here; the keeper does that setup itself.
    ///
    /// The keeper is `mur-keeper` through the descriptor the capsule opened at start, or this
    /// very binary as `/proc/self/exe` (`keeper_exe`): never a path looked up now, which a
    /// harness running as the user could have replaced with a program of its own before the
    /// next attempt.
    pub(super) fn start(
        namespaces: bool,
        walls: &Walls,
        env: &[(String, OsString)],
        program: Option<Program>,
    ) -> std::io::Result<Contained> {
        let slot = walls.limits.as_ref().map(|_| {
            static SWEPT: std::sync::Once = std::sync::Once::new();
            SWEPT.call_once(limits::sweep);
            Slot::take()
        });
        let (status_r, status_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        let jail = match walls.jail {
            Some(_) => Some(nix::sys::socket::socketpair(
                nix::sys::socket::AddressFamily::Unix,
                nix::sys::socket::SockType::SeqPacket,
                None,
                nix::sys::socket::SockFlag::SOCK_CLOEXEC,
            )?),
            None => None,
        };
        let order = match program {
            None => Some(nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?),
            Some(_) => None,
        };
        let (program, args) = program.unwrap_or_default();
        let keeper_args = KeeperArgs {
            namespaces,
            net: jail.is_some(),
            forward: walls.jail.clone().unwrap_or_default(),
            jail_fd: jail.as_ref().map(|(_, theirs)| theirs.as_raw_fd()),
            limits: walls.limits.clone(),
            cgroup: slot.as_ref().map(|s| s.name().to_owned()),
            files: walls.files.clone(),
            probe: false,
            order_fd: order.as_ref().map(|(theirs, _)| theirs.as_raw_fd()),
            hide: walls.hide.clone(),
            status_fd: Some(status_w.as_raw_fd()),
            parent: Some(std::process::id() as i32),
            program,
            args,
        };
        let keeper_exe = super::keeper_exe::program();
        let mut cmd = std::process::Command::new(&keeper_exe.exec);
        cmd.arg0(&keeper_exe.arg0)
            .args(keeper_args.to_args())
            .current_dir(&walls.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd.env_clear();
        for (k, v) in env {
            cmd.env(k, v);
        }
        // The keeper inherits the status pipe's write end (and the jail socket's and order
        // pipe's other ends): close-on-exec is lifted for this spawn only (no other spawn runs
        // meanwhile: `spawning`), and this process's copies are closed right after.
        let (jail, theirs) = match jail {
            Some((ours, theirs)) => (Some(ours), Some(theirs)),
            None => (None, None),
        };
        let (order_theirs, order) = match order {
            Some((theirs, ours)) => (Some(theirs), Some(ours)),
            None => (None, None),
        };
        let keeper = {
            let _alone = super::spawning();
            inheritable(&status_w)?;
            for fd in theirs.iter().chain(&order_theirs) {
                inheritable(fd)?;
            }
            let keeper = tokio::process::Command::from(cmd).spawn();
            drop(status_w);
            drop(theirs);
            drop(order_theirs);
            keeper
        };
        let mut keeper = keeper?;
        let pid = keeper.id().map(|p| p as i32).unwrap_or(0);
        let status = tokio::task::spawn_blocking(move || {
            let mut text = String::new();
            let _ = std::fs::File::from(status_r).read_to_string(&mut text);
            text
        });
        Ok(Contained {
            stdin: keeper.stdin.take(),
            stdout: keeper.stdout.take(),
            stderr: keeper.stderr.take(),
            keeper,
            pid,
            status: Some(status),
            jail,
            namespaces,
            order,
            refused: None,
            slot,
            reached: None,
        })
    }

    /// True while a ready keeper is still there to take an order.
    pub(super) fn waiting(&mut self) -> bool {
        self.order.is_some() && matches!(self.keeper.try_wait(), Ok(None))
    }

    /// Sends a ready keeper its program: the spec's command and environment (the walls were
    /// matched by `ready::take`). Written from a blocking thread: an order larger than the
    /// pipe holds waits for the init to read it, and the pipe's end closes after it.
    pub(super) fn hand_over(&mut self, spec: &Spec) -> std::io::Result<()> {
        let order = Order {
            program: spec.program.clone().into(),
            args: spec.args.iter().map(Into::into).collect(),
            env: spec
                .env
                .iter()
                .map(|(k, v)| (k.into(), v.clone()))
                .collect(),
        };
        let pipe = self
            .order
            .take()
            .ok_or_else(|| std::io::Error::other("this keeper took its order"))?;
        let bytes = order.encode();
        tokio::task::spawn_blocking(move || {
            let _ = std::fs::File::from(pipe).write_all(&bytes);
        });
        Ok(())
    }

    /// Ends a keeper no attempt will use: its order pipe closes (its init ends on reading
    /// that), and SIGTERM ends the keeper, which takes its init with it; it is reaped in the
    /// background, and killed if it does not end in time. Nothing is swept from here: another
    /// attempt's keeper may be starting meanwhile.
    pub(super) fn discard(mut self) {
        self.order = None;
        tree::signal_process(self.pid, Signal::SIGTERM);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(self.reaped());
        }
    }

    /// [`Contained::discard`], waited for: the keeper is reaped and its cgroup removed.
    pub(super) async fn discard_now(mut self) {
        self.order = None;
        tree::signal_process(self.pid, Signal::SIGTERM);
        self.reaped().await;
    }

    /// Reaps a keeper told to end (killed if it does not in time), and removes its cgroup.
    async fn reaped(mut self) {
        if tokio::time::timeout(END_WITHIN, self.keeper.wait())
            .await
            .is_err()
        {
            let _ = self.keeper.start_kill();
            let _ = self.keeper.wait().await;
        }
        self.unbound();
    }

    /// A jailed program's ways out of its network namespace, as its keeper bound them inside:
    /// each listener with the loopback port it stands for (0: the egress proxy). Empty when the
    /// program is not jailed. When they cannot all be taken (the keeper failed first and says
    /// why on its status line, or what it sent cannot be read), none is kept: the keeper is
    /// told to end everything, and the attempt ends as not started (`setup-failed`), never run
    /// without its ways out.
    pub async fn ways_out(&mut self) -> Vec<(u16, std::net::TcpListener)> {
        let Some(sock) = self.jail.take() else {
            return Vec::new();
        };
        let received = tokio::task::spawn_blocking(move || super::netns::recv_listeners(&sock))
            .await
            .unwrap_or_else(|e| Err(format!("receiving the jail's listeners: {e}")));
        match received {
            Ok(listeners) => listeners,
            Err(why) => {
                tree::signal_process(self.pid, Signal::SIGTERM);
                self.refused = Some(why);
                Vec::new()
            }
        }
    }

    /// Forwards SIGINT to the program's process group.
    pub fn interrupt(&self) {
        tree::signal_process(self.pid, Signal::SIGINT);
    }

    /// Resolves once the keeper is gone: the program ended and the keeper ended what it left.
    /// Cancel-safe; follow it with [`Contained::outcome`].
    pub async fn exited(&mut self) {
        let _ = self.keeper.wait().await;
    }

    /// How the program ended, once [`Contained::exited`] resolved.
    pub async fn outcome(&mut self) -> Exit {
        let _ = self.keeper.wait().await;
        self.settle().await
    }

    /// Ends the program and everything it started, now: the keeper ends its tree; if it does
    /// not manage within a few seconds it is killed, and what it left is swept from here.
    pub async fn end(&mut self) -> Exit {
        tree::signal_process(self.pid, Signal::SIGTERM);
        if tokio::time::timeout(END_WITHIN, self.keeper.wait())
            .await
            .is_err()
        {
            let _ = self.keeper.start_kill();
            let _ = self.keeper.wait().await;
        }
        self.settle().await
    }

    /// After the keeper is gone, whatever it left with this process (a subreaper) is swept: in
    /// fallback mode the orphans of a keeper that was killed outright, in namespace mode the
    /// namespace's init, which lands here to be reaped when its keeper dies first. A namespace
    /// keeper that reported has nothing to sweep: its init wrote the report, and the init's end
    /// waits for every process of its namespace to end. (A sweep also ends the keeper waiting
    /// ready: the next task then starts one the ordinary way.)
    async fn settle(&mut self) -> Exit {
        let report = if self.namespaces {
            let report = self.report().await;
            if report.is_none() {
                self.sweep().await;
            }
            report
        } else {
            self.sweep().await;
            self.report().await
        };
        self.unbound();
        match (report, self.refused.take()) {
            // The keeper's own reason for failing goes first: it came before the capsule's.
            (Some(Report::SetupFailed(why)), _) => {
                Exit::NotStarted(format!("the harness could not be contained: {why}"))
            }
            (_, Some(why)) => {
                Exit::NotStarted(format!("the harness could not be contained: {why}"))
            }
            (Some(Report::Exited(c)), None) => Exit::Exited(c),
            (Some(Report::Signaled(s)), None) => Exit::Signaled(s),
            (Some(Report::SpawnFailed(why)), None) => Exit::NotStarted(why),
            (None, None) => Exit::Ended,
        }
    }

    /// The limit the program reached, once it ended (`outcome`, `end`): its cgroup counted a
    /// fork refused or a process killed for memory.
    pub fn reached(&self) -> Option<Reached> {
        self.reached
    }

    /// Once the keeper is gone: what its cgroup counted, and the cgroup handed back.
    fn unbound(&mut self) {
        if let Some(slot) = self.slot.take() {
            self.reached = slot.settle();
        }
    }

    /// Ends and reaps every process below this one.
    async fn sweep(&self) {
        let me = std::process::id() as i32;
        let _ = tokio::task::spawn_blocking(move || tree::sweep_below(me, Duration::from_secs(5)))
            .await;
    }

    /// The keeper's status line, read to the pipe's end (the keeper and its init are gone).
    async fn report(&mut self) -> Option<Report> {
        let text = match self.status.take() {
            Some(h) => h.await.unwrap_or_default(),
            None => String::new(),
        };
        text.lines().rev().find_map(Report::parse)
    }
}

/// Lifts close-on-exec from `fd`, so the next process started inherits it.
fn inheritable(fd: &OwnedFd) -> std::io::Result<()> {
    let fd = fd.as_raw_fd();
    // SAFETY: fcntl on a descriptor this process owns.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
