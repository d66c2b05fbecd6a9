//! `metadata.murmur.noAnswerBelow` (agent-card.md "Task metadata"): on a terminal task whose
//! member calls gave no answer, each such member, then each member those reported below them,
//! each once, at most 8. A member's own task carries what it reported below it.

use serde_json::{json, Value};

use crate::trace::CallStatus;

/// At most this many entries.
pub const MAX: usize = 8;

/// One member call that gave no answer, with what that member's task reported below it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoAnswer {
    pub member: String,
    /// Never [`CallStatus::Completed`].
    pub status: CallStatus,
    pub reported: Vec<(String, CallStatus)>,
}

/// What a member's task reported below it: the `{member, status}` entries of its
/// `metadata.murmur.noAnswerBelow`. An entry that is not one (no member, a status that is not a
/// member_call status other than completed) is skipped: a peer's metadata is read, not trusted.
pub fn reported_by(task: &Value) -> Vec<(String, CallStatus)> {
    let Some(list) = task
        .pointer("/metadata/murmur/noAnswerBelow")
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|e| {
            let member = e.get("member")?.as_str()?;
            let status = CallStatus::parse(e.get("status")?.as_str()?)?;
            let ok = !member.is_empty() && status != CallStatus::Completed;
            ok.then(|| (member.to_owned(), status))
        })
        .take(MAX)
        .collect()
}

/// The list, in the spec's order: the members that gave no answer (in call order), then what
/// they reported below them; each member once (its first entry), at most [`MAX`].
pub fn no_answer_below(calls: &[NoAnswer]) -> Vec<Value> {
    let direct = calls.iter().map(|c| (c.member.as_str(), c.status));
    let reported = calls
        .iter()
        .flat_map(|c| c.reported.iter().map(|(m, s)| (m.as_str(), *s)));
    let mut seen: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for (member, status) in direct.chain(reported) {
        if out.len() == MAX {
            break;
        }
        if seen.contains(&member) {
            continue;
        }
        seen.push(member);
        out.push(json!({"member": member, "status": status.as_str()}));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use CallStatus::{Canceled, Failed, Rejected, TimedOut, Unreachable};

    fn call(member: &str, status: CallStatus, reported: &[(&str, CallStatus)]) -> NoAnswer {
        NoAnswer {
            member: member.into(),
            status,
            reported: reported.iter().map(|(m, s)| (m.to_string(), *s)).collect(),
        }
    }

    #[test]
    fn members_first_then_what_they_reported_each_once() {
        let calls = [
            call("q", TimedOut, &[("r", Failed), ("s", Unreachable)]),
            call(
                "p",
                CallStatus::NoAnswer,
                &[("q", Canceled), ("t", Rejected)],
            ),
            call("q", Failed, &[]),
        ];
        assert_eq!(
            no_answer_below(&calls),
            vec![
                json!({"member": "q", "status": "timed_out"}),
                json!({"member": "p", "status": "no_answer"}),
                json!({"member": "r", "status": "failed"}),
                json!({"member": "s", "status": "unreachable"}),
                json!({"member": "t", "status": "rejected"}),
            ]
        );
        assert!(no_answer_below(&[]).is_empty());
    }

    #[test]
    fn at_most_eight() {
        let reported: Vec<(String, CallStatus)> =
            (0..20).map(|i| (format!("m{i}"), Failed)).collect();
        let calls = [NoAnswer {
            member: "a".into(),
            status: Canceled,
            reported,
        }];
        let list = no_answer_below(&calls);
        assert_eq!(list.len(), MAX);
        assert_eq!(list[0], json!({"member": "a", "status": "canceled"}));
        assert_eq!(list[7], json!({"member": "m6", "status": "failed"}));
    }

    #[test]
    fn a_peers_report_is_read_strictly() {
        let task = json!({"metadata": {"murmur": {"noAnswerBelow": [
            {"member": "r", "status": "timed_out"},
            {"member": "s", "status": "completed"},
            {"member": "t", "status": "exploded"},
            {"member": 7, "status": "failed"},
            {"status": "failed"},
            "u",
            {"member": "", "status": "failed"},
            {"member": "v", "status": "no_answer", "extra": 1}
        ]}}});
        assert_eq!(
            reported_by(&task),
            vec![
                ("r".to_owned(), TimedOut),
                ("v".to_owned(), CallStatus::NoAnswer)
            ]
        );
        assert!(reported_by(&json!({"metadata": {"murmur": {"noAnswerBelow": 3}}})).is_empty());
        assert!(reported_by(&json!({})).is_empty());
    }
}
