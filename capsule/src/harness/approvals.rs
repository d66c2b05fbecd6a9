//! Answering a CLI's questions during an attempt (`harness.approvals`, docs/agent-clis.md
//! "Approvals"): each `can_use_tool` request is answered by the manifest's rules at once, or
//! shown on the task (TASK_STATE_INPUT_REQUIRED with an `approval` data part) and answered by
//! whoever may answer, or denied when `approval_timeout_secs` passes or the task is canceled.
//! Questions a person answers are shown one at a time, oldest first. Every question and answer
//! is traced; the answer goes to the CLI on its stdin, in the protocol it asked in (Claude
//! Code's `control_response` line, Codex app-server's JSON-RPC response).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::codex_rpc;
use super::dialect::{Ask, Heard, Protocol};
use super::stdin::{permission_line, Permission};
use crate::ids::{ApprovalId, TaskId};
use crate::manifest::approvals::{From, Mode, Ruled};
use crate::session::Session;
use crate::tasks::approval::{main_input, By, Decision, Question, Verdict};
use crate::trace::TraceEvent;

/// How many questions may wait for a person at once; past it the CLI is answered deny.
const MOST_WAITING: usize = 64;

/// The questions of one attempt, as its stdout reader hears them.
pub(super) type Asks = mpsc::Receiver<Heard>;

/// One question on its way to an answer.
struct Pending {
    ask: Ask,
    id: ApprovalId,
}

/// What the CLI is told, and the trace's account of who decided.
struct Answer {
    verdict: Verdict,
    /// The deciding rule, as `harness.deny[0] "Bash(rm:*)"`.
    rule: Option<String>,
}

/// Answers the attempt's questions until its reader ends. `cli` is how the question names the
/// CLI; `lines` writes to its stdin.
pub(super) async fn answer(
    session: Arc<Session>,
    task: TaskId,
    cli: &'static str,
    mut asks: Asks,
    lines: mpsc::Sender<Vec<u8>>,
) {
    let mut waiting: VecDeque<Pending> = VecDeque::new();
    loop {
        let Some(next) = waiting.pop_front() else {
            match asks.recv().await {
                Some(heard) => hear(&session, &task, &lines, &mut waiting, heard),
                None => return,
            }
            continue;
        };
        let question = Question {
            id: next.id.clone(),
            cli,
            tool: next.ask.tool.clone(),
            input: next.ask.input.clone(),
            caller_may_answer: session.manifest.harness.approvals.from == From::Caller,
        };
        let Some(mut verdict) = session.registry.request_approval(&task, question) else {
            tell(&session, &task, &lines, &next, canceled());
            continue;
        };
        let timeout = session.manifest.harness.approvals.timeout_secs;
        let timer = tokio::time::sleep(Duration::from_secs(timeout));
        tokio::pin!(timer);
        let answer = loop {
            tokio::select! {
                v = &mut verdict => break Some(v.map_or_else(|_| canceled(), |verdict| Answer { verdict, rule: None })),
                _ = &mut timer => break Some(timed_out(timeout)),
                heard = asks.recv() => match heard {
                    Some(Heard::Withdrawn(r)) if r == next.ask.request_id => break None,
                    Some(heard) => hear(&session, &task, &lines, &mut waiting, heard),
                    // The attempt is over: what it asked is answered by nobody, and said so.
                    None => {
                        session.registry.withdraw_approval(&task, &next.id);
                        for p in std::iter::once(&next).chain(waiting.iter()) {
                            traced(&session, &task, &p.id, &ended());
                        }
                        return;
                    }
                },
            }
        };
        session.registry.withdraw_approval(&task, &next.id);
        match answer {
            Some(answer) => tell(&session, &task, &lines, &next, answer),
            None => traced(&session, &task, &next.id, &withdrawn()),
        }
    }
}

