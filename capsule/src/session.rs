//! The state one capsule process shares between its door, its worker and its harnesses: the
//! session's identity, manifest, task registry, trace, harness sessions and helper tokens.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rand::RngCore;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::delegation::completion::Awaited;
use crate::delegation::protocol::CompletionTarget;
use crate::delegation::supervisor::Supervisor;
use crate::errands::Errands;
use crate::held::harness_sessions::HarnessSessions;
use crate::ids::{SessionId, TaskId};
use crate::manifest::Manifest;
use crate::stream::EventLog;
use crate::tasks::{
    Admission, CancelRefusal, Owner, Registry, Residue, TaskInput, TaskState, Viewer,
};
use crate::trace::{EndStatus, Origin, Trace, TraceEvent};
use crate::wiring::Wiring;

pub struct Session {
    pub id: SessionId,
    pub manifest: Manifest,
    pub registry: Registry,
    /// Every task change as numbered stream events, for SSE streams and their replay.
    pub events: Arc<EventLog>,
    pub trace: Trace,
    /// `http://localhost:PORT`: the door's own address, as its card advertises it.
    pub url: String,
    /// The door's address for this capsule's own harnesses, when not `url`.
    pub harness_url: Option<String>,
    /// Where harnesses run.
    pub workdir: PathBuf,
    pub records_dir: PathBuf,
    /// The `mur` binary, whose folder goes first on a harness's PATH.
    pub mur_exe: PathBuf,
    /// The harness session each context holds, resumed on its next task.
    pub harness_sessions: HarnessSessions,
    /// The conversation each context holds on an http capsule, continued by its next task.
    pub conversations: crate::inference::conversation::Conversations,
    /// sha256 of each live task's helper token → the task it authorizes.
    task_tokens: Mutex<HashMap<[u8; 32], TaskId>>,
    /// What the session's tasks leave running past their end.
    pub residue: Residue,
    /// The shell commands the model of an http capsule runs (the shell module runs them).
    pub commands: crate::held::commands::Commands,
    /// The formation wiring of a member; `None` for a capsule launched alone.
    pub wiring: Option<Wiring>,
    /// Where this capsule may connect (`capabilities.network.allow`, plus a member's callees).
    pub allow: Vec<String>,
    /// What each running task's helpers have in flight, and leave for its ending.
    pub errands: Errands,
    /// Set once the capsule is going down ([`Session::go_down`]).
    pub shutdown: watch::Sender<bool>,
    /// The control socket to the supervisor, which starts and ends sub-capsules; `None` when
    /// the supervisor gave none (this capsule cannot delegate).
    pub supervisor: Option<Arc<Supervisor>>,
    /// The delegations this session's tasks await the completion of.
    pub delegations: Awaited,
    /// A sub-capsule's parent: where its launch task's completion goes.
    pub completion: Option<CompletionTarget>,
    /// This run's manifests beyond the capsule's own, which no harness may change.
    pub run_files: Vec<PathBuf>,
    /// What the session's model calls have used, against every ceiling it is under.
    pub spend: Arc<crate::gateway::Spend>,
    /// The model gateway its harnesses call their provider through; `None` for an http
    /// capsule (its loop calls the provider itself) or a CLI left to its own way out.
    pub gateway: Option<Arc<crate::gateway::Gateway>>,
    /// Where tasks, harness sessions and spend outlive the process (`crate::store`).
    pub store: Option<Arc<crate::store::Store>>,
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl Session {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: SessionId,
        manifest: Manifest,
        registry: Registry,
        events: Arc<EventLog>,
        trace: Trace,
        url: String,
        workdir: PathBuf,
        records_dir: PathBuf,
        mur_exe: PathBuf,
    ) -> Session {
        let manifest_allow = manifest.capabilities.network_allow.clone();
        Session {
            id,
            manifest,
            registry,
            events,
            trace,
            url,
            harness_url: None,
            workdir,
            records_dir,
            mur_exe,
            harness_sessions: HarnessSessions::default(),
            conversations: Default::default(),
            task_tokens: Mutex::new(HashMap::new()),
            residue: Residue::default(),
            commands: Default::default(),
            allow: manifest_allow,
            errands: Errands::default(),
            wiring: None,
            shutdown: watch::channel(false).0,
            supervisor: None,
            delegations: Awaited::default(),
            completion: None,
            run_files: Vec::new(),
            spend: Arc::new(crate::gateway::Spend::none()),
            gateway: None,
            store: None,
        }
    }

