//! Every event as it is written: its `event_type` and its keys, in order.

//! Each record byte for byte as the string-built trace wrote it before the enum, so
//! `mur trace show`, the end-to-end tests and anyone tailing the file read the same lines.

use super::*;

const AT: Millis = Millis(1_760_346_000_123);
const HEAD: &str = r#""session_id":"ses_1","timestamp":"2025-10-13T09:00:00.123Z""#;

fn tsk() -> TaskId {
    TaskId::from_wire("tsk_1")
}

/// Asserts `event` is written as `{"event_type":TYPE,<HEAD>,REST}` and a newline.
fn written(event: TraceEvent, event_type: &str, rest: &str) {
    let bytes = line(&event, &SessionId::from_wire("ses_1"), AT).unwrap();
    let text = String::from_utf8(bytes).unwrap();
    let sep = if rest.is_empty() { "" } else { "," };
    assert_eq!(
        text,
        format!("{{\"event_type\":\"{event_type}\",{HEAD}{sep}{rest}}}\n")
    );
}

#[test]
fn session_start() {
    written(
        TraceEvent::SessionStart {
            capsule: "worker".into(),
            version: "0.1.0".into(),
            pid: 42,
            url: "http://localhost:1".into(),
            workdir: "/w".into(),
            manifest: "/w/murmur.yaml".into(),
            containment: Some(Mode::Namespaces),
            walls: Some(Box::new(namespaces().walls())),
        },
        "session_start",
        r#""capsule":"worker","version":"0.1.0","pid":42,"url":"http://localhost:1","workdir":"/w","manifest":"/w/murmur.yaml","containment":"namespaces","walls":{"pid":"up","mount":"up","network":"up","files":"up","environment":"up"}"#,
    );
}

