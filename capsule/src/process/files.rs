//! The files half of an attempt's jail (DESIGN §8), raised by the keeper in the attempt's mount
//! namespace: every mount is remounted read-only but the folders the harness may write (its
//! work folder, its private tmp, its CLI's state folder, and what `MURMUR_HARNESS_WRITABLE`
//! adds); the user's runtime folder is a private, empty tmpfs (the user's agent sockets are not
//! there); and `$MURMUR_HOME/records` is covered so that only this session's own records are
//! there. The folders the harness needs are brought back at their own paths.
//! A folder that cannot be kept, made writable or covered refuses the attempt: the wall never
//! fails open.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{open, OFlag};
use nix::mount::{mount, MsFlags};
use nix::sys::stat::Mode;

/// What the keeper raises for one attempt.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FilesWall {
    /// `$MURMUR_HOME/records`, covered so other sessions' records are out of sight.
    pub records: Option<PathBuf>,
    /// Folders under `records` brought back (this session's own records).
    pub keep: Vec<PathBuf>,
    /// Folders the harness may write.
    pub writable: Vec<PathBuf>,
    /// The user's secrets (and other murmur homes' records): hidden where they exist, a folder
    /// under an empty read-only tmpfs, a file under `/dev/null`.
    pub secrets: Vec<PathBuf>,
    /// Files and folders inside writable folders that decide what the user's next command
    /// runs: made read-only where they exist.
    pub protect: Vec<PathBuf>,
}

/// File systems with no files of the user's: a remount they refuse is no hole in the wall.
const PSEUDO: [&str; 20] = [
    "proc",
    "sysfs",
    "cgroup",
    "cgroup2",
    "devpts",
    "mqueue",
    "debugfs",
    "tracefs",
    "securityfs",
    "pstore",
    "bpf",
    "configfs",
    "fusectl",
    "hugetlbfs",
    "binfmt_misc",
    "autofs",
    "nsfs",
    "efivarfs",
    "rpc_pipefs",
    "selinuxfs",
];

/// Folders covered by a private, writable tmpfs, so that what other programs of the user's keep
/// there (an ssh or gpg agent's socket) is out of sight: the user's runtime folder
/// (`/run/user/<uid>`), where it exists. `/tmp` is not covered: programs and work folders live
/// under it too (a clone in `/tmp`, its build, its node_modules), and a cover would hide them
/// from the harness; it stays read-only instead, with `TMPDIR` private.
fn private_folders() -> Vec<PathBuf> {
    let uid = nix::unistd::geteuid().as_raw();
    Some(PathBuf::from(format!("/run/user/{uid}")))
        .into_iter()
        .filter(|d| d.is_dir())
        .collect()
}

/// Codex's app-server rendezvous folder (`/tmp/codex-daemon-<uid>`, which the Codex preset makes
/// before the jail: `harness::preset`), covered by an empty, read-only folder of the attempt's
/// own, 0700 and the harness's: the user's own Codex daemon sockets there (an RPC that runs
/// commands outside every sandbox) are out of sight, and Codex finds the private folder its
/// sandbox insists on. Only a real folder is covered: a mount follows a symlink, and `/tmp` is
/// everyone's.
fn codex_daemon_folder() -> Option<PathBuf> {
    let uid = nix::unistd::geteuid().as_raw();
    let dir = PathBuf::from(format!("/tmp/codex-daemon-{uid}"));
    std::fs::symlink_metadata(&dir)
        .is_ok_and(|m| m.is_dir())
        .then_some(dir)
}

