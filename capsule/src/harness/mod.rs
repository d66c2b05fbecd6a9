//! The process transport (DESIGN §8): one harness process per task attempt, in its own process
//! group, fed the task on stdin (or as its last argument), read in its dialect, interrupted on
//! cancel with SIGINT or stdin bytes, and killed with all its descendants after the grace.

mod dialect;
mod reap;

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::watch;

pub use dialect::Transcript;
pub use reap::{descendants, kill_all, parent_pid};

use crate::ids::TaskId;
use crate::manifest::{Interrupt, Manifest, OutputDialect, ProcessDriver, PromptMode};
use crate::session::Session;
use crate::stream::EventLog;
use crate::trace::{ExitCause, InterruptSent, SessionMode, TraceEvent};

/// How long an interrupted harness has to end on its own.
pub const GRACE: Duration = Duration::from_secs(10);
/// The most of stdout kept; a harness printing more has the rest dropped.
const STDOUT_CAP: usize = 8 << 20;
const STDERR_TAIL: usize = 64 << 10;

/// A resolved process driver: the manifest's `process` block, presets already filled in.
pub type Driver = ProcessDriver;

/// The process driver `inference.driver.artifact` names, when it is one.
pub fn driver_of(m: &Manifest) -> Option<Driver> {
    m.driver_artifact()?.process.clone()
}

/// One attempt at one task.
pub struct Attempt<'a> {
    pub task_id: &'a str,
    pub context_id: &'a str,
    pub message_id: &'a str,
    pub prompt: &'a str,
    pub token: &'a str,
    /// The context's harness session, when the driver can resume it.
    pub resume: Option<String>,
    pub guide: &'a Path,
    pub max_turns: u32,
}

/// How an attempt ended.
pub enum Ending {
    Exited {
        code: Option<i32>,
        signal: Option<i32>,
        transcript: Transcript,
        stderr_last_line: String,
    },
    Canceled {
        killed: bool,
        transcript: Transcript,
    },
    TurnsExhausted {
        transcript: Transcript,
    },
    SpawnFailed(String),
}

fn expand(arg: &str, a: &Attempt, guide_text: &str) -> String {
    arg.replace("{session}", a.resume.as_deref().unwrap_or(""))
        .replace("{guide_text}", guide_text)
        .replace("{guide}", &a.guide.to_string_lossy())
}

fn build_command(session: &Session, d: &Driver, a: &Attempt) -> Option<Command> {
    let guide_text = if d.command.iter().any(|c| c.contains("{guide_text}")) {
        std::fs::read_to_string(a.guide).unwrap_or_default()
    } else {
        String::new()
    };
    let (program, rest) = d.command.split_first()?;
    let mut argv: Vec<String> = rest.iter().map(|s| expand(s, a, &guide_text)).collect();
    if let (Some(model_args), Some(model)) = (&d.model_args, &session.manifest.inference.model) {
        argv.extend(model_args.iter().map(|s| s.replace("{model}", model)));
    }
    if let (Some(resume), Some(_)) = (&d.resume, &a.resume) {
        argv.extend(resume.iter().map(|s| expand(s, a, &guide_text)));
    }
    if d.prompt == PromptMode::Arg {
        argv.push(a.prompt.to_owned());
    }
    let mut path = session
        .mur_exe
        .parent()
        .map(|p| p.as_os_str().to_owned())
        .unwrap_or_default();
    if let Some(old) = std::env::var_os("PATH") {
        path.push(":");
        path.push(old);
    }
    let mut cmd = Command::new(program);
    cmd.args(argv)
        .current_dir(&session.workdir)
        .env("PATH", path)
        .env("MURMUR_SESSION_ID", session.id.as_str())
        .env("MURMUR_TASK_ID", a.task_id)
        .env("MURMUR_CONTEXT_ID", a.context_id)
        .env("MURMUR_MESSAGE_ID", a.message_id)
        .env("MURMUR_DOOR_URL", &session.url)
        .env("MURMUR_TASK_TOKEN", a.token)
        .env("MURMUR_GUIDE", a.guide)
        .env_remove("MURMUR_HARNESS_SESSION")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(false);
    if let Some(s) = &a.resume {
        cmd.env("MURMUR_HARNESS_SESSION", s);
    }
    Some(cmd)
}

