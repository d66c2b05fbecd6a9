//! The jail's ways out (DESIGN §8): an attempt in namespace mode has a network namespace that
//! holds only loopback, and its keeper hands the capsule the listeners it bound there
//! (`process::netns`). This module serves them from outside, for as long as the attempt lives:
//! - each forwarded loopback port (the capsule's own door, which the helpers reach at
//!   `MURMUR_DOOR_URL`, and every granted loopback destination) is relayed to the same port
//!   outside, through `policy::dial`;
//! - the egress proxy (`HTTP(S)_PROXY` inside) admits exactly what the capsule may reach —
//!   `capabilities.network.allow`, the member's callees, and the endpoints its CLI preset needs —
//!   and refuses the rest with a 403 naming that list, and an `egress_denied` trace record.
//!
//! A program that ignores the proxy variables reaches nothing but the forwarded ports: the
//! namespace has no route off loopback, and no resolver it can reach.
//!
//! Every connection an attempt opens through these costs the capsule descriptors (two when
//! relayed), so each attempt holds at most [`connection_cap`] at once, across all its ways out:
//! past that its listeners are not accepted on until one ends. A harness that floods its
//! proxy waits on its own backlog; the door and the capsule's other attempts keep theirs.

mod proxy;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

use crate::policy::{self, Allowed};
use crate::session::Session;

/// How long a relayed connection may take to open.
const DIAL_WITHIN: Duration = Duration::from_secs(10);

/// The most connections one attempt holds open through its ways out at once.
const MOST_CONNECTIONS: usize = 256;
/// Of the capsule's descriptors (its `RLIMIT_NOFILE`), the most one attempt's connections may
/// hold: one sixteenth.
const DESCRIPTOR_SHARE: u64 = 16;
/// The fewest connections an attempt is allowed, however low the capsule's descriptor limit.
const FEWEST_CONNECTIONS: usize = 8;

/// The connections one attempt may hold open at once: [`MOST_CONNECTIONS`], or fewer where the
/// capsule's descriptor limit is low, so that an attempt's connections (two descriptors each:
/// the harness's end and the relayed one) hold at most a sixteenth of the capsule's
/// descriptors.
pub fn connection_cap() -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 1024,
        rlim_max: 1024,
    };
    // SAFETY: getrlimit writes the one struct it is given; on failure it stays at 1024.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    let limit = limit.rlim_cur;
    let share = (limit / DESCRIPTOR_SHARE / 2).min(MOST_CONNECTIONS as u64) as usize;
    share.max(FEWEST_CONNECTIONS)
}

/// What one jailed attempt may reach, decided before it starts.
#[derive(Clone, Debug)]
pub struct Grant {
    /// Destinations the proxy admits, as allow-list entries.
    pub admitted: Vec<String>,
    /// Loopback ports forwarded into the namespace, each with where it leads outside.
    pub forwards: Vec<(u16, Allowed)>,
}

impl Grant {
    /// The grant of an attempt of `session`: its allow list (callees included), `extra`
    /// (what the CLI preset needs), and its own door forwarded at the port of `door_url`.
    pub fn of(session: &Session, extra: &[String]) -> Grant {
        Grant::build(session, extra, true)
    }

    /// The grant of a shell command the model runs (`crate::shell`): the allow list, callees
    /// included, and not the capsule's own door, which no command has a token for and no tool
    /// of the model needs to reach from inside.
    pub fn for_commands(session: &Session) -> Grant {
        Grant::build(session, &[], false)
    }

    fn build(session: &Session, extra: &[String], door: bool) -> Grant {
        let mut admitted = session.allow.clone();
        admitted.extend(extra.iter().cloned());
        let mut forwards: Vec<(u16, Allowed)> = Vec::new();
        if let Some(door) = door
            .then(|| policy::own_door(session.inside_url()).ok())
            .flatten()
        {
            forwards.push((door.target().port(), door));
        }
        // The model gateway, forwarded like the door: the CLI's only way to its provider.
        if let Some(gateway) = door
            .then_some(session.gateway.as_ref())
            .flatten()
            .and_then(|g| policy::own_door(&format!("http://127.0.0.1:{}", g.port())).ok())
        {
            forwards.push((gateway.target().port(), gateway));
        }
        for written in &admitted {
            let Ok(entry) = policy::Entry::parse(written) else {
                continue;
            };
            let (Some(port), true) = (entry.port(), is_loopback(entry.host())) else {
                continue;
            };
            if forwards.iter().any(|(p, _)| *p == port) {
                continue;
            }
            let url = format!("http://{}:{port}", entry.host());
            if let Ok(allowed) = policy::check(&admitted, &url) {
                forwards.push((port, allowed));
            }
        }
        Grant { admitted, forwards }
    }

    /// The ports forwarded into the namespace, door first.
    pub fn ports(&self) -> Vec<u16> {
        self.forwards.iter().map(|(p, _)| *p).collect()
    }
}

fn is_loopback(host: &str) -> bool {
    matches!(host, "localhost" | "127.0.0.1" | "[::1]" | "::1")
}

/// The served ways out of one attempt; dropping it closes them.
pub struct Exits {
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Exits {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Serves `listeners` (port 0: the proxy) for the attempt of `task_id` under `grant`, at
/// most [`connection_cap`] connections at once across them all.
pub fn serve(
    session: &Arc<Session>,
    task_id: &str,
    grant: &Grant,
    listeners: Vec<(u16, std::net::TcpListener)>,
) -> Exits {
    let admitted = Arc::new(grant.admitted.clone());
    let open = Arc::new(Semaphore::new(connection_cap()));
    let mut tasks = Vec::new();
    for (port, listener) in listeners {
        let Ok(listener) = listener
            .set_nonblocking(true)
            .and_then(|()| tokio::net::TcpListener::from_std(listener))
        else {
            continue;
        };
        let open = open.clone();
        if port == 0 {
            let (session, task, admitted) = (session.clone(), task_id.to_owned(), admitted.clone());
            tasks.push(tokio::spawn(async move {
                while let Some((conn, permit)) = next(&listener, &open).await {
                    let (session, task, admitted) =
                        (session.clone(), task.clone(), admitted.clone());
                    tokio::spawn(async move {
                        proxy::serve(conn, &session, &task, &admitted).await;
                        drop(permit);
                    });
                }
            }));
        } else if let Some((_, target)) = grant.forwards.iter().find(|(p, _)| *p == port) {
            let target = target.clone();
            tasks.push(tokio::spawn(async move {
                while let Some((conn, permit)) = next(&listener, &open).await {
                    let target = target.clone();
                    tokio::spawn(async move {
                        relay(conn, &target).await;
                        drop(permit);
                    });
                }
            }));
        }
    }
    Exits { tasks }
}

/// The next connection on `listener`, once the attempt is under its cap (`open`): nothing is
/// accepted while it is at it. `None` once the listener fails.
async fn next(
    listener: &tokio::net::TcpListener,
    open: &Arc<Semaphore>,
) -> Option<(tokio::net::TcpStream, OwnedSemaphorePermit)> {
    let permit = open.clone().acquire_owned().await.ok()?;
    let (conn, _) = listener.accept().await.ok()?;
    Some((conn, permit))
}

/// Relays one connection to `target` outside the namespace, both ways, until either side ends.
async fn relay(mut inside: tokio::net::TcpStream, target: &Allowed) {
    if let Ok(mut outside) = policy::dial(target, DIAL_WITHIN).await {
        let _ = tokio::io::copy_bidirectional(&mut inside, &mut outside).await;
    }
}
