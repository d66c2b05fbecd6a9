use serde_json::json;

use super::*;

fn rec(session: &str, member: &str, pid: u32, port: u16) -> RunningCapsule {
    serde_json::from_value(json!({
        "pid": pid, "supervisor_pid": 1, "url": format!("http://localhost:{port}"),
        "name": "worker", "version": "0.1.0", "session_id": session,
        "records": "/nonexistent", "formation": "split", "member": member,
        "started_at": "2026-12-01T10:00:00.000Z",
    }))
    .unwrap()
}

fn status(task: &str, state: &str, ts: &str) -> Value {
    json!({"statusUpdate": {"taskId": task, "contextId": "ctx_1",
        "status": {"state": state, "timestamp": ts}}})
}

fn board() -> Board {
    let mut b = Board::new(Scope::Everything);
    let added = b.set_records(vec![
        rec("ses_b", "left", 11, 4002),
        rec("ses_a", "lead", 10, 4001),
    ]);
    assert_eq!(added.added.len(), 2);
    b
}

#[test]
fn a_replay_after_a_task_list_keeps_the_task_ended_and_its_whole_span() {
    let mut b = board();
    b.apply_task("ses_a", &json!({"id": "tsk_1", "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-12-01T10:00:05.000Z"}}));
    b.apply_event(
        "ses_a",
        &status("tsk_1", "TASK_STATE_SUBMITTED", "2026-12-01T10:00:01.000Z"),
    );
    b.apply_event(
        "ses_a",
        &status("tsk_1", "TASK_STATE_WORKING", "2026-12-01T10:00:02.000Z"),
    );
    let t = &b.session("ses_a").unwrap().tasks[0];
    assert_eq!(t.state, TaskState::Completed);
    assert_eq!(t.changed_ms.unwrap() - t.since_ms.unwrap(), 4000);
}

#[test]
fn frames_and_the_answer_make_the_tail_and_counts_follow_states() {
    let mut b = board();
    let uri = capsule::stream::STREAM_URI;
    b.apply_event(
        "ses_b",
        &status("tsk_2", "TASK_STATE_SUBMITTED", "2026-12-01T10:00:01.000Z"),
    );
    assert_eq!(b.session("ses_b").unwrap().queued(), 1);
    b.apply_event(
        "ses_b",
        &status("tsk_2", "TASK_STATE_WORKING", "2026-12-01T10:00:01.500Z"),
    );
    b.apply_event(
        "ses_b",
        &json!({"message": {"taskId": "tsk_2", "parts": [{"text": "thinking about it\nstill"}],
        "metadata": {uri: {"frame": "text", "turn": 2}}}}),
    );
    b.apply_event("ses_b", &json!({"artifactUpdate": {"taskId": "tsk_2", "artifact": {"parts": [{"text": "the answer"}]}}}));
    let v = b.session("ses_b").unwrap();
    assert_eq!((v.queued(), v.running()), (0, 1));
    let t = &v.tasks[0];
    assert_eq!(t.turns, 2);
    assert_eq!(t.last_text, "still");
    assert_eq!(t.tail, ["thinking about it", "still", "the answer"]);
}

#[test]
fn a_call_is_in_flight_from_its_send_to_its_end() {
    let mut b = board();
    b.apply_trace(
        "ses_a",
        &json!({"event_type": "a2a_send", "peer_url": "http://localhost:4002",
        "caller_task_id": "tsk_lead", "task_id": "tsk_w"}),
    );
    let calls = &b.session("ses_a").unwrap().calls;
    assert_eq!(
        calls,
        &[Call {
            caller_task: "tsk_lead".into(),
            callee: "left".into(),
            callee_task: Some("tsk_w".into())
        }]
    );
    b.apply_trace(
        "ses_a",
        &json!({"event_type": "member_call", "member": "left",
        "caller_task_id": "tsk_lead", "task_id": "tsk_w", "status": "completed"}),
    );
    assert!(b.session("ses_a").unwrap().calls.is_empty());
}

#[test]
fn refusals_and_failures_are_alerts_and_only_the_newest_are_kept() {
    let mut b = board();
    for i in 0..ALERTS_KEPT + 5 {
        b.apply_trace(
            "ses_b",
            &json!({"event_type": "egress_denied", "timestamp": "2026-12-01T10:00:07.123Z",
            "task_id": format!("tsk_{i}"), "host": "example.com", "port": 443}),
        );
    }
    b.apply_trace(
        "ses_b",
        &json!({"event_type": "task_start", "task_id": "tsk_x"}),
    );
    assert_eq!(b.alerts.len(), ALERTS_KEPT);
    let last = b.alerts.back().unwrap();
    assert_eq!(
        (last.at.as_str(), last.what.as_str()),
        ("10:00:07", "egress refused example.com:443")
    );
}