    /// The session's spend scopes, and the gateway its harnesses reach their provider through.
    pub fn spending(
        mut self,
        spend: crate::gateway::Spend,
        gateway: Option<Arc<crate::gateway::Gateway>>,
    ) -> Session {
        self.spend = Arc::new(spend);
        self.gateway = gateway;
        self
    }

    /// The session's durable store and the harness sessions it kept (`None`: a capsule run
    /// with `MURMUR_STORE=off`, whose tasks end with it).
    pub fn storing(
        mut self,
        store: Option<Arc<crate::store::Store>>,
        harness_sessions: HarnessSessions,
        conversations: crate::inference::conversation::Conversations,
    ) -> Session {
        self.store = store;
        self.harness_sessions = harness_sessions;
        self.conversations = conversations;
        self
    }

    /// Returns once the store holds every task change made so far: an answer rendered before
    /// this call may then leave (docs/store.md). At once without a store.
    pub async fn kept(&self) {
        if let Some(store) = &self.store {
            store.kept(self.registry.newest()).await;
        }
    }

    /// What a stream waits on before it writes an event: the store, when there is one.
    pub fn keeper(&self) -> Option<Arc<dyn crate::stream::Keeper>> {
        self.store
            .clone()
            .map(|s| s as Arc<dyn crate::stream::Keeper>)
    }

    /// The files this run was launched from (a formation's file, its members' manifests):
    /// read-only to every harness (`harness::protect`).
    pub fn protecting(mut self, run_files: Vec<PathBuf>) -> Session {
        self.run_files = run_files;
        self
    }

    /// A capsule whose supervisor handed it a control socket: its tasks may delegate.
    pub fn delegating(mut self, supervisor: Option<Arc<Supervisor>>) -> Session {
        self.supervisor = supervisor;
        self
    }

    /// A sub-capsule: its launch task's completion goes to `target`, whose door its allow list
    /// therefore includes (the child could not report back otherwise; it reaches nothing else
    /// of its parent's).
    pub fn completing_to(mut self, target: Option<CompletionTarget>) -> Session {
        if let Some(t) = &target {
            let host_port = t
                .url
                .strip_prefix("http://")
                .unwrap_or(&t.url)
                .trim_end_matches('/')
                .to_owned();
            if !self.allow.contains(&host_port) {
                self.allow.push(host_port);
            }
        }
        self.completion = target;
        self
    }

    /// A capsule whose advertised URL does not lead back from inside it: its harnesses reach
    /// the door at `url` instead (`CapsuleConfig::harness_url`).
    pub fn reached_inside_at(mut self, url: Option<String>) -> Session {
        self.harness_url = url;
        self
    }

    /// The door's address as this capsule's harnesses reach it.
    pub fn inside_url(&self) -> &str {
        self.harness_url.as_deref().unwrap_or(&self.url)
    }

    /// The session of a formation member: its wiring, and the allow list that wiring extends.
    pub fn wired(mut self, wiring: Option<Wiring>) -> Session {
        if let Some(w) = &wiring {
            self.allow = w.allow(&self.manifest.capabilities.network_allow);
        }
        self.wiring = wiring;
        self
    }

    /// Mints the `MURMUR_TASK_TOKEN` for one task attempt; only its digest is kept.
    pub fn mint_task_token(&self, task: &TaskId) -> String {
        let mut bytes = [0u8; 32];
        rand::thread_rng().fill_bytes(&mut bytes);
        let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        self.tokens().insert(digest(&token), task.clone());
        token
    }

    pub fn revoke_task_tokens(&self, task: &TaskId) {
        self.tokens().retain(|_, t| t != task);
    }

    /// The task a helper token authorizes.
    pub fn task_for_token(&self, token: &str) -> Option<TaskId> {
        self.tokens().get(&digest(token)).cloned()
    }

