//! The `bash` tool: one command the model asked for, read against the allow list
//! ([`super::line`]), started in the jail a harness attempt runs in, its output streamed to
//! the task's streams as `tool-call-progress` frames and kept within a bound ([`Output`]),
//! and waited for until the model's wait is over, when it moves to the background. The
//! command's process is owned by a task of its own ([`supervise`]), never by the tool call:
//! a cancel that drops the call leaves the command running, as the spec wants.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::watch;

use super::line::{self, Refused};
use super::{cut, Command, Commands, Ended, Place};
use crate::clock::Millis;
use crate::egress::{Exits, Grant};
use crate::harness;
use crate::ids::{MessageId, TaskId, WorkId};
use crate::inference::ToolSpec;
use crate::manifest::harness_limits::HarnessLimits;
use crate::process::{Contained, Containment, Exit, Spec};
use crate::provenance::{Origin, Trust};
use crate::session::Session;
use crate::tasks::{Owner, Residue, TaskInput};
use crate::trace::{Backgrounded, Trace, TraceEvent};

/// The tool's name, as the agent card's `tools` lists it.
pub const TOOL: &str = "bash";
/// How long the tool waits for a command when the model names no `wait_secs`.
pub const DEFAULT_WAIT_SECS: u64 = 120;
/// The longest wait the model may ask for.
pub const MAX_WAIT_SECS: u64 = 600;
/// How much of a command's output goes out as frames; past it, the frames stop (the command's
/// result still keeps its head and tail).
const STREAMED: usize = 1 << 20;
/// How long the readers of an ended command's pipes keep reading.
const DRAIN: Duration = Duration::from_secs(2);

/// What runs the commands of an http capsule whose manifest grants a shell: the containment
/// its harness attempts would run in.
#[derive(Clone, Debug)]
pub struct Shell {
    pub containment: Containment,
}

/// The tool, as the model is offered it: what it may run is in the description.
pub fn spec(allow: &[String]) -> ToolSpec {
    let what = if allow.iter().any(|e| e.trim() == "bash") {
        "The command is a bash command line.".to_owned()
    } else {
        format!(
            "The command is one program and its arguments, with no pipes, redirections, `;`, \
             `&&` or `$`; the programs you may run: {}.",
            allow.join(", ")
        )
    };
    ToolSpec {
        name: TOOL,
        description: format!(
            "Run a command in the capsule's work folder and read its output (stdout and stderr \
             together; when long, its first 8 KiB and last 24 KiB). {what} A command still \
             running after wait_secs moves to the background, where it goes on: you get its \
             work id, and its result comes as a new message in this conversation once it ends."
        ),
        schema: json!({"type": "object", "properties": {
            "command": {"type": "string", "description": "The command to run."},
            "wait_secs": {"type": "integer", "minimum": 1, "maximum": MAX_WAIT_SECS,
                "description": format!("How many seconds to wait for it before it moves to the background (default {DEFAULT_WAIT_SECS}).")},
            "background": {"type": "boolean",
                "description": "Start it in the background at once (a server, a long build)."}},
            "required": ["command"]}),
    }
}

/// The tool call a command runs for.
pub struct Call<'a> {
    pub task: &'a TaskId,
    pub context_id: &'a str,
    pub call_id: &'a str,
    pub turn: u32,
}

/// What the model asked for.
struct Asked {
    command: String,
    wait: Duration,
    background: bool,
}

fn asked(given: &Map<String, Value>) -> Result<Asked, (&'static str, String)> {
    let bad = |why: &str| ("bad_command", why.to_owned());
    let command = match given.get("command") {
        Some(Value::String(c)) => c.clone(),
        _ => return Err(bad("bash takes a command: a non-empty string")),
    };
    let wait = match given.get("wait_secs") {
        None | Some(Value::Null) => DEFAULT_WAIT_SECS,
        Some(v) => match v.as_u64().filter(|s| (1..=MAX_WAIT_SECS).contains(s)) {
            Some(s) => s,
            None => {
                return Err(bad(&format!(
                    "wait_secs is a whole number of seconds from 1 to {MAX_WAIT_SECS}"
                )))
            }
        },
    };
    let background = match given.get("background") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(bad("background is true or false")),
    };
    Ok(Asked {
        command,
        wait: Duration::from_secs(wait),
        background,
    })
}

