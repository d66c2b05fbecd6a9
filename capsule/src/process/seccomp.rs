//! The system call filter every jailed harness runs under (DESIGN §8), installed by the
//! namespace's init before it starts the harness, inherited by every descendant and never lifted.
//! It refuses what a container runtime's default profile refuses and the jail does not need,
//! and what we saw a hostile harness use to climb a wall: io_uring (it opens sockets the
//! `socket(2)` rule never sees), the kernel keyrings (the user's session keyring is shared with
//! the shell that started `mur`), pushing keystrokes into a terminal, and stream or seqpacket
//! unix sockets (the kind agents, daemons and buses listen on). The list, and why each entry is
//! there, is [`DENIED`]; docs/containment.md prints the same table.
//!
//! Kept allowed on purpose: `unshare`, `mount`, `pivot_root`, `setns` and `clone` with namespace
//! flags (Codex's bubblewrap sandbox builds its own namespaces inside the jail, with no more
//! than the jail gives it), `ptrace` and `process_vm_*` (only the attempt's own processes are
//! visible in its PID namespace), datagram unix sockets and `socketpair` (libc and Codex's
//! sandbox use them).

/// How a refused call answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    /// "Not implemented": programs that probe for a facility (libuv for io_uring, keyutils
    /// users for the keyrings) fall back as on a kernel without it.
    NotThere,
    /// "Operation not permitted", what the call answers an unprivileged caller anyway.
    NotPermitted,
}

impl Answer {
    fn errno(self) -> u32 {
        match self {
            Answer::NotThere => libc::ENOSYS as u32,
            Answer::NotPermitted => libc::EPERM as u32,
        }
    }
}

/// The refused system calls: number, answer, and why (docs/containment.md, "System calls").
const DENIED: &[(libc::c_long, Answer, &str)] = &[
    (
        libc::SYS_io_uring_setup,
        Answer::NotThere,
        "io_uring opens sockets and files past the socket rule",
    ),
    (libc::SYS_io_uring_enter, Answer::NotThere, "io_uring"),
    (libc::SYS_io_uring_register, Answer::NotThere, "io_uring"),
    (
        libc::SYS_keyctl,
        Answer::NotThere,
        "the user's session keyring is shared with the shell outside",
    ),
    (libc::SYS_add_key, Answer::NotThere, "keyrings"),
    (libc::SYS_request_key, Answer::NotThere, "keyrings"),
    (libc::SYS_bpf, Answer::NotPermitted, "kernel programs"),
    (
        libc::SYS_perf_event_open,
        Answer::NotPermitted,
        "kernel profiling: a side channel on the host",
    ),
    (
        libc::SYS_userfaultfd,
        Answer::NotPermitted,
        "a staple of kernel exploits",
    ),
    (
        libc::SYS_kexec_load,
        Answer::NotPermitted,
        "loading a new kernel",
    ),
    (
        libc::SYS_kexec_file_load,
        Answer::NotPermitted,
        "loading a new kernel",
    ),
    (
        libc::SYS_init_module,
        Answer::NotPermitted,
        "kernel modules",
    ),
    (
        libc::SYS_finit_module,
        Answer::NotPermitted,
        "kernel modules",
    ),
    (
        libc::SYS_delete_module,
        Answer::NotPermitted,
        "kernel modules",
    ),
    (
        libc::SYS_open_by_handle_at,
        Answer::NotPermitted,
        "opens files by handle, past every mount",
    ),
    (
        libc::SYS_name_to_handle_at,
        Answer::NotPermitted,
        "file handles",
    ),
    (libc::SYS_acct, Answer::NotPermitted, "process accounting"),
    (libc::SYS_swapon, Answer::NotPermitted, "swap"),
    (libc::SYS_swapoff, Answer::NotPermitted, "swap"),
    (libc::SYS_reboot, Answer::NotPermitted, "rebooting"),
    (
        libc::SYS_settimeofday,
        Answer::NotPermitted,
        "the host's clock",
    ),
    (
        libc::SYS_clock_settime,
        Answer::NotPermitted,
        "the host's clock",
    ),
    (
        libc::SYS_clock_adjtime,
        Answer::NotPermitted,
        "the host's clock",
    ),
    (libc::SYS_quotactl, Answer::NotPermitted, "disk quotas"),
    (
        libc::SYS_lookup_dcookie,
        Answer::NotPermitted,
        "kernel profiling",
    ),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_iopl, Answer::NotPermitted, "I/O ports"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_ioperm, Answer::NotPermitted, "I/O ports"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_uselib, Answer::NotPermitted, "obsolete"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_ustat, Answer::NotPermitted, "obsolete"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_sysfs, Answer::NotPermitted, "obsolete"),
];

/// `ioctl` requests refused on any descriptor: pushing input into a terminal (TIOCSTI) and the
/// Linux console's own requests (TIOCLINUX, which can paste a selection as input).
const DENIED_IOCTLS: [u32; 2] = [libc::TIOCSTI as u32, libc::TIOCLINUX as u32];

/// Installs the filter on this process (after `no_new_privs`). Everything it starts inherits it.
pub(super) fn install() -> std::io::Result<()> {
    let filter = program();
    let program = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: the filter lives across the call, which copies it into the kernel.
    let set = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER as libc::c_ulong,
            &program as *const libc::sock_fprog as libc::c_ulong,
            0,
            0,
        )
    };
    if set != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(target_arch = "x86_64")]