/// Raises the wall; call it in the attempt's own mount namespace, with its capabilities.
pub fn raise(wall: &FilesWall) -> Result<(), String> {
    for dir in wall.writable.iter().chain(&wall.keep) {
        if !dir.is_absolute() || !dir.is_dir() {
            return Err(format!(
                "cannot let the harness at {}: it is not an absolute path to a folder",
                dir.display()
            ));
        }
    }
    let cwd = std::env::current_dir().map_err(|e| format!("reading the work folder: {e}"))?;
    // Held before anything is covered: a cover takes the paths of what lies beneath it.
    let mut held: Vec<(PathBuf, OwnedFd)> = wall
        .keep
        .iter()
        .chain(&wall.writable)
        .map(|k| {
            open(
                k.as_path(),
                OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            // SAFETY: the descriptor was just opened, and nothing else owns it.
            .map(|fd| (k.clone(), unsafe { OwnedFd::from_raw_fd(fd) }))
            .map_err(|e| format!("keeping {}: {e}", k.display()))
        })
        .collect::<Result<_, _>>()?;
    // Outer folders come back first, so a folder inside one lands on top of it.
    held.sort_by_key(|(p, _)| p.components().count());
    let private = private_folders();
    for dir in &private {
        cover(dir, "mode=1777", &held)?;
    }
    if let Some(dir) = codex_daemon_folder() {
        cover(&dir, "mode=0700,size=64k", &held)?;
    }
    if let Some(records) = &wall.records {
        if !records.is_dir() {
            return Err(format!(
                "cannot hide {}: it is not a folder",
                records.display()
            ));
        }
        cover(records, "mode=0700,size=64k", &held)?;
    }
    // Hidden as runc masks: a folder under an empty read-only tmpfs, a file under /dev/null.
    for secret in &wall.secrets {
        super::masks::mask(secret)?;
    }
    for dir in &wall.writable {
        mount(
            Some(dir),
            dir,
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            None::<&str>,
        )
        .map_err(|e| format!("keeping {} writable: {e}", dir.display()))?;
    }
    let dev = super::masks::DEV_WRITABLE
        .iter()
        .map(PathBuf::from)
        .filter(|d| d.is_dir());
    let open: Vec<PathBuf> = wall
        .writable
        .iter()
        .chain(&private)
        .cloned()
        .chain(dev)
        .collect();
    read_only_but(&open)?;
    for path in &wall.protect {
        protect(path)?;
    }
    // The working folder was entered before the binds: entered again, it is the writable bind
    // on top, not the read-only mount beneath it.
    std::env::set_current_dir(&cwd).map_err(|e| format!("entering {}: {e}", cwd.display()))
}

/// Makes `path` (a file or folder inside a writable folder) read-only in place: bound onto
/// itself, and that mount made read-only. A path that is gone by now is skipped.
fn protect(path: &Path) -> Result<(), String> {
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(());
    }
    mount(
        Some(path),
        path,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(|e| format!("protecting {}: {e}", path.display()))?;
    mount_setattr_read_only(path, true, true)
        .or_else(|_| {
            mount(
                None::<&str>,
                path,
                None::<&str>,
                MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY,
                None::<&str>,
            )
        })
        .map_err(|e| format!("protecting {}: {e}", path.display()))
}

/// Covers `dir` with an empty tmpfs, then brings back each of `held` that lies beneath it at
/// its own path.
fn cover(dir: &Path, options: &str, held: &[(PathBuf, OwnedFd)]) -> Result<(), String> {
    mount(
        Some("tmpfs"),
        dir,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(options),
    )
    .map_err(|e| format!("covering {}: {e}", dir.display()))?;
    for (path, fd) in held {
        let Ok(below) = path.strip_prefix(dir) else {
            continue;
        };
        let target = dir.join(below);
        std::fs::create_dir_all(&target)
            .map_err(|e| format!("bringing back {}: {e}", path.display()))?;
        let source = format!("/proc/self/fd/{}", fd.as_raw_fd());
        mount(
            Some(source.as_str()),
            &target,
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            None::<&str>,
        )
        .map_err(|e| format!("bringing back {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Makes every mount read-only but those at `writable`. Where the kernel has `mount_setattr`
/// (5.12), one call makes the whole tree read-only and one per folder of `writable` that was
/// writable makes it writable again: the per-mount remounts below cost an attempt a read of the
/// mount table and a system call per mount of the host's (BENCHMARKS.md, "Task start"). A
/// kernel without it, or a tree it refuses to change whole, gets the per-mount remounts.
fn read_only_but(writable: &[PathBuf]) -> Result<(), String> {
    let was_writable: Vec<&PathBuf> = writable.iter().filter(|w| !is_read_only(w)).collect();
    if mount_setattr_read_only(Path::new("/"), true, true).is_err() {
        // All or nothing: the kernel undid whatever it had changed.
        return remount_each_but(writable);
    }
    for dir in was_writable {
        mount_setattr_read_only(dir, false, false)
            .map_err(|e| format!("keeping {} writable: {e}", dir.display()))?;
    }
    Ok(())
}

/// Whether the mount at `dir` is read-only.
fn is_read_only(dir: &Path) -> bool {
    nix::sys::statvfs::statvfs(dir)
        .map(|s| s.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY))
        .unwrap_or(false)
}

/// Sets (`read_only`) or clears the read-only flag of the mount at `path` (with `recursive`,
/// of every mount beneath it too), leaving every other flag as it is: `mount_setattr(2)`.
fn mount_setattr_read_only(path: &Path, read_only: bool, recursive: bool) -> nix::Result<()> {
    /// `struct mount_attr` (linux/mount.h).
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    const MOUNT_ATTR_RDONLY: u64 = 0x1;
    const AT_RECURSIVE: libc::c_uint = 0x8000;
    let attr = MountAttr {
        attr_set: if read_only { MOUNT_ATTR_RDONLY } else { 0 },
        attr_clr: if read_only { 0 } else { MOUNT_ATTR_RDONLY },
        propagation: 0,
        userns_fd: 0,
    };
    let path = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| Errno::EINVAL)?;
    let flags = if recursive { AT_RECURSIVE } else { 0 };
    // SAFETY: the path and the attributes live across the call, which only reads them.
    let done = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    Errno::result(done).map(drop)
}

/// Remounts every mount read-only but those at `writable`, one by one from the mount table,
/// keeping each mount's own flags (the kernel refuses to clear a flag a less privileged
/// namespace locked).
fn remount_each_but(writable: &[PathBuf]) -> Result<(), String> {
    let table = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("reading the mount table: {e}"))?;
    for line in table.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let fields: Vec<&str> = left.split(' ').collect();
        let (Some(point), Some(options)) = (fields.get(4), fields.get(5)) else {
            continue;
        };
        let point = PathBuf::from(unescape(point));
        if writable.contains(&point) {
            continue;
        }
        let fstype = right.split(' ').next().unwrap_or("");
        let mut flags = MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY;
        for option in options.split(',') {
            flags |= match option {
                "nosuid" => MsFlags::MS_NOSUID,
                "nodev" => MsFlags::MS_NODEV,
                "noexec" => MsFlags::MS_NOEXEC,
                "noatime" => MsFlags::MS_NOATIME,
                "nodiratime" => MsFlags::MS_NODIRATIME,
                "relatime" => MsFlags::MS_RELATIME,
                "strictatime" => MsFlags::MS_STRICTATIME,
                _ => MsFlags::empty(),
            };
        }
        if let Err(e) = mount(None::<&str>, &point, None::<&str>, flags, None::<&str>) {
            // A mount whose path a cover took is out of reach: nothing can be written there.
            if e == nix::errno::Errno::ENOENT && !point.exists() {
                continue;
            }
            if !PSEUDO.contains(&fstype) {
                return Err(format!("making {} read-only: {e}", point.display()));
            }
        }
    }
    Ok(())
}

/// A mountinfo path with its octal escapes (`\040` for a space) decoded.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 4 <= bytes.len() {
            if let Ok(n) = u8::from_str_radix(&field[i + 1..i + 4], 8) {
                out.push(n);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    CString::new(out)
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_else(|_| field.to_owned())
}

#[cfg(test)]
mod tests {
    use super::unescape;

    #[test]
    fn mountinfo_escapes_are_decoded() {
        assert_eq!(unescape("/a\\040b"), "/a b");
        assert_eq!(unescape("/plain"), "/plain");
        assert_eq!(unescape("/end\\"), "/end\\");
    }
}
