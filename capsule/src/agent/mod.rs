//! The agent loop: takes each queued task in turn, runs it through the capsule's inference
//! transport — a harness process (`inference.transport: process`, [`crate::harness`]) or the
//! http loop against a provider ([`http`]) — and records how it ended.

mod guide;
pub mod http;
pub mod tools;

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

pub use guide::Guide;

use crate::harness::{self, Attempt, Driver, Ending};
use crate::ids::TaskId;
use crate::manifest::AfterTask;
use crate::process::Containment;
use crate::session::Session;
use crate::tasks::{Notes, Outcome, Started, Viewer};
use crate::telemetry::{self, keys, Kind, Span, SpanEvent};
use crate::trace::{EndStatus, Ran, RequestedBy, TraceEvent};
pub use http::HttpAgent;

const KILLED: &str = "task canceled; the harness was killed and its session may not resume cleanly";

/// What runs a capsule's tasks.
pub enum Worker {
    /// A harness process per task attempt, in containment.
    Harness(Driver, Containment),
    /// The http loop against a provider.
    Http(HttpAgent),
}

/// Runs tasks until the door closes, or until the first idle moment under `after_task: exit`.
pub async fn work(session: Arc<Session>, worker: Worker, launch: Option<TaskId>) {
    let members: Vec<&str> = session
        .wiring
        .iter()
        .flat_map(|w| w.callees.keys().map(String::as_str))
        .collect();
    let mut guide = Guide::new(
        &session.records_dir,
        &session.manifest.name,
        &members,
        &session.mur_exe,
    );
    while let Some(task) = session.registry.next().await {
        let id = task.id.clone();
        let outcome = run_task(&session, &worker, &mut guide, task).await;
        // Its ending is kept before anyone is told of it: the terminal, or a parent.
        session.kept().await;
        let is_launch = launch.as_ref() == Some(&id);
        // A sub-capsule's answer is its parent's to tell, not the user's terminal's.
        if is_launch && session.completion.is_none() {
            report_launch_outcome(&outcome);
        }
        // A sub-capsule reports its launch task's end to its parent, and then ends: it exists
        // for that one task, and its supervisor sees it exit.
        let completes = match (&session.completion, is_launch) {
            (Some(target), true) => {
                crate::peers::deliver::deliver(&session, target, &outcome).await;
                true
            }
            _ => false,
        };
        session.registry.release(&id);
        let exit = session.manifest.lifecycle.after_task == AfterTask::Exit;
        if completes || (exit && session.registry.is_idle()) {
            session.go_down();
            break;
        }
    }
}

/// The launch's own task prints its answer on stdout (its failure on stderr), which `mur run`
/// relays after its announcement lines.
fn report_launch_outcome(outcome: &Outcome) {
    match outcome {
        Outcome::Completed(answer) => {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{answer}");
            let _ = out.flush();
        }
        Outcome::Failed(why) => eprintln!("task failed: {why}"),
        Outcome::CanceledEnded(why) => {
            eprintln!("{}", why.as_deref().unwrap_or("task canceled"))
        }
        Outcome::NoAnswer(why) => eprintln!("task ended without an answer: {why}"),
    }
}