/// A line the reader heard while a question may be open: a new question is ruled on at once
/// or queued; a withdrawn one leaves the queue unanswered.
fn hear(
    session: &Session,
    task: &TaskId,
    lines: &mpsc::Sender<Vec<u8>>,
    waiting: &mut VecDeque<Pending>,
    heard: Heard,
) {
    let ask = match heard {
        Heard::Ask(ask) => ask,
        Heard::Withdrawn(request_id) => {
            if let Some(at) = waiting.iter().position(|p| p.ask.request_id == request_id) {
                if let Some(p) = waiting.remove(at) {
                    traced(session, task, &p.id, &withdrawn());
                }
            }
            return;
        }
        Heard::Text(_) | Heard::ThreadReady(_) | Heard::Unanswerable { .. } => return,
    };
    let pending = Pending {
        id: ApprovalId::mint(),
        ask,
    };
    session.trace.event(TraceEvent::ApprovalAsked {
        task_id: task.clone(),
        approval_id: pending.id.clone(),
        request_id: match &pending.ask.request_id {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        },
        tool: pending.ask.tool.clone(),
        input: pending.ask.input.clone(),
    });
    let policy = &session.manifest.harness.approvals;
    if policy.mode == Mode::Deny {
        return tell(session, task, lines, &pending, refused_by_mode());
    }
    let ruled = policy.rule(
        &pending.ask.tool,
        main_input(&pending.ask.tool, &pending.ask.input),
    );
    let by_rule = |decision, rule: &crate::manifest::approvals::Rule| Answer {
        verdict: Verdict {
            decision,
            by: By::Rule,
            reason: None,
        },
        rule: Some(format!("{} {:?}", rule.at, rule.text)),
    };
    match ruled {
        Ruled::Approved(rule) => tell(
            session,
            task,
            lines,
            &pending,
            by_rule(Decision::Approve, rule),
        ),
        Ruled::Denied(rule) => tell(
            session,
            task,
            lines,
            &pending,
            by_rule(Decision::Deny, rule),
        ),
        Ruled::Open if waiting.len() >= MOST_WAITING => {
            tell(session, task, lines, &pending, too_many())
        }
        Ruled::Open => waiting.push_back(pending),
    }
}

/// Traces the answer and writes it to the CLI.
fn tell(
    session: &Session,
    task: &TaskId,
    lines: &mpsc::Sender<Vec<u8>>,
    pending: &Pending,
    answer: Answer,
) {
    traced(session, task, &pending.id, &answer);
    let ask = &pending.ask;
    let line = match ask.protocol {
        Protocol::ClaudeControl => {
            let message = denial(&answer);
            let permission = match answer.verdict.decision {
                Decision::Approve => Permission::Allow {
                    updated_input: &ask.input,
                },
                Decision::Deny => Permission::Deny { message: &message },
            };
            let id = ask.request_id.as_str().unwrap_or_default();
            permission_line(id, permission)
        }
        // Codex tells its model a declined command was "rejected by user"; the protocol
        // carries no message.
        Protocol::CodexRpc => codex_rpc::answer(&ask.request_id, answer.verdict.decision),
    };
    // A full queue means the CLI reads none of its stdin: it would not read the answer either.
    let _ = lines.try_send(line);
}

fn traced(session: &Session, task: &TaskId, id: &ApprovalId, answer: &Answer) {
    session.trace.event(TraceEvent::ApprovalAnswered {
        task_id: task.clone(),
        approval_id: id.clone(),
        decision: answer.verdict.decision,
        by: answer.verdict.by,
        rule: answer.rule.clone(),
        reason: answer.verdict.reason.clone(),
    });
}

/// What the model reads when it is denied: who denied it and why, so it can say so or try
/// another way.
fn denial(answer: &Answer) -> String {
    let v = &answer.verdict;
    let reason = v
        .reason
        .as_deref()
        .map(|r| format!(": {r}"))
        .unwrap_or_default();
    match (v.by, &answer.rule) {
        (By::Operator, _) => format!("murmur: the operator denied this{reason}"),
        (By::Caller, _) => format!("murmur: the task's caller denied this{reason}"),
        (By::Rule, Some(rule)) => format!("murmur: the rule {rule} denies this"),
        (By::Rule, None) | (By::Timeout, _) | (By::Cancel, _) => {
            format!("murmur: denied{reason}")
        }
    }
}

fn canceled() -> Answer {
    Answer {
        verdict: Verdict::canceled(),
        rule: None,
    }
}

