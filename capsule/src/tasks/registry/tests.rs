//! The registry's own rules: admission, retention by count and bytes, inputs dropped, listing.

use super::*;

fn notes(no_answer_below: Vec<Value>) -> Notes {
    Notes {
        no_answer_below,
        running_commands: Vec::new(),
    }
}

fn input() -> TaskInput {
    TaskInput::default()
}

#[test]
fn past_its_retention_the_registry_forgets_the_longest_ended_tasks_only() {
    let reg = Registry::with_retention(
        1,
        Retention {
            tasks: 3,
            bytes: RETAINED.bytes,
        },
    );
    let admit = || match reg.admit(None, Owner::Session, input()) {
        Admission::Accepted(id, _) | Admission::Rejected(id, _) => id,
    };
    let live = admit();
    // The one slot is taken: these four are rejected, so they end at once.
    let rejected: Vec<TaskId> = (0..4).map(|_| admit()).collect();
    let everyone = Viewer::Everyone;
    let kept: Vec<String> = reg
        .list(&all(), &everyone)
        .tasks
        .iter()
        .map(|t| t["id"].as_str().unwrap_or_default().to_owned())
        .collect();
    let expected: Vec<String> = [&rejected[3], &rejected[2], &live]
        .iter()
        .map(|id| id.to_string())
        .collect();
    assert_eq!(kept, expected, "the newest ended tasks and the live one");
    assert!(reg.get(rejected[0].as_str(), &everyone).is_none());
}

fn input_of(size: usize) -> TaskInput {
    TaskInput {
        text: "x".repeat(size),
        message_id: "m".into(),
        ..TaskInput::default()
    }
}

fn id_of(admission: Admission) -> TaskId {
    match admission {
        Admission::Accepted(id, _) | Admission::Rejected(id, _) => id,
    }
}

/// What GetTask answers for the task, parsed back.
fn shown(reg: &Registry, id: &str) -> Option<Value> {
    let text = reg.get(id, &Viewer::Everyone)?;
    serde_json::from_slice(&text).ok()
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .map(|rt| rt.block_on(f))
        .unwrap_or_else(|e| panic!("no runtime: {e}"))
}

fn input_held(reg: &Registry, id: &TaskId) -> Option<usize> {
    reg.read(id.as_str(), &Viewer::Everyone, |t| {
        t.input.as_ref().map(|i| i.text.len())
    })
    .flatten()
}

#[test]
fn a_rejected_task_keeps_no_input_and_a_started_one_hands_its_input_over() {
    let reg = Registry::new(1);
    let queued = id_of(reg.admit(None, Owner::Session, input_of(1 << 20)));
    assert_eq!(
        input_held(&reg, &queued),
        Some(1 << 20),
        "kept while it waits"
    );
    let before = reg.held_bytes();
    assert!(before >= 1 << 20, "the queued input is counted: {before}");
    for _ in 0..20 {
        let rejected = reg.admit(None, Owner::Session, input_of(1 << 20));
        let Admission::Rejected(id, json) = rejected else {
            panic!("the one slot is taken: the task must be rejected");
        };
        assert_eq!(json["status"]["state"], "TASK_STATE_REJECTED");
        assert_eq!(
            input_held(&reg, &id),
            None,
            "a rejected task keeps no input"
        );
    }
    assert!(
        reg.held_bytes() < before + 20 * 1024,
        "twenty rejected 1 MiB messages grew the registry from {before} to {} bytes",
        reg.held_bytes()
    );
    let started = block_on(reg.next()).map(|s| (s.id, s.input.text.len()));
    assert_eq!(
        started,
        Some((queued.clone(), 1 << 20)),
        "the worker gets the input"
    );
    assert_eq!(input_held(&reg, &queued), None, "moved, not copied");
    assert!(reg.held_bytes() < 64 * 1024, "{}", reg.held_bytes());
}

#[test]
fn an_ended_task_drops_its_input_and_a_canceled_queued_one_too() {
    let reg = Registry::new(2);
    let running = id_of(reg.admit(None, Owner::Session, input_of(1000)));
    let waiting = id_of(reg.admit(None, Owner::Session, input_of(1000)));
    let started = block_on(reg.next());
    assert_eq!(started.map(|s| s.id), Some(running.clone()));
    assert!(reg.cancel(waiting.as_str(), &Viewer::Everyone).is_ok());
    assert_eq!(
        input_held(&reg, &waiting),
        None,
        "a canceled task keeps no input"
    );
    reg.finish(&running, Outcome::Completed("four".into()));
    assert_eq!(input_held(&reg, &running), None);
    let answer = shown(&reg, running.as_str());
    assert_eq!(
        answer.map(|t| t["artifacts"][0]["parts"][0]["text"].clone()),
        Some(Value::from("four")),
        "an ended task still shows what GetTask shows"
    );
}

