//! Starting one sub-capsule: its manifest checked against the parent's
//! `capabilities.delegate.allow`, its folder under the parent's `children/`, its listener, tokens
//! and control socket, the delegated text as its launch task, and its parent's door as where its
//! completion goes. Answers once its door is ready.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use rand::RngCore;
use tokio::sync::watch;

use capsule::clock::Millis;
use capsule::delegation::protocol::{Child, CompletionTarget};
use capsule::ids::SessionId;
use capsule::manifest::paths::normalize;
use capsule::runtime::{CapsuleConfig, LaunchTask, READY_LINE};

use super::{Parent, Running, Service};
use crate::launch;
use crate::records::{self, RunningCapsule};
use crate::tokens;

/// How long a new sub-capsule has to get its door ready.
const READY_WITHIN: Duration = Duration::from_secs(15);

/// What the parent asked for.
pub struct Request {
    pub delegation_id: String,
    pub manifest: PathBuf,
    pub text: String,
    pub completion_token: Option<String>,
    /// The delegating span: the child's launch task and its completion continue it.
    pub traceparent: Option<String>,
}

/// `run/<session>.completion`: a sub-capsule's completion token, beside its token file.
pub fn completion_token_path(session: &str) -> PathBuf {
    records::run_dir().join(format!("{session}.completion"))
}

/// `<capsule>-<16 hex>`: the child's folder name under `children/`.
fn folder_name(capsule: &str) -> String {
    let mut bytes = [0u8; 8];
    rand::thread_rng().fill_bytes(&mut bytes);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{capsule}-{hex}")
}

