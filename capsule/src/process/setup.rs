//! What every child murmur starts gets between fork and exec: its own process group, a
//! parent-death signal (checked against a parent that died before it was armed), inherited
//! descriptors placed where the child expects them, and a clean signal mask.

use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::process::Command;

use nix::sys::signal::Signal;

/// How a child is set up before it runs.
#[derive(Clone, Debug, Default)]
pub struct ChildSetup {
    /// Lead a process group of its own, so signals to the group reach exactly its tree.
    pub own_group: bool,
    /// Delivered to the child when the thread that started it ends.
    pub death_signal: Option<Signal>,
    /// `(from, to)`: the parent's descriptor `from` becomes the child's `to`, inherited.
    pub fds: Vec<(RawFd, RawFd)>,
}

impl ChildSetup {
    /// Applies the setup to `cmd`.
    pub fn apply(&self, cmd: &mut Command) {
        if self.own_group {
            cmd.process_group(0);
        }
        let death = self.death_signal.map(|s| s as libc::c_int);
        let fds = self.fds.clone();
        let first_unplaced = fds.iter().map(|f| f.1).max().unwrap_or(2) + 1;
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: only async-signal-safe libc calls run between fork and exec, on values
        // prepared before the fork.
        unsafe {
            cmd.pre_exec(move || {
                for &(from, to) in &fds {
                    place_fd(from, to)?;
                }
                // Whatever this process inherited itself goes no further (marked, not closed:
                // the spawn's own error pipe must live until exec).
                libc::syscall(
                    libc::SYS_close_range,
                    first_unplaced as libc::c_uint,
                    libc::c_uint::MAX,
                    libc::CLOSE_RANGE_CLOEXEC,
                );
                unblock_signals();
                if let Some(sig) = death {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    // The parent may have died before the signal was armed.
                    if libc::getppid() != parent {
                        libc::_exit(1);
                    }
                }
                Ok(())
            });
        }
    }
}

/// Makes `from` the inherited descriptor `to` (async-signal-safe).
fn place_fd(from: RawFd, to: RawFd) -> std::io::Result<()> {
    // SAFETY: fcntl and dup2 on descriptors the parent handed over.
    unsafe {
        if from == to {
            let flags = libc::fcntl(from, libc::F_GETFD);
            if flags < 0 || libc::fcntl(from, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                return Err(std::io::Error::last_os_error());
            }
        } else if libc::dup2(from, to) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Empties the signal mask: a keeper blocks the signals it waits for, and its children must not
/// inherit that.
pub fn unblock_signals() {
    // SAFETY: sigemptyset and sigprocmask on a local set are async-signal-safe.
    unsafe {
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
    }
}

/// Makes this process the reaper of its orphaned descendants, so none escapes a sweep.
pub fn become_subreaper() {
    let _ = nix::sys::prctl::set_child_subreaper(true);
}
