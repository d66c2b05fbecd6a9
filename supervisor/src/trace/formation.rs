//! `mur trace show --formation`: the formation of a member, then every member's events merged
//! by time, so a call from one member to another reads in the order it happened.

use std::path::Path;

use serde_json::Value;

use super::{detail, parse, rule, s};
use crate::error::{CliError, CliResult, Code};
use crate::records;
use crate::terminal;

/// One member of the formation being shown: its roster name, its session, and its events
/// (`None` when its trace cannot be read: it never started, or its folder was removed).
struct MemberTrace {
    name: String,
    session: String,
    events: Option<Vec<Value>>,
}

/// The formation of the member whose trace is `trace`: its `formation.json` names every
/// member's session, whose folders are siblings of this one.
pub fn view(trace: &Path) -> CliResult<String> {
    let dir = trace.parent().unwrap_or(Path::new("."));
    let session = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string());
    let roster = match records::roster(dir) {
        Ok(Some(roster)) => roster,
        Ok(None) => return Err(not_a_member(&session)),
        Err(why) => {
            return Err(CliError::new(
                Code::NotAFormationMember,
                format!("cannot read the formation of session {session}: {why}"),
                "`mur run` writes formation.json into each member's session folder; without it, show one member at a time with `mur trace show ADDRESS`",
            ))
        }
    };
    let siblings = dir.parent().unwrap_or(Path::new("."));
    let members = roster
        .members()
        .into_iter()
        .map(|(name, session)| {
            let events = is_session_id(&session)
                .then(|| std::fs::read_to_string(siblings.join(&session).join("trace.jsonl")))
                .and_then(Result::ok)
                .map(|text| parse(&text));
            MemberTrace {
                name,
                session,
                events,
            }
        })
        .collect::<Vec<_>>();
    Ok(render_formation(&roster, &members))
}

fn not_a_member(session: &str) -> CliError {
    CliError::new(
        Code::NotAFormationMember,
        format!("session {session} is not a formation member: it was launched as a lone capsule"),
        "--formation needs the session of a formation member (`mur run` prints each as `member NAME: … session ses_…`); drop --formation to show this session's own trace",
    )
}