async fn run_task(
    session: &Arc<Session>,
    worker: &Worker,
    guide: &mut Guide,
    task: Started,
) -> Outcome {
    let Started {
        id,
        context_id,
        owner,
        input,
        canceled,
    } = task;
    // The context's harness session or conversation, as its owner holds it.
    let conversation = owner.conversation_key(&context_id);
    let began = Instant::now();
    session.trace.event(TraceEvent::TaskStart {
        task_id: id.clone(),
        context_id: context_id.clone(),
        message_id: input.message_id.clone(),
        reference_task_ids: input.reference_task_ids.clone(),
        attachments: attachments(&input.images),
    });
    if input.forget_session {
        if let Some(dropped) = session.set_harness_session(&conversation, None) {
            session.trace.event(TraceEvent::HarnessSessionForgotten {
                context_id: context_id.clone(),
                harness_session: dropped,
                requested_by: RequestedBy::A2a,
            });
        }
    }
    let mut span = invoke_agent_span(session, worker, &id, &context_id, &input);
    let wind_down =
        session
            .errands
            .open(&id, input.trust, canceled.clone(), span.context().clone());
    let ((outcome, turns), errands) = match worker {
        Worker::Harness(driver, containment) => {
            let token = session.mint_task_token(&id);
            let resume = driver
                .resumes()
                .then(|| session.harness_session(&conversation))
                .flatten();
            let mode = if resume.is_some() { "resume" } else { "new" };
            span.set(keys::SESSION_MODE, mode);
            // The guide's file is written when the first attempt needs it; a capsule that
            // cannot write it fails the task that asked, saying where.
            let ending = match guide.write() {
                Err(why) => Ending::SpawnFailed(why),
                Ok(()) => {
                    let attempt = Attempt {
                        task_id: id.as_str(),
                        context_id: &context_id,
                        message_id: &input.message_id,
                        prompt: &input.text,
                        token: &token,
                        resume,
                        guide: guide.path(),
                        guide_text: guide.text(),
                        max_turns: session.manifest.inference.max_turns,
                        span: span.context(),
                    };
                    harness::run(session, driver, containment, &attempt, canceled, wind_down).await
                }
            };
            session.revoke_task_tokens(&id);
            // Member calls still in flight are canceled, and recorded, before the task's end is.
            let errands = session.errands.close(&id).await;
            (judge(session, &id, &conversation, ending), errands)
        }
        Worker::Http(agent) => {
            let (ending, turns) = http::run(
                session,
                agent,
                &id,
                (&context_id, &conversation),
                &input,
                canceled,
            )
            .await;
            session.spend.end_task(id.as_str());
            let errands = session.errands.close(&id).await;
            ((settle(session, &id, ending), turns), errands)
        }
    };
    // end-without-answer decided the task's ending, whatever the harness did after; a cancel
    // that came first still stands.
    let outcome = match (errands.no_answer, outcome) {
        (Some(reason), o) if !matches!(o, Outcome::CanceledEnded(_)) => Outcome::NoAnswer(reason),
        (_, o) => o,
    };
    let (status, cause) = match &outcome {
        Outcome::Completed(_) => (EndStatus::Completed, None),
        Outcome::Failed(why) | Outcome::NoAnswer(why) => (EndStatus::Failed, Some(why.clone())),
        Outcome::CanceledEnded(_) => (EndStatus::Canceled, None),
    };
    if let Some(cause) = cause {
        session.trace.event(TraceEvent::TaskFailed {
            task_id: id.clone(),
            cause,
        });
    }
    let ran = Ran {
        turns,
        duration_ms: began.elapsed().as_millis() as u64,
    };
    end_invoke_agent(session, span, &outcome, errands.notes.clone());
    session
        .trace
        .event(TraceEvent::task_end(id.clone(), status, Some(ran)));
    // Whoever sees the task end (GetTask, a held answer, a stream) finds its task_end on file.
    session.trace.flush().await;
    // What the model left running in the background is named on the task.
    let notes = Notes {
        no_answer_below: errands.no_answer_below,
        running_commands: session.commands.running_of(&id),
    };
    session.registry.finish_with(&id, outcome.clone(), notes);
    outcome
}

/// The `invoke_agent {member}` span of a task's attempt, under the span of the message that
/// started it (or the root of a new trace for the launch's own task).
fn invoke_agent_span(
    session: &Session,
    worker: &Worker,
    id: &TaskId,
    context_id: &str,
    input: &crate::tasks::TaskInput,
) -> Span {
    let agent = session
        .wiring
        .as_ref()
        .map_or(session.manifest.name.as_str(), |w| w.member.as_str());
    let name = format!("{} {agent}", keys::INVOKE_AGENT);
    let mut span = Span::start(name, Kind::Internal, input.parent.as_ref());
    span.set(keys::OPERATION, keys::INVOKE_AGENT);
    span.set(keys::AGENT_NAME, agent.to_owned());
    span.set(keys::CONVERSATION, context_id.to_owned());
    span.set(keys::A2A_TASK, id.as_str().to_owned());
    span.set(keys::CAPSULE, session.manifest.name.clone());
    span.set_some(
        keys::PRESET,
        session.manifest.inference.driver_artifact.clone(),
    );
    if let Worker::Http(_) = worker {
        span.set_some(
            keys::REQUEST_MODEL,
            session.manifest.inference.model.clone(),
        );
    }
    if telemetry::captures_content() {
        span.set(keys::INPUT_MESSAGES, messages("user", &input.text));
    }
    span
}