const NATIVE: u32 = 0xC000_003E; // AUDIT_ARCH_X86_64
#[cfg(target_arch = "aarch64")]
const NATIVE: u32 = 0xC000_00B7; // AUDIT_ARCH_AARCH64
/// x32 system calls carry this bit in their number on x86_64.
const X32: u32 = 0x4000_0000;
// Offsets in struct seccomp_data: nr, arch, then the arguments (the low half of each: the
// kernel truncates `int` and `unsigned int` arguments the same way).
const NR: u32 = 0;
const ARCH: u32 = 4;
const ARG0: u32 = 16;
const ARG1: u32 = 24;

const LOAD: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const RET: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
const JEQ: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JGE: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const AND: u16 = (libc::BPF_ALU | libc::BPF_AND | libc::BPF_K) as u16;

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

fn refuse(errno: u32) -> libc::sock_filter {
    stmt(RET, libc::SECCOMP_RET_ERRNO | errno)
}

fn allow() -> libc::sock_filter {
    stmt(RET, libc::SECCOMP_RET_ALLOW)
}

/// The BPF program: another architecture's calls refused, then each of [`DENIED`], then the
/// two calls refused by argument (`ioctl` by request, `socket` by family and type).
fn program() -> Vec<libc::sock_filter> {
    let mut p = vec![
        stmt(LOAD, ARCH),
        jump(JEQ, NATIVE, 1, 0),
        refuse(libc::ENOSYS as u32),
        stmt(LOAD, NR),
        jump(JGE, X32, 0, 1),
        refuse(libc::ENOSYS as u32),
    ];
    for (nr, answer, _) in DENIED {
        p.push(jump(JEQ, *nr as u32, 0, 1));
        p.push(refuse(answer.errno()));
    }
    // ioctl: the accumulator still holds the call's number on the way past.
    let ioctls = DENIED_IOCTLS.len() as u8;
    p.push(jump(JEQ, libc::SYS_ioctl as u32, 0, ioctls + 3));
    p.push(stmt(LOAD, ARG1));
    for (i, request) in DENIED_IOCTLS.iter().enumerate() {
        // Each match jumps to the refusal after the allow below.
        p.push(jump(JEQ, *request, ioctls - i as u8, 0));
    }
    p.push(allow());
    p.push(refuse(libc::EPERM as u32));
    // socket: a unix socket that is not a datagram one.
    p.extend([
        jump(JEQ, libc::SYS_socket as u32, 0, 6),
        stmt(LOAD, ARG0),
        jump(JEQ, libc::AF_UNIX as u32, 0, 4),
        stmt(LOAD, ARG1),
        // The type without SOCK_NONBLOCK and SOCK_CLOEXEC.
        stmt(AND, 0xF),
        jump(JEQ, libc::SOCK_DGRAM as u32, 1, 0),
        refuse(libc::EACCES as u32),
        allow(),
    ]);
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the program over one call as the kernel would, answering the action it returns.
    fn run(p: &[libc::sock_filter], nr: u32, args: [u32; 2]) -> u32 {
        let data = |off: u32| match off {
            NR => nr,
            ARCH => NATIVE,
            ARG0 => args[0],
            ARG1 => args[1],
            _ => 0,
        };
        let (mut a, mut pc) = (0u32, 0usize);
        loop {
            let i = p[pc];
            pc += 1;
            match i.code {
                LOAD => a = data(i.k),
                AND => a &= i.k,
                RET => return i.k,
                JEQ | JGE => {
                    let taken = if i.code == JEQ { a == i.k } else { a >= i.k };
                    pc += if taken { i.jt } else { i.jf } as usize;
                }
                c => panic!("unexpected instruction {c}"),
            }
        }
    }

    const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
    fn refused(errno: i32) -> u32 {
        libc::SECCOMP_RET_ERRNO | errno as u32
    }

    #[test]
    fn every_denied_call_is_refused_with_its_answer() {
        let p = program();
        for (nr, answer, _) in DENIED {
            assert_eq!(run(&p, *nr as u32, [0, 0]), refused(answer.errno() as i32));
        }
        assert_eq!(
            run(&p, libc::SYS_io_uring_setup as u32, [0, 0]),
            refused(libc::ENOSYS)
        );
        assert_eq!(run(&p, libc::SYS_read as u32, [0, 0]), ALLOW);
        assert_eq!(run(&p, libc::SYS_unshare as u32, [0, 0]), ALLOW);
    }

    #[test]
    fn ioctl_is_refused_only_for_terminal_injection() {
        let p = program();
        let ioctl = libc::SYS_ioctl as u32;
        assert_eq!(
            run(&p, ioctl, [0, libc::TIOCSTI as u32]),
            refused(libc::EPERM)
        );
        assert_eq!(
            run(&p, ioctl, [0, libc::TIOCLINUX as u32]),
            refused(libc::EPERM)
        );
        assert_eq!(run(&p, ioctl, [0, libc::TIOCGWINSZ as u32]), ALLOW);
        assert_eq!(run(&p, ioctl, [0, libc::FIONREAD as u32]), ALLOW);
    }

    #[test]
    fn only_stream_and_seqpacket_unix_sockets_are_refused() {
        let p = program();
        let socket = libc::SYS_socket as u32;
        let unix = libc::AF_UNIX as u32;
        let stream = libc::SOCK_STREAM as u32 | libc::SOCK_CLOEXEC as u32;
        assert_eq!(run(&p, socket, [unix, stream]), refused(libc::EACCES));
        assert_eq!(
            run(&p, socket, [unix, libc::SOCK_SEQPACKET as u32]),
            refused(libc::EACCES)
        );
        assert_eq!(run(&p, socket, [unix, libc::SOCK_DGRAM as u32]), ALLOW);
        assert_eq!(run(&p, socket, [libc::AF_INET as u32, stream]), ALLOW);
    }
}
