//! The network half of an attempt's jail (DESIGN §8), as the keeper sets it up inside the new
//! network namespace and the capsule receives it: loopback brought up, then the namespace's only
//! ways out bound as listeners *inside* it — the egress proxy on an ephemeral port, and each
//! forwarded loopback port (the capsule's door, granted loopback destinations) — and handed to
//! the capsule over a unix socket (SCM_RIGHTS). The capsule accepts on them from outside, so
//! every connection the harness makes lands in murmur's hands; a port nobody forwarded refuses,
//! and every other address is unreachable (the namespace has no route but loopback).

use std::io::{IoSlice, IoSliceMut};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use nix::sys::socket::{recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags};

/// The most listeners one attempt hands over (the proxy and two per forwarded port).
pub const MAX_LISTENERS: usize = 64;

/// Brings `lo` up in the current network namespace (a new one has it down).
pub fn loopback_up() -> Result<(), String> {
    // SAFETY: a datagram socket used only for the interface ioctls below, closed by OwnedFd.
    let sock = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if sock < 0 {
        return Err(format!("socket: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: `sock` was just opened and nothing else owns it.
    let sock = unsafe { OwnedFd::from_raw_fd(sock) };
    // SAFETY: ifreq is plain data; zeroed is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (i, b) in b"lo\0".iter().enumerate() {
        req.ifr_name[i] = *b as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS read and write `req`, which lives across both calls.
    unsafe {
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) < 0 {
            return Err(format!(
                "reading lo's flags: {}",
                std::io::Error::last_os_error()
            ));
        }
        req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) < 0 {
            return Err(format!(
                "bringing lo up: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// Binds every forwarded port on 127.0.0.1 and, where the kernel has IPv6 loopback, [::1], then
/// the proxy (127.0.0.1, an ephemeral port). Answers the proxy's port and each listener with
/// the port it stands for (0 for the proxy), the proxy first.
///
/// The forwarded ports go first: the ephemeral port the kernel picks for the proxy comes from
/// the range the capsule's own door port was picked from, so a proxy bound first could take
/// the door's port in the fresh namespace (about one attempt in a few thousand failed so,
/// `Address already in use`); bound last, it is given a port nothing forwarded needs.
pub fn bind_listeners(forwards: &[u16]) -> Result<(u16, Vec<(u16, TcpListener)>), String> {
    let mut out = Vec::new();
    for &port in forwards {
        let v4 = TcpListener::bind((Ipv4Addr::LOCALHOST, port))
            .map_err(|e| format!("forwarding 127.0.0.1:{port} into the jail: {e}"))?;
        out.push((port, v4));
        if let Ok(v6) = TcpListener::bind(SocketAddr::from((Ipv6Addr::LOCALHOST, port))) {
            out.push((port, v6));
        }
    }
    let proxy = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| format!("binding the egress proxy inside the jail: {e}"))?;
    let proxy_port = proxy.local_addr().map_err(|e| e.to_string())?.port();
    out.insert(0, (0, proxy));
    Ok((proxy_port, out))
}

/// Sends the listeners over `sock`: one message, the ports as text (`0 52222 52222`), the
/// descriptors alongside in the same order.
pub fn send_listeners(sock: RawFd, listeners: &[(u16, TcpListener)]) -> Result<(), String> {
    let ports: Vec<String> = listeners.iter().map(|(p, _)| p.to_string()).collect();
    let text = ports.join(" ");
    let fds: Vec<RawFd> = listeners.iter().map(|(_, l)| l.as_raw_fd()).collect();
    let iov = [IoSlice::new(text.as_bytes())];
    let cmsg = [ControlMessage::ScmRights(&fds)];
    sendmsg::<()>(sock, &iov, &cmsg, MsgFlags::empty(), None)
        .map(|_| ())
        .map_err(|e| format!("handing the jail's listeners to the capsule: {e}"))
}

/// Receives what [`send_listeners`] sent; an empty list when the keeper closed the socket
/// without sending (its setup failed, and says why on its status line).
pub fn recv_listeners(sock: &OwnedFd) -> std::io::Result<Vec<(u16, TcpListener)>> {
    let mut buf = vec![0u8; 4096];
    let mut space = nix::cmsg_space!([RawFd; MAX_LISTENERS]);
    let mut iov = [IoSliceMut::new(&mut buf)];
    let msg = recvmsg::<()>(
        sock.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )?;
    let mut fds = Vec::new();
    for c in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(received) = c {
            // SAFETY: each descriptor was just received and belongs to this process alone.
            fds.extend(
                received
                    .into_iter()
                    .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
            );
        }
    }
    let n = msg.bytes;
    let text = String::from_utf8_lossy(&buf[..n]).into_owned();
    let ports: Vec<u16> = text
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    if ports.len() != fds.len() {
        return Err(std::io::Error::other(format!(
            "the keeper sent {} listeners for {} ports",
            fds.len(),
            ports.len()
        )));
    }
    Ok(ports
        .into_iter()
        .zip(fds)
        .map(|(p, fd)| (p, TcpListener::from(fd)))
        .collect())
}
