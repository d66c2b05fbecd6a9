//! What every child murmur starts gets between fork and exec: its own process group, a
//! parent-death signal (checked against a parent that died before it was armed), inherited
//! descriptors placed where the child expects them, and a clean signal mask.

use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};

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
                cloexec_from(first_unplaced as libc::c_uint);
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

/// Lifts (`true`) or sets (`false`) close-on-exec on `fd`: a descriptor a process started with
/// posix_spawn must inherit is made inheritable for that spawn only (under
/// [`super::spawning`]), there being no code of the parent's between fork and exec to place it.
pub fn set_inheritable(fd: RawFd, inheritable: bool) -> std::io::Result<()> {
    // SAFETY: fcntl on a descriptor number only reads and sets its flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    let flags = match inheritable {
        true => flags & !libc::FD_CLOEXEC,
        false => flags | libc::FD_CLOEXEC,
    };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFD, flags) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// What [`ChildSetup`] did between fork and exec, done by a child started with posix_spawn at
/// its own start: each `(from, to)` descriptor it inherited moved to where it is expected,
/// everything else it inherited beyond those marked close-on-exec, the signal mask emptied (a
/// posix_spawn hands on the spawning thread's), and `signal` armed for its parent's death,
/// checked against a parent (`parent`) that died before it was armed. Call first thing, before
/// the process opens anything or starts a thread.
pub fn settle_spawned(
    fds: &[(RawFd, RawFd)],
    death_signal: Signal,
    parent: i32,
) -> Result<(), String> {
    // Out of the way first, so no move overwrites a descriptor still to be moved.
    let mut moved = Vec::new();
    for &(from, to) in fds {
        // SAFETY: fcntl duplicates a descriptor this process inherited.
        let high = unsafe { libc::fcntl(from, libc::F_DUPFD_CLOEXEC, 64) };
        if high < 0 {
            return Err(format!(
                "descriptor {from} was not inherited: {}",
                std::io::Error::last_os_error()
            ));
        }
        moved.push((from, high, to));
    }
    for &(from, _, _) in &moved {
        // SAFETY: the inherited copy is closed; its duplicate stands in for it.
        unsafe { libc::close(from) };
    }
    for &(_, high, to) in &moved {
        // SAFETY: dup2 onto the expected number (inheritable, as the child expects), then the
        // duplicate is closed.
        unsafe {
            if libc::dup2(high, to) < 0 {
                return Err(format!(
                    "placing descriptor {to}: {}",
                    std::io::Error::last_os_error()
                ));
            }
            libc::close(high);
        }
    }
    let first_unplaced = fds.iter().map(|f| f.1).max().unwrap_or(2) + 1;
    cloexec_from(first_unplaced as libc::c_uint);
    unblock_signals();
    nix::sys::prctl::set_pdeathsig(death_signal)
        .map_err(|e| format!("cannot arm the parent-death signal: {e}"))?;
    if nix::unistd::getppid().as_raw() != parent {
        return Err("its parent ended before it started".into());
    }
    PARENT.store(parent, Ordering::Relaxed);
    Ok(())
}

/// The parent [`settle_spawned`] checked; 0 when it was not called.
static PARENT: AtomicI32 = AtomicI32::new(0);

/// Whether the parent this process settled under has ended since. A process that catches its
/// parent-death signal asks this once it listens for it: a signal that came before it
/// listened, while a handler was already installed, is lost.
pub fn parent_is_gone() -> bool {
    let parent = PARENT.load(Ordering::Relaxed);
    parent != 0 && nix::unistd::getppid().as_raw() != parent
}

/// Marks every descriptor from `first` up close-on-exec: what this process inherited goes no
/// further than it (marked, not closed, so a spawn's own error pipe lives until exec). One
/// syscall, async-signal-safe, so it may run between fork and exec.
pub(super) fn cloexec_from(first: libc::c_uint) {
    // SAFETY: close_range only sets flags on this process's own descriptors.
    unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        );
    }
}
