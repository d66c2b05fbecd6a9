//! The process transport (DESIGN §8): one harness process per task attempt, run in containment
//! (`crate::process`) so that everything it starts ends with the attempt, fed the task on stdin
//! (or as its last argument) without ever delaying a cancel, read in its dialect, interrupted
//! with SIGINT, stdin bytes or an in-band stream-json `control_request` (SIGINT its fallback),
//! and ended with all it started after the grace.

mod approvals;
mod codex_rpc;
mod dialect;
pub mod env;
pub mod preset;
pub(crate) mod protect;
mod reader;
pub mod route;
mod stdin;
mod watched;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

pub use crate::held::harness_sessions::HarnessSessions;
pub use dialect::Transcript;

use crate::egress::Grant;
use crate::ids::TaskId;
use crate::manifest::harness_limits::shown_size;
use crate::manifest::{
    InputDialect, Interrupt, Manifest, OutputDialect, ProcessDriver, PromptMode,
    CONTROL_REQUEST_BOUND,
};
use crate::process::files::FilesWall;
use crate::process::limits::{Limits, Reached, Tmp};
use crate::process::{Contained, Containment, Exit, Spec};
use crate::session::Session;
use crate::trace::{ExitCause, InterruptSent, SessionMode, TraceEvent};

use reader::{joined, read_stdout, read_tail, Heeded, Rpc, TurnFrames};
use stdin::{fresh_request_id, interrupt_line, user_line, Hold, StdinFeed};
use watched::signalled;

/// How long an interrupted harness has to end on its own.
pub const GRACE: Duration = Duration::from_secs(10);
/// The most one command-line argument may hold on Linux, its terminating NUL included
/// (`MAX_ARG_STRLEN`, 32 pages).
const ARG_MAX: usize = 128 << 10;

/// A resolved process driver: the manifest's `process` block (presets already filled in), and
/// what a preset adds for this capsule (its CLI's permission flags and state folder).
#[derive(Debug, Clone)]
pub struct Driver {
    pub process: ProcessDriver,
    pub preset: preset::Prepared,
}

impl Driver {
    /// Points the CLI at the capsule's model gateway at `url` (its base-URL variable or config
    /// key); each attempt then adds its placeholder key.
    pub fn through_gateway(&mut self, url: &str) {
        let Some(route) = &self.preset.route else {
            return;
        };
        let (args, env) = route.pointing(url);
        self.preset.args.extend(args);
        self.preset
            .env
            .extend(env.into_iter().map(|(k, v)| (k, v.into())));
    }
}

impl std::ops::Deref for Driver {
    type Target = ProcessDriver;
    fn deref(&self) -> &ProcessDriver {
        &self.process
    }
}

/// The process driver `inference.driver.artifact` names, when it is one.
pub fn driver_of(m: &Manifest) -> Option<ProcessDriver> {
    m.driver_artifact()?.process.clone()
}

/// The driver a capsule runs its attempts with: [`driver_of`], and for a preset its CLI's flags
/// and state folder under `records_dir` ([`preset::prepare`]). `mur` is the helpers' binary.
pub fn driver_for(m: &Manifest, mur: &Path, records_dir: &Path) -> Result<Driver, String> {
    let mut process = driver_of(m).ok_or_else(|| {
        format!(
            "{} names no process driver this capsule can run",
            m.path.display()
        )
    })?;
    // `codex exec` never asks: a Codex that may ask runs as its app-server.
    let builtin = m.driver_artifact().and_then(|a| a.builtin);
    if builtin == Some(crate::manifest::Builtin::Codex)
        && m.harness.approvals.mode == crate::manifest::approvals::Mode::Ask
    {
        process = crate::manifest::Builtin::codex_app_server();
    }
    let gateway = m.driver_artifact().and_then(|a| a.gateway.as_ref());
    let prepared = match m.driver_artifact().and_then(|a| a.builtin) {
        Some(b) => preset::prepare(b, &m.harness, mur, records_dir, gateway).map_err(|e| {
            format!(
                "cannot prepare {}'s state folder in {}: {e}",
                b.name(),
                records_dir.display()
            )
        })?,
        None => preset::Prepared {
            route: gateway.and_then(route::declared).map(Box::new),
            ..Default::default()
        },
    };
    Ok(Driver {
        process,
        preset: prepared,
    })
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
    pub guide_text: &'a str,
    pub max_turns: u32,
    /// The attempt's `invoke_agent` span: the CLI is handed it as `TRACEPARENT`, and the
    /// gateway's `chat` spans continue it.
    pub span: &'a crate::telemetry::SpanContext,
}

