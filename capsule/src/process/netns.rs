//! The network half of an attempt's jail (DESIGN §8), as the keeper sets it up inside the new
//! network namespace and the capsule receives it: loopback brought up, then the namespace's only
//! ways out bound as listeners *inside* it — the egress proxy on an ephemeral port, and each
//! forwarded loopback port (the capsule's door, granted loopback destinations) — and handed to
//! the capsule over a unix socket (SCM_RIGHTS). The capsule accepts on them from outside, so
//! every connection the harness makes lands in murmur's hands; a port nobody forwarded refuses,
//! and every other address is unreachable (the namespace has no route but loopback).

use std::io::IoSlice;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags};

/// The most descriptors one message carries. A member has two listeners per forwarded port
/// (callees and allow entries) and the proxy, any number in all, so they go in as many messages
/// as it takes; one message stays far below the kernel's cap (`SCM_MAX_FD`, 253) and the
/// control buffer the capsule reads it into is sized for exactly this many.
pub const BATCH: usize = 32;

/// The word a message's text starts with: more messages follow, or this one is the last.
const MORE: &str = "more";
const LAST: &str = "last";

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

/// Sends the listeners over `sock` in messages of at most [`BATCH`] descriptors: each one's
/// text is `more` or `last`, then the ports of its descriptors in the same order
/// (`last 0 52222 52222`).
pub fn send_listeners(sock: RawFd, listeners: &[(u16, TcpListener)]) -> Result<(), String> {
    let batches: Vec<&[(u16, TcpListener)]> = listeners.chunks(BATCH).collect();
    for (i, batch) in batches.iter().enumerate() {
        let word = if i + 1 == batches.len() { LAST } else { MORE };
        let text = std::iter::once(word.to_owned())
            .chain(batch.iter().map(|(p, _)| p.to_string()))
            .collect::<Vec<_>>()
            .join(" ");
        let fds: Vec<RawFd> = batch.iter().map(|(_, l)| l.as_raw_fd()).collect();
        send_one(sock, &text, &fds).map_err(|e| {
            format!(
                "handing the jail's listeners to the capsule (message {} of {}): {e}",
                i + 1,
                batches.len()
            )
        })?;
    }
    Ok(())
}

/// One message: `text`, and `fds` alongside it.
fn send_one(sock: RawFd, text: &str, fds: &[RawFd]) -> nix::Result<()> {
    let iov = [IoSlice::new(text.as_bytes())];
    let cmsg = [ControlMessage::ScmRights(fds)];
    sendmsg::<()>(sock, &iov, &cmsg, MsgFlags::empty(), None).map(|_| ())
}

/// Receives what [`send_listeners`] sent, message by message, to the one marked `last`. Every
/// descriptor that arrived is owned from the moment it is read, so on any error (the keeper
/// closed the socket first — its setup failed and says why on its status line —, a message cut
/// short, ports that do not match the descriptors) all of them are closed as the error returns.
pub fn recv_listeners(sock: &OwnedFd) -> Result<Vec<(u16, TcpListener)>, String> {
    let mut out = Vec::new();
    loop {
        let (text, fds) = recv_one(sock.as_raw_fd())?;
        let mut words = text.split(' ');
        let last = match words.next() {
            Some(LAST) => true,
            Some(MORE) => false,
            _ => {
                return Err(format!(
                    "the keeper sent a message murmur cannot read: {text:?}"
                ))
            }
        };
        let ports = words
            .map(|p| p.parse::<u16>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| format!("the keeper sent ports murmur cannot read: {text:?}"))?;
        if ports.len() != fds.len() {
            return Err(format!(
                "the keeper sent {} listeners for {} ports",
                fds.len(),
                ports.len()
            ));
        }
        out.extend(
            ports
                .into_iter()
                .zip(fds)
                .map(|(p, fd)| (p, TcpListener::from(fd))),
        );
        if last {
            return Ok(out);
        }
    }
}

/// The control buffer of one message: room for [`BATCH`] descriptors, aligned as a cmsghdr.
#[repr(C, align(8))]
struct Control([u8; 256]);

/// Reads one message: its text and the descriptors it carried (close-on-exec, owned).
fn recv_one(sock: RawFd) -> Result<(String, Vec<OwnedFd>), String> {
    let mut text = [0u8; 1024];
    let mut control = Control([0; 256]);
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE((BATCH * std::mem::size_of::<RawFd>()) as u32) };
    debug_assert!(space as usize <= control.0.len());
    let mut iov = libc::iovec {
        iov_base: text.as_mut_ptr().cast(),
        iov_len: text.len(),
    };
    // SAFETY: msghdr is plain data; zeroed is a valid value, and the pointers set below outlive
    // the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    let n = loop {
        // SAFETY: recvmsg writes into the buffers `msg` points at, each of the stated size.
        let n = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC) };
        match n {
            n if n >= 0 => break n as usize,
            _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
            _ => {
                let e = std::io::Error::last_os_error();
                return Err(format!("receiving the jail's listeners: {e}"));
            }
        }
    };
    let fds = owned_fds(&msg);
    if msg.msg_flags & libc::MSG_CTRUNC != 0 {
        return Err(format!(
            "the keeper sent more listeners in one message than the {BATCH} murmur takes"
        ));
    }
    if msg.msg_flags & libc::MSG_TRUNC != 0 {
        return Err("the keeper sent a message longer than murmur takes".into());
    }
    if n == 0 && fds.is_empty() {
        return Err("the keeper ended before it handed over the jail's listeners".into());
    }
    let text = std::str::from_utf8(&text[..n])
        .map_err(|_| "the keeper sent a message that is not text".to_owned())?;
    Ok((text.to_owned(), fds))
}

