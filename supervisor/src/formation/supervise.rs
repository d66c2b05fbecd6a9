//! Seeing a launched formation through (DESIGN §3, §7): each member's exit as the reaper
//! collects it, what its `restart` policy and the formation's `on_member_failure` make of it
//! (a restart after its backoff, a clean end, the formation stopped), Ctrl-C and SIGTERM, and
//! the clean stop of every member at the end.

use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::json;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc::UnboundedReceiver;

use capsule::clock::Millis;
use capsule::manifest::OnMemberFailure;

use super::failure;
use super::plan::Plan;
use super::restart::Decision;
use super::restart::Restarts;
use crate::client;
use crate::delegation::Service;
use crate::launch;
use std::net::TcpListener;
use std::path::PathBuf;

use capsule::runtime::CapsuleConfig;

use crate::delegation::Parent;
use crate::records::RunningCapsule;

/// One started member.
pub(super) struct Member {
    pub(super) name: String,
    pub(super) pid: i32,
    pub(super) url: String,
    pub(super) session_id: String,
    pub(super) records: PathBuf,
    pub(super) stdout: launch::CapsuleStdout,
    pub(super) operator: Option<String>,
    pub(super) record: RunningCapsule,
    pub(super) alive: bool,
    /// Its restarts so far, by its `restart` policy.
    pub(super) restarts: Restarts,
    /// What starting it again takes, for a member that may restart: its listener (kept open,
    /// so its port and its callers' wiring stay good across restarts), its config (same
    /// session, same token digests) and its delegation parent.
    pub(super) respawn: Option<Respawn>,
}

pub(super) struct Respawn {
    pub(super) listener: TcpListener,
    pub(super) config: CapsuleConfig,
    pub(super) parent: Parent,
}

/// How many unclaimed exits [`Exits`] keeps.
const SEEN_KEPT: usize = 1024;
/// SIGTERM to SIGKILL for a capsule being stopped.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// How long a stopping member has to give its StopSession account.
const STOP_SESSION_WITHIN: Duration = Duration::from_secs(5);

/// Exit statuses of this process's children, as the reaper collects them.
pub(super) struct Exits {
    rx: UnboundedReceiver<(i32, i32)>,
    seen: Vec<(i32, i32)>,
    /// Sub-capsules' exits are theirs.
    pub(super) children: Arc<Service>,
}

impl Exits {
    pub(super) fn new(rx: UnboundedReceiver<(i32, i32)>, children: Arc<Service>) -> Exits {
        Exits {
            rx,
            seen: Vec::new(),
            children,
        }
    }

    /// Keeps an exit for a member, hands a sub-capsule's to the delegation service; answers
    /// whether it was kept.
    fn route(&mut self, pid: i32, code: i32) -> bool {
        if self.children.owns(pid) {
            self.children.exited(pid, code);
            return false;
        }
        true
    }

    fn drain(&mut self) {
        while let Ok((pid, code)) = self.rx.try_recv() {
            if self.route(pid, code) {
                // Orphans reaped here (this process is a subreaper) are exits too: keep only
                // the newest, so a launch that runs for weeks does not collect them all.
                if self.seen.len() >= SEEN_KEPT {
                    self.seen.remove(0);
                }
                self.seen.push((pid, code));
            }
        }
    }

    pub(super) fn of(&mut self, pid: i32) -> Option<i32> {
        self.drain();
        self.seen.iter().find(|(p, _)| *p == pid).map(|(_, c)| *c)
    }

    /// The next exit of one of `pids` (others are a sweep's business).
    pub(super) async fn next_of(&mut self, pids: &[i32]) -> Option<(i32, i32)> {
        if let Some(i) = self.seen.iter().position(|(p, _)| pids.contains(p)) {
            return Some(self.seen.remove(i));
        }
        loop {
            let (pid, code) = self.rx.recv().await?;
            if self.route(pid, code) && pids.contains(&pid) {
                return Some((pid, code));
            }
        }
    }
}