/// A roster names sessions as `mur run` minted them; anything else (a path) is not followed.
fn is_session_id(s: &str) -> bool {
    s.starts_with("ses_") && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The width of the event-type column: the longest common type (`a2a_task_received`).
const TYPE_WIDTH: usize = 17;

/// The formation, its members, then every member's events merged by timestamp. The sort is
/// stable: events stamped in the same millisecond keep roster order, and each member's own
/// events keep the order of its file. Times are UTC, as the trace records them; a rule names
/// the date, again whenever it changes.
fn render_formation(roster: &records::Roster, members: &[MemberTrace]) -> String {
    let mut out = String::new();
    out.push_str(&rule("Formation"));
    out.push('\n');
    out.push_str(&format!(
        "formation:  {} {}\n",
        terminal::field(&roster.formation),
        terminal::field(&roster.version)
    ));
    out.push_str(&format!("entry:      {}\n", terminal::field(&roster.entry)));
    // The roster's names, as they are shown: one line each.
    let names: Vec<String> = members
        .iter()
        .map(|m| terminal::field(&m.name).into_owned())
        .collect();
    let width = names.iter().map(|n| n.chars().count()).max();
    let width = width.unwrap_or(0);
    for (m, name) in members.iter().zip(&names) {
        let missing = if m.events.is_none() {
            "  (no trace)"
        } else {
            ""
        };
        out.push_str(&format!(
            "member:     {name:<width$}  {}{missing}\n",
            terminal::field(&m.session)
        ));
    }
    let mut merged: Vec<(&str, &str, &Value)> = members
        .iter()
        .zip(&names)
        .flat_map(|(m, name)| {
            m.events
                .iter()
                .flatten()
                .map(move |e| (s(e, "timestamp"), name.as_str(), e))
        })
        .collect();
    merged.sort_by(|a, b| a.0.cmp(b.0));
    if merged.is_empty() {
        out.push_str(&rule("Events"));
        out.push_str("\n(no events)\n");
        return out;
    }
    let mut date = None;
    for (ts, name, e) in merged {
        let (day, time) = split_timestamp(ts);
        if date != Some(day) {
            let title = match date {
                None => format!("Events, {day} UTC"),
                Some(_) => format!("{day} UTC"),
            };
            out.push_str(&rule(&title));
            out.push('\n');
            date = Some(day);
        }
        let line = format!(
            "{time:<12}  {name:<width$}  {:<TYPE_WIDTH$}  {}",
            s(e, "event_type"),
            detail(e)
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `2026-11-30T15:53:01.123Z` → (`2026-11-30`, `15:53:01.123`); anything else is shown whole.
fn split_timestamp(ts: &str) -> (&str, &str) {
    match (ts.get(..10), ts.get(11..23)) {
        (Some(day), Some(time)) if ts.len() == 24 && ts.ends_with('Z') => (day, time),
        _ => ("(no date)", ts),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn roster() -> records::Roster {
        serde_json::from_value(json!({
            "formation": "review", "version": "0.1.0", "member": "lead", "entry": "lead",
            "members": {"lead": "ses_b", "coder": "ses_a", "reviewer": "ses_c"},
        }))
        .unwrap()
    }

    fn event(ts: &str, kind: &str, task: &str) -> Value {
        json!({"event_type": kind, "session_id": "ses_x", "timestamp": ts, "task_id": task})
    }

    fn member(name: &str, session: &str, events: Option<Vec<Value>>) -> MemberTrace {
        MemberTrace {
            name: name.into(),
            session: session.into(),
            events,
        }
    }

    #[test]
    fn events_interleave_by_time_and_ties_keep_roster_then_file_order() {
        let members = [
            member(
                "lead",
                "ses_b",
                Some(vec![
                    event("2026-11-30T15:53:01.100Z", "task_start", "tsk_1"),
                    event("2026-11-30T15:53:01.300Z", "task_end", "tsk_1"),
                ]),
            ),
            member(
                "coder",
                "ses_a",
                Some(vec![
                    event("2026-11-30T15:53:01.100Z", "task_start", "tsk_2"),
                    event("2026-11-30T15:53:01.200Z", "a2a_task_received", "tsk_3"),
                    event("2026-11-30T15:53:01.200Z", "task_start", "tsk_3"),
                ]),
            ),
            member("reviewer", "ses_c", None),
        ];
        let out = render_formation(&roster(), &members);
        let expected = "\
── Formation ─────────────────────────────────────
formation:  review 0.1.0
entry:      lead
member:     lead      ses_b
member:     coder     ses_a
member:     reviewer  ses_c  (no trace)
── Events, 2026-11-30 UTC ────────────────────────
15:53:01.100  lead      task_start         tsk_1
15:53:01.100  coder     task_start         tsk_2
15:53:01.200  coder     a2a_task_received  tsk_3
15:53:01.200  coder     task_start         tsk_3
15:53:01.300  lead      task_end           tsk_1
";
        assert_eq!(out, expected);
    }

    #[test]
    fn a_new_day_gets_its_own_rule_and_unknown_events_show_their_fields() {
        let mut call = event("2026-12-01T00:00:00.001Z", "member_call", "tsk_9");
        call["member"] = json!("coder");
        call["status"] = json!("completed");
        call["answer"] = json!("x".repeat(80));
        let members = [member(
            "lead",
            "ses_b",
            Some(vec![
                event("2026-11-30T23:59:59.999Z", "task_start", "tsk_9"),
                call,
            ]),
        )];
        let out = render_formation(&roster(), &members);
        assert!(
            out.contains("── 2026-12-01 UTC ──"),
            "a rule names the new day: {out}"
        );
        let last = out.lines().last().unwrap();
        assert!(
            last.starts_with("00:00:00.001  lead  member_call        tsk_9  member=coder  status=completed  answer=xxx")
                && last.ends_with("x…"),
            "{last}"
        );
    }

    #[test]
    fn names_from_the_roster_and_the_records_are_shown_on_their_own_lines() {
        use crate::terminal::{assert_forged_shown, FORGED};
        let forged: records::Roster = serde_json::from_value(json!({
            "formation": FORGED, "version": FORGED, "member": "lead", "entry": FORGED,
            "members": {FORGED: FORGED},
        }))
        .unwrap();
        let text = format!(
            "{}\n",
            json!({"event_type": "egress_denied", "timestamp": "2026-11-30T15:53:01.100Z", "task_id": FORGED, "host": FORGED, "port": 1})
        );
        let members = [member(FORGED, FORGED, Some(parse(&text)))];
        let out = render_formation(&forged, &members);
        assert_forged_shown(&out);
        assert_eq!(out.lines().count(), 6, "{out}");
    }

    #[test]
    fn a_roster_never_leads_outside_the_records() {
        assert!(is_session_id("ses_01a22d2adc1377bb9510ba410a41c065"));
        assert!(!is_session_id("../../etc"));
        assert!(!is_session_id("ses_../x"));
    }
}
