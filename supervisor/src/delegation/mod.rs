//! Sub-capsules (DESIGN §7 delegate-task), the supervisor's side. Every capsule a launch starts
//! is handed a control socket; on it the capsule asks for a sub-capsule from one of its
//! `capabilities.delegate.allow` manifests (`delegate`), or for one to be stopped (`end`). A
//! sub-capsule runs under its parent's records, `children/<capsule>-<16 hex>/` (its session
//! folder and its work folder), with the delegated text as its launch task and its parent's
//! door as where its completion goes; it gets a control socket too, so it may delegate again.
//!
//! A sub-capsule ends on its own once its completion is posted. It is stopped when its parent
//! asks (`end`, as the parent's task is canceled), when its parent dies, and when the launch
//! ends; stopping one stops its own sub-capsules, at every depth.

mod child;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::watch;

use capsule::delegation::completion::Completion;
use capsule::delegation::protocol::{CompletionTarget, Op, Outcome, Request, Response};
use capsule::manifest::Manifest;
use capsule::peers::client::PeerDoor;
use capsule::policy;
use capsule::process::Containment;
use capsule::tasks::Outcome as TaskOutcome;

use crate::client;
use crate::launch;
use crate::records::RunningCapsule;
use crate::tokens;

/// SIGTERM to SIGKILL for a sub-capsule being stopped.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// How long a stopping sub-capsule has to give its StopSession account (and so cancel its own
/// task, which ends its own sub-capsules).
const STOP_SESSION_WITHIN: Duration = Duration::from_secs(15);
/// The longest request line a capsule may send.
const LINE_CAP: usize = 1 << 20;

/// A capsule that may delegate: what its requests are checked and its children placed by.
#[derive(Clone)]
pub struct Parent {
    pub session_id: String,
    pub url: String,
    pub manifest: Manifest,
    /// Its session folder; its children go under `children/`.
    pub records: PathBuf,
}

/// A running sub-capsule.
struct Running {
    pid: i32,
    url: String,
    operator: Option<String>,
    session_id: String,
    parent: String,
    record: RunningCapsule,
    /// Where its completion goes: also where the supervisor reports it, if it dies first.
    completion: CompletionTarget,
    /// `Some(status)` once it exited.
    exited: watch::Sender<Option<i32>>,
}

#[derive(Default)]
struct State {
    /// By delegation id.
    children: HashMap<String, Running>,
    /// Delegations ended before their sub-capsule was running: it must not be left to run.
    ended_early: HashSet<String>,
}

/// The launch's sub-capsules.
pub struct Service {
    state: Mutex<State>,
    containment: Option<Containment>,
    /// The formation's spend scope, which its sub-capsules are in too.
    formation_spend: Option<capsule::runtime::FormationSpend>,
}

