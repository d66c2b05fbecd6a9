//! The zygote: one `mur` started for a formation's launch, which forks each member's capsule
//! where the supervisor would otherwise spawn `mur` again for each. Every exec of the 12 MB
//! binary costs the new capsule its loading and relocation (about 1 ms of a core on the
//! benchmark machine), and costs the supervisor, whose descriptor table grows with every member
//! it starts, a copy and a close of that whole table; a fork of a small single-threaded process
//! costs neither (BENCHMARKS.md, "500 members").
//!
//! Each capsule is forked with `CLONE_PARENT`: its parent is the supervisor, as if spawned by
//! it, which reaps it, and whose death its parent-death signal follows. What the supervisor
//! sends for each: the environment variables the capsule is to find, its stdout pipe, and the
//! descriptors it inherits, each named by the variable that is to hold its number. The zygote
//! answers the pid. It ends when the supervisor closes its end, and dies with the supervisor.
//!
//! Nothing here may draw randomness, seed a hash map or start a thread before it forks: each
//! child would inherit that state (a raw clone runs no atfork handler, which is how `rand`
//! would reseed), and its task tokens would be its siblings'.

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::sync::Mutex;
use std::time::Duration;

use nix::sys::signal::Signal;
use nix::sys::socket::{
    recvmsg, sendmsg, setsockopt, socketpair, sockopt, AddressFamily, ControlMessage,
    ControlMessageOwned, MsgFlags, SockFlag, SockType,
};
use nix::sys::time::TimeVal;
use serde::{Deserialize, Serialize};

/// Where the zygote finds its socket, and the supervisor's pid (its parent, checked). It is
/// started with the capsules' own arguments (`mur __capsule`), which its children keep: a
/// forked capsule shows in `ps` as a spawned one does; this variable makes it the zygote.
pub const SOCKET_ENV: &str = "MURMUR_ZYGOTE_FD";
pub const PARENT_ENV: &str = "MURMUR_ZYGOTE_PARENT";
/// The fd the zygote moves its socket to.
const SOCKET_FD: RawFd = 3;
/// The largest request: a capsule config is a few KiB; a datagram holds it whole or fails.
const MAX_REQUEST: usize = 256 * 1024;
/// The most descriptors one message can carry (the kernel's SCM_MAX_FD): room for all of them,
/// so that none is ever cut off unread and left open here, where every capsule forked after
/// would inherit it.
const MAX_FDS: usize = 253;

/// One capsule to fork.
#[derive(Serialize, Deserialize)]
struct Request {
    /// Set in the capsule's environment before it runs.
    env: Vec<(String, String)>,
    /// The variable that names each descriptor after the stdout pipe, in order.
    fd_env: Vec<String>,
}

#[derive(Serialize, Deserialize)]
enum Reply {
    Pid(i32),
    Failed(String),
}

/// How long the supervisor waits for a zygote's answer before it gives the zygote up: a fork
/// takes a millisecond; a zygote that is stopped (SIGSTOP) or wedged must not hang a launch.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);

/// The supervisor's end of a zygote. A zygote that fails once (it died, was stopped, answered
/// what cannot be read) is killed and never asked again: its requests and answers may be out
/// of step, and the caller starts capsules another way.
pub struct Zygote {
    /// `None` once given up. Held for one request and its answer, so that no answer is ever
    /// read for another's request.
    socket: Mutex<Option<OwnedFd>>,
    /// Its pid, which leads its process group.
    pid: i32,
}