/// What an attempt is given beyond its [`Attempt`]: its model gateway placeholder.
struct Given<'p> {
    placeholder: Option<&'p crate::gateway::Placeholder>,
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
    /// The attempt reached one of its `harness.limits`; the sentence names which.
    LimitReached(String),
    /// A spend ceiling refused one of its model calls; the sentence names the ceiling.
    SpendStopped(String),
}

/// Fills a command's placeholders: `{session}`, `{guide}` (the guide's path), `{guide_text}`
/// (its text) and `{guide_toml}` (its text as a TOML string, for Codex's `-c key=value`).
fn expand(arg: &str, a: &Attempt, guide_text: &str) -> String {
    let mut out = arg
        .replace("{session}", a.resume.as_deref().unwrap_or(""))
        .replace("{guide_text}", guide_text)
        .replace("{guide}", &a.guide.to_string_lossy());
    if out.contains("{guide_toml}") {
        // A JSON string is a TOML basic string: the same quotes and escapes.
        out = out.replace(
            "{guide_toml}",
            &serde_json::Value::from(guide_text).to_string(),
        );
    }
    out
}

/// The folder of the session's records that is a harness's private tmp (`TMPDIR`).
pub const TMP_DIR: &str = "harness-tmp";

/// The variable that names, for a whole run, more folders every harness may write (absolute
/// paths separated by `:`), as `harness.env`'s run-wide twin `MURMUR_HARNESS_ENV` does for
/// variables.
pub const WRITABLE_ENV: &str = "MURMUR_HARNESS_WRITABLE";