/// Runs the tool: the command's result, or the refusal's code and sentence.
pub async fn tool(
    session: &Arc<Session>,
    shell: &Shell,
    call: Call<'_>,
    given: &Map<String, Value>,
) -> Result<Value, (&'static str, String)> {
    let asked = asked(given)?;
    let path = harness::path_with_mur(session);
    let line = match line::read(
        &asked.command,
        &session.manifest.capabilities.shell_allow,
        &path,
        &session.workdir,
    ) {
        Ok(l) => l,
        Err(refused) => return Err(refuse(&session.trace, call.task, &asked.command, refused)),
    };
    let command = Arc::new(Command {
        work_id: WorkId::mint(),
        task: call.task.clone(),
        context_id: call.context_id.to_owned(),
        binary: line.binary.clone(),
        command: cut(&asked.command),
        started_at: Millis::now(),
        started: Instant::now(),
        call_id: call.call_id.to_owned(),
        turn: call.turn,
        output: Mutex::default(),
        streamed: AtomicUsize::new(0),
        moved: watch::channel(asked.background).0,
        end: watch::channel(false).0,
        ended: watch::channel(None).0,
    });
    let started = start(session, shell, &command, line).await.map_err(|why| {
        (
            "command_not_started",
            format!("{} could not start: {why}", command.binary),
        )
    })?;
    let place = match asked.background {
        true => Place::Background,
        false => Place::Foreground,
    };
    session
        .commands
        .add(command.clone(), place, &session.residue);
    session.trace.event(TraceEvent::ShellStart {
        task_id: command.task.clone(),
        work_id: command.work_id.clone(),
        pid: started.0.pid,
        binary: command.binary.clone(),
        command: command.command.clone(),
        background: asked.background,
    });
    tokio::spawn(supervise(
        session.clone(),
        command.clone(),
        started.0,
        started.1,
    ));
    if asked.background {
        return Ok(running(&command, "started in the background"));
    }
    wait_for(
        &session.commands,
        &session.residue,
        &session.trace,
        &command,
        asked.wait,
    )
    .await
}

/// The refusal's code and sentence, recorded.
fn refuse(trace: &Trace, task: &TaskId, command: &str, refused: Refused) -> (&'static str, String) {
    trace.event(TraceEvent::ShellRefused {
        task_id: task.clone(),
        command: cut(command),
        reason: refused.code(),
    });
    (refused.code(), refused.message())
}

/// Starts `line` for `command` in the jail: its keeper, and the ways out of its network.
async fn start(
    session: &Arc<Session>,
    shell: &Shell,
    command: &Command,
    line: line::Line,
) -> std::io::Result<(Contained, Exits)> {
    crate::private::create_dir_all(&session.records_dir.join(harness::TMP_DIR))?;
    let grant = Grant::for_commands(session);
    let files = harness::files_wall(
        session,
        &shell.containment,
        std::slice::from_ref(&line.binary),
    );
    let mut env = harness::env::allowed(std::env::vars_os(), &[], &[]);
    env.extend([
        ("PATH".into(), harness::path_with_mur(session)),
        ("MURMUR_SESSION_ID".into(), session.id.as_str().into()),
        ("MURMUR_TASK_ID".into(), command.task.as_str().into()),
        (
            "MURMUR_CONTEXT_ID".into(),
            command.context_id.as_str().into(),
        ),
        ("MURMUR_WORK_ID".into(), command.work_id.as_str().into()),
        (
            "TMPDIR".into(),
            session.records_dir.join(harness::TMP_DIR).into(),
        ),
    ]);
    let spec = Spec {
        program: line.program.to_string_lossy().into_owned(),
        args: line.args,
        cwd: session.workdir.clone(),
        env,
        jail: Some(grant.ports()),
        files: Some(files),
        // The defaults of `harness.limits`, but the tmp bound: a command's tmp is the one the
        // model's next command reads, so it is not emptied per command.
        limits: Some(crate::process::limits::Limits {
            pids: HarnessLimits::default().pids,
            memory: HarnessLimits::default().memory,
            tmp: None,
        }),
    };
    let mut contained = Contained::spawn(&shell.containment, spec)?;
    // The command's stdin is closed: nobody types into it.
    drop(contained.stdin.take());
    let exits = crate::egress::serve(
        session,
        command.task.as_str(),
        &grant,
        contained.ways_out().await,
    );
    Ok((contained, exits))
}