#[test]
fn an_ended_session_stays_in_view_and_a_restart_is_told() {
    let mut b = board();
    b.apply_event(
        "ses_b",
        &status("tsk_2", "TASK_STATE_WORKING", "2026-12-01T10:00:01.000Z"),
    );
    let changed = b.set_records(vec![rec("ses_b", "left", 12, 4002)]);
    assert_eq!(changed.removed, ["ses_a"]);
    assert_eq!(changed.restarted.len(), 1);
    assert_eq!(b.session("ses_a").unwrap().link, Link::Ended);
    b.set_link("ses_a", Link::Live);
    assert_eq!(
        b.session("ses_a").unwrap().link,
        Link::Ended,
        "an ended session stays ended"
    );
    b.forget_tasks("ses_b");
    assert!(
        b.session("ses_b").unwrap().tasks.is_empty(),
        "a restarted capsule holds none of its old tasks"
    );
    let labels: Vec<String> = b
        .entries
        .iter()
        .map(|e| match e {
            Entry::Heading(h) => h.clone(),
            Entry::Capsule(p) => format!("{} {}", p.n, p.label),
        })
        .collect();
    assert_eq!(
        labels,
        ["formation split", "1 └─ left", "ended", "0 ├─ lead"]
    );
}

#[test]
fn a_session_keeps_at_most_its_newest_tasks_and_live_ones_first() {
    let mut b = board();
    b.apply_event(
        "ses_b",
        &status("tsk_live", "TASK_STATE_WORKING", "2026-12-01T10:00:00.000Z"),
    );
    for i in 0..TASKS_KEPT + 3 {
        b.apply_event(
            "ses_b",
            &status(
                &format!("tsk_{i}"),
                "TASK_STATE_COMPLETED",
                "2026-12-01T10:00:01.000Z",
            ),
        );
    }
    let tasks = &b.session("ses_b").unwrap().tasks;
    assert_eq!(tasks.len(), TASKS_KEPT);
    assert!(tasks.iter().any(|t| t.id == "tsk_live"));
}

#[test]
fn a_model_call_adds_its_tokens_and_its_turn() {
    let mut b = board();
    for (turn, i, o) in [(1, 120, 30), (2, 200, 45)] {
        b.apply_trace(
            "ses_a",
            &json!({"event_type": "inference", "task_id": "tsk_h", "turn": turn,
            "input_tokens": i, "output_tokens": o}),
        );
    }
    let t = &b.session("ses_a").unwrap().tasks[0];
    assert_eq!((t.tokens, t.turns), (Some((320, 75)), 2));
    b.apply_trace(
        "ses_a",
        &json!({"event_type": "task_end", "task_id": "tsk_h", "status": "failed", "turns": 3}),
    );
    let t = &b.session("ses_a").unwrap().tasks[0];
    assert_eq!((t.state, t.turns), (TaskState::Failed, 3));
}

#[test]
fn the_spend_of_each_member_and_of_its_formation_against_the_ceiling() {
    let mut b = board();
    for (session, counted, usd) in [("ses_a", 1500, 0.01), ("ses_b", 1500, 0.02)] {
        b.apply_trace(
            session,
            &json!({"event_type": "inference", "task_id": "tsk_x", "turn": 1,
            "input_tokens": 1000, "output_tokens": 500, "counted_tokens": counted, "usd": usd}),
        );
    }
    b.sessions.get_mut("ses_a").unwrap().ceiling = Some(crate::records::RosterSpend {
        max_tokens: Some(2500),
        max_usd: None,
    });
    b.apply_trace(
        "ses_b",
        &json!({"event_type": "spend_ceiling", "task_id": "tsk_y", "scope": "formation",
        "key": "spend.max_tokens of the formation split", "used": "3000 tokens",
        "ceiling": "2500 tokens", "timestamp": "2026-12-01T10:00:09.000Z"}),
    );
    let a = b.session("ses_a").unwrap();
    let member_b = b.session("ses_b").unwrap();
    assert_eq!(
        (a.spent.tokens, a.spent.stopped, member_b.spent.stopped),
        (1500, false, true)
    );
    assert_eq!(
        crate::top::cells::spend(&b),
        [(
            "formation split: 3000 tokens, $0.0300 of 2500 tokens (ceiling reached)".to_owned(),
            true
        )]
    );
    assert_eq!(
        b.alerts.back().map(|a| a.what.as_str()),
        Some(
            "spend ceiling spend.max_tokens of the formation split (formation): used 3000 \
             tokens, ceiling 2500 tokens"
        )
    );
}
