//! What of the kernel's own files an attempt sees (DESIGN §8): a `/dev` of its own, and, when
//! the harness is host root, a `/proc` and `/sys` that cannot change one host setting.
//!
//! `/dev` is rebuilt in the attempt's mount namespace as bubblewrap's `--dev` does: an empty
//! tmpfs holding only `null`, `zero`, `full`, `random`, `urandom` and `tty` (bound from the
//! host's), a `devpts` of its own, an empty `shm` and the usual links. A read-only mount does not
//! stop writes to a device node, so the host's `/dev` would give a root harness its disks and
//! `/dev/kmsg`, and anyone the user's other programs' POSIX shared memory (`/dev/shm`).
//!
//! A root harness is the host's uid 0 (its user namespace maps uid 0 to itself, so that it owns
//! what it writes in its work folder), and the kernel lets uid 0 write `/proc/sys` whatever its
//! capabilities. So for root the paths runc masks are masked (an empty read-only folder or
//! `/dev/null`) and the ones it makes read-only are read-only. With the namespace's `/proc` no
//! longer whole, the kernel also refuses a fresh, unmasked `/proc` to any namespace made inside
//! (`mount_too_revealing`): Codex's sandbox then runs without one, as it does in containers.
//! A non-root harness cannot write those files anyway; its `/proc` is left whole.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use nix::fcntl::{open, OFlag};
use nix::mount::{mount, MsFlags};
use nix::sys::stat::Mode;

/// The host devices an attempt keeps.
const DEVICES: [&str; 6] = ["null", "zero", "full", "random", "urandom", "tty"];

/// Links every `/dev` has.
const LINKS: [(&str, &str); 5] = [
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
    ("ptmx", "pts/ptmx"),
];

/// Folders of `/dev` a harness may write even inside the read-only files wall.
pub const DEV_WRITABLE: [&str; 2] = ["/dev/shm", "/dev/pts"];

/// Masked for a root harness, as runc masks them: folders under an empty read-only tmpfs, files
/// under `/dev/null`.
const MASKED: [&str; 12] = [
    "/proc/acpi",
    "/proc/asound",
    "/proc/interrupts",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
];

/// Read-only for a root harness, as runc makes them.
const READ_ONLY: [&str; 5] = [
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

/// Replaces `/dev` with the attempt's own. Call it in the attempt's mount namespace, with its
/// capabilities, before the files wall (which makes it read-only but [`DEV_WRITABLE`]).
pub fn own_dev() -> Result<(), String> {
    let held: Vec<(&str, OwnedFd)> = DEVICES
        .iter()
        .filter_map(|name| {
            let path = format!("/dev/{name}");
            // A device the host lacks is not made up.
            open(
                path.as_str(),
                OFlag::O_PATH | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .ok()
            // SAFETY: the descriptor was just opened, and nothing else owns it.
            .map(|fd| (*name, unsafe { OwnedFd::from_raw_fd(fd) }))
        })
        .collect();
    let fs = |what: &str, target: &str, flags: MsFlags, options: &str| {
        mount(Some(what), target, Some(what), flags, Some(options))
            .map_err(|e| format!("mounting the attempt's {target}: {e}"))
    };
    let private = MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC;
    fs("tmpfs", "/dev", private, "mode=0755,size=64k")?;
    for (name, fd) in &held {
        let target = format!("/dev/{name}");
        std::fs::File::create(&target).map_err(|e| format!("making {target}: {e}"))?;
        let source = format!("/proc/self/fd/{}", fd.as_raw_fd());
        mount(
            Some(source.as_str()),
            target.as_str(),
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .map_err(|e| format!("keeping {target}: {e}"))?;
    }
    for (name, to) in LINKS {
        std::os::unix::fs::symlink(to, format!("/dev/{name}"))
            .map_err(|e| format!("linking /dev/{name}: {e}"))?;
    }
    for dir in DEV_WRITABLE {
        std::fs::create_dir(dir).map_err(|e| format!("making {dir}: {e}"))?;
    }
    fs(
        "devpts",
        "/dev/pts",
        private,
        "newinstance,ptmxmode=0666,mode=0620",
    )?;
    fs(
        "tmpfs",
        "/dev/shm",
        private | MsFlags::MS_NODEV,
        "mode=1777,size=64m",
    )?;
    Ok(())
}

/// For a root harness, masks and makes read-only what runc does, in the namespace's own
/// `/proc` (mounted just before) and in `/sys`. Any other harness: nothing. A path the kernel
/// does not have is skipped; one that is there but cannot be masked refuses the attempt.
pub fn guard_proc_for_root() -> Result<(), String> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(());
    }
    for path in MASKED {
        mask(Path::new(path))?;
    }
    for path in READ_ONLY {
        read_only(Path::new(path))?;
    }
    Ok(())
}

/// Masks `path` where it exists: a folder under an empty read-only tmpfs, anything else under
/// `/dev/null`. One that is there and cannot be masked refuses the attempt. Also hides the
/// user's secrets (`files`).
pub(super) fn mask(path: &Path) -> Result<(), String> {
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(());
    };
    let masked = if meta.is_dir() {
        mount(
            Some("tmpfs"),
            path,
            Some("tmpfs"),
            MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            Some("mode=0555,size=4k"),
        )
    } else {
        mount(
            Some("/dev/null"),
            path,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
    };
    masked.map_err(|e| format!("masking {}: {e}", path.display()))
}

fn read_only(path: &Path) -> Result<(), String> {
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(());
    }
    let kept = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    mount(
        Some(path),
        path,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .and_then(|()| {
        mount(
            None::<&str>,
            path,
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | kept,
            None::<&str>,
        )
    })
    .map_err(|e| format!("making {} read-only: {e}", path.display()))
}