fn withdrawn() -> Answer {
    Answer {
        verdict: Verdict {
            decision: Decision::Deny,
            by: By::Cancel,
            reason: Some("the CLI withdrew its question".into()),
        },
        rule: None,
    }
}

fn ended() -> Answer {
    Answer {
        verdict: Verdict {
            decision: Decision::Deny,
            by: By::Cancel,
            reason: Some("the attempt ended while this waited for approval".into()),
        },
        rule: None,
    }
}

fn timed_out(secs: u64) -> Answer {
    Answer {
        verdict: Verdict {
            decision: Decision::Deny,
            by: By::Timeout,
            reason: Some(format!(
                "no answer came within {secs} s (harness.approval_timeout_secs)"
            )),
        },
        rule: None,
    }
}

fn refused_by_mode() -> Answer {
    Answer {
        verdict: Verdict {
            decision: Decision::Deny,
            by: By::Rule,
            reason: Some(
                "harness.approvals is deny: what harness.permissions does not allow is refused"
                    .into(),
            ),
        },
        rule: Some("harness.approvals \"deny\"".into()),
    }
}

fn too_many() -> Answer {
    Answer {
        verdict: Verdict {
            decision: Decision::Deny,
            by: By::Rule,
            reason: Some(format!(
                "{MOST_WAITING} questions already wait for an answer"
            )),
        },
        rule: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::{Owner, Registry, Reply, TaskInput, TaskState, Viewer};
    use serde_json::{json, Value};

    const MANIFEST: &str =
        "name: asker\nversion: \"1\"\nartifacts: [{ name: murmur/driver-claude-code, \
        runtime: driver }]\nharness: { approvals: ask, approve: [\"Bash(ls)\"] }\n\
        network: { authentication: { scheme: bearer } }\n";

    fn session(sink: &crate::trace::tests::Shared) -> Arc<Session> {
        let manifest =
            crate::manifest::load_str(MANIFEST, std::path::Path::new("a/murmur.yaml"), &|_| None)
                .unwrap();
        let id = crate::ids::SessionId::mint();
        let trace = crate::trace::Trace::to_sink(sink.clone(), id.clone(), 256).unwrap();
        Arc::new(Session::new(
            id,
            manifest,
            Registry::new(2),
            Arc::new(crate::stream::EventLog::default()),
            trace,
            "http://localhost:1".into(),
            std::path::PathBuf::from("/tmp"),
            std::path::PathBuf::from("/tmp"),
            std::path::PathBuf::from("/bin/true"),
        ))
    }

    fn ask(id: &str, command: &str) -> Heard {
        Heard::Ask(Ask {
            request_id: json!(id),
            protocol: Protocol::ClaudeControl,
            tool: "Bash".into(),
            input: json!({"command": command}),
        })
    }

    /// The request id and behavior of the next line written to the CLI.
    async fn next_answer(lines: &mut mpsc::Receiver<Vec<u8>>) -> (String, String) {
        let line = tokio::time::timeout(Duration::from_secs(5), lines.recv())
            .await
            .unwrap()
            .unwrap();
        let v: Value = serde_json::from_slice(&line).unwrap();
        (
            v.pointer("/response/request_id")
                .and_then(Value::as_str)
                .unwrap()
                .to_owned(),
            v.pointer("/response/response/behavior")
                .and_then(Value::as_str)
                .unwrap()
                .to_owned(),
        )
    }

    /// The command of the question the task shows, once it shows one.
    async fn shown(session: &Session, task: &TaskId) -> String {
        for _ in 0..500 {
            let q = session
                .registry
                .read(task.as_str(), &Viewer::Everyone, |t| {
                    t.approval
                        .as_ref()
                        .map(|q| q.input["command"].as_str().unwrap_or("").to_owned())
                });
            if let Some(Some(command)) = q {
                return command;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("no question was shown");
    }

    #[tokio::test]
    async fn rules_answer_at_once_and_people_answer_one_at_a_time_oldest_first() {
        let sink = crate::trace::tests::Shared::default();
        let session = session(&sink);
        let task = match session
            .registry
            .admit(None, Owner::Session, TaskInput::default())
        {
            crate::tasks::Admission::Accepted(id, _) => id,
            crate::tasks::Admission::Rejected(..) => panic!("rejected"),
        };
        assert!(session.registry.next().await.is_some());
        let (asks_tx, asks) = mpsc::channel(8);
        let (lines_tx, mut lines) = mpsc::channel(8);
        let answering = tokio::spawn(answer(
            session.clone(),
            task.clone(),
            "Claude Code",
            asks,
            lines_tx,
        ));
        for heard in [
            ask("r1", "touch first"),
            ask("r2", "ls"),
            ask("r3", "touch second"),
            ask("r4", "touch third"),
        ] {
            asks_tx.send(heard).await.unwrap();
        }
        // The rule answers r2 at once, though r1 waits before it.
        assert_eq!(next_answer(&mut lines).await, ("r2".into(), "allow".into()));
        assert_eq!(shown(&session, &task).await, "touch first");
        let reply = |text: &str| {
            session.registry.reply(
                task.as_str(),
                &Viewer::Everyone,
                None,
                Reply {
                    text: text.into(),
                    data: &[],
                },
            )
        };
        assert!(reply("deny").is_ok());
        assert_eq!(next_answer(&mut lines).await, ("r1".into(), "deny".into()));
        assert_eq!(shown(&session, &task).await, "touch second");
        // r4 is withdrawn while it waits its turn, r3 while it is shown: neither is answered.
        asks_tx.send(Heard::Withdrawn(json!("r4"))).await.unwrap();
        asks_tx.send(Heard::Withdrawn(json!("r3"))).await.unwrap();
        for _ in 0..500 {
            if session.registry.state_of(task.as_str(), &Viewer::Everyone)
                == Some(TaskState::Working)
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(
            session.registry.state_of(task.as_str(), &Viewer::Everyone),
            Some(TaskState::Working)
        );
        // The attempt ends while r5 is shown: it is said to have ended unanswered.
        asks_tx.send(ask("r5", "touch fifth")).await.unwrap();
        assert_eq!(shown(&session, &task).await, "touch fifth");
        drop(asks_tx);
        tokio::time::timeout(Duration::from_secs(5), answering)
            .await
            .unwrap()
            .unwrap();
        assert!(
            lines.try_recv().is_err(),
            "a withdrawn question is not answered"
        );
        // The trace is written beside the loop: wait (bounded) for the five answers.
        let answered = || -> Vec<(String, String)> {
            sink.records()
                .iter()
                .filter(|r| r["event_type"] == "approval_answered")
                .map(|r| {
                    (
                        r["decision"].as_str().unwrap().to_owned(),
                        r["by"].as_str().unwrap().to_owned(),
                    )
                })
                .collect()
        };
        for _ in 0..500 {
            if answered().len() >= 5 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let answered = answered();
        let pairs = |l: &[(&str, &str)]| {
            l.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            answered,
            pairs(&[
                ("approve", "rule"),
                ("deny", "operator"),
                ("deny", "cancel"),
                ("deny", "cancel"),
                ("deny", "cancel")
            ])
        );
    }

    #[test]
    fn each_denial_says_who_denied_and_why() {
        let by = |by, reason: Option<&str>, rule: Option<&str>| {
            denial(&Answer {
                verdict: Verdict {
                    decision: Decision::Deny,
                    by,
                    reason: reason.map(str::to_owned),
                },
                rule: rule.map(str::to_owned),
            })
        };
        assert_eq!(
            by(By::Operator, None, None),
            "murmur: the operator denied this"
        );
        assert_eq!(
            by(By::Operator, Some("not on main"), None),
            "murmur: the operator denied this: not on main"
        );
        assert_eq!(
            by(By::Caller, Some("no"), None),
            "murmur: the task's caller denied this: no"
        );
        assert_eq!(
            by(By::Rule, None, Some("harness.deny[0] \"Bash(rm:*)\"")),
            "murmur: the rule harness.deny[0] \"Bash(rm:*)\" denies this"
        );
        assert_eq!(
            denial(&timed_out(5)),
            "murmur: denied: no answer came within 5 s (harness.approval_timeout_secs)"
        );
        assert_eq!(
            denial(&canceled()),
            "murmur: denied: the task was canceled while this waited for approval"
        );
    }
}
