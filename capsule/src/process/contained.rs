//! The capsule's side of a contained process: starts the keeper (`mur __contain`) with the
//! program's environment, folder and pipes, and tells it to interrupt, to end everything, or
//! is told by it how the program ended.

use std::ffi::OsString;
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};

use super::containment::{Containment, Mode};
use super::keeper::{KeeperArgs, Report};
use super::tree;

/// How long the keeper has to end everything after SIGTERM before it is killed outright.
const END_WITHIN: Duration = Duration::from_secs(3);

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
}

impl Contained {
    /// Starts `spec` under a keeper in `containment`, with piped stdin, stdout and stderr.
    ///
    /// The keeper's parent-death signal fires when the *thread* that started it ends, so this
    /// must run on a thread that lives as long as the capsule (a runtime worker), never in
    /// `spawn_blocking`, whose idle threads exit and would take their keepers with them.
    ///
    /// The keeper is started with posix_spawn (vfork and exec), not fork: a fork of the capsule
    /// copies its page tables and write-protects its whole heap, so every page the door's
    /// threads write afterwards takes a copy-on-write fault (the profile in BENCHMARKS.md). That
    /// is why no code runs between fork and exec here; the keeper does that setup itself.
    ///
    /// The keeper is this very binary, started as `/proc/self/exe`: the file the capsule runs,
    /// never the path it was started by, which a harness running as the user could have
    /// replaced with a program of its own before the next attempt.
    pub fn spawn(containment: &Containment, spec: Spec) -> std::io::Result<Contained> {
        let (status_r, status_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        let namespaces = containment.mode == Mode::Namespaces;
        let jail = match (&spec.jail, namespaces) {
            (Some(_), true) => Some(nix::sys::socket::socketpair(
                nix::sys::socket::AddressFamily::Unix,
                nix::sys::socket::SockType::SeqPacket,
                None,
                nix::sys::socket::SockFlag::SOCK_CLOEXEC,
            )?),
            _ => None,
        };
        let keeper_args = KeeperArgs {
            namespaces,
            net: jail.is_some(),
            forward: spec.jail.clone().filter(|_| namespaces).unwrap_or_default(),
            jail_fd: jail.as_ref().map(|(_, theirs)| theirs.as_raw_fd()),
            files: spec.files.clone().filter(|_| namespaces),
            probe: false,
            hide: containment.hidden.clone(),
            status_fd: Some(status_w.as_raw_fd()),
            parent: Some(std::process::id() as i32),
            program: spec.program.into(),
            args: spec.args.into_iter().map(OsString::from).collect(),
        };
        let mut cmd = std::process::Command::new(super::SELF_EXE);
        cmd.args(keeper_args.to_args())
            .current_dir(&spec.cwd)
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd.env_clear();
        for (k, v) in &spec.env {
            cmd.env(k, v);
        }
        // The keeper inherits the status pipe's write end: close-on-exec is lifted for this
        // spawn only (no other spawn runs meanwhile: `spawning`), and this process's copy is
        // closed right after.
        let (jail, theirs) = match jail {
            Some((ours, theirs)) => (Some(ours), Some(theirs)),
            None => (None, None),
        };
        let keeper = {
            let _alone = super::spawning();
            inheritable(&status_w)?;
            if let Some(fd) = &theirs {
                inheritable(fd)?;
            }
            let keeper = tokio::process::Command::from(cmd).spawn();
            drop(status_w);
            drop(theirs);
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
        })
    }

    /// A jailed program's ways out of its network namespace, as its keeper bound them inside:
    /// each listener with the loopback port it stands for (0: the egress proxy). Empty when the
    /// program is not jailed, or its keeper failed before handing them over (it says why on
    /// its status line).
    pub async fn ways_out(&mut self) -> Vec<(u16, std::net::TcpListener)> {
        let Some(sock) = self.jail.take() else {
            return Vec::new();
        };
        tokio::task::spawn_blocking(move || super::netns::recv_listeners(&sock))
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default()
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
    /// namespace's init, which lands here to be reaped when its keeper dies first. Then its
    /// report is read.
    async fn settle(&mut self) -> Exit {
        let me = std::process::id() as i32;
        let _ = tokio::task::spawn_blocking(move || tree::sweep_below(me, Duration::from_secs(5)))
            .await;
        let text = match self.status.take() {
            Some(h) => h.await.unwrap_or_default(),
            None => String::new(),
        };
        match text.lines().rev().find_map(Report::parse) {
            Some(Report::Exited(c)) => Exit::Exited(c),
            Some(Report::Signaled(s)) => Exit::Signaled(s),
            Some(Report::SpawnFailed(why)) => Exit::NotStarted(why),
            Some(Report::SetupFailed(why)) => {
                Exit::NotStarted(format!("the harness could not be contained: {why}"))
            }
            None => Exit::Ended,
        }
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
