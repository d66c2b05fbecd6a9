//! The state one capsule process shares between its door, its worker and its harnesses: the
//! session's identity, manifest, task registry, trace, harness sessions and helper tokens.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rand::RngCore;
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::ids::{SessionId, TaskId};
use crate::manifest::Manifest;
use crate::stream::EventLog;
use crate::tasks::Registry;
use crate::trace::{EndStatus, Trace, TraceEvent};

pub struct Session {
    pub id: SessionId,
    pub manifest: Manifest,
    pub registry: Registry,
    /// Every task change as numbered stream events, for SSE streams and their replay.
    pub events: Arc<EventLog>,
    pub trace: Trace,
    /// `http://localhost:PORT`: the door's own address.
    pub url: String,
    /// Where harnesses run.
    pub workdir: PathBuf,
    pub records_dir: PathBuf,
    /// The `mur` binary, whose folder goes first on a harness's PATH.
    pub mur_exe: PathBuf,
    /// The harness session each context holds, resumed on its next task.
    pub harness_sessions: Mutex<HashMap<String, String>>,
    /// sha256 of each live task's helper token → the task it authorizes.
    task_tokens: Mutex<HashMap<[u8; 32], TaskId>>,
    /// Set once the capsule is going down.
    pub shutdown: watch::Sender<bool>,
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
        Session {
            id,
            manifest,
            registry,
            events,
            trace,
            url,
            workdir,
            records_dir,
            mur_exe,
            harness_sessions: Mutex::new(HashMap::new()),
            task_tokens: Mutex::new(HashMap::new()),
            shutdown: watch::channel(false).0,
        }
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

    /// Resolves once the capsule is going down (at once if it already is).
    pub async fn going_down(&self) {
        let mut rx = self.shutdown.subscribe();
        // The guard wait_for answers is dropped here, so callers stay Send.
        let _ = rx.wait_for(|down| *down).await.map(|_| ());
    }

    /// Traces the end of a task canceled while it waited in the queue: no worker ran it, so
    /// no worker will tell its ending.
    pub fn trace_canceled_in_queue(&self, task: &TaskId) {
        self.trace
            .event(TraceEvent::canceled_in_queue(task.clone()));
        self.trace.event(TraceEvent::task_end(
            task.clone(),
            EndStatus::Canceled,
            None,
        ));
    }

    pub fn harness_session(&self, context: &str) -> Option<String> {
        self.harness_sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(context)
            .cloned()
    }

    pub fn set_harness_session(&self, context: &str, session: Option<String>) -> Option<String> {
        let mut map = self
            .harness_sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match session {
            Some(s) => map.insert(context.to_owned(), s),
            None => map.remove(context),
        }
    }
}