impl Zygote {
    /// Starts the zygote: this very binary, with `args` (a capsule's), in its own process
    /// group so that a Ctrl-C to the terminal's group reaches the supervisor alone, which stops
    /// the launch in order.
    pub fn start(args: &[&str]) -> std::io::Result<Zygote> {
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )?;
        let fd = theirs.as_raw_fd();
        let mut cmd = std::process::Command::new(super::SELF_EXE);
        cmd.args(args)
            .env(SOCKET_ENV, fd.to_string())
            .env(PARENT_ENV, std::process::id().to_string())
            .process_group(0)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null());
        let spawned = {
            let _alone = super::spawning();
            super::set_inheritable(fd, true).and_then(|()| cmd.spawn())
        };
        drop(theirs);
        let child = spawned?;
        Zygote::over(ours, child.id() as i32, ANSWER_WITHIN)
    }

    /// The supervisor's end on `socket`, to the zygote `pid`, each answer awaited `within`.
    fn over(socket: OwnedFd, pid: i32, within: Duration) -> std::io::Result<Zygote> {
        let bound = TimeVal::new(within.as_secs() as _, within.subsec_micros() as _);
        setsockopt(&socket, sockopt::ReceiveTimeout, &bound)?;
        setsockopt(&socket, sockopt::SendTimeout, &bound)?;
        Ok(Zygote {
            socket: Mutex::new(Some(socket)),
            pid,
        })
    }

    /// Whether it is still asked (it has not failed).
    pub fn usable(&self) -> bool {
        self.socket
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .is_some()
    }

    /// Forks a capsule: `env` set, `stdout` on its fd 1, and each of `fds` inherited, its
    /// number in the variable `fds` pairs it with. Answers its pid.
    pub fn fork(
        &self,
        env: &[(&str, &str)],
        stdout: BorrowedFd<'_>,
        fds: &[(&str, BorrowedFd<'_>)],
    ) -> std::io::Result<i32> {
        let mut held = self
            .socket
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let Some(socket) = held.as_ref() else {
            return Err(std::io::Error::other("the zygote was given up"));
        };
        let answer = ask(socket, env, stdout, fds);
        if answer.is_err() {
            // SIGKILL also ends a stopped zygote, before it can fork what it was last asked.
            super::tree::signal_group(self.pid, Signal::SIGKILL);
            *held = None;
        }
        answer
    }
}

/// One request and its answer; any failure leaves the zygote unusable.
fn ask(
    socket: &OwnedFd,
    env: &[(&str, &str)],
    stdout: BorrowedFd<'_>,
    fds: &[(&str, BorrowedFd<'_>)],
) -> std::io::Result<i32> {
    let request = Request {
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        fd_env: fds.iter().map(|(k, _)| k.to_string()).collect(),
    };
    let bytes = serde_json::to_vec(&request).map_err(std::io::Error::other)?;
    let raw: Vec<RawFd> = std::iter::once(stdout.as_raw_fd())
        .chain(fds.iter().map(|(_, fd)| fd.as_raw_fd()))
        .collect();
    // A socket with a timeout is not restarted after a signal (signal(7)): EINTR is retried.
    retried(|| {
        sendmsg::<()>(
            socket.as_raw_fd(),
            &[IoSlice::new(&bytes)],
            &[ControlMessage::ScmRights(&raw)],
            MsgFlags::MSG_NOSIGNAL,
            None,
        )
    })?;
    let mut buf = [0u8; 4096];
    let got = retried(|| {
        let mut iov = [IoSliceMut::new(&mut buf)];
        recvmsg::<()>(
            socket.as_raw_fd(),
            &mut iov,
            None,
            MsgFlags::MSG_CMSG_CLOEXEC,
        )
        .map(|m| m.bytes)
    })
    .map_err(|e| match e {
        nix::errno::Errno::EAGAIN => std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!(
                "the zygote did not answer within {} s",
                ANSWER_WITHIN.as_secs()
            ),
        ),
        e => e.into(),
    })?;
    if got == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the zygote has ended",
        ));
    }
    match serde_json::from_slice(&buf[..got]).map_err(std::io::Error::other)? {
        Reply::Pid(pid) => Ok(pid),
        Reply::Failed(why) => Err(std::io::Error::other(why)),
    }
}

/// `call`, again for as long as a signal interrupts it.
fn retried<T>(mut call: impl FnMut() -> nix::Result<T>) -> nix::Result<T> {
    loop {
        match call() {
            Err(nix::errno::Errno::EINTR) => continue,
            done => return done,
        }
    }
}

/// Whether this process was started as a zygote ([`Zygote::start`]).
pub fn is_asked() -> bool {
    std::env::var_os(SOCKET_ENV).is_some()
}

/// The zygote, first thing in the process (before any thread exists, and none ever will
/// here): serves fork requests until the supervisor closes its end; each child runs `run` and
/// exits with its answer.
pub fn main(run: fn() -> i32) -> i32 {
    let number = |var: &str| std::env::var(var).ok().and_then(|v| v.parse::<i32>().ok());
    let (Some(socket), Some(parent)) = (number(SOCKET_ENV), number(PARENT_ENV)) else {
        eprintln!("error: a zygote is started by `mur run`, not by hand");
        return 2;
    };
    std::env::remove_var(SOCKET_ENV);
    std::env::remove_var(PARENT_ENV);
    if let Err(why) = super::settle_spawned(&[(socket, SOCKET_FD)], Signal::SIGKILL, parent) {
        eprintln!("error: the zygote cannot start: {why}");
        return 2;
    }
    let mut buf = vec![0u8; MAX_REQUEST];
    loop {
        let (request, fds) = match receive(&mut buf) {
            Ok(Some(r)) => r,
            Ok(None) => return 0,
            Err(why) => {
                if reply(&Reply::Failed(why)).is_err() {
                    return 0;
                }
                continue;
            }
        };
        let answer = match fork_child() {
            Ok(0) => std::process::exit(child(&request, fds, run)),
            Ok(pid) => Reply::Pid(pid),
            Err(e) => Reply::Failed(format!("cannot fork a capsule: {e}")),
        };
        drop(fds);
        if reply(&answer).is_err() {
            return 0;
        }
    }
}