/// Runs one attempt to its end. Traces harness_start, harness_interrupt and harness_exit.
pub async fn run(
    session: &Session,
    d: &Driver,
    a: &Attempt<'_>,
    mut canceled: watch::Receiver<bool>,
) -> Ending {
    let Some(mut cmd) = build_command(session, d, a) else {
        return Ending::SpawnFailed("the driver's command is empty".into());
    };
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return Ending::SpawnFailed(format!(
                "the harness {} could not start: {e}",
                d.command.first().map(String::as_str).unwrap_or("")
            ))
        }
    };
    let pid = child.id().map(|p| p as i32).unwrap_or(0);
    let started = Instant::now();
    session.trace.event(TraceEvent::HarnessStart {
        task_id: TaskId::from_wire(a.task_id),
        context_id: a.context_id.to_owned(),
        pid,
        command: d.command.first().cloned(),
        session_mode: match a.resume {
            Some(_) => SessionMode::Resume,
            None => SessionMode::New,
        },
        harness_session: a.resume.clone(),
    });
    let mut stdin = feed_stdin(&mut child, d, a).await;
    let (turns_tx, mut turns_rx) = watch::channel(0u32);
    let turn_frames = TurnFrames {
        events: session.events.clone(),
        task_id: a.task_id.to_owned(),
        context_id: a.context_id.to_owned(),
    };
    let stdout = child
        .stdout
        .take()
        .map(|out| tokio::spawn(read_stdout(out, d.output, turns_tx, turn_frames)));
    let stderr = child.stderr.take().map(|err| tokio::spawn(read_tail(err)));

    let mut cause = "exited";
    let mut killed = false;
    let mut turns_exhausted = false;
    let status = tokio::select! {
        status = child.wait() => status.ok(),
        _ = signalled(&mut canceled, |c| *c) => {
            cause = "canceled";
            killed = interrupt(session, d, a, &mut child, &mut stdin, pid).await;
            child.wait().await.ok()
        }
        _ = signalled(&mut turns_rx, |t| *t > a.max_turns) => {
            turns_exhausted = true;
            cause = "max_turns";
            killed = interrupt(session, d, a, &mut child, &mut stdin, pid).await;
            child.wait().await.ok()
        }
    };
    drop(stdin);
    // Whatever the harness left in its group goes with it.
    reap::kill_all(pid, &[]);
    let transcript = join_with_deadline(stdout).await.unwrap_or_default();
    let stderr_tail = join_with_deadline(stderr).await.unwrap_or_default();
    let code = status.and_then(|s| s.code());
    let signal = status.and_then(|s| std::os::unix::process::ExitStatusExt::signal(&s));
    session.trace.event(TraceEvent::HarnessExit {
        task_id: TaskId::from_wire(a.task_id),
        pid,
        cause: match cause {
            "canceled" => ExitCause::Canceled,
            "max_turns" => ExitCause::MaxTurns,
            _ => ExitCause::Exited,
        },
        exit_code: code,
        signal,
        killed,
        duration_ms: started.elapsed().as_millis() as u64,
        harness_session: transcript.session.clone(),
    });
    let stderr_last_line = stderr_tail
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_owned();
    match (cause, turns_exhausted) {
        (_, true) => Ending::TurnsExhausted { transcript },
        ("canceled", _) => Ending::Canceled { killed, transcript },
        _ => Ending::Exited {
            code,
            signal,
            transcript,
            stderr_last_line,
        },
    }
}