/// Waits for a foreground command until it ends, its wait is over (it moves to the
/// background) or its task is canceled (it was moved already).
async fn wait_for(
    table: &Commands,
    residue: &Residue,
    trace: &Trace,
    command: &Command,
    wait: Duration,
) -> Result<Value, (&'static str, String)> {
    let mut ended = command.ended.subscribe();
    let mut moved = command.moved.subscribe();
    tokio::select! {
        e = ended.wait_for(Option::is_some) => {
            let e = e.ok().and_then(|e| e.clone());
            return result(command, e);
        }
        _ = async { moved.wait_for(|m| *m).await.is_ok() } => {
            return Ok(running(command, "moved to the background"))
        }
        _ = tokio::time::sleep(wait) => {}
    }
    if table.background(command, Backgrounded::Waited, residue, trace) {
        return Ok(running(
            command,
            &format!("still running after {} s", wait.as_secs()),
        ));
    }
    // It ended as the wait did.
    let e = ended
        .wait_for(Option::is_some)
        .await
        .ok()
        .and_then(|e| e.clone());
    result(command, e)
}

/// The answer for a command that runs on in the background.
fn running(command: &Command, how: &str) -> Value {
    json!({
        "work_id": command.work_id.as_str(),
        "running": true,
        "message": format!(
            "{how}: it goes on in the background as {}; its result comes as a new message in \
             this conversation once it ends",
            command.work_id
        ),
        "output": command.output().text(),
    })
}

/// The answer for a command that ended.
fn result(command: &Command, ended: Option<Ended>) -> Result<Value, (&'static str, String)> {
    let ended = ended.unwrap_or(Ended {
        exit_code: None,
        signal: None,
        killed: true,
        not_started: None,
    });
    if let Some(why) = ended.not_started {
        return Err((
            "command_not_started",
            format!("{} could not start: {why}", command.binary),
        ));
    }
    let mut answer = json!({"work_id": command.work_id.as_str()});
    match (ended.exit_code, ended.signal) {
        (Some(code), _) => answer["exit_code"] = code.into(),
        (None, Some(signal)) => answer["signal"] = signal.into(),
        (None, None) => answer["ended"] = "without an exit status".into(),
    }
    answer["output"] = command.output().text().into();
    Ok(answer)
}

/// Owns the command's process from its start to its end: reads its output, ends it at the
/// session's end, and records its ending; a background command has its result told as a task
/// of the session's own.
async fn supervise(
    session: Arc<Session>,
    command: Arc<Command>,
    mut child: Contained,
    exits: Exits,
) {
    let readers: Vec<_> = [
        child.stdout.take().map(|p| Box::new(p) as Pipe),
        child.stderr.take().map(|p| Box::new(p) as Pipe),
    ]
    .into_iter()
    .flatten()
    .map(|pipe| tokio::spawn(read_into(session.clone(), command.clone(), pipe)))
    .collect();
    let mut end = command.end.subscribe();
    // The session's end first: once it asked every command to end, a keeper that is found gone
    // too (another command's sweep ended it, say) was ended by it, not on its own.
    let (exit, killed) = tokio::select! {
        biased;
        _ = async { end.wait_for(|e| *e).await.is_ok() } => (child.end().await, true),
        _ = child.exited() => (child.outcome().await, false),
    };
    drop(exits);
    for reader in readers {
        let abort = reader.abort_handle();
        if tokio::time::timeout(DRAIN, reader).await.is_err() {
            abort.abort();
        }
    }
    let ended = match exit {
        Exit::Exited(c) => Ended {
            exit_code: Some(c),
            signal: None,
            killed,
            not_started: None,
        },
        Exit::Signaled(s) => Ended {
            exit_code: None,
            signal: Some(s),
            killed,
            not_started: None,
        },
        Exit::NotStarted(why) => Ended {
            exit_code: None,
            signal: None,
            killed,
            not_started: Some(why),
        },
        Exit::Ended => Ended {
            exit_code: None,
            signal: None,
            killed,
            not_started: None,
        },
    };
    let background = session.commands.finish(&command.work_id, &session.residue);
    session.trace.event(TraceEvent::ShellEnd {
        task_id: command.task.clone(),
        work_id: command.work_id.clone(),
        exit_code: ended.exit_code,
        signal: ended.signal,
        killed,
        duration_ms: command.elapsed().as_millis() as u64,
        output_bytes: command.output().total(),
    });
    // Its tool call answered when it moved to the background, promising the result.
    if background && !killed {
        tell_result(&session, &command, &ended);
    }
    let _ = command.ended.send(Some(ended));
}

