//! `mur run`: validate the manifest, bind the listener, start the capsule, announce it, relay
//! the launch task's answer, and stop everything cleanly on Ctrl-C or SIGTERM (DESIGN §3).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::mpsc;
use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::json;
use tokio::signal::unix::{signal, SignalKind};

use capsule::clock::Millis;
use capsule::ids::SessionId;
use capsule::manifest::{self, Manifest, TaskAcceptance, Transport};
use capsule::process::Containment;
use capsule::runtime::{CapsuleConfig, LaunchTask, READY_LINE};

use crate::client;
use crate::error::{CliError, CliResult, Code};
use crate::launch;
use crate::records::{self, RunningCapsule};
use crate::tokens;

pub struct RunArgs {
    pub manifest: PathBuf,
    pub task: Option<String>,
    pub context: Option<String>,
    pub forget_session: bool,
    pub workdir: Option<PathBuf>,
    pub json: bool,
}

/// How long a new capsule has to answer its card.
const READY_WITHIN: Duration = Duration::from_secs(15);
/// SIGTERM to SIGKILL for a capsule being stopped.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// The checks a launch makes before anything starts: what this release can run.
fn check_runnable(m: &Manifest) -> CliResult<()> {
    // A door that starts no task never runs inference: any driver (or none) will do.
    if m.lifecycle.task_acceptance == TaskAcceptance::None {
        return Ok(());
    }
    if m.inference.transport == Transport::Http {
        return Err(CliError::new(
            Code::NotAvailable,
            format!("{}: inference.transport: http is not available in this release", m.path.display()),
            "run the capsule on inference.transport: process with a process driver (see manifests/worker.yaml)",
        ));
    }
    if capsule::harness::driver_of(m).is_none() {
        return Err(CliError::new(
            Code::NotAvailable,
            format!("{}: inference.driver.artifact names no process driver", m.path.display()),
            "declare the artifact with a process block, or use murmur/driver-claude-code or murmur/driver-codex",
        ));
    }
    Ok(())
}

/// How the capsule's harness attempts will be contained (DESIGN §3); `None` for a door that
/// starts no task.
fn contain(m: &Manifest) -> CliResult<Option<Containment>> {
    if m.lifecycle.task_acceptance == TaskAcceptance::None {
        return Ok(None);
    }
    let exe = std::env::current_exe().unwrap_or_default();
    // The probe hides the folder as an attempt will, so it must exist to be tried.
    let run_dir = records::run_dir();
    let _ = capsule::private::create_dir_all(&run_dir);
    Containment::detect(&exe, vec![run_dir])
        .map(Some)
        .map_err(|why| {
            CliError::new(
                Code::Containment,
                why,
                "unset MURMUR_CONTAINMENT (or set it to auto) to use the fallback; `mur install` says which mode is in force",
            )
        })
}

/// The launched manifest into the records, 0600 like every record (`fs::copy` would carry the
/// source's mode). At most the 1 MiB a manifest may be: a file grown since it was validated is
/// refused by the capsule's own load, and must not fill the records meanwhile.
fn copy_manifest(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::io::Read;
    let mut source = std::fs::File::open(from)?.take(manifest::limits::MAX_BYTES);
    std::io::copy(&mut source, &mut capsule::private::open(to, false)?).map(|_| ())
}

fn task_text(task: &str) -> CliResult<String> {
    let path = Path::new(task);
    if path.is_file() {
        return std::fs::read_to_string(path).map_err(|e| {
            CliError::new(
                Code::BadTask,
                format!("cannot read the task file {task}: {e}"),
                "pass readable UTF-8 text, or the task itself",
            )
        });
    }
    Ok(task.to_owned())
}

fn workdir(dir: Option<&Path>) -> CliResult<PathBuf> {
    let dir = match dir {
        Some(d) => d.to_path_buf(),
        None => std::env::current_dir().map_err(|e| {
            CliError::new(
                Code::BadWorkdir,
                format!("cannot read the current folder: {e}"),
                "run mur from an existing folder",
            )
        })?,
    };
    dir.canonicalize()
        .ok()
        .filter(|d| d.is_dir())
        .ok_or_else(|| {
            CliError::new(
                Code::BadWorkdir,
                format!("--workdir {} is not a folder", dir.display()),
                "create it first, or pass an existing folder",
            )
        })
}