/// Every descriptor in `msg`'s control messages, owned (so closed when dropped), even when the
/// kernel cut the control data short: what did arrive is this process's to close.
fn owned_fds(msg: &libc::msghdr) -> Vec<OwnedFd> {
    let mut fds = Vec::new();
    // SAFETY: the CMSG_* macros walk the control buffer recvmsg filled, within msg_controllen;
    // each SCM_RIGHTS payload holds whole descriptors, just received and owned by no one else.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c);
                let len = ((*c).cmsg_len as usize).saturating_sub(data as usize - c as usize);
                for i in 0..len / std::mem::size_of::<RawFd>() {
                    let fd = std::ptr::read_unaligned(data.cast::<RawFd>().add(i));
                    fds.push(OwnedFd::from_raw_fd(fd));
                }
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    fds
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};

    fn pair() -> (OwnedFd, OwnedFd) {
        socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .unwrap()
    }

    fn listeners(n: usize) -> Vec<(u16, TcpListener)> {
        (0..n)
            .map(|i| {
                (
                    i as u16,
                    TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap(),
                )
            })
            .collect()
    }

    fn port_of(l: &TcpListener) -> u16 {
        l.local_addr().unwrap().port()
    }

    #[test]
    fn any_number_of_listeners_crosses_in_batches() {
        for n in [1, BATCH - 1, BATCH, BATCH + 1, 5 * BATCH + 3] {
            let (ours, theirs) = pair();
            let sent = listeners(n);
            let bound: Vec<u16> = sent.iter().map(|(_, l)| port_of(l)).collect();
            send_listeners(theirs.as_raw_fd(), &sent).unwrap();
            let got = recv_listeners(&ours).unwrap();
            assert_eq!(got.len(), n);
            for (i, (port, l)) in got.iter().enumerate() {
                // In order, each descriptor the very listener sent under its port.
                assert_eq!((*port, port_of(l)), (i as u16, bound[i]));
            }
        }
    }

    /// A port is free again only once every copy of its listener is closed.
    fn released(port: u16) -> bool {
        TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok()
    }

    #[test]
    fn a_message_cut_short_is_refused_and_what_arrived_is_closed() {
        let (ours, theirs) = pair();
        let sent = listeners(BATCH + 8);
        let ports: Vec<u16> = sent.iter().map(|(_, l)| port_of(l)).collect();
        let fds: Vec<RawFd> = sent.iter().map(|(_, l)| l.as_raw_fd()).collect();
        let text = format!("last {}", vec!["1"; fds.len()].join(" "));
        send_one(theirs.as_raw_fd(), &text, &fds).unwrap();
        drop(sent);
        assert_eq!(
            recv_listeners(&ours).unwrap_err(),
            format!("the keeper sent more listeners in one message than the {BATCH} murmur takes")
        );
        assert!(ports.iter().all(|p| released(*p)), "a descriptor leaked");
    }

    #[test]
    fn a_keeper_that_stops_halfway_leaves_nothing_open() {
        let (ours, theirs) = pair();
        let sent = listeners(3);
        let ports: Vec<u16> = sent.iter().map(|(_, l)| port_of(l)).collect();
        let fds: Vec<RawFd> = sent.iter().map(|(_, l)| l.as_raw_fd()).collect();
        send_one(theirs.as_raw_fd(), "more 0 1 2", &fds).unwrap();
        drop((sent, theirs));
        assert_eq!(
            recv_listeners(&ours).unwrap_err(),
            "the keeper ended before it handed over the jail's listeners"
        );
        assert!(ports.iter().all(|p| released(*p)), "a descriptor leaked");
    }

    #[test]
    fn ports_that_do_not_match_the_descriptors_are_refused() {
        let (ours, theirs) = pair();
        let sent = listeners(2);
        let port = port_of(&sent[0].1);
        let fds: Vec<RawFd> = sent.iter().map(|(_, l)| l.as_raw_fd()).collect();
        send_one(theirs.as_raw_fd(), "last 0", &fds).unwrap();
        drop(sent);
        assert_eq!(
            recv_listeners(&ours).unwrap_err(),
            "the keeper sent 2 listeners for 1 ports"
        );
        assert!(released(port));
    }
}