    fn tokens(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], TaskId>> {
        self.task_tokens.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the capsule down: its door stops taking connections, its worker ends. Kept
    /// (`send_replace`) even while nothing listens yet: a SIGTERM that comes as the door
    /// starts must still close it once it does listen.
    pub fn go_down(&self) {
        self.shutdown.send_replace(true);
    }

    /// Resolves once the capsule is going down (at once if it already is).
    pub async fn going_down(&self) {
        let mut rx = self.shutdown.subscribe();
        // The guard wait_for answers is dropped here, so callers stay Send.
        let _ = rx.wait_for(|down| *down).await.map(|_| ());
    }

    pub fn harness_session(&self, context: &str) -> Option<String> {
        self.harness_sessions.get(context)
    }

    pub fn set_harness_session(&self, context: &str, session: Option<String>) -> Option<String> {
        self.harness_sessions.set(context, session)
    }
}

/// A task's way in and its way out by cancel, each with its trace records. Every caller (the
/// door's methods, the launch, the shutdown) goes through here, so no path admits a task
/// without its `a2a_task_received` or cancels a queued one without its `task_end`.
impl Session {
    /// Takes a new task, or answers it rejected (busy or closing). An accepted task is traced
    /// as received; a rejected one never started, so it leaves no record.
    pub fn admit(
        &self,
        context_id: Option<String>,
        owner: Owner,
        input: TaskInput,
        origin: Origin,
    ) -> Admission {
        // The launch's message id is one the runtime minted, not one a client sent.
        let message_id = match origin {
            Origin::Client | Origin::Peer => Some(input.message_id.clone()),
            Origin::Launch | Origin::Command => None,
        };
        let trust = input.trust;
        // A command's result is what the session already started: it waits its turn rather than
        // being refused for room, which a client's task is.
        let admission = match origin {
            Origin::Command => self.registry.admit_beyond_room(context_id, owner, input),
            _ => self.registry.admit(context_id, owner, input),
        };
        if let Admission::Accepted(id, task) = &admission {
            self.trace.event(TraceEvent::A2aTaskReceived {
                task_id: id.clone(),
                context_id: task["contextId"].as_str().unwrap_or_default().to_owned(),
                message_id,
                origin,
                trust,
            });
        }
        admission
    }

    /// CancelTask: a live task the viewer sees moves to TASK_STATE_CANCELED. Answers the task
    /// and the state it was in.
    pub async fn cancel(
        &self,
        id: &str,
        viewer: &Viewer,
    ) -> Result<(Value, TaskState), CancelRefusal> {
        let (task, was) = self.registry.cancel(id, viewer)?;
        let id = TaskId::from_wire(id);
        if was == TaskState::Submitted {
            self.end_in_queue(std::slice::from_ref(&id)).await;
        }
        self.commands.demote_task(&id, &self.residue, &self.trace);
        Ok((task, was))
    }

    /// Cancels every live task (StopSession, shutdown), answering their ids sorted, each with
    /// the state it was in.
    pub async fn cancel_all(&self) -> Vec<(TaskId, TaskState)> {
        self.end_all(None).await
    }

    /// Ends every live task as [`Session::cancel_all`] does, but failed saying `why`: the
    /// session ends without its stop (docs/store.md).
    pub async fn fail_all(&self, why: &str) -> Vec<(TaskId, TaskState)> {
        self.end_all(Some(why)).await
    }

    async fn end_all(&self, failed: Option<&str>) -> Vec<(TaskId, TaskState)> {
        let canceled = match failed {
            Some(why) => self.registry.fail_all(why),
            None => self.registry.cancel_all(),
        };
        let queued: Vec<TaskId> = canceled
            .iter()
            .filter(|(_, was)| *was == TaskState::Submitted)
            .map(|(id, _)| id.clone())
            .collect();
        self.end_in_queue(&queued).await;
        for (id, _) in &canceled {
            self.commands.demote_task(id, &self.residue, &self.trace);
        }
        canceled
    }

    /// Traces the end of tasks canceled while they waited in the queue (no worker ran them, so
    /// no worker will tell their ending), and waits until it is on file, as the worker does
    /// for the tasks it ends: whoever is answered the cancel finds the task_end.
    async fn end_in_queue(&self, tasks: &[TaskId]) {
        if tasks.is_empty() {
            return;
        }
        for task in tasks {
            self.trace
                .event(TraceEvent::canceled_in_queue(task.clone()));
            self.trace.event(TraceEvent::task_end(
                task.clone(),
                EndStatus::Canceled,
                None,
            ));
        }
        self.trace.flush().await;
    }
}

#[cfg(test)]
mod tests {
    //! The records each way in and out leaves, read as soon as the call returns.

    use std::path::Path;

    use serde_json::Value;

    use super::*;
    use crate::trace::tests::Shared;