/// The next request and its descriptors; `None` once the supervisor has closed its end.
fn receive(buf: &mut [u8]) -> Result<Option<(Request, Vec<OwnedFd>)>, String> {
    let mut space = nix::cmsg_space!([RawFd; MAX_FDS]);
    let mut iov = [IoSliceMut::new(buf)];
    let msg = loop {
        match recvmsg::<()>(
            SOCKET_FD,
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Ok(m) => break m,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return Ok(None),
        }
    };
    let mut fds = Vec::new();
    for cmsg in msg
        .cmsgs()
        .map_err(|e| format!("unreadable descriptors: {e}"))?
    {
        if let ControlMessageOwned::ScmRights(raw) = cmsg {
            // SAFETY: each descriptor was just received, and is owned by nothing else.
            fds.extend(
                raw.into_iter()
                    .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
            );
        }
    }
    let (bytes, truncated) = (msg.bytes, msg.flags.contains(MsgFlags::MSG_TRUNC));
    if bytes == 0 && fds.is_empty() {
        return Ok(None);
    }
    if truncated || msg.flags.contains(MsgFlags::MSG_CTRUNC) {
        return Err("the request is larger than a zygote takes".into());
    }
    let request: Request =
        serde_json::from_slice(&iov[0][..bytes]).map_err(|e| format!("unreadable request: {e}"))?;
    if fds.len() != request.fd_env.len() + 1 {
        return Err(format!(
            "{} descriptors for {} names and a stdout",
            fds.len(),
            request.fd_env.len()
        ));
    }
    Ok(Some((request, fds)))
}

fn reply(answer: &Reply) -> nix::Result<usize> {
    let bytes = serde_json::to_vec(answer).unwrap_or_default();
    sendmsg::<()>(
        SOCKET_FD,
        &[IoSlice::new(&bytes)],
        &[],
        MsgFlags::MSG_NOSIGNAL,
        None,
    )
}

/// fork(), with the supervisor as the child's parent. Answers 0 in the child.
fn fork_child() -> std::io::Result<i32> {
    let flags = (libc::CLONE_PARENT | libc::SIGCHLD) as libc::c_ulong;
    // SAFETY: a clone without CLONE_VM is a fork: the child gets a copy of this process, which
    // is single-threaded (no lock can be held by a thread the child lacks). With CLONE_PARENT
    // its parent is this process's (the supervisor), and it signals that parent when it ends.
    let pid = unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) };
    match pid {
        -1 => Err(std::io::Error::last_os_error()),
        pid => Ok(pid as i32),
    }
}

/// The forked child, before it becomes the capsule: its own process group, its stdout, its
/// environment; then `run`, which takes its descriptors as a spawned capsule does.
fn child(request: &Request, mut fds: Vec<OwnedFd>, run: fn() -> i32) -> i32 {
    // SAFETY: this is the zygote's socket, which the capsule must not hold.
    unsafe { libc::close(SOCKET_FD) };
    let stdout = fds.remove(0);
    // SAFETY: setpgid on itself; dup2 of an owned descriptor onto stdout.
    let placed =
        unsafe { libc::setpgid(0, 0) == 0 && libc::dup2(stdout.as_fd().as_raw_fd(), 1) == 1 };
    if !placed {
        eprintln!(
            "error: a forked capsule cannot take its place: {}",
            std::io::Error::last_os_error()
        );
        return 2;
    }
    drop(stdout);
    for (name, value) in &request.env {
        std::env::set_var(name, value);
    }
    for (name, fd) in request.fd_env.iter().zip(fds) {
        // Kept open for `run`, which moves it where it belongs.
        std::env::set_var(name, fd_number(fd).to_string());
    }
    run()
}