pub async fn run(args: RunArgs) -> CliResult<i32> {
    let document =
        manifest::load_document(&args.manifest).map_err(|e| CliError::Formatted(e.to_string()))?;
    let m = match document {
        manifest::Document::Capsule(m) => m,
        manifest::Document::Formation(f) => {
            return Err(CliError::new(
                Code::NotAvailable,
                format!(
                    "{}: formation {} is valid, but launching formations is not available in this release",
                    f.path.display(),
                    f.name
                ),
                "launch each member's manifest with its own `mur run --manifest` for now",
            ))
        }
    };
    check_runnable(&m)?;
    let containment = contain(&m)?;
    let launch_task = match &args.task {
        Some(t) => Some(LaunchTask {
            text: task_text(t)?,
            context_id: args.context.clone(),
            forget_session: args.forget_session,
        }),
        None => None,
    };
    let workdir = workdir(args.workdir.as_deref())?;
    let session_id = SessionId::mint();
    let records_dir = records::sessions_dir(&workdir).join(session_id.as_str());
    capsule::private::create_dir_under(&records::home(), &records_dir)
        .and_then(|_| copy_manifest(&m.path, &records_dir.join("manifest.yaml")))
        .map_err(|e| {
            CliError::new(
                Code::Records,
                format!(
                    "cannot write the session records in {}: {e}",
                    records_dir.display()
                ),
                "check that $MURMUR_HOME is writable",
            )
        })?;

    let listener = launch::bind(m.network.internal_port)?;
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    let url = format!("http://localhost:{port}");
    launch::become_subreaper();
    let minted = tokens::mint(&m);
    tokens::save(session_id.as_str(), &minted).map_err(|e| {
        CliError::new(
            Code::Records,
            format!("cannot write the session's tokens: {e}"),
            "check that $MURMUR_HOME is writable",
        )
    })?;
    let config = CapsuleConfig {
        manifest: m.path.clone(),
        session_id: session_id.to_string(),
        records_dir: records_dir.clone(),
        workdir: workdir.clone(),
        url: url.clone(),
        mur_exe: std::env::current_exe().unwrap_or_default(),
        launch: launch_task,
        tokens: tokens::digests(&minted),
        containment,
        run_dir: Some(records::run_dir()),
        wiring: None,
    };
    let mut child = match launch::spawn_capsule(&listener, &config) {
        Ok(child) => child,
        Err(e) => {
            tokens::remove(session_id.as_str());
            return Err(e);
        }
    };
    drop(listener);
    let pid = child.id() as i32;
    let exited = launch::start_reaper(pid);
    let stdout = read_stdout(&mut child);

    if let Err(e) = wait_ready(&stdout, &exited).await {
        launch::terminate_group(pid, Signal::SIGKILL);
        launch::sweep();
        tokens::remove(session_id.as_str());
        return Err(e);
    }
    let record = RunningCapsule {
        pid: pid as u32,
        supervisor_pid: std::process::id(),
        url: url.clone(),
        name: m.name.clone(),
        version: m.version.clone(),
        session_id: session_id.to_string(),
        records: records_dir.clone(),
        formation: None,
        member: None,
        started_at: Millis::now().rfc3339(),
    };
    if let Err(e) = record.save() {
        eprintln!("warning: cannot write the running-capsule record: {e}");
    }
    announce(&args, &m, &record, &workdir);
    let _ = stdout.relay.send(());

    let operator = minted
        .iter()
        .find(|t| t.scopes.is_none())
        .map(|t| t.token.clone());
    let door = client::DoorRef {
        url: &url,
        token: operator,
    };
    let code = supervise(&door, pid, &exited).await;
    launch::sweep();
    record.remove();
    tokens::remove(session_id.as_str());
    Ok(code)
}

/// The capsule's stdout, read by a thread: its first line says it is ready, and the rest (the
/// launch task's answer) is relayed once the launch has been announced.
struct CapsuleStdout {
    first_line: mpsc::Receiver<String>,
    relay: mpsc::Sender<()>,
}