/// Ends the attempt's span with its outcome, and what befell it on the way.
fn end_invoke_agent(session: &Session, mut span: Span, outcome: &Outcome, notes: Vec<SpanEvent>) {
    span.events(notes);
    let (word, failed) = match outcome {
        Outcome::Completed(answer) => {
            if telemetry::captures_content() {
                span.set(keys::OUTPUT_MESSAGES, messages("assistant", answer));
            }
            ("completed", None)
        }
        Outcome::Failed(why) => ("failed", Some(("task_failed", why.clone()))),
        Outcome::NoAnswer(why) => ("no_answer", Some(("no_answer", why.clone()))),
        Outcome::CanceledEnded(why) => {
            let why = why.clone().unwrap_or_else(|| "task canceled".into());
            span.event(keys::EV_CANCELED, vec![]);
            ("canceled", Some(("canceled", why)))
        }
    };
    span.set(keys::OUTCOME, word);
    if let Some((kind, why)) = failed {
        span.fail(kind, why);
    }
    span.end(&session.trace);
}

/// The conventions' message list of one message with one text part.
fn messages(role: &str, text: &str) -> String {
    serde_json::json!([{"role": role, "parts": [{"type": "text", "content": text}]}]).to_string()
}

/// The task_start record's `attachments`: each image the door took, in part order, by its
/// media type and size (the bytes themselves stay out of the trace).
fn attachments(images: &[(String, Vec<u8>)]) -> Vec<String> {
    images
        .iter()
        .map(|(media_type, bytes)| format!("{media_type}, {} bytes", bytes.len()))
        .collect()
}

/// Turns an http loop's ending into the task's outcome.
fn settle(session: &Session, id: &TaskId, ending: http::Ending) -> Outcome {
    match ending {
        http::Ending::Answer(a) => Outcome::Completed(a),
        http::Ending::Failed(cause) => Outcome::Failed(cause.to_string()),
        // The errands hold the reason, which the caller applies.
        http::Ending::WithoutAnswer => Outcome::Failed("the task ended without an answer".into()),
        http::Ending::Canceled(interrupted) => {
            let in_flight = session
                .registry
                .read(id.as_str(), &Viewer::Everyone, |t| t.residue.clone())
                .unwrap_or_default();
            session.trace.event(TraceEvent::canceled_in_loop(
                id.clone(),
                interrupted,
                in_flight,
            ));
            Outcome::CanceledEnded(None)
        }
    }
}

/// Turns a harness ending into the task's outcome, keeping the context's harness session under
/// its owner's `conversation` key.
fn judge(session: &Session, id: &TaskId, conversation: &str, ending: Ending) -> (Outcome, u32) {
    let keep = |t: &harness::Transcript| {
        if let Some(s) = &t.session {
            session.set_harness_session(conversation, Some(s.clone()));
        }
        t.turns
    };
    match ending {
        Ending::SpawnFailed(why) | Ending::LimitReached(why) | Ending::SpendStopped(why) => {
            (Outcome::Failed(why), 0)
        }
        Ending::Canceled { killed, transcript } => {
            let turns = keep(&transcript);
            // What the cancel's answer named as in flight (its residue artifact).
            let in_flight = session
                .registry
                .read(id.as_str(), &Viewer::Everyone, |t| t.residue.clone())
                .unwrap_or_default();
            session.trace.event(TraceEvent::canceled_in_harness(
                id.clone(),
                killed,
                in_flight,
            ));
            (
                Outcome::CanceledEnded(killed.then(|| KILLED.to_owned())),
                turns,
            )
        }
        Ending::TurnsExhausted { transcript } => {
            let turns = keep(&transcript);
            let why = http::Cause::TurnsExhausted(session.manifest.inference.max_turns);
            (Outcome::Failed(why.to_string()), turns)
        }
        Ending::Exited {
            code,
            signal,
            transcript,
            stderr_last_line,
        } => {
            let turns = keep(&transcript);
            let outcome = match (code, transcript.error, transcript.answer) {
                (Some(0), None, Some(answer)) => Outcome::Completed(answer),
                (Some(0), Some(err), _) => {
                    Outcome::Failed(format!("the harness reported an error: {err}"))
                }
                (Some(0), None, None) => {
                    Outcome::Failed("the harness exited with status 0 without an answer".into())
                }
                (code, _, _) => {
                    let how = match (code, signal) {
                        (Some(c), _) => format!("the harness exited with status {c}"),
                        (None, Some(s)) => format!("the harness was killed by signal {s}"),
                        (None, None) => "the harness ended without an exit status".to_owned(),
                    };
                    if stderr_last_line.is_empty() {
                        Outcome::Failed(how)
                    } else {
                        Outcome::Failed(format!("{how}: {stderr_last_line}"))
                    }
                }
            };
            (outcome, turns)
        }
    }
}