/// Resolves once the watched value satisfies `f`; never, if its sender goes away first.
async fn signalled<T>(rx: &mut watch::Receiver<T>, f: impl FnMut(&T) -> bool) {
    if rx.wait_for(f).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Writes the prompt; closes stdin unless the driver interrupts through it.
async fn feed_stdin(child: &mut Child, d: &Driver, a: &Attempt<'_>) -> Option<ChildStdin> {
    let mut stdin = child.stdin.take()?;
    if d.prompt == PromptMode::Stdin {
        // A harness that exits without reading its prompt closes the pipe: not our failure.
        let _ = stdin.write_all(a.prompt.as_bytes()).await;
        let _ = stdin.flush().await;
    }
    match d.interrupt {
        Interrupt::Stdin(_) => Some(stdin),
        _ => None,
    }
}

/// Sends the driver's interrupt, waits out the grace, and kills the harness and every
/// descendant if it is still there. Answers whether it had to kill.
async fn interrupt(
    session: &Session,
    d: &Driver,
    a: &Attempt<'_>,
    child: &mut Child,
    stdin: &mut Option<ChildStdin>,
    pid: i32,
) -> bool {
    let how = match &d.interrupt {
        Interrupt::Sigint => {
            reap::interrupt_group(pid);
            "sigint"
        }
        Interrupt::Stdin(bytes) => {
            // Written, not closed: closing stdin is not the interrupt the driver declared.
            if let Some(s) = stdin.as_mut() {
                let _ = s.write_all(bytes).await;
                let _ = s.flush().await;
            }
            "stdin"
        }
        Interrupt::None => "none",
    };
    session.trace.event(TraceEvent::HarnessInterrupt {
        task_id: TaskId::from_wire(a.task_id),
        pid,
        interrupt: InterruptSent::from(&d.interrupt),
        grace_ms: if how == "none" {
            0
        } else {
            GRACE.as_millis() as u64
        },
    });
    if d.interrupt != Interrupt::None && tokio::time::timeout(GRACE, child.wait()).await.is_ok() {
        return false;
    }
    let tree = reap::descendants(pid);
    reap::kill_all(pid, &tree);
    true
}

async fn join_with_deadline<T: Default>(h: Option<tokio::task::JoinHandle<T>>) -> Option<T> {
    let h = h?;
    // A descendant may hold the pipe open after the harness is gone; the answer cannot wait.
    match tokio::time::timeout(Duration::from_secs(2), h).await {
        Ok(Ok(v)) => Some(v),
        _ => None,
    }
}

/// Where a harness's turns go as `text` frames.
struct TurnFrames {
    events: Arc<EventLog>,
    task_id: String,
    context_id: String,
}

async fn read_stdout(
    mut out: impl AsyncRead + Unpin,
    dialect: OutputDialect,
    turns: watch::Sender<u32>,
    frames: TurnFrames,
) -> Transcript {
    let mut t = Transcript::default();
    let mut buf = vec![0u8; 64 << 10];
    let mut line: Vec<u8> = Vec::new();
    let mut kept = 0usize;
    loop {
        let n = match out.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if dialect == OutputDialect::Text {
            let room = STDOUT_CAP.saturating_sub(kept);
            let take = n.min(room);
            t.raw.push_str(&String::from_utf8_lossy(&buf[..take]));
            kept += take;
            continue;
        }
        for &b in &buf[..n] {
            if b == b'\n' {
                if let Some(text) = feed_line(&mut t, dialect, &line) {
                    let meta = json!({"turn": t.turns});
                    frames.events.frame_for(
                        &frames.task_id,
                        &frames.context_id,
                        "text",
                        &text,
                        meta,
                    );
                }
                line.clear();
                let _ = turns.send(t.turns);
            } else if line.len() < STDOUT_CAP {
                line.push(b);
            }
        }
    }
    if !line.is_empty() {
        let _ = feed_line(&mut t, dialect, &line);
    }
    if dialect == OutputDialect::Text {
        let answer = t.raw.trim_end().to_owned();
        t.answer = (!answer.trim().is_empty()).then_some(answer);
    }
    t
}

fn feed_line(t: &mut Transcript, dialect: OutputDialect, line: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(line);
    match dialect {
        OutputDialect::StreamJson => dialect::stream_json_line(t, &text),
        OutputDialect::CodexJson => dialect::codex_line(t, &text),
        OutputDialect::Text => None,
    }
}

async fn read_tail(mut err: impl AsyncRead + Unpin) -> String {
    let mut tail: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 16 << 10];
    loop {
        match err.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                tail.extend_from_slice(&buf[..n]);
                if tail.len() > STDERR_TAIL {
                    tail.drain(..tail.len() - STDERR_TAIL);
                }
            }
        }
    }
    String::from_utf8_lossy(&tail).into_owned()
}