/// The files wall of an attempt of `session` (namespace mode), or of a shell command it runs
/// (`crate::shell`): it writes only its work folder, its private tmp, its CLI's state folder and
/// what `MURMUR_HARNESS_WRITABLE` names; of the records it sees only this session's own.
/// `command` is what runs (its files named by absolute path stay in sight).
pub(crate) fn files_wall(
    session: &Session,
    containment: &Containment,
    command: &[String],
) -> FilesWall {
    let records = containment
        .hidden
        .first()
        .and_then(|run| run.parent())
        .map(|home| home.join("records"));
    // What the harness runs stays in sight whatever a cover (a private /tmp) hides: the
    // session's own records, the manifest's folder, the folder of every file the driver's
    // command names by path, and `mur`'s own folder (the helpers).
    let mut keep = vec![session.records_dir.clone(), session.manifest.dir.clone()];
    let named = command
        .iter()
        .map(Path::new)
        .filter(|p| p.is_absolute())
        .chain(std::iter::once(session.mur_exe.as_path()));
    for path in named {
        let dir = if path.is_dir() {
            Some(path)
        } else {
            path.parent()
        };
        if let Some(dir) = dir.filter(|d| d.is_dir() && !keep.iter().any(|k| k == d)) {
            keep.push(dir.to_path_buf());
        }
    }
    if records.as_ref().is_some_and(|r| {
        session.workdir.starts_with(r) && !session.workdir.starts_with(&session.records_dir)
    }) {
        keep.push(session.workdir.clone());
    }
    let mut writable = vec![session.workdir.clone(), session.records_dir.join(TMP_DIR)];
    let state = session.records_dir.join(preset::STATE_DIR);
    if state.is_dir() {
        writable.push(state);
    }
    writable.extend(
        std::env::var_os(WRITABLE_ENV)
            .map(|v| {
                std::env::split_paths(&v)
                    .filter(|p| !p.as_os_str().is_empty())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default(),
    );
    let home = records.as_deref().and_then(Path::parent);
    FilesWall {
        secrets: protect::secrets(session, home),
        protect: protect::protected(session, command, &writable),
        records,
        keep,
        writable,
    }
}

/// A contained program's `PATH`: `mur`'s folder first (a CLI whose shell is a login shell must
/// still find the helpers), then the capsule's own.
pub(crate) fn path_with_mur(session: &Session) -> std::ffi::OsString {
    let mut path = session
        .mur_exe
        .parent()
        .map(|p| p.as_os_str().to_owned())
        .unwrap_or_default();
    if let Some(old) = std::env::var_os("PATH") {
        path.push(":");
        path.push(old);
    }
    path
}

fn build_spec(
    session: &Session,
    d: &Driver,
    a: &Attempt,
    given: &Given,
    grant: &Grant,
    files: FilesWall,
) -> Option<Spec> {
    let guide_text = a.guide_text;
    let (program, rest) = d.command.split_first()?;
    let mut args: Vec<String> = rest.iter().map(|s| expand(s, a, guide_text)).collect();
    args.extend(d.preset.args.iter().cloned());
    if let (Some(model_args), Some(model)) = (&d.model_args, &session.manifest.inference.model) {
        args.extend(model_args.iter().map(|s| s.replace("{model}", model)));
    }
    if let (Some(resume), Some(_)) = (&d.resume, &a.resume) {
        args.extend(resume.iter().map(|s| expand(s, a, guide_text)));
    }
    if d.prompt == PromptMode::Arg {
        args.push(a.prompt.to_owned());
    }
    let path = path_with_mur(session);
    let mut env = env::allowed(
        std::env::vars_os(),
        &d.preset.pass,
        &session.manifest.harness.env,
    );
    // The provider's real key and address never reach a CLI that calls through the gateway,
    // whatever an allow list says.
    // Nor any variable that holds the real key under another name (the one a gateway block's
    // `${VAR}` reads, handed on by a run-wide allow list).
    if let Some(route) = &d.preset.route {
        let real = route.key.as_ref().map(|(_, k)| k.expose().as_bytes());
        env.retain(|(k, v)| {
            let holds_key = real.is_some_and(|key| {
                !key.is_empty() && v.as_encoded_bytes().windows(key.len()).any(|w| w == key)
            });
            !holds_key
                && !route::WITHHELD.contains(&k.as_str())
                && !route.withheld.iter().any(|w| w == k)
        });
    }
    env.extend([
        ("PATH".into(), path),
        ("MURMUR_SESSION_ID".into(), session.id.as_str().into()),
        ("MURMUR_TASK_ID".into(), a.task_id.into()),
        ("MURMUR_CONTEXT_ID".into(), a.context_id.into()),
        ("MURMUR_MESSAGE_ID".into(), a.message_id.into()),
        ("MURMUR_DOOR_URL".into(), session.inside_url().into()),
        ("MURMUR_TASK_TOKEN".into(), a.token.into()),
        ("MURMUR_GUIDE".into(), a.guide.into()),
        ("TMPDIR".into(), session.records_dir.join(TMP_DIR).into()),
    ]);
    env.extend(d.preset.env.iter().cloned());
    if let (Some(route), Some(p)) = (&d.preset.route, given.placeholder) {
        env.extend(
            route
                .placeholder_env(&p.key)
                .into_iter()
                .map(|(k, v)| (k, v.into())),
        );
    }
    if let Some(s) = &a.resume {
        env.push(("MURMUR_HARNESS_SESSION".into(), s.into()));
    }
    // W3C Trace Context for a CLI that continues a trace from its environment.
    for (name, value) in crate::telemetry::propagation::headers_of(a.span) {
        env.push((name.to_ascii_uppercase(), value.into()));
    }
    Some(Spec {
        program: program.clone(),
        args,
        cwd: session.workdir.clone(),
        env,
        jail: Some(grant.ports()),
        files: Some(files),
        limits: Some(limits_of(session)),
    })
}

/// An attempt's bounds: the manifest's `harness.limits`, its tmp bound on the private tmp.
fn limits_of(session: &Session) -> Limits {
    let written = &session.manifest.harness.limits;
    Limits {
        pids: written.pids,
        memory: written.memory,
        tmp: Some(Tmp {
            dir: session.records_dir.join(TMP_DIR),
            bytes: written.tmp,
        }),
    }
}

/// The task's status when its attempt reached a limit, naming the key that set it.
fn limit_sentence(session: &Session, reached: Reached) -> String {
    let written = &session.manifest.harness.limits;
    match reached {
        Reached::Pids => format!(
            "the harness reached its pids limit (harness.limits.pids: {})",
            written.pids
        ),
        Reached::Memory => format!(
            "the harness reached its memory limit (harness.limits.memory: \"{}\")",
            shown_size(written.memory)
        ),
    }
}

/// Runs one attempt to its end, and everything it started with it. Traces harness_start,
/// harness_interrupt and harness_exit.
pub async fn run(
    session: &Arc<Session>,
    d: &Driver,
    containment: &Containment,
    a: &Attempt<'_>,
    mut canceled: watch::Receiver<bool>,
    mut wind_down: watch::Receiver<bool>,
) -> Ending {
    let grant = Grant::of(session, &d.preset.egress);
    if let Err(e) = crate::private::create_dir_all(&session.records_dir.join(TMP_DIR)) {
        return Ending::SpawnFailed(format!("the harness's private tmp could not be made: {e}"));
    }
    let files = files_wall(session, containment, &d.command);
    if d.prompt == PromptMode::Arg && a.prompt.len() >= ARG_MAX {
        return Ending::SpawnFailed(format!(
            "the task's text is {} bytes, and this driver passes it as one command-line argument \
             (prompt: arg), which Linux limits to {} bytes; use prompt: stdin",
            a.prompt.len(),
            ARG_MAX - 1
        ));
    }
    // The attempt's key to the model gateway, dead once the attempt ends.
    let placeholder = match (&session.gateway, &d.preset.route) {
        (Some(g), Some(_)) => Some(g.admit(a.task_id, a.span.clone())),
        _ => None,
    };
    let mut spend_stopped = placeholder.as_ref().map(|p| p.stopped.clone());
    let given = Given {
        placeholder: placeholder.as_ref(),
    };
    let Some(spec) = build_spec(session, d, a, &given, &grant, files) else {
        return Ending::SpawnFailed("the driver's command is empty".into());
    };
    let program = spec.program.clone();
    let mut harness = match Contained::spawn(containment, spec) {
        Ok(h) => h,
        Err(e) => {
            return Ending::SpawnFailed(format!("the harness {program} could not start: {e}"))
        }
    };
    // In namespace mode the attempt's only ways out, served until it ends (dropped below).
    let exits = crate::egress::serve(session, a.task_id, &grant, harness.ways_out().await);
    let pid = harness.pid;
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
        containment: containment.mode,
        walls: Box::new(containment.walls()),
    });
    let (turn_over_tx, turn_over) = watch::channel(false);
    let model = session.manifest.inference.model.as_deref();
    let prompt = (d.prompt == PromptMode::Stdin).then(|| match d.input {
        InputDialect::Text => a.prompt.as_bytes().to_vec(),
        InputDialect::StreamJson => user_line(a.prompt),
        // The task goes in once the thread is known (see `Heeded::rpc`).
        InputDialect::CodexAppServer => {
            codex_rpc::opening(a.resume.as_deref(), &session.workdir, model)
        }
    });
    let hold = match (d.input, &d.interrupt) {
        (InputDialect::StreamJson | InputDialect::CodexAppServer, _) => {
            Hold::UntilTurnEnds(turn_over)
        }
        (InputDialect::Text, Interrupt::Stdin(_)) => Hold::ForInterrupts,
        (InputDialect::Text, _) => Hold::Close,
    };
    let stdin = StdinFeed::start(harness.stdin.take(), prompt, hold);
    // A stream-json CLI may ask before it runs a tool; its questions are answered beside the
    // reader, which goes on reading while one waits.
    let (asks, answering) = match (d.output, stdin.lines()) {
        (OutputDialect::StreamJson | OutputDialect::CodexAppServer, Some(lines)) => {
            let (tx, rx) = tokio::sync::mpsc::channel(QUEUED_ASKS);
            let task = TaskId::from_wire(a.task_id);
            let answering = approvals::answer(session.clone(), task, cli_of(session), rx, lines);
            (Some(tx), Some(tokio::spawn(answering)))
        }
        _ => (None, None),
    };
    let (turns_tx, mut turns_rx) = watch::channel(0u32);
    let (ended_tx, ended) = watch::channel(false);
    let turn_frames = TurnFrames {
        events: session.events.clone(),
        task_id: a.task_id.to_owned(),
        context_id: a.context_id.to_owned(),
    };
    let stdout = harness.stdout.take().map(|out| {
        tokio::spawn(read_stdout(
            out,
            d.output,
            Heeded {
                turns: turns_tx,
                turn_over: turn_over_tx,
                frames: turn_frames,
                asks,
                rpc: match (d.input, stdin.lines()) {
                    (InputDialect::CodexAppServer, Some(lines)) => Some(Rpc {
                        lines,
                        task: a.prompt.to_owned(),
                    }),
                    _ => None,
                },
            },
            ended.clone(),
        ))
    });
    let stderr = harness
        .stderr
        .take()
        .map(|err| tokio::spawn(read_tail(err, ended.clone())));

    let mut cause = ExitCause::Exited;
    let mut killed = false;
    let exit = tokio::select! {
        _ = harness.exited() => harness.outcome().await,
        _ = signalled(&mut canceled, |c| *c) => {
            cause = ExitCause::Canceled;
            let (exit, k) = interrupt(session, d, a, &mut harness, &stdin).await;
            killed = k;
            exit
        }
        _ = signalled(&mut turns_rx, |t| *t > a.max_turns) => {
            cause = ExitCause::MaxTurns;
            let (exit, k) = interrupt(session, d, a, &mut harness, &stdin).await;
            killed = k;
            exit
        }
        // end-without-answer told the harness to exit; one that has not within the grace is
        // stopped as a cancel would stop it.
        _ = async {
            signalled(&mut wind_down, |w| *w).await;
            tokio::time::sleep(GRACE).await;
        } => {
            cause = ExitCause::EndedWithoutAnswer;
            let (exit, k) = interrupt(session, d, a, &mut harness, &stdin).await;
            killed = k;
            exit
        }
        // A ceiling refused a call: the CLI was told in its provider's words and should end
        // its turn; one still running after the grace is stopped.
        _ = async {
            match spend_stopped.as_mut() {
                Some(rx) => signalled(rx, |s| *s).await,
                None => std::future::pending().await,
            }
            tokio::time::sleep(GRACE).await;
        } => {
            cause = ExitCause::SpendCeiling;
            let (exit, k) = interrupt(session, d, a, &mut harness, &stdin).await;
            killed = k;
            exit
        }
    };
    drop(placeholder);
    drop(stdin);
    drop(exits);
    let _ = ended_tx.send_replace(true);
    let transcript = joined(stdout).await;
    let stderr_tail = joined(stderr).await;
    // The reader has ended, so the answering ends too, giving up a question still open.
    joined(answering).await;
    let (code, signal) = match &exit {
        Exit::Exited(c) => (Some(*c), None),
        Exit::Signaled(s) => (None, Some(*s)),
        _ => (None, None),
    };
    if let Exit::NotStarted(_) = &exit {
        cause = ExitCause::NotStarted;
    }
    session.trace.event(TraceEvent::HarnessExit {
        task_id: TaskId::from_wire(a.task_id),
        pid,
        cause,
        exit_code: code,
        signal,
        killed,
        duration_ms: started.elapsed().as_millis() as u64,
        harness_session: transcript.session.clone(),
    });
    if let Exit::NotStarted(why) = exit {
        return Ending::SpawnFailed(why);
    }
    let spend_stop = session.spend.end_task(a.task_id);
    // A limit reached fails the task whatever the harness made of it: what it did is cut short.
    if let Some(reached) = harness.reached() {
        return Ending::LimitReached(limit_sentence(session, reached));
    }
    if let Some(stop) = spend_stop {
        return Ending::SpendStopped(stop.sentence);
    }
    let stderr_last_line = stderr_tail
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_owned();
    match cause {
        ExitCause::MaxTurns => Ending::TurnsExhausted { transcript },
        ExitCause::Canceled => Ending::Canceled { killed, transcript },
        _ => Ending::Exited {
            code,
            signal,
            transcript,
            stderr_last_line,
        },
    }
}

