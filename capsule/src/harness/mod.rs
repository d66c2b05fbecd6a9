//! The process transport (DESIGN §8): one harness process per task attempt, run in containment
//! (`crate::process`) so that everything it starts ends with the attempt, fed the task on stdin
//! (or as its last argument) without ever delaying a cancel, read in its dialect, interrupted
//! with SIGINT, stdin bytes or an in-band stream-json `control_request` (SIGINT its fallback),
//! and ended with all it started after the grace.

mod approvals;
mod codex_rpc;
mod dialect;
pub mod env;
mod interrupt;
pub mod preset;
pub(crate) mod protect;
mod reader;
pub mod route;
mod spec;
mod stdin;
mod watched;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

pub use crate::held::harness_sessions::HarnessSessions;
pub use dialect::Transcript;
pub(crate) use spec::{files_wall, path_with_mur};
pub use spec::{TMP_DIR, WRITABLE_ENV};

use crate::egress::Grant;
use crate::ids::TaskId;
use crate::manifest::{
    InputDialect, Interrupt, Manifest, OutputDialect, ProcessDriver, PromptMode,
};
use crate::process::{Contained, Containment, Exit};
use crate::session::Session;
use crate::trace::{ExitCause, SessionMode, TraceEvent};

use interrupt::interrupt;
use reader::{joined, read_stdout, read_tail, Heeded, Rpc, TurnFrames};
use spec::{build_spec, limit_sentence};
use stdin::{user_line, Hold, StdinFeed};
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
