//! The zygote as `mur run` meets it: the real `mur __capsule` started as one, asked over its
//! socket as the supervisor asks it. What it cannot take it answers with why and goes on
//! serving; what it forks is its asker's child; it ends when its asker closes its end; and it
//! will not be started by hand.

mod support;

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

use nix::sys::socket::{
    recvmsg, sendmsg, socketpair, AddressFamily, ControlMessage, MsgFlags, SockFlag, SockType,
};
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::Pid;
use serde_json::{json, Value};
use support::*;

/// A zygote started as `mur run` starts one, and the asker's end of its socket.
struct Zygote {
    child: Child,
    socket: OwnedFd,
}

impl Zygote {
    fn start(home: &Home) -> Zygote {
        let (ours, theirs) = seqpacket_pair();
        let child = zygote_command(home, &theirs, std::process::id())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(theirs);
        Zygote {
            child,
            socket: ours,
        }
    }

    /// Sends `body` with `fds`, answers the zygote's reply.
    fn ask(&self, body: &[u8], fds: &[BorrowedFd<'_>]) -> Value {
        let raw: Vec<RawFd> = fds.iter().map(|fd| fd.as_raw_fd()).collect();
        let rights = [ControlMessage::ScmRights(&raw)];
        let cmsgs: &[ControlMessage] = if raw.is_empty() { &[] } else { &rights };
        sendmsg::<()>(
            self.socket.as_raw_fd(),
            &[IoSlice::new(body)],
            cmsgs,
            MsgFlags::MSG_NOSIGNAL,
            None,
        )
        .unwrap();
        let mut buf = [0u8; 4096];
        let mut iov = [IoSliceMut::new(&mut buf)];
        let got = recvmsg::<()>(self.socket.as_raw_fd(), &mut iov, None, MsgFlags::empty())
            .unwrap()
            .bytes;
        serde_json::from_slice(&buf[..got])
            .unwrap_or_else(|e| panic!("the zygote's answer is not JSON ({e}): {:?}", &buf[..got]))
    }

    /// Closes the asker's end; answers the zygote's exit status and what it wrote to stderr.
    fn close(self) -> (Option<i32>, String) {
        drop(self.socket);
        let out = self.child.wait_with_output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

fn seqpacket_pair() -> (OwnedFd, OwnedFd) {
    socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .unwrap()
}

/// `mur __capsule` asked to be a zygote on `socket` under `parent`, as `mur run` starts one.
fn zygote_command(home: &Home, socket: &OwnedFd, parent: u32) -> Command {
    let fd = socket.as_raw_fd();
    let mut cmd = Command::new(&home.bin);
    cmd.arg("__capsule")
        .env("MURMUR_HOME", &home.home)
        .env("MURMUR_ZYGOTE_FD", fd.to_string())
        .env("MURMUR_ZYGOTE_PARENT", parent.to_string());
    // SAFETY: fcntl is async-signal-safe; it lifts close-on-exec from this one descriptor in
    // the child alone (other tests spawn meanwhile, and must not inherit it).
    unsafe {
        cmd.pre_exec(move || match libc::fcntl(fd, libc::F_SETFD, 0) {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        });
    }
    cmd
}

/// The descriptors process `pid` holds, by number.
fn open_fds(pid: u32) -> Vec<u32> {
    let mut fds: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    fds.sort();
    fds
}

fn null() -> std::fs::File {
    std::fs::File::open("/dev/null").unwrap()
}

#[test]
fn what_the_zygote_cannot_take_it_refuses_with_why_and_goes_on_serving() {
    let home = Home::new();
    let zygote = Zygote::start(&home);
    let stdout = null();
    let listener = null();

    let unreadable = zygote.ask(b"not json", &[stdout.as_fd()]);
    let why = unreadable["Failed"].as_str().unwrap_or_default();
    assert!(why.starts_with("unreadable request: "), "{unreadable}");

    // A descriptor named but not sent.
    let short = json!({"env": [], "fd_env": ["MURMUR_LISTEN_FD"]}).to_string();
    assert_eq!(
        zygote.ask(short.as_bytes(), &[stdout.as_fd()]),
        json!({"Failed": "1 descriptors for 1 names and a stdout"})
    );

    // More descriptors than it names: all are taken and closed, none kept open in the zygote
    // for the capsules it forks next to inherit.
    let held = open_fds(zygote.child.id());
    let many: Vec<std::fs::File> = (0..12).map(|_| null()).collect();
    let wide = json!({"env": [], "fd_env": ["A", "B", "C"]}).to_string();
    let fds: Vec<BorrowedFd> = many.iter().map(|f| f.as_fd()).collect();
    assert_eq!(
        zygote.ask(wide.as_bytes(), &fds),
        json!({"Failed": "12 descriptors for 3 names and a stdout"})
    );
    assert_eq!(open_fds(zygote.child.id()), held);

    // Still serving: a well-formed request is forked, and the child is the asker's (it is
    // reaped here), though its config is nothing a capsule can run.
    let fine = json!({
        "env": [["MURMUR_CAPSULE_CONFIG", "{}"], ["MURMUR_SUPERVISOR_PID", std::process::id().to_string()]],
        "fd_env": ["MURMUR_LISTEN_FD", "MURMUR_CONTROL_FD"],
    })
    .to_string();
    let control = null();
    let forked = zygote.ask(
        fine.as_bytes(),
        &[stdout.as_fd(), listener.as_fd(), control.as_fd()],
    );
    let pid = forked["Pid"]
        .as_i64()
        .unwrap_or_else(|| panic!("no pid: {forked}"));
    assert_ne!(pid, zygote.child.id() as i64);
    match waitpid(Pid::from_raw(pid as i32), None).unwrap() {
        WaitStatus::Exited(_, code) => assert_ne!(code, 0, "a capsule with an empty config ran"),
        other => panic!("the forked capsule ended as {other:?}"),
    }

    let (code, stderr) = zygote.close();
    assert_eq!(code, Some(0), "{stderr}");
    assert_nothing_left(&home, std::time::Duration::from_secs(10));
}

#[test]
fn a_zygote_is_not_started_by_hand() {
    let home = Home::new();
    let by_hand = Command::new(&home.bin)
        .arg("__capsule")
        .env("MURMUR_HOME", &home.home)
        .env("MURMUR_ZYGOTE_FD", "3")
        .output()
        .unwrap();
    assert_eq!(by_hand.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&by_hand.stderr),
        "error: a zygote is started by `mur run`, not by hand\n"
    );
    // A parent it does not have: it refuses before it serves anything.
    let (_ours, theirs) = seqpacket_pair();
    let wrong = zygote_command(&home, &theirs, 1).output().unwrap();
    assert_eq!(wrong.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&wrong.stderr),
        "error: the zygote cannot start: its parent ended before it started\n"
    );
}