    const MANIFEST: &str = "\
name: owner-test
version: \"0.1.0\"
artifacts:
  - name: murmur/driver-anthropic
    runtime: driver
    gateway: { endpoint: https://api.anthropic.com, api_key: sk-test }
inference:
  model: claude-sonnet-5
";

    /// A session with room for one running task and one queued, tracing into `sink`.
    fn session(sink: &Shared) -> Session {
        let manifest =
            crate::manifest::load_str(MANIFEST, Path::new("owner/murmur.yaml"), &|_| None).unwrap();
        let id = SessionId::from_wire("ses_owner");
        let trace = Trace::to_sink(sink.clone(), id.clone(), 64).unwrap();
        Session::new(
            id,
            manifest,
            Registry::new(2),
            Arc::new(EventLog::default()),
            trace,
            "http://localhost:1".into(),
            PathBuf::from("/tmp"),
            PathBuf::from("/tmp"),
            PathBuf::from("/bin/true"),
        )
    }

    fn input(message_id: &str) -> TaskInput {
        TaskInput {
            text: "hello".into(),
            message_id: message_id.into(),
            ..TaskInput::default()
        }
    }

    fn admitted(admission: Admission) -> TaskId {
        match admission {
            Admission::Accepted(id, _) => id,
            Admission::Rejected(..) => panic!("rejected"),
        }
    }

    /// `(event_type, task_id)` of every record so far.
    fn records(sink: &Shared) -> Vec<(String, String)> {
        sink.records()
            .iter()
            .map(|r| {
                let s = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
                (s("event_type"), s("task_id"))
            })
            .collect()
    }

    fn of<'a>(kind: &'a str, id: &'a TaskId) -> (String, String) {
        (kind.to_owned(), id.to_string())
    }

    #[tokio::test]
    async fn admission_traces_what_it_accepts_and_nothing_it_rejects() {
        let sink = Shared::default();
        let s = session(&sink);
        let client = admitted(s.admit(None, Owner::Session, input("m1"), Origin::Client));
        let launch = admitted(s.admit(None, Owner::Session, input("m2"), Origin::Launch));
        let busy = s.admit(None, Owner::Session, input("m3"), Origin::Client);
        assert!(matches!(busy, Admission::Rejected(..)));
        s.trace.flush().await;
        let all = sink.records();
        assert_eq!(all.len(), 2, "{all:?}");
        assert_eq!(all[0]["task_id"], client.as_str());
        assert_eq!(all[0]["message_id"], "m1");
        assert_eq!(all[0]["origin"], "client");
        assert!(all[0]["context_id"].as_str().unwrap().starts_with("ctx_"));
        assert_eq!(all[1]["task_id"], launch.as_str());
        assert_eq!(all[1].get("message_id"), None::<&Value>);
        assert_eq!(all[1]["origin"], "launch");
    }

    #[tokio::test]
    async fn a_task_canceled_in_the_queue_has_its_end_on_file_when_the_cancel_returns() {
        let sink = Shared::default();
        let s = session(&sink);
        let queued = admitted(s.admit(None, Owner::Session, input("m1"), Origin::Client));
        let Ok((task, was)) = s.cancel(queued.as_str(), &Viewer::Everyone).await else {
            panic!("the queued task was not canceled");
        };
        assert_eq!(was, TaskState::Submitted);
        assert_eq!(task["status"]["state"], "TASK_STATE_CANCELED");
        assert_eq!(
            records(&sink)[1..],
            [of("task_canceled", &queued), of("task_end", &queued)]
        );
    }

    #[tokio::test]
    async fn cancel_all_ends_queued_tasks_and_leaves_running_ones_to_the_worker() {
        let sink = Shared::default();
        let s = session(&sink);
        let running = admitted(s.admit(None, Owner::Session, input("m1"), Origin::Client));
        let queued = admitted(s.admit(None, Owner::Session, input("m2"), Origin::Client));
        let started = s.registry.next().await.unwrap();
        assert_eq!(started.id, running);
        let canceled = s.cancel_all().await;
        let mut ids: Vec<&TaskId> = canceled.iter().map(|(id, _)| id).collect();
        let mut both = vec![&running, &queued];
        ids.sort();
        both.sort();
        assert_eq!(ids, both);
        assert_eq!(
            records(&sink)[2..],
            [of("task_canceled", &queued), of("task_end", &queued)],
            "the worker traces the running task's end once its harness stops"
        );
        assert!(
            s.cancel_all().await.is_empty(),
            "a second call cancels nothing"
        );
    }
}