/// A registry bounded at 1 MiB that ran six tasks answering 300 KiB each, never holding more
/// than its bound; answers it and the tasks' ids, oldest first.
fn six_ended_tasks_in_one_mib() -> (Registry, Vec<TaskId>) {
    const RESPONSE: usize = 300 << 10;
    let reg = Registry::with_retention(
        1,
        Retention {
            tasks: 1000,
            bytes: 1 << 20,
        },
    );
    let mut ended = Vec::new();
    for _ in 0..6 {
        let id = id_of(reg.admit(None, Owner::Session, input_of(10)));
        assert!(block_on(reg.next()).is_some());
        reg.finish(&id, Outcome::Completed("r".repeat(RESPONSE)));
        reg.release(&id);
        ended.push(id);
        assert!(reg.held_bytes() <= 1 << 20, "{}", reg.held_bytes());
    }
    (reg, ended)
}

#[test]
fn past_its_byte_bound_the_registry_forgets_the_longest_ended_tasks_only() {
    let (reg, ended) = six_ended_tasks_in_one_mib();
    // A live task whose input alone is past the bound: it is kept, and pushes out every
    // ended task.
    let live = id_of(reg.admit(None, Owner::Session, input_of(2 << 20)));
    let everyone = Viewer::Everyone;
    assert!(
        reg.get(live.as_str(), &everyone).is_some(),
        "a live task stays"
    );
    let kept: Vec<bool> = ended
        .iter()
        .map(|id| reg.get(id.as_str(), &everyone).is_some())
        .collect();
    assert_eq!(kept, [false; 6]);

    // Without the big live task, three 300 KiB responses fit in 1 MiB and a fourth does not.
    let (reg, ended) = six_ended_tasks_in_one_mib();
    let kept: Vec<bool> = ended
        .iter()
        .map(|id| reg.get(id.as_str(), &everyone).is_some())
        .collect();
    assert_eq!(kept, [false, false, false, true, true, true]);
    assert_eq!(reg.list(&all(), &everyone).total_size, 3);
}

#[test]
fn the_byte_total_is_what_the_kept_tasks_hold() {
    let reg = Registry::new(1);
    let id = id_of(reg.admit(None, Owner::Session, input_of(5000)));
    assert!(block_on(reg.next()).is_some());
    let rx = reg.request_input(&id, "q".repeat(7000));
    assert!(rx.is_some());
    let with_prompt = reg.held_bytes();
    assert!(with_prompt >= 7000, "{with_prompt}");
    assert!(reg
        .reply(
            id.as_str(),
            &Viewer::Everyone,
            None,
            crate::tasks::Reply {
                text: "a".into(),
                data: &[],
            },
        )
        .is_ok());
    assert!(
        reg.held_bytes() + 7000 <= with_prompt,
        "the prompt is dropped"
    );
    reg.finish(&id, Outcome::Failed("f".repeat(3000)));
    let sum: usize = reg
        .read(id.as_str(), &Viewer::Everyone, |t| t.held_bytes())
        .unwrap_or_default();
    assert_eq!(reg.held_bytes(), sum, "one task: the total is its own");
}

#[test]
fn an_ending_without_answer_fails_with_its_reason_and_says_what_is_missing() {
    let reg = Registry::new(2);
    let id = id_of(reg.admit(None, Owner::Session, input_of(1)));
    assert!(block_on(reg.next()).is_some());
    let below = vec![serde_json::json!({"member": "q", "status": "timed_out"})];
    reg.finish_with(
        &id,
        Outcome::NoAnswer("q gave no answer".into()),
        notes(below),
    );
    let task = shown(&reg, id.as_str()).unwrap_or_default();
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED");
    assert_eq!(
        task["status"]["message"]["parts"][0]["text"],
        "q gave no answer"
    );
    assert_eq!(
        task["metadata"],
        serde_json::json!({"murmur": {"noAnswer": true,
            "noAnswerBelow": [{"member": "q", "status": "timed_out"}]}})
    );

    // Canceled before its harness ended: the cancel stands, and says what was missing.
    let canceled = id_of(reg.admit(None, Owner::Session, input_of(1)));
    reg.release(&id);
    assert!(block_on(reg.next()).is_some());
    assert!(reg.cancel(canceled.as_str(), &Viewer::Everyone).is_ok());
    let below = vec![serde_json::json!({"member": "c", "status": "canceled"})];
    reg.finish_with(&canceled, Outcome::NoAnswer("late".into()), notes(below));
    let task = shown(&reg, canceled.as_str()).unwrap_or_default();
    assert_eq!(task["status"]["state"], "TASK_STATE_CANCELED");
    assert_eq!(
        task["metadata"],
        serde_json::json!({"murmur": {"noAnswerBelow": [{"member": "c", "status": "canceled"}]}})
    );

    // A task whose calls all answered carries no metadata at all.
    let plain = id_of(reg.admit(None, Owner::Session, input_of(1)));
    reg.release(&canceled);
    assert!(block_on(reg.next()).is_some());
    reg.finish_with(&plain, Outcome::Completed("ok".into()), Notes::default());
    let task = shown(&reg, plain.as_str()).unwrap_or_default();
    assert!(task.get("metadata").is_none(), "{task}");
}

