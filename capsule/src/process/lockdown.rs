//! What a jailed harness runs under, and how it is started (DESIGN §8): the init of its
//! namespace takes on the limits itself — nothing it holds beyond stdio inherited, no
//! capability but CAP_SETFCAP, the system call filter (`seccomp`) — and starts the harness with
//! posix_spawn, which hands every one of them on. The init needs none of them afterwards.

use std::ffi::{CString, OsString};

/// What the harness's fork used to take on between fork and exec, taken on by the init itself
/// before it starts the harness, which inherits every part: nothing it holds beyond stdio goes
/// further (close-on-exec), no capability but CAP_SETFCAP ([`drop_capabilities`]), the system
/// call filter ([`super::seccomp`]). The init needs none of it afterwards: it only waits,
/// forwards signals to, and kills processes of its own user in its own namespace.
pub(super) fn lock_down_init() -> std::io::Result<()> {
    super::setup::cloexec_from(3);
    drop_capabilities()?;
    super::seccomp::install()
}

/// Starts the harness with posix_spawn, searching PATH as exec does: in a process group of its
/// own, with an empty signal mask (the init blocks the signals it waits for, and std's spawn
/// would hand that mask on, so a harness would never see its SIGINT), SIGPIPE at its default (a
/// Rust program ignores it), and `extra` over this process's environment. Answers its pid.
pub(super) fn spawn_harness(
    program: &OsString,
    args: &[OsString],
    extra: &[(&str, String)],
) -> std::io::Result<i32> {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let text = |bytes: Vec<u8>| {
        CString::new(bytes).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a NUL byte in the harness's command or environment",
            )
        })
    };
    let argv: Vec<CString> = std::iter::once(program)
        .chain(args)
        .map(|a| text(a.as_bytes().to_vec()))
        .collect::<Result<_, _>>()?;
    let mut env = Vec::new();
    for (key, value) in std::env::vars_os() {
        if extra.iter().any(|(k, _)| std::ffi::OsStr::new(k) == key) {
            continue;
        }
        let mut pair = key.into_vec();
        pair.push(b'=');
        pair.extend_from_slice(value.as_bytes());
        env.push(text(pair)?);
    }
    for (key, value) in extra {
        env.push(text(format!("{key}={value}").into_bytes())?);
    }
    let pointers = |v: &[CString]| -> Vec<*mut libc::c_char> {
        v.iter()
            .map(|c| c.as_ptr() as *mut libc::c_char)
            .chain(std::iter::once(std::ptr::null_mut()))
            .collect()
    };
    let (argv_p, env_p) = (pointers(&argv), pointers(&env));
    let check = |code: libc::c_int| match code {
        0 => Ok(()),
        e => Err(std::io::Error::from_raw_os_error(e)),
    };
    // SAFETY: the attributes are initialised before use and destroyed after; every pointer
    // handed to posix_spawnp (program, argv, envp, each NULL-terminated) outlives the call.
    unsafe {
        let mut attr: libc::posix_spawnattr_t = std::mem::zeroed();
        check(libc::posix_spawnattr_init(&mut attr))?;
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        let mut pipe: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut pipe);
        libc::sigaddset(&mut pipe, libc::SIGPIPE);
        let flags = libc::POSIX_SPAWN_SETSIGMASK
            | libc::POSIX_SPAWN_SETSIGDEF
            | libc::POSIX_SPAWN_SETPGROUP;
        let mut pid: libc::pid_t = 0;
        let spawned = check(libc::posix_spawnattr_setsigmask(&mut attr, &none))
            .and_then(|()| check(libc::posix_spawnattr_setsigdefault(&mut attr, &pipe)))
            .and_then(|()| check(libc::posix_spawnattr_setpgroup(&mut attr, 0)))
            .and_then(|()| {
                check(libc::posix_spawnattr_setflags(
                    &mut attr,
                    flags as libc::c_short,
                ))
            })
            .and_then(|()| {
                check(libc::posix_spawnp(
                    &mut pid,
                    argv[0].as_ptr(),
                    std::ptr::null(),
                    &attr,
                    argv_p.as_ptr(),
                    env_p.as_ptr(),
                ))
            });
        libc::posix_spawnattr_destroy(&mut attr);
        spawned.map(|()| pid)
    }
}

/// Leaves the harness, whatever its uid, one capability in its user namespace: CAP_SETFCAP,
/// which the kernel asks of a program that maps root into a namespace of its own (Codex's
/// bubblewrap sandbox does, when murmur runs as root) and which undoes none of the jail's walls.
/// With murmur run as root the namespace maps uid 0 to itself, and an exec'd root program would
/// otherwise hold every capability over the attempt's mounts (and could `umount` the hide). The
/// securebits stop exec from granting root its capabilities again; the bounding set keeps only
/// CAP_SETFCAP; no new privileges may be gained (setuid binaries included), so file
/// capabilities are not honoured either. Called by the init, before it starts the harness.
fn drop_capabilities() -> std::io::Result<()> {
    const CAP_SETFCAP: u32 = 31;
    const SECBIT_NOROOT: libc::c_ulong = 1 << 0;
    const SECBIT_NOROOT_LOCKED: libc::c_ulong = 1 << 1;
    const SECBIT_NO_SETUID_FIXUP: libc::c_ulong = 1 << 2;
    const SECBIT_NO_SETUID_FIXUP_LOCKED: libc::c_ulong = 1 << 3;
    const SECBIT_NO_CAP_AMBIENT_RAISE: libc::c_ulong = 1 << 6;
    const SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED: libc::c_ulong = 1 << 7;
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let header = Header {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
        pid: 0,
    };
    let fail = || Err(std::io::Error::last_os_error());
    let bits = SECBIT_NOROOT
        | SECBIT_NOROOT_LOCKED
        | SECBIT_NO_SETUID_FIXUP
        | SECBIT_NO_SETUID_FIXUP_LOCKED
        | SECBIT_NO_CAP_AMBIENT_RAISE
        | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
    // SAFETY: prctl and the capget/capset system calls change only this process's credentials.
    unsafe {
        let mut now = [Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(libc::SYS_capget, &header, now.as_mut_ptr()) != 0 {
            return fail();
        }
        // CAP_SETFCAP survives exec as an ambient capability: inheritable first, then raised.
        now[0].inheritable |= 1 << CAP_SETFCAP;
        if libc::syscall(libc::SYS_capset, &header, now.as_ptr()) != 0 {
            return fail();
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
        // Without CAP_SETFCAP itself (a harness started without it) there is nothing to keep.
        let _ = libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_RAISE,
            CAP_SETFCAP as libc::c_ulong,
            0,
            0,
        );
        for cap in 0..64u32 {
            if cap == CAP_SETFCAP {
                continue;
            }
            // Capabilities the kernel does not know answer EINVAL: the set ends there.
            if libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) != 0 {
                break;
            }
        }
        if libc::prctl(libc::PR_SET_SECUREBITS, bits, 0, 0, 0) != 0 {
            return fail();
        }
        let keep = Data {
            effective: now[0].permitted & (1 << CAP_SETFCAP),
            permitted: now[0].permitted & (1 << CAP_SETFCAP),
            inheritable: now[0].permitted & (1 << CAP_SETFCAP),
        };
        let zero = Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        };
        if libc::syscall(libc::SYS_capset, &header, [keep, zero].as_ptr()) != 0 {
            return fail();
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return fail();
        }
    }
    Ok(())
}