/// Sends the driver's interrupt, waits out its bound, and ends the harness and everything it
/// started if it is still there; an in-band `control_request` that brings no end within
/// [`CONTROL_REQUEST_BOUND`] is followed by SIGINT and the grace. Answers how it ended and
/// whether it had to be ended.
async fn interrupt(
    session: &Session,
    d: &Driver,
    a: &Attempt<'_>,
    harness: &mut Contained,
    stdin: &StdinFeed,
) -> (Exit, bool) {
    let mut request_id = None;
    let bound = match &d.interrupt {
        Interrupt::Sigint => {
            harness.interrupt();
            GRACE
        }
        Interrupt::Stdin(bytes) => {
            stdin.interrupt(bytes.clone());
            GRACE
        }
        Interrupt::ControlRequest => {
            let id = fresh_request_id();
            stdin.interrupt(interrupt_line(&id));
            request_id = Some(id);
            CONTROL_REQUEST_BOUND
        }
        Interrupt::None => Duration::ZERO,
    };
    session.trace.event(TraceEvent::HarnessInterrupt {
        task_id: TaskId::from_wire(a.task_id),
        pid: harness.pid,
        interrupt: InterruptSent::from(&d.interrupt),
        grace_ms: bound.as_millis() as u64,
        request_id,
        fallback_for: None,
    });
    if d.interrupt == Interrupt::None {
        return (harness.end().await, true);
    }
    if tokio::time::timeout(bound, harness.exited()).await.is_ok() {
        return (harness.outcome().await, false);
    }
    if d.interrupt == Interrupt::ControlRequest {
        harness.interrupt();
        session.trace.event(TraceEvent::HarnessInterrupt {
            task_id: TaskId::from_wire(a.task_id),
            pid: harness.pid,
            interrupt: InterruptSent::Sigint,
            grace_ms: GRACE.as_millis() as u64,
            request_id: None,
            fallback_for: Some(InterruptSent::ControlRequest),
        });
        if tokio::time::timeout(GRACE, harness.exited()).await.is_ok() {
            return (harness.outcome().await, false);
        }
    }
    (harness.end().await, true)
}

/// How many questions a reader may hand on before it waits for the answering to take them.
const QUEUED_ASKS: usize = 64;

/// How a question names the CLI that asks.
fn cli_of(session: &Session) -> &'static str {
    match session.manifest.driver_artifact().and_then(|a| a.builtin) {
        Some(crate::manifest::Builtin::ClaudeCode) => "Claude Code",
        Some(crate::manifest::Builtin::Codex) => "Codex",
        _ => "The harness",
    }
}