fn all() -> ListQuery {
    ListQuery {
        context_id: None,
        state: StateFilter::Any,
        page_size: 100,
        after_seq: None,
        since_nanos: None,
        include_artifacts: false,
    }
}

mod approvals {
    use super::*;
    use crate::ids::ApprovalId;
    use crate::tasks::approval::{Decision, Question, Verdict};
    use crate::tasks::Reply;

    fn question(caller_may_answer: bool) -> Question {
        Question {
            id: ApprovalId::mint(),
            cli: "Claude Code",
            tool: "Bash".into(),
            input: serde_json::json!({"command": "touch approved.txt"}),
            caller_may_answer,
        }
    }

    fn text(t: &str) -> Reply<'static> {
        Reply {
            text: t.into(),
            data: &[],
        }
    }

    /// A task of `member:lead`'s, running, with an approval open.
    fn asking(caller_may_answer: bool) -> (Registry, TaskId, oneshot::Receiver<Verdict>) {
        let reg = Registry::new(1);
        let owner = Owner::Credential("member:lead".into());
        let id = id_of(reg.admit(None, owner, input()));
        assert!(block_on(reg.next()).is_some());
        let rx = reg
            .request_approval(&id, question(caller_may_answer))
            .unwrap();
        (reg, id, rx)
    }

    fn state(reg: &Registry, id: &TaskId) -> TaskState {
        reg.state_of(id.as_str(), &Viewer::Everyone).unwrap()
    }

    #[test]
    fn the_operator_answers_and_the_task_works_again() {
        let (reg, id, rx) = asking(false);
        assert_eq!(state(&reg, &id), TaskState::InputRequired);
        let shown: Value =
            serde_json::from_slice(&reg.get(id.as_str(), &Viewer::Everyone).unwrap()).unwrap();
        assert_eq!(
            shown["status"]["message"]["parts"][1]["data"]["kind"],
            "approval"
        );
        let (_, task) = reg
            .reply(
                id.as_str(),
                &Viewer::Everyone,
                None,
                text("Deny: not today"),
            )
            .ok()
            .unwrap();
        assert_eq!(task["status"]["state"], "TASK_STATE_WORKING");
        assert!(task["status"].get("message").is_none());
        let verdict = block_on(rx).unwrap();
        assert_eq!(
            (verdict.decision, verdict.by, verdict.reason.as_deref()),
            (Decision::Deny, By::Operator, Some("not today"))
        );
    }

    #[test]
    fn a_member_credential_is_told_the_task_is_not_found_unless_callers_may_answer() {
        let lead = Viewer::Credential("member:lead".into());
        let (reg, id, _rx) = asking(false);
        assert!(matches!(
            reg.reply(id.as_str(), &lead, None, text("approve")),
            Err(ReplyRefusal::NotFound)
        ));
        assert_eq!(
            state(&reg, &id),
            TaskState::InputRequired,
            "the question stays open"
        );
        let (reg, id, rx) = asking(true);
        assert!(reg.reply(id.as_str(), &lead, None, text("approve")).is_ok());
        assert_eq!(block_on(rx).unwrap().by, By::Caller);
        // Another credential does not see the task at all.
        let (reg, id, _rx) = asking(true);
        let other = Viewer::Credential("member:other".into());
        assert!(matches!(
            reg.reply(id.as_str(), &other, None, text("approve")),
            Err(ReplyRefusal::NotFound)
        ));
    }

    #[test]
    fn a_reply_that_is_no_answer_leaves_the_question_open() {
        let (reg, id, mut rx) = asking(false);
        let Err(ReplyRefusal::NotAnAnswer(why)) =
            reg.reply(id.as_str(), &Viewer::Everyone, None, text("sure, go ahead"))
        else {
            panic!("a reply that is no answer was taken");
        };
        assert!(
            why.starts_with(&format!(
                "Invalid params: task {id} waits for approval apr_"
            )),
            "{why}"
        );
        assert!(
            why.contains("the reply is neither approve nor deny"),
            "{why}"
        );
        assert_eq!(state(&reg, &id), TaskState::InputRequired);
        assert!(rx.try_recv().is_err(), "nothing was answered");
    }

    #[test]
    fn a_cancel_drops_the_question_which_reads_as_a_denial() {
        let (reg, id, rx) = asking(false);
        assert!(reg.cancel(id.as_str(), &Viewer::Everyone).is_ok());
        assert!(block_on(rx).is_err(), "the sender is dropped");
        let shown: Value =
            serde_json::from_slice(&reg.get(id.as_str(), &Viewer::Everyone).unwrap()).unwrap();
        assert!(
            shown.get("artifacts").is_none(),
            "no prompt is left: {shown}"
        );
    }

    #[test]
    fn a_withdrawn_question_leaves_the_task_working() {
        let (reg, id, _rx) = asking(false);
        let open = reg
            .read(id.as_str(), &Viewer::Everyone, |t| {
                t.approval.as_ref().map(|q| q.id.clone())
            })
            .flatten()
            .unwrap();
        reg.withdraw_approval(&id, &ApprovalId::from_wire("apr_other"));
        assert_eq!(
            state(&reg, &id),
            TaskState::InputRequired,
            "another id withdraws nothing"
        );
        reg.withdraw_approval(&id, &open);
        assert_eq!(state(&reg, &id), TaskState::Working);
        assert!(matches!(
            reg.reply(id.as_str(), &Viewer::Everyone, None, text("approve")),
            Err(ReplyRefusal::NotWaiting(TaskState::Working))
        ));
    }
}

