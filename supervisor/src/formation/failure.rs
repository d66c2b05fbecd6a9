//! A member that died unexpectedly (DESIGN §7): said on stderr, and written into its own trace
//! — each task it had taken and not ended gets `task_failed` and `task_end` (failed), then one
//! `capsule_died` record, and `member_restarted` when its formation starts it again — so the
//! member's trace tells how each of its runs really ended.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use capsule::ids::{SessionId, TaskId};
use capsule::telemetry::{keys, KeyValue, Kind, Span};
use capsule::trace::{EndStatus, Trace, TraceEvent};

/// The cause a task of a dead member is failed with.
pub const DIED: &str = "the capsule died before the task ended";

/// The tasks a trace shows taken (`a2a_task_received`) and never ended (`task_end`).
fn unfinished(trace: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(trace).unwrap_or_default();
    let mut taken = Vec::new();
    let mut ended = BTreeSet::new();
    for record in text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        let task = record["task_id"].as_str().unwrap_or("").to_owned();
        match record["event_type"].as_str() {
            Some("a2a_task_received") if !taken.contains(&task) => taken.push(task),
            Some("task_end") => {
                ended.insert(task);
            }
            _ => {}
        }
    }
    taken.retain(|t| !t.is_empty() && !ended.contains(t));
    taken
}

/// Writes the member's ending into its trace (in `records`), and answers how many tasks it
/// failed.
pub async fn record(
    records: &Path,
    session_id: &str,
    formation: &str,
    member: &str,
    exit_status: i32,
) -> usize {
    let left = unfinished(&records.join(capsule::trace::FILE_NAME));
    let Ok(trace) = Trace::open(records, SessionId::from_wire(session_id)) else {
        return 0;
    };
    for task in &left {
        let task_id = TaskId::from_wire(task);
        trace.event(TraceEvent::TaskFailed {
            task_id: task_id.clone(),
            cause: DIED.to_owned(),
        });
        trace.event(TraceEvent::task_end(task_id, EndStatus::Failed, None));
    }
    trace.event(TraceEvent::CapsuleDied {
        formation: formation.to_owned(),
        member: member.to_owned(),
        exit_status,
    });
    trace.close().await;
    left.len()
}

/// Writes a member's restart into its trace: the record after the `capsule_died` of the run
/// that ended, and a span that says so (docs/telemetry.md), exported when `mur run` exports.
pub async fn restarted(records: &Path, session_id: &str, event: TraceEvent) {
    let Ok(trace) = Trace::open(records, SessionId::from_wire(session_id)) else {
        return;
    };
    if let TraceEvent::MemberRestarted {
        formation,
        member,
        attempt,
        backoff_ms,
        exit_status,
    } = &event
    {
        let mut span = Span::start(format!("restart {member}"), Kind::Internal, None);
        span.set(keys::FORMATION, formation.clone());
        span.set(keys::MEMBER, member.clone());
        span.set(keys::SESSION_ID, session_id.to_owned());
        span.event(
            keys::EV_RESTARTED,
            vec![
                KeyValue::new("murmur.restart.attempt", i64::from(*attempt)),
                KeyValue::new("murmur.restart.backoff_ms", *backoff_ms as i64),
                KeyValue::new(keys::EXIT_CODE, i64::from(*exit_status)),
            ],
        );
        span.fail(
            "capsule_died",
            format!("member {member} exited with status {exit_status}; restart {attempt}"),
        );
        span.end(&trace);
    }
    trace.event(event);
    trace.close().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unfinished_tasks_are_the_ones_taken_and_not_ended() {
        let dir = std::env::temp_dir().join(format!("murmur-failure-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("trace.jsonl");
        std::fs::write(
            &path,
            [
                r#"{"event_type":"a2a_task_received","task_id":"tsk_a"}"#,
                r#"{"event_type":"a2a_task_received","task_id":"tsk_b"}"#,
                r#"{"event_type":"task_end","task_id":"tsk_a"}"#,
                r#"{"event_type":"a2a_task_received","task_id":"tsk_c"}"#,
                "not json",
            ]
            .join("\n"),
        )
        .unwrap();
        assert_eq!(unfinished(&path), vec!["tsk_b", "tsk_c"]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