/// Ctrl-C and SIGTERM, as streams (`None` if the runtime could not listen for them).
pub(super) struct Stops(Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>);

impl Stops {
    pub(super) fn take() -> Stops {
        match (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) {
            (Ok(int), Ok(term)) => Stops(Some((int, term))),
            _ => Stops(None),
        }
    }
}

/// Waits for the launch to end: the entry ending on its own, a member dying (as its `restart`
/// policy, then `on_member_failure`, say), or Ctrl-C / SIGTERM. Answers the exit status of
/// `mur run`. A member due to restart waits out its backoff here, while everything else is
/// still watched.
pub(super) async fn supervise(
    plan: &Plan,
    members: &mut [Member],
    exits: &mut Exits,
    stops: Stops,
    service: &Arc<Service>,
) -> i32 {
    let Stops(Some((mut int, mut term))) = stops else {
        stop_all(members, exits, None).await;
        return 1;
    };
    // Members waiting out their backoff: (index, when it starts again).
    let mut due: Vec<(usize, tokio::time::Instant)> = Vec::new();
    loop {
        let pids: Vec<i32> = members.iter().filter(|m| m.alive).map(|m| m.pid).collect();
        let next_due = due.iter().map(|(_, at)| *at).min();
        let ended = tokio::select! {
            ended = exits.next_of(&pids) => Some(ended),
            _ = async {
                match next_due {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => None,
            _ = int.recv() => Some(None),
            _ = term.recv() => Some(None),
        };
        let ended = match ended {
            // A backoff is over: that member starts again.
            None => {
                let now = tokio::time::Instant::now();
                let (ready, waiting): (Vec<_>, Vec<_>) =
                    due.drain(..).partition(|(_, at)| *at <= now);
                due = waiting;
                for (i, _) in ready {
                    respawn(&mut members[i], service);
                }
                continue;
            }
            Some(ended) => ended,
        };
        let Some((pid, code)) = ended else {
            stop_all(members, exits, Some(&mut int)).await;
            return 0;
        };
        let Some(i) = members.iter().position(|m| m.pid == pid) else {
            continue;
        };
        members[i].alive = false;
        if i == plan.entry {
            members[i].record.remove();
            // The launch's own end: the rest of the formation goes with it.
            stop_all(members, exits, Some(&mut int)).await;
            return code;
        }
        let Some(formation) = &plan.formation else {
            members[i].record.remove();
            return code;
        };
        let decision = members[i].restarts.on_exit(code, std::time::Instant::now());
        let m = &members[i];
        let (children, session) = (exits.children.clone(), m.session_id.clone());
        // Its sub-capsules go with it; their exits arrive while this loop goes on.
        tokio::spawn(async move { children.stop_children_of(&session).await });
        if let Decision::Restart { attempt, backoff } = decision {
            let failed =
                failure::record(&m.records, &m.session_id, &formation.name, &m.name, code).await;
            failure::restarted(
                &m.records,
                &m.session_id,
                capsule::trace::TraceEvent::MemberRestarted {
                    formation: formation.name.clone(),
                    member: m.name.clone(),
                    attempt,
                    backoff_ms: backoff.as_millis() as u64,
                    exit_status: code,
                },
            )
            .await;
            let rule = plan.members[i].restart;
            eprintln!(
                "mur: member {} (pid {pid}) exited with status {code}; {failed} of its tasks failed; restarting it in {:.1} s (restart {attempt} of {} within {} s)",
                m.name,
                backoff.as_secs_f64(),
                rule.max,
                rule.window.as_secs()
            );
            due.push((i, tokio::time::Instant::now() + backoff));
            continue;
        }
        members[i].record.remove();
        let m = &members[i];
        if code == 0 && decision == Decision::Final {
            // A member that ends cleanly (its lifecycle's after_task: exit) is no crash. No
            // member others call can (the formation's validation refuses it), so nothing waits.
            eprintln!("mur: member {} (pid {pid}) ended (status 0)", m.name);
            continue;
        }
        let failed =
            failure::record(&m.records, &m.session_id, &formation.name, &m.name, code).await;
        let then = match formation.on_member_failure {
            OnMemberFailure::Stop => "stopping the formation (on_member_failure: stop)",
            OnMemberFailure::Continue => "the formation goes on (on_member_failure: continue)",
        };
        let how = match decision {
            Decision::CapReached { restarts } => format!(
                "exited with status {code} after {restarts} restarts within {} s, its cap (max_restarts)",
                plan.members[i].restart.window.as_secs()
            ),
            _ => format!("exited unexpectedly with status {code}"),
        };
        eprintln!(
            "mur: member {} (pid {pid}) {how}; {failed} of its tasks failed; {then}",
            m.name
        );
        if formation.on_member_failure == OnMemberFailure::Stop {
            stop_all(members, exits, Some(&mut int)).await;
            return 1;
        }
    }
}

/// Starts member `m` again on its own listener (its port, and so its callers' wiring, stay
/// good: connections made meanwhile wait in the listener's backlog), with the same session and
/// tokens. A member that cannot be started again stays down, said on stderr.
fn respawn(m: &mut Member, service: &Arc<Service>) {
    let Some(again) = &m.respawn else {
        return;
    };
    let started = launch::control_pair().and_then(|(ours, theirs)| {
        let child = launch::spawn_capsule(&again.listener, &theirs, &again.config, None);
        drop(theirs);
        if child.is_ok() {
            service.serve(again.parent.clone(), ours);
        }
        child
    });
    let child = match started {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mur: member {} could not be started again: {e}", m.name);
            return;
        }
    };
    m.pid = child.pid;
    m.alive = true;
    m.stdout = launch::read_stdout(child.stdout);
    // Only the entry's answer is relayed; a member's output is drained.
    let _ = m.stdout.relay.send(false);
    m.record.pid = m.pid as u32;
    m.record.restarts = m.restarts.total;
    m.record.last_exit = m.restarts.last_exit;
    m.record.started_at = Millis::now().rfc3339();
    if let Err(e) = m.record.save() {
        eprintln!(
            "warning: cannot write the running-capsule record of {}: {e}",
            m.name
        );
    }
}

/// Stops every live member cleanly: each session's account first (murmur.StopSession, while
/// the capsules can still give it), then SIGTERM, the grace, SIGKILL. A Ctrl-C during the grace
/// kills at once.
pub(super) async fn stop_all(
    members: &mut [Member],
    exits: &mut Exits,
    int: Option<&mut tokio::signal::unix::Signal>,
) {
    let live: Vec<&Member> = members.iter().filter(|m| m.alive).collect();
    let mut accounts = tokio::task::JoinSet::new();
    for m in &live {
        let (url, token) = (m.url.clone(), m.operator.clone());
        accounts.spawn(async move {
            let door = client::DoorRef { url: &url, token };
            let _ = tokio::time::timeout(
                STOP_SESSION_WITHIN,
                client::rpc(&door, "murmur.StopSession", json!({})),
            )
            .await;
        });
    }
    while accounts.join_next().await.is_some() {}
    let pids: Vec<i32> = live.iter().map(|m| m.pid).collect();
    for &pid in &pids {
        launch::terminate_group(pid, Signal::SIGTERM);
    }
    let all_ended = async {
        let mut left = pids.clone();
        while !left.is_empty() {
            match exits.next_of(&left).await {
                Some((pid, _)) => left.retain(|p| *p != pid),
                None => return,
            }
        }
    };
    let killed = match int {
        Some(int) => tokio::select! {
            r = tokio::time::timeout(STOP_GRACE, all_ended) => r.is_err(),
            _ = int.recv() => true,
        },
        None => tokio::time::timeout(STOP_GRACE, all_ended).await.is_err(),
    };
    if killed {
        for &pid in &pids {
            launch::terminate_group(pid, Signal::SIGKILL);
        }
    }
    for m in members.iter_mut() {
        m.alive = false;
    }
}
