//! The capsule's end of the control socket ([`super::protocol`]): one connection to its
//! supervisor, shared by every delegation of every task. One reader task reads the supervisor's
//! answers and hands each to the request that waits for its `id`; writes go through a tokio
//! mutex held only while one line is written, never while its answer is awaited, so a slow
//! `delegate` never holds up an `end`.
//!
//! Bounded: an answer line longer than [`LINE_CAP`] ends the link (the supervisor never writes
//! one), and every request waits at most the time its caller gives.

use std::collections::HashMap;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::OwnedWriteHalf;
use tokio::net::UnixStream;
use tokio::sync::oneshot;

use super::protocol::{Op, Outcome, Request, Response, CONTROL_FD};

/// The longest answer line read: a `started` names a path and a URL, far below this.
pub const LINE_CAP: usize = 64 << 10;

/// Why a request has no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkError {
    /// The socket is gone (the supervisor closed it, or it broke).
    Closed,
    /// No answer within the time given.
    TimedOut(Duration),
}

impl std::fmt::Display for LinkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LinkError::Closed => f.write_str("the supervisor's control socket is closed"),
            LinkError::TimedOut(d) => {
                write!(f, "the supervisor did not answer within {} s", d.as_secs())
            }
        }
    }
}

type Waiters = Arc<Mutex<Option<HashMap<u64, oneshot::Sender<Outcome>>>>>;

/// The link to the supervisor.
pub struct Supervisor {
    next_id: AtomicU64,
    writer: tokio::sync::Mutex<OwnedWriteHalf>,
    /// Requests awaiting their answer by id; `None` once the reader has ended, so no request
    /// waits for an answer that cannot come.
    waiters: Waiters,
}

fn lock(w: &Waiters) -> MutexGuard<'_, Option<HashMap<u64, oneshot::Sender<Outcome>>>> {
    w.lock().unwrap_or_else(|e| e.into_inner())
}

impl Supervisor {
    /// Takes the inherited control socket on [`CONTROL_FD`]. Marks it close-on-exec first, so
    /// no harness (nor anything else this capsule starts) inherits it. Call once, from within
    /// the runtime.
    pub fn inherited() -> std::io::Result<Arc<Supervisor>> {
        // SAFETY: fcntl on a descriptor number only reads and sets its flags.
        let flags = unsafe { libc::fcntl(CONTROL_FD, libc::F_GETFD) };
        if flags < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: as above.
        if unsafe { libc::fcntl(CONTROL_FD, libc::F_SETFD, flags | libc::FD_CLOEXEC) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: the supervisor placed the socket on CONTROL_FD for this process, and nothing
        // else in it takes that descriptor: it is owned from here on.
        let fd = unsafe { OwnedFd::from_raw_fd(CONTROL_FD) };
        let std = std::os::unix::net::UnixStream::from(fd);
        std.set_nonblocking(true)?;
        Ok(Supervisor::new(UnixStream::from_std(std)?))
    }

    /// A link over `stream` (tests hand one end of a `UnixStream::pair()`).
    pub fn new(stream: UnixStream) -> Arc<Supervisor> {
        let (read, write) = stream.into_split();
        let waiters: Waiters = Arc::new(Mutex::new(Some(HashMap::new())));
        tokio::spawn(read_answers(read, waiters.clone()));
        Arc::new(Supervisor {
            next_id: AtomicU64::new(1),
            writer: tokio::sync::Mutex::new(write),
            waiters,
        })
    }

    /// Sends `op` and waits at most `within` for its answer.
    pub async fn request(&self, op: Op, within: Duration) -> Result<Outcome, LinkError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        match lock(&self.waiters).as_mut() {
            Some(w) => w.insert(id, tx),
            None => return Err(LinkError::Closed),
        };
        let answered = async {
            let mut line =
                serde_json::to_vec(&Request { id, op }).map_err(|_| LinkError::Closed)?;
            line.push(b'\n');
            {
                let mut w = self.writer.lock().await;
                w.write_all(&line).await.map_err(|_| LinkError::Closed)?;
                w.flush().await.map_err(|_| LinkError::Closed)?;
            }
            rx.await.map_err(|_| LinkError::Closed)
        };
        let outcome = match tokio::time::timeout(within, answered).await {
            Ok(o) => o,
            Err(_) => Err(LinkError::TimedOut(within)),
        };
        if outcome.is_err() {
            if let Some(w) = lock(&self.waiters).as_mut() {
                w.remove(&id);
            }
        }
        outcome
    }
}