#[test]
fn a_path_that_is_not_utf8_is_written_lossily() {
    use std::os::unix::ffi::OsStrExt;
    let odd = PathBuf::from(std::ffi::OsStr::from_bytes(b"/w/\xff"));
    let event = TraceEvent::SessionStart {
        capsule: "c".into(),
        version: "1".into(),
        pid: 1,
        url: "u".into(),
        workdir: odd.clone(),
        manifest: odd,
        containment: None,
        walls: None,
    };
    let text = line(&event, &SessionId::from_wire("ses_1"), AT).unwrap();
    assert!(String::from_utf8(text)
        .unwrap()
        .contains(r#""workdir":"/w/�""#));
}

#[test]
fn session_end() {
    written(
        TraceEvent::SessionEnd {
            launch_task_state: Some(TaskState::Completed),
        },
        "session_end",
        r#""launch_task_state":"completed""#,
    );
    written(
        TraceEvent::SessionEnd {
            launch_task_state: None,
        },
        "session_end",
        r#""launch_task_state":null"#,
    );
}

#[test]
fn a2a_task_received() {
    written(
        TraceEvent::A2aTaskReceived {
            task_id: tsk(),
            context_id: "ctx_1".into(),
            message_id: Some("m1".into()),
            origin: Origin::Client,
            trust: Trust::Trusted,
        },
        "a2a_task_received",
        r#""task_id":"tsk_1","context_id":"ctx_1","message_id":"m1","origin":"client","trust":"trusted""#,
    );
    written(
        TraceEvent::A2aTaskReceived {
            task_id: tsk(),
            context_id: "ctx_1".into(),
            message_id: None,
            origin: Origin::Launch,
            trust: Trust::Trusted,
        },
        "a2a_task_received",
        r#""task_id":"tsk_1","context_id":"ctx_1","origin":"launch","trust":"trusted""#,
    );
    written(
        TraceEvent::A2aTaskReceived {
            task_id: tsk(),
            context_id: "ctx_1".into(),
            message_id: Some("msg_1".into()),
            origin: Origin::Peer,
            trust: Trust::Untrusted,
        },
        "a2a_task_received",
        r#""task_id":"tsk_1","context_id":"ctx_1","message_id":"msg_1","origin":"peer","trust":"untrusted""#,
    );
}

#[test]
fn task_start() {
    written(
        TraceEvent::TaskStart {
            task_id: tsk(),
            context_id: "ctx_1".into(),
            message_id: "m1".into(),
            reference_task_ids: vec!["tsk_0".into()],
            attachments: Vec::new(),
        },
        "task_start",
        r#""task_id":"tsk_1","context_id":"ctx_1","message_id":"m1","reference_task_ids":["tsk_0"],"attachments":[]"#,
    );
}

#[test]
fn task_failed() {
    written(
        TraceEvent::TaskFailed {
            task_id: tsk(),
            cause: "the harness exited with status 3".into(),
        },
        "task_failed",
        r#""task_id":"tsk_1","cause":"the harness exited with status 3""#,
    );
}

#[test]
fn task_canceled() {
    written(
        TraceEvent::canceled_in_queue(tsk()),
        "task_canceled",
        r#""task_id":"tsk_1","interrupted":"queue","in_flight":[]"#,
    );
    written(
        TraceEvent::canceled_in_harness(tsk(), true, Vec::new()),
        "task_canceled",
        r#""task_id":"tsk_1","interrupted":"harness","in_flight":[],"harness_killed":true"#,
    );
}

#[test]
fn task_end() {
    let ran = Ran {
        turns: 3,
        duration_ms: 1500,
    };
    written(
        TraceEvent::task_end(tsk(), EndStatus::Completed, Some(ran)),
        "task_end",
        r#""task_id":"tsk_1","status":"completed","exit_status":"completed","turns":3,"duration_ms":1500"#,
    );
    written(
        TraceEvent::task_end(tsk(), EndStatus::Failed, Some(ran)),
        "task_end",
        r#""task_id":"tsk_1","status":"failed","exit_status":"failed","turns":3,"duration_ms":1500"#,
    );
    written(
        TraceEvent::task_end(tsk(), EndStatus::Canceled, None),
        "task_end",
        r#""task_id":"tsk_1","status":"canceled","exit_status":"canceled""#,
    );
}

fn namespaces() -> crate::process::Containment {
    crate::process::Containment {
        mode: Mode::Namespaces,
        reason: "granted".into(),
        hidden: vec![],
    }
}

#[test]
fn harness_start() {
    let fallback = crate::process::Containment {
        mode: Mode::Fallback,
        reason: "asked for".into(),
        hidden: vec![],
    };
    written(
        TraceEvent::HarnessStart {
            task_id: tsk(),
            context_id: "ctx_1".into(),
            pid: 7,
            command: Some("claude".into()),
            session_mode: SessionMode::Resume,
            harness_session: Some("h1".into()),
            containment: Mode::Fallback,
            walls: Box::new(fallback.walls()),
        },
        "harness_start",
        r#""task_id":"tsk_1","context_id":"ctx_1","pid":7,"command":"claude","session_mode":"resume","harness_session":"h1","containment":"fallback","walls":{"pid":"missing: fallback mode, asked for","mount":"missing: fallback mode, asked for","network":"missing: fallback mode, asked for","files":"missing: fallback mode, asked for","environment":"up"}"#,
    );
    written(
        TraceEvent::HarnessStart {
            task_id: tsk(),
            context_id: "ctx_1".into(),
            pid: 7,
            command: None,
            session_mode: SessionMode::New,
            harness_session: None,
            containment: Mode::Namespaces,
            walls: Box::new(namespaces().walls()),
        },
        "harness_start",
        r#""task_id":"tsk_1","context_id":"ctx_1","pid":7,"command":null,"session_mode":"new","harness_session":null,"containment":"namespaces","walls":{"pid":"up","mount":"up","network":"up","files":"up","environment":"up"}"#,
    );
}

#[test]
fn harness_interrupt() {
    for (how, word, grace) in [
        (Interrupt::Sigint, "sigint", 10000),
        (Interrupt::Stdin(b"\x03".to_vec()), "stdin", 10000),
        (Interrupt::None, "none", 0),
    ] {
        written(
            TraceEvent::HarnessInterrupt {
                task_id: tsk(),
                pid: 7,
                interrupt: InterruptSent::from(&how),
                grace_ms: grace,
                request_id: None,
                fallback_for: None,
            },
            "harness_interrupt",
            &format!(r#""task_id":"tsk_1","pid":7,"interrupt":"{word}","grace_ms":{grace}"#),
        );
    }
}

#[test]
fn harness_interrupt_in_band_then_fallback() {
    written(
        TraceEvent::HarnessInterrupt {
            task_id: tsk(),
            pid: 7,
            interrupt: InterruptSent::from(&Interrupt::ControlRequest),
            grace_ms: 1000,
            request_id: Some("int_1".into()),
            fallback_for: None,
        },
        "harness_interrupt",
        r#""task_id":"tsk_1","pid":7,"interrupt":"control_request","grace_ms":1000,"request_id":"int_1""#,
    );
    written(
        TraceEvent::HarnessInterrupt {
            task_id: tsk(),
            pid: 7,
            interrupt: InterruptSent::Sigint,
            grace_ms: 10000,
            request_id: None,
            fallback_for: Some(InterruptSent::ControlRequest),
        },
        "harness_interrupt",
        r#""task_id":"tsk_1","pid":7,"interrupt":"sigint","grace_ms":10000,"fallback_for":"control_request""#,
    );
}

#[test]
fn harness_exit() {
    for (cause, word) in [
        (ExitCause::Exited, "exited"),
        (ExitCause::Canceled, "canceled"),
        (ExitCause::MaxTurns, "max_turns"),
        (ExitCause::EndedWithoutAnswer, "ended_without_answer"),
    ] {
        written(
            TraceEvent::HarnessExit {
                task_id: tsk(),
                pid: 7,
                cause,
                exit_code: None,
                signal: Some(9),
                killed: true,
                duration_ms: 12,
                harness_session: None,
            },
            "harness_exit",
            &format!(
                r#""task_id":"tsk_1","pid":7,"cause":"{word}","exit_code":null,"signal":9,"killed":true,"duration_ms":12,"harness_session":null"#
            ),
        );
    }
}

#[test]
fn harness_session_forgotten() {
    written(
        TraceEvent::HarnessSessionForgotten {
            context_id: "ctx_1".into(),
            harness_session: "h1".into(),
            requested_by: RequestedBy::A2a,
        },
        "harness_session_forgotten",
        r#""context_id":"ctx_1","harness_session":"h1","requested_by":"a2a""#,
    );
}

#[test]
fn tool_call() {
    written(
        TraceEvent::ToolCall {
            task_id: tsk(),
            call: Tool::RequestInput {
                question: "which file?".into(),
            },
        },
        "tool_call",
        r#""task_id":"tsk_1","tool":"request-input","question":"which file?""#,
    );
}

#[test]
fn capsule_died() {
    written(
        TraceEvent::CapsuleDied {
            formation: "review".into(),
            member: "coder".into(),
            exit_status: 137,
        },
        "capsule_died",
        r#""formation":"review","member":"coder","exit_status":137"#,
    );
}

#[test]
fn helper_tool_calls() {
    for (call, rest) in [
        (
            Tool::SendMessage {
                destination: "http://localhost:1".into(),
            },
            r#""tool":"send-message","destination":"http://localhost:1""#,
        ),
        (
            Tool::CallMember {
                member: "coder".into(),
            },
            r#""tool":"call-member","member":"coder""#,
        ),
        (
            Tool::EndWithoutAnswer {
                reason: "q gave no answer".into(),
            },
            r#""tool":"end-without-answer","reason":"q gave no answer""#,
        ),
    ] {
        written(
            TraceEvent::ToolCall {
                task_id: tsk(),
                call,
            },
            "tool_call",
            &format!(r#""task_id":"tsk_1",{rest}"#),
        );
    }
}

#[test]
fn a2a_send() {
    written(
        TraceEvent::A2aSend {
            peer_url: "localhost:52222".into(),
            message_id: "msg_1".into(),
            task_id: Some("tsk_9".into()),
            context_id: Some("ctx_9".into()),
            caller_task_id: tsk(),
        },
        "a2a_send",
        r#""peer_url":"localhost:52222","message_id":"msg_1","task_id":"tsk_9","context_id":"ctx_9","caller_task_id":"tsk_1""#,
    );
    written(
        TraceEvent::A2aSend {
            peer_url: "localhost:52222".into(),
            message_id: "msg_1".into(),
            task_id: None,
            context_id: None,
            caller_task_id: tsk(),
        },
        "a2a_send",
        r#""peer_url":"localhost:52222","message_id":"msg_1","task_id":null,"context_id":null,"caller_task_id":"tsk_1""#,
    );
}

#[test]
fn member_call_with_every_status() {
    for (status, word) in CALL_STATUSES {
        assert_eq!(status.as_str(), word);
        assert_eq!(CallStatus::parse(word), Some(status));
        written(
            TraceEvent::MemberCall {
                member: "coder".into(),
                status,
                caller_task_id: tsk(),
                task_id: Some("tsk_9".into()),
                context_id: None,
                duration_ms: 40,
                reason: Some("why".into()),
            },
            "member_call",
            &format!(
                r#""member":"coder","status":"{word}","caller_task_id":"tsk_1","task_id":"tsk_9","context_id":null,"duration_ms":40,"reason":"why""#
            ),
        );
    }
    assert_eq!(CallStatus::parse("timed-out"), None);
}

#[test]
fn network_refused() {
    written(
        TraceEvent::NetworkRefused {
            caller_task_id: tsk(),
            destination: "http://localhost:9".into(),
            reason: "localhost:9 is not in capabilities.network.allow".into(),
        },
        "network_refused",
        r#""caller_task_id":"tsk_1","destination":"http://localhost:9","reason":"localhost:9 is not in capabilities.network.allow""#,
    );
}

#[test]
fn trace_records_lost() {
    written(
        TraceEvent::TraceRecordsLost { lost: 12 },
        "trace_records_lost",
        r#""lost":12"#,
    );
}

fn dlg() -> DelegationId {
    DelegationId::from_wire("dlg_1")
}

#[test]
fn delegation_start() {
    written(
        TraceEvent::DelegationStart {
            task_id: tsk(),
            delegation_id: dlg(),
            capsule: "worker".into(),
            version: "0.1.0".into(),
            child_session_id: "ses_2".into(),
            child_workdir: "/r/ses_1/children/worker-0123456789abcdef".into(),
        },
        "delegation_start",
        r#""task_id":"tsk_1","delegation_id":"dlg_1","capsule":"worker","version":"0.1.0","child_session_id":"ses_2","child_workdir":"/r/ses_1/children/worker-0123456789abcdef""#,
    );
}

#[test]
fn delegation_end() {
    written(
        TraceEvent::DelegationEnd {
            task_id: tsk(),
            delegation_id: dlg(),
            capsule: "worker".into(),
            state: DelegationState::Ended,
            duration_ms: 1200,
        },
        "delegation_end",
        r#""task_id":"tsk_1","delegation_id":"dlg_1","capsule":"worker","state":"ended","duration_ms":1200"#,
    );
}

#[test]
fn completion_received() {
    written(
        TraceEvent::CompletionReceived {
            task_id: tsk(),
            delegation_id: dlg(),
            state: DelegationState::Completed,
        },
        "completion_received",
        r#""task_id":"tsk_1","delegation_id":"dlg_1","state":"completed""#,
    );
}

#[test]
fn delivery_error() {
    written(
        TraceEvent::DeliveryError {
            delegation_id: dlg(),
            parent_url: "localhost:41873".into(),
            reason:
                "JSON-RPC error -31002: no task in this session is waiting for delegation dlg_1"
                    .into(),
        },
        "delivery_error",
        r#""delegation_id":"dlg_1","parent_url":"localhost:41873","reason":"JSON-RPC error -31002: no task in this session is waiting for delegation dlg_1""#,
    );
}

#[test]
fn delegation_states_round_trip() {
    for w in [
        "completed",
        "failed",
        "canceled",
        "rejected",
        "ended",
        "lost",
    ] {
        assert_eq!(DelegationState::parse(w).map(|s| s.as_str()), Some(w));
    }
    assert_eq!(DelegationState::parse("TASK_STATE_COMPLETED"), None);
}

#[test]
fn delegate_task_tool_call() {
    written(
        TraceEvent::ToolCall {
            task_id: tsk(),
            call: Tool::DelegateTask {
                capsule: "worker".into(),
            },
        },
        "tool_call",
        r#""task_id":"tsk_1","tool":"delegate-task","capsule":"worker""#,
    );
}

#[test]
fn shell_records() {
    let wrk = || crate::ids::WorkId::from_wire("wrk_1");
    written(
        TraceEvent::ShellStart {
            task_id: tsk(),
            work_id: wrk(),
            pid: 7,
            binary: "/usr/bin/bash".into(),
            command: "cargo test".into(),
            background: false,
        },
        "shell_start",
        r#""task_id":"tsk_1","work_id":"wrk_1","pid":7,"binary":"/usr/bin/bash","command":"cargo test","background":false"#,
    );
    written(
        TraceEvent::ShellBackground {
            task_id: tsk(),
            work_id: wrk(),
            why: Backgrounded::Waited,
        },
        "shell_background",
        r#""task_id":"tsk_1","work_id":"wrk_1","why":"waited""#,
    );
    written(
        TraceEvent::ShellEnd {
            task_id: tsk(),
            work_id: wrk(),
            exit_code: None,
            signal: Some(9),
            killed: true,
            duration_ms: 12,
            output_bytes: 3,
        },
        "shell_end",
        r#""task_id":"tsk_1","work_id":"wrk_1","exit_code":null,"signal":9,"killed":true,"duration_ms":12,"output_bytes":3"#,
    );
    written(
        TraceEvent::ShellRefused {
            task_id: tsk(),
            command: "rm -rf /".into(),
            reason: "command_not_allowed",
        },
        "shell_refused",
        r#""task_id":"tsk_1","command":"rm -rf /","reason":"command_not_allowed""#,
    );
}