impl Service {
    pub fn new(
        containment: Option<Containment>,
        formation_spend: Option<capsule::runtime::FormationSpend>,
    ) -> Arc<Service> {
        Arc::new(Service {
            state: Mutex::new(State::default()),
            containment,
            formation_spend,
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Serves `parent`'s requests on its control socket until it closes.
    pub fn serve(self: &Arc<Self>, parent: Parent, socket: tokio::net::UnixStream) {
        let service = self.clone();
        tokio::spawn(async move {
            let (read, write) = socket.into_split();
            let write = Arc::new(tokio::sync::Mutex::new(write));
            let mut lines = BufReader::new(read);
            let mut line = String::new();
            loop {
                line.clear();
                match tokio::io::AsyncReadExt::take(&mut lines, LINE_CAP as u64)
                    .read_line(&mut line)
                    .await
                {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                let Ok(request) = serde_json::from_str::<Request>(line.trim_end()) else {
                    // Not ours to guess at: a capsule speaks the protocol or nothing.
                    continue;
                };
                let (service, parent, write) = (service.clone(), parent.clone(), write.clone());
                tokio::spawn(async move {
                    let outcome = service.handle(&parent, request.op).await;
                    let answer = Response {
                        id: request.id,
                        outcome,
                    };
                    if let Ok(mut text) = serde_json::to_string(&answer) {
                        text.push('\n');
                        let _ = write.lock().await.write_all(text.as_bytes()).await;
                    }
                });
            }
        });
    }

    async fn handle(self: &Arc<Self>, parent: &Parent, op: Op) -> Outcome {
        match op {
            Op::Delegate {
                delegation_id,
                parent_task: _,
                manifest,
                text,
                completion_token,
                traceparent,
            } => {
                let request = child::Request {
                    delegation_id,
                    manifest,
                    text,
                    completion_token,
                    traceparent,
                };
                match child::start(self, parent, request).await {
                    Ok(started) => Outcome::Started(started),
                    Err(why) => Outcome::Error(why),
                }
            }
            Op::End { delegation_id } => {
                self.end(&delegation_id).await;
                Outcome::Ended {}
            }
        }
    }

    /// Whether `pid` is one of the sub-capsules (their exits come here, see [`Service::exited`]).
    pub fn owns(&self, pid: i32) -> bool {
        self.state().children.values().any(|c| c.pid == pid)
    }

    /// A sub-capsule's process ended: its records go, and its own sub-capsules are stopped.
    pub fn exited(self: &Arc<Self>, pid: i32, status: i32) {
        let gone = {
            let state = self.state();
            state
                .children
                .iter()
                .find(|(_, c)| c.pid == pid)
                .map(|(id, c)| (id.clone(), c.session_id.clone()))
        };
        let Some((id, session)) = gone else {
            return;
        };
        let removed = self.state().children.remove(&id);
        if let Some(child) = removed {
            child.record.remove();
            tokens::remove(&child.session_id);
            let _ = std::fs::remove_file(child::completion_token_path(&child.session_id));
            let _ = child.exited.send(Some(status));
            // Whatever its status: a child that had reported is no longer awaited, and its
            // parent refuses this stand-in (-31002), which changes nothing; one that had not
            // would otherwise leave its parent's task waiting for ever.
            tokio::spawn(report_death(child.completion, child.session_id, status));
        }
        let service = self.clone();
        tokio::spawn(async move { service.stop_children_of(&session).await });
    }

    /// Whether the delegation was ended before its sub-capsule ran (and forgets it).
    fn ended_early(&self, delegation_id: &str) -> bool {
        self.state().ended_early.remove(delegation_id)
    }

    /// Stops the sub-capsule of `delegation_id` (if it still runs) and returns once it is gone.
    pub async fn end(&self, delegation_id: &str) {
        let found = {
            let state = self.state();
            state.children.get(delegation_id).map(|c| {
                (
                    c.pid,
                    c.url.clone(),
                    c.operator.clone(),
                    c.exited.subscribe(),
                )
            })
        };
        let Some((pid, url, operator, mut exited)) = found else {
            // Its sub-capsule may still be starting: it is ended as soon as it runs.
            self.state().ended_early.insert(delegation_id.to_owned());
            return;
        };
        // Its account first: the stop cancels its task, which ends its own sub-capsules.
        let door = client::DoorRef {
            url: &url,
            token: operator,
        };
        let _ = tokio::time::timeout(
            STOP_SESSION_WITHIN,
            client::rpc(&door, "murmur.StopSession", json!({})),
        )
        .await;
        launch::terminate_group(pid, Signal::SIGTERM);
        let gone = tokio::time::timeout(STOP_GRACE, exited.wait_for(|e| e.is_some()))
            .await
            .is_ok_and(|r| r.is_ok());
        if !gone {
            launch::terminate_group(pid, Signal::SIGKILL);
            let _ = tokio::time::timeout(STOP_GRACE, exited.wait_for(|e| e.is_some())).await;
        }
    }

    /// Stops every sub-capsule `session` started.
    pub async fn stop_children_of(&self, session: &str) {
        let ids: Vec<String> = self
            .state()
            .children
            .iter()
            .filter(|(_, c)| c.parent == session)
            .map(|(id, _)| id.clone())
            .collect();
        let stops = ids.iter().map(|id| self.end(id));
        for stop in stops {
            stop.await;
        }
    }

    /// Stops every sub-capsule of the launch (it is ending).
    pub async fn stop_all(&self) {
        let ids: Vec<String> = self.state().children.keys().cloned().collect();
        for id in ids {
            self.end(&id).await;
        }
    }

    fn register(&self, delegation_id: String, child: Running) {
        self.state().children.insert(delegation_id, child);
    }
}

/// Tells the parent a sub-capsule ended, as the completion it may never have sent (state
/// failed), so the delegating task does not wait for ever. A parent no longer waiting (the
/// child reported first) refuses it (-31002), which changes nothing.
async fn report_death(target: CompletionTarget, child_session: String, status: i32) {
    let why = match status {
        s if s > 128 => format!("the sub-capsule died (exit status {s}) before it reported"),
        s => format!("the sub-capsule ended (exit status {s}) without reporting"),
    };
    let completion = Completion::of(
        &target.delegation_id,
        &child_session,
        &TaskOutcome::Failed(why),
    );
    let host = target.url.trim_start_matches("http://").to_owned();
    let Ok(allowed) = policy::check(&[host], &target.url) else {
        return;
    };
    let door = PeerDoor::new(allowed, target.token.clone());
    let _ = tokio::time::timeout(
        STOP_SESSION_WITHIN,
        door.complete(
            completion.params(),
            &target.session_id,
            &target.delegation_id,
        ),
    )
    .await;
}