/// Starts the sub-capsule `req` asks for on behalf of `parent`; answers it, or why not.
pub async fn start(service: &Arc<Service>, parent: &Parent, req: Request) -> Result<Child, String> {
    if service.ended_early(&req.delegation_id) {
        return Err("the delegation was ended before its sub-capsule started".into());
    }
    let path = normalize(&req.manifest);
    if !parent
        .manifest
        .capabilities
        .delegate_allow
        .iter()
        .any(|allowed| normalize(allowed) == path)
    {
        return Err(format!(
            "{} is not in capabilities.delegate.allow of {}",
            path.display(),
            parent.manifest.name
        ));
    }
    let manifest = capsule::manifest::load(&path).map_err(|e| e.to_string())?;
    launch::check_runnable(&manifest).map_err(|e| e.to_string())?;
    let dir = parent
        .records
        .join("children")
        .join(folder_name(&manifest.name));
    capsule::private::create_dir_under(&records::home(), &dir)
        .and_then(|_| records::copy_manifest(&manifest.path, &dir.join("manifest.yaml")))
        .map_err(|e| {
            format!(
                "cannot write the sub-capsule's records in {}: {e}",
                dir.display()
            )
        })?;
    // A sub-capsule's port is always the OS's: many may run from one manifest at once.
    let listener = launch::bind(None).map_err(|e| e.to_string())?;
    let url = format!(
        "http://localhost:{}",
        listener.local_addr().map(|a| a.port()).unwrap_or(0)
    );
    let session = SessionId::mint().to_string();
    let minted = tokens::mint(&manifest, false);
    tokens::save(&session, &minted).map_err(|e| format!("cannot write its tokens: {e}"))?;
    let (ours, theirs) = launch::control_pair().map_err(|e| e.to_string())?;
    let target = CompletionTarget {
        url: parent.url.clone(),
        session_id: parent.session_id.clone(),
        delegation_id: req.delegation_id.clone(),
        token: req.completion_token,
        traceparent: req.traceparent.clone(),
    };
    // The token travels in a 0600 file, never in the environment the config rides in.
    let token_file = match &target.token {
        Some(token) => {
            let path = completion_token_path(&session);
            records::write_private(&path, token.as_bytes())
                .map_err(|e| format!("cannot write its completion token: {e}"))?;
            Some(path)
        }
        None => None,
    };
    let config = CapsuleConfig {
        manifest: manifest.path.clone(),
        session_id: session.clone(),
        records_dir: dir.clone(),
        workdir: dir.clone(),
        url: url.clone(),
        mur_exe: std::env::current_exe().unwrap_or_default(),
        launch: Some(LaunchTask {
            text: req.text,
            context_id: None,
            forget_session: false,
            traceparent: req.traceparent,
            tracestate: None,
        }),
        tokens: tokens::digests(&minted),
        containment: service.containment.clone(),
        run_dir: Some(records::run_dir()),
        wiring: None,
        control: true,
        completion: Some(CompletionTarget {
            token: None,
            ..target.clone()
        }),
        completion_token: token_file,
        harness_url: None,
        protect: Vec::new(),
        storeless: true,
        spend_home: Some(records::home()),
        formation_spend: service.formation_spend.clone(),
    };
    let process = match launch::spawn_capsule(&listener, &theirs, &config, None) {
        Ok(p) => p,
        Err(e) => {
            tokens::remove(&session);
            let _ = std::fs::remove_file(completion_token_path(&session));
            return Err(e.to_string());
        }
    };
    drop(theirs);
    drop(listener);
    let pid = process.pid;
    let stdout = launch::read_stdout(process.stdout);
    let record = RunningCapsule {
        pid: pid as u32,
        supervisor_pid: std::process::id(),
        url: url.clone(),
        name: manifest.name.clone(),
        version: manifest.version.clone(),
        session_id: session.clone(),
        records: dir.clone(),
        formation: None,
        member: None,
        parent: Some(parent.session_id.clone()),
        delegation_id: Some(req.delegation_id.clone()),
        started_at: Millis::now().rfc3339(),
        restarts: 0,
        last_exit: None,
    };
    let (exited_tx, mut exited) = watch::channel(None);
    service.register(
        req.delegation_id.clone(),
        Running {
            pid,
            url: url.clone(),
            operator: tokens::operator_of(&minted),
            session_id: session.clone(),
            parent: parent.session_id.clone(),
            record: record.clone(),
            completion: target,
            exited: exited_tx,
        },
    );
    let deadline = tokio::time::Instant::now() + READY_WITHIN;
    loop {
        match stdout.first_line.try_recv() {
            Ok(line) if line == READY_LINE => break,
            Ok(line) => {
                launch::terminate_group(pid, Signal::SIGKILL);
                return Err(format!(
                    "the sub-capsule said {line:?} instead of getting ready"
                ));
            }
            Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                let _ =
                    tokio::time::timeout(Duration::from_secs(2), exited.wait_for(|e| e.is_some()))
                        .await;
                let status = exited
                    .borrow()
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| "unknown".into());
                return Err(format!(
                    "the sub-capsule {} exited with status {status} before its door was ready",
                    manifest.name
                ));
            }
            Err(std::sync::mpsc::TryRecvError::Empty) => {}
        }
        if tokio::time::Instant::now() > deadline {
            launch::terminate_group(pid, Signal::SIGKILL);
            return Err(format!(
                "the sub-capsule {} was not ready within {}s",
                manifest.name,
                READY_WITHIN.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let _ = stdout.relay.send(false);
    // Ended while it was starting: it does not get to run.
    if service.ended_early(&req.delegation_id) {
        service.end(&req.delegation_id).await;
        return Err("the delegation was ended while its sub-capsule started".into());
    }
    if let Err(e) = record.save() {
        eprintln!(
            "warning: cannot write the running-capsule record of {}: {e}",
            manifest.name
        );
    }
    service.serve(
        Parent {
            session_id: session.clone(),
            url: url.clone(),
            manifest: manifest.clone(),
            records: dir.clone(),
        },
        ours,
    );
    Ok(Child {
        capsule: manifest.name.clone(),
        version: manifest.version.clone(),
        child_session_id: session,
        child_workdir: dir,
        url,
    })
}