/// Reads answers until the socket ends (or sends a line past [`LINE_CAP`], or one that does
/// not read); each goes to the request of its id, and an answer nobody waits for any more is
/// dropped. At the end every waiting request learns the link is closed.
async fn read_answers(read: tokio::net::unix::OwnedReadHalf, waiters: Waiters) {
    let mut reader = BufReader::new(read);
    let mut line = Vec::new();
    loop {
        line.clear();
        let mut limited = (&mut reader).take(LINE_CAP as u64 + 1);
        match limited.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) if line.len() > LINE_CAP => break,
            Ok(_) => {}
        }
        let Ok(answer) = serde_json::from_slice::<Response>(&line) else {
            continue;
        };
        let waiter = lock(&waiters).as_mut().and_then(|w| w.remove(&answer.id));
        if let Some(tx) = waiter {
            let _ = tx.send(answer.outcome);
        }
    }
    // Dropping the senders answers every waiting request `Closed`.
    lock(&waiters).take();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delegation::protocol::Child;

    /// A fake supervisor on the other end: answers `end` at once, `delegate` after `pause`
    /// (answering out of order), and nothing to an op it was told to ignore.
    async fn fake(stream: UnixStream, pause: Duration) {
        let (read, write) = stream.into_split();
        let write = Arc::new(tokio::sync::Mutex::new(write));
        let mut lines = BufReader::new(read).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let req: Request = serde_json::from_str(&line).unwrap();
            let write = write.clone();
            tokio::spawn(async move {
                let outcome = match req.op {
                    Op::Delegate { delegation_id, .. } => {
                        tokio::time::sleep(pause).await;
                        Outcome::Started(Child {
                            capsule: "worker".into(),
                            version: "0.1.0".into(),
                            child_session_id: format!("ses_of_{delegation_id}"),
                            child_workdir: "/w/children/worker-0".into(),
                            url: "http://localhost:1".into(),
                        })
                    }
                    Op::End { .. } => Outcome::Ended {},
                };
                let mut bytes = serde_json::to_vec(&Response {
                    id: req.id,
                    outcome,
                })
                .unwrap();
                bytes.push(b'\n');
                write.lock().await.write_all(&bytes).await.unwrap();
            });
        }
    }

    fn delegate(id: &str) -> Op {
        Op::Delegate {
            delegation_id: id.into(),
            parent_task: "tsk_1".into(),
            manifest: "/w/worker.yaml".into(),
            text: "hi".into(),
            completion_token: None,
            traceparent: None,
        }
    }

    #[tokio::test]
    async fn answers_go_to_their_requests_whatever_their_order() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        tokio::spawn(fake(theirs, Duration::from_millis(200)));
        let link = Supervisor::new(ours);
        let slow = {
            let link = link.clone();
            tokio::spawn(async move {
                link.request(delegate("dlg_a"), Duration::from_secs(5))
                    .await
            })
        };
        // `end` is answered while `delegate` still waits: the writer is not held across it.
        let ended = link
            .request(
                Op::End {
                    delegation_id: "dlg_b".into(),
                },
                Duration::from_secs(1),
            )
            .await;
        assert_eq!(ended, Ok(Outcome::Ended {}));
        let Ok(Ok(Outcome::Started(child))) = slow.await else {
            panic!("the delegate was not answered");
        };
        assert_eq!(child.child_session_id, "ses_of_dlg_a");
    }

    #[tokio::test]
    async fn a_closed_socket_fails_waiting_and_later_requests() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let link = Supervisor::new(ours);
        let waiting = {
            let link = link.clone();
            tokio::spawn(async move {
                link.request(delegate("dlg_a"), Duration::from_secs(5))
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(theirs);
        assert_eq!(waiting.await.unwrap(), Err(LinkError::Closed));
        assert_eq!(
            link.request(delegate("dlg_b"), Duration::from_secs(1))
                .await,
            Err(LinkError::Closed)
        );
    }

    #[tokio::test]
    async fn a_silent_supervisor_times_out_and_an_overlong_line_ends_the_link() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let link = Supervisor::new(ours);
        assert_eq!(
            link.request(delegate("dlg_a"), Duration::from_millis(50))
                .await,
            Err(LinkError::TimedOut(Duration::from_millis(50)))
        );
        let (_read, mut write) = theirs.into_split();
        write.write_all(&vec![b'x'; LINE_CAP + 10]).await.unwrap();
        write.write_all(b"\n").await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(
            link.request(delegate("dlg_b"), Duration::from_secs(1))
                .await,
            Err(LinkError::Closed)
        );
    }
}