fn fd_number(fd: OwnedFd) -> RawFd {
    std::os::fd::IntoRawFd::into_raw_fd(fd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Child, Command, Stdio};

    /// A process standing in for the zygote's, in a group of its own, to see whether a zygote
    /// given up is killed.
    fn stand_in() -> Child {
        Command::new("sleep")
            .arg("60")
            .process_group(0)
            .stdin(Stdio::null())
            .spawn()
            .expect("sleep starts")
    }

    fn pair() -> (OwnedFd, OwnedFd) {
        socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .expect("a socket pair")
    }

    fn fork_one(zygote: &Zygote) -> std::io::Result<i32> {
        let null = std::fs::File::open("/dev/null").expect("/dev/null");
        zygote.fork(&[("A", "1")], null.as_fd(), &[("B", null.as_fd())])
    }

    /// The signal that ended `child`, waited for (bounded); `None` if it still ran, then ended
    /// here.
    fn killed_by(mut child: Child) -> Option<i32> {
        for _ in 0..500 {
            if let Ok(Some(status)) = child.try_wait() {
                return status.signal();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    }

    #[test]
    fn a_zygote_that_has_ended_is_given_up_and_never_asked_again() {
        let process = stand_in();
        let (ours, theirs) = pair();
        drop(theirs);
        let zygote = Zygote::over(ours, process.id() as i32, Duration::from_secs(5)).unwrap();
        assert!(fork_one(&zygote).is_err());
        let again = fork_one(&zygote).unwrap_err();
        assert_eq!(again.to_string(), "the zygote was given up");
        assert_eq!(killed_by(process), Some(libc::SIGKILL));
    }

    #[test]
    fn a_zygote_that_does_not_answer_is_given_up_after_the_bound() {
        let process = stand_in();
        let (ours, _theirs) = pair();
        let zygote = Zygote::over(ours, process.id() as i32, Duration::from_millis(200)).unwrap();
        let silent = fork_one(&zygote).unwrap_err();
        assert_eq!(silent.kind(), std::io::ErrorKind::TimedOut, "{silent}");
        assert!(silent.to_string().contains("did not answer"), "{silent}");
        assert_eq!(killed_by(process), Some(libc::SIGKILL));
    }

    /// A zygote's side played by a thread: the request arrives whole, with its descriptors in
    /// order; its answer is what `fork` returns; a refusal gives the zygote up.
    #[test]
    fn a_request_carries_its_environment_and_descriptors_and_the_answer_comes_back() {
        let process = stand_in();
        let (ours, theirs) = pair();
        let zygote = Zygote::over(ours, process.id() as i32, Duration::from_secs(5)).unwrap();
        let served = std::thread::spawn(move || {
            let mut got = Vec::new();
            for answer in [
                Reply::Pid(4242),
                Reply::Failed("cannot fork a capsule".into()),
            ] {
                let mut buf = vec![0u8; 4096];
                let mut space = nix::cmsg_space!([RawFd; MAX_FDS]);
                let mut iov = [IoSliceMut::new(&mut buf)];
                let msg = recvmsg::<()>(
                    theirs.as_raw_fd(),
                    &mut iov,
                    Some(&mut space),
                    MsgFlags::MSG_CMSG_CLOEXEC,
                )
                .unwrap();
                let fds: usize = msg
                    .cmsgs()
                    .unwrap()
                    .map(|c| match c {
                        ControlMessageOwned::ScmRights(raw) => {
                            raw.iter()
                                .for_each(|fd| drop(unsafe { OwnedFd::from_raw_fd(*fd) }));
                            raw.len()
                        }
                        _ => 0,
                    })
                    .sum();
                let bytes = msg.bytes;
                let request: Request = serde_json::from_slice(&buf[..bytes]).unwrap();
                got.push((request.env, request.fd_env, fds));
                let reply = serde_json::to_vec(&answer).unwrap();
                sendmsg::<()>(
                    theirs.as_raw_fd(),
                    &[IoSlice::new(&reply)],
                    &[],
                    MsgFlags::empty(),
                    None,
                )
                .unwrap();
            }
            got
        });
        assert_eq!(fork_one(&zygote).unwrap(), 4242);
        let refused = fork_one(&zygote).unwrap_err();
        assert_eq!(refused.to_string(), "cannot fork a capsule");
        let got = served.join().unwrap();
        let one = (
            vec![("A".to_owned(), "1".to_owned())],
            vec!["B".to_owned()],
            2,
        );
        assert_eq!(got, vec![one.clone(), one]);
        assert_eq!(
            fork_one(&zygote).unwrap_err().to_string(),
            "the zygote was given up"
        );
        assert_eq!(killed_by(process), Some(libc::SIGKILL));
    }
}