type Pipe = Box<dyn AsyncRead + Send + Unpin>;

/// Reads one of the command's pipes to its end: into its output, and while it runs in the
/// foreground, onto its task's streams as `tool-call-progress` frames.
async fn read_into(session: Arc<Session>, command: Arc<Command>, mut pipe: Pipe) {
    let mut buf = vec![0u8; 8 << 10];
    let mut carry: Vec<u8> = Vec::new();
    loop {
        let n = match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        command.output().push(&buf[..n]);
        let foreground = !command.in_background();
        if !foreground || command.streamed.fetch_add(n, Ordering::Relaxed) >= STREAMED {
            carry.clear();
            continue;
        }
        carry.extend_from_slice(&buf[..n]);
        let text = whole_chars(&mut carry);
        if !text.is_empty() {
            session.events.frame_for(
                command.task.as_str(),
                &command.context_id,
                "tool-call-progress",
                &text,
                json!({"turn": command.turn, "toolCallId": command.call_id,
                       "workId": command.work_id.as_str()}),
            );
        }
    }
}

/// The text of `bytes` up to its last whole character; a character cut by the read is kept
/// for the next. Bytes that are no UTF-8 at all are replaced.
fn whole_chars(bytes: &mut Vec<u8>) -> String {
    let keep = match std::str::from_utf8(bytes) {
        Ok(_) => 0,
        Err(e) if e.error_len().is_none() => bytes.len() - e.valid_up_to(),
        Err(_) => 0,
    };
    let rest = bytes.split_off(bytes.len() - keep);
    let text = String::from_utf8_lossy(bytes).into_owned();
    *bytes = rest;
    text
}

/// A background command's result is a task of the session's own, in the command's context, so
/// the model reads it in the same conversation (queued behind the task that started it, when
/// that one still runs).
fn tell_result(session: &Session, command: &Command, ended: &Ended) {
    let how = match (ended.exit_code, ended.signal, &ended.not_started) {
        (_, _, Some(why)) => format!("could not start: {why}"),
        (Some(code), _, _) => format!("ended with exit status {code}"),
        (None, Some(signal), _) => format!("was ended by signal {signal}"),
        (None, None, None) => "ended without an exit status".to_owned(),
    };
    let text = format!(
        "The background command {} ({}) {how} after {:.1} s. Its output:\n{}",
        command.work_id,
        command.command,
        command.elapsed().as_secs_f64(),
        command.output().text()
    );
    let input = TaskInput {
        text,
        message_id: MessageId::mint().to_string(),
        reference_task_ids: vec![command.task.to_string()],
        forget_session: false,
        // What a command printed is not the user's word.
        trust: Trust::Untrusted,
        images: Vec::new(),
        parent: None,
    };
    session.admit(
        Some(command.context_id.clone()),
        Owner::Session,
        input,
        Origin::Command,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_character_cut_by_a_read_waits_for_its_other_bytes() {
        let mut carry = "aé".as_bytes().to_vec();
        carry.pop();
        assert_eq!(whole_chars(&mut carry), "a");
        assert_eq!(carry, vec![0xc3]);
        carry.push(0xa9);
        assert_eq!(whole_chars(&mut carry), "é");
        assert!(carry.is_empty());
        let mut junk = vec![0xff, b'x'];
        assert_eq!(whole_chars(&mut junk), "\u{fffd}x");
    }

    #[test]
    fn the_model_s_arguments_are_read_with_their_bounds() {
        let m = |v: Value| v.as_object().cloned().unwrap();
        let a = asked(&m(json!({"command": "ls"}))).ok().unwrap();
        assert_eq!(a.wait, Duration::from_secs(DEFAULT_WAIT_SECS));
        assert!(!a.background);
        for bad in [
            json!({}),
            json!({"command": 3}),
            json!({"command": "ls", "wait_secs": 0}),
            json!({"command": "ls", "wait_secs": 601}),
            json!({"command": "ls", "wait_secs": "5"}),
            json!({"command": "ls", "background": "yes"}),
        ] {
            assert_eq!(
                asked(&m(bad.clone())).err().map(|e| e.0),
                Some("bad_command"),
                "{bad}"
            );
        }
    }
}