fn read_stdout(child: &mut Child) -> CapsuleStdout {
    let (line_tx, first_line) = mpsc::channel();
    let (relay, go) = mpsc::channel::<()>();
    if let Some(from) = child.stdout.take() {
        std::thread::spawn(move || {
            let mut reader = BufReader::new(from);
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let _ = line_tx.send(line.trim_end().to_owned());
            if go.recv().is_ok() {
                let _ = std::io::copy(&mut reader, &mut std::io::stdout());
            }
        });
    }
    CapsuleStdout { first_line, relay }
}

/// Waits (bounded) for the capsule's ready line. The listener was bound before the capsule
/// started, so once the capsule is serving its URL is good, however fast its task ends.
async fn wait_ready(out: &CapsuleStdout, exited: &mpsc::Receiver<i32>) -> CliResult<()> {
    let deadline = tokio::time::Instant::now() + READY_WITHIN;
    loop {
        match out.first_line.try_recv() {
            Ok(line) if line == READY_LINE => return Ok(()),
            Ok(line) => {
                return Err(CliError::new(
                    Code::CapsuleDidNotStart,
                    format!("the capsule said {line:?} instead of getting ready"),
                    "report this bug",
                ))
            }
            Err(mpsc::TryRecvError::Disconnected) => {
                let code = launch_exit_code(exited).await;
                return Err(CliError::new(
                    Code::CapsuleDidNotStart,
                    format!("the capsule exited with status {code} before its door was ready"),
                    "read the capsule's error above",
                ));
            }
            Err(mpsc::TryRecvError::Empty) => {}
        }
        if tokio::time::Instant::now() > deadline {
            return Err(CliError::new(
                Code::CapsuleDidNotStart,
                format!(
                    "the capsule's door was not ready within {}s",
                    READY_WITHIN.as_secs()
                ),
                "check the machine's load and the capsule's output",
            ));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn launch_exit_code(exited: &mpsc::Receiver<i32>) -> String {
    match poll_exit(exited, Some(Duration::from_secs(2))).await {
        Some(code) => code.to_string(),
        None => "unknown".to_owned(),
    }
}

fn announce(args: &RunArgs, m: &Manifest, r: &RunningCapsule, workdir: &Path) {
    let mut out = std::io::stdout().lock();
    if args.json {
        let v = json!({
            "url": r.url, "pid": r.pid, "session_id": r.session_id,
            "name": m.name, "version": m.version, "workdir": workdir,
        });
        let _ = writeln!(out, "{v}");
    } else {
        let port = r.url.rsplit(':').next().unwrap_or("");
        let _ = writeln!(out, "murmur: url localhost:{port}");
        let _ = writeln!(out, "session: {}", r.session_id);
    }
    let _ = out.flush();
}

/// Waits for the capsule to end on its own, or stops it on Ctrl-C / SIGTERM. Answers the exit
/// status of `mur run`.
async fn supervise(door: &client::DoorRef<'_>, pid: i32, exited: &mpsc::Receiver<i32>) -> i32 {
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return poll_exit(exited, None).await.unwrap_or(1);
    };
    tokio::select! {
        code = poll_exit(exited, None) => return code.unwrap_or(1),
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
    // Stop: the session's account first, while the capsule can still give it.
    let _ = tokio::time::timeout(
        Duration::from_secs(5),
        client::rpc(door, "murmur.StopSession", json!({})),
    )
    .await;
    launch::terminate_group(pid, Signal::SIGTERM);
    tokio::select! {
        code = poll_exit(exited, Some(STOP_GRACE)) => {
            if code.is_none() {
                launch::terminate_group(pid, Signal::SIGKILL);
            }
        }
        _ = int.recv() => launch::terminate_group(pid, Signal::SIGKILL),
    }
    0
}

async fn poll_exit(exited: &mpsc::Receiver<i32>, limit: Option<Duration>) -> Option<i32> {
    let deadline = limit.map(|l| tokio::time::Instant::now() + l);
    loop {
        if let Ok(code) = exited.try_recv() {
            return Some(code);
        }
        if deadline.is_some_and(|d| tokio::time::Instant::now() > d) {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