/// What a journal was told, in order.
#[derive(Default)]
struct Told(Mutex<Vec<(String, u64, TaskState)>>);

impl Journal for Told {
    fn changed(&self, task: &Task) {
        let mut told = self.0.lock().unwrap();
        told.push((task.id.to_string(), task.seq, task.state));
    }
    fn forgotten(&self, id: &TaskId) {
        self.0
            .lock()
            .unwrap()
            .push((id.to_string(), 0, TaskState::Rejected));
    }
}

fn kept(id: &str, seq: u64, state: TaskState) -> Task {
    Task {
        id: TaskId::from_wire(id),
        context_id: "ctx_1".into(),
        owner: Owner::Session,
        state,
        status_text: None,
        changed_at: Millis(1_700_000_000_000 + seq as i64),
        seq,
        response: None,
        prompt: None,
        approval: None,
        residue: Vec::new(),
        murmur_metadata: Map::new(),
        input: None,
        held: 0,
    }
}

#[test]
fn restored_tasks_keep_their_places_and_the_live_ones_fail_saying_why() {
    let told = Arc::new(Told::default());
    let reg = Registry::new(1).journaled(told.clone());
    reg.restore(
        vec![
            kept("tsk_live", 5, TaskState::Working),
            kept("tsk_done", 2, TaskState::Completed),
            kept("tsk_asks", 4, TaskState::InputRequired),
        ],
        7,
        "the capsule restarted",
    );
    let everyone = Viewer::Everyone;
    // The live ones changed (failed) after everything kept: newer than the newest seen.
    let order: Vec<String> = reg
        .list(&all(), &everyone)
        .tasks
        .iter()
        .map(|t| t["id"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(order, ["tsk_live", "tsk_asks", "tsk_done"]);
    assert_eq!(
        *told.0.lock().unwrap(),
        [
            ("tsk_asks".to_owned(), 8, TaskState::Failed),
            ("tsk_live".to_owned(), 9, TaskState::Failed)
        ],
        "only the change is journaled: the rest is kept already"
    );
    assert_eq!(reg.newest(), 9);
    let failed: Value = serde_json::from_slice(&reg.get("tsk_live", &everyone).unwrap()).unwrap();
    assert_eq!(failed["status"]["state"], "TASK_STATE_FAILED");
    assert_eq!(
        failed["status"]["message"]["parts"][0]["text"],
        "the capsule restarted"
    );
    // A page token naming a kept position reads: positions go on past the store's newest.
    let token = page_token::encode(7, "tsk_x");
    assert_eq!(reg.decode_page_token(&token), Some(7));
}

#[test]
fn a_task_failed_as_its_supervisor_went_stays_failed_when_its_attempt_ends() {
    let reg = Registry::new(1);
    let id = id_of(reg.admit(None, Owner::Session, input()));
    let everyone = Viewer::Everyone;
    assert!(matches!(tokio_test_block(reg.next()), Some(Started { .. })));
    let ended = reg.fail_all("the supervisor went");
    assert_eq!(ended, [(id.clone(), TaskState::Working)]);
    reg.finish(&id, Outcome::CanceledEnded(None));
    let task: Value = serde_json::from_slice(&reg.get(id.as_str(), &everyone).unwrap()).unwrap();
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED");
    assert_eq!(
        task["status"]["message"]["parts"][0]["text"],
        "the supervisor went"
    );
}

fn tokio_test_block<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}
