//! Ending work from outside a session, as `mur cancel`, `mur stop` and `mur top` do it:
//! CancelTask with its residue, murmur.StopSession for the account of what a session leaves
//! running, then SIGTERM to the launch, which stops the capsule and sweeps everything it
//! started. Each answers the lines the user reads, so the CLI and the live view say the same.
//!
//! A formation member is stopped with its whole formation: its members share one `mur run`, and
//! that launch can only end whole (DESIGN §3). Every member gives its account first, under a
//! `member NAME: session ID` line, so what the formation leaves running is read while every
//! capsule can still be asked; then the shared supervisor is signalled, and the stop returns
//! once every member's process is gone.

use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};

use crate::client;
use crate::error::{CliError, CliResult, Code};
use crate::records::{self, RunningCapsule};
use crate::terminal::field;

/// One line of a stop's account: what the user reads, or a warning that goes to stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Said {
    Line(String),
    Warning(String),
}

/// A door's JSON-RPC error as a CLI error; its message is the door's, shown, never obeyed.
pub fn refused(url: &str, e: &Value) -> CliError {
    CliError::new(
        Code::Refused,
        format!(
            "the door at {} answered {}: {}",
            field(url),
            e.get("code").and_then(Value::as_i64).unwrap_or(0),
            field(e.get("message").and_then(Value::as_str).unwrap_or(""))
        ),
        "see the error codes under Errors in the agent card reference",
    )
}

/// `running:` / `ended:` lines for residue items (detached shells run on; delegations ended).
/// Every value is the door's (a command its harness ran), one visible line each.
pub fn residue_lines(items: &[Value]) -> Vec<String> {
    items
        .iter()
        .map(|item| {
            let s = |k: &str| field(item.get(k).and_then(Value::as_str).unwrap_or("")).into_owned();
            match s("kind").as_str() {
                "detached_shell" => format!(
                    "running: {} ({}: {})",
                    s("command"),
                    s("work_id"),
                    s("binary")
                ),
                "delegation" => format!(
                    "ended: {} {} ({}, session {})",
                    s("capsule"),
                    s("version"),
                    s("delegation_id"),
                    s("child_session_id")
                ),
                other => format!("residue: {other} {}", field(&item.to_string())),
            }
        })
        .collect()
}

/// CancelTask on `task`, as the lines `mur cancel` prints: `canceled: ID` and the residue, or
/// `nothing to cancel: …` for a task that already ended.
pub async fn cancel(rec: &RunningCapsule, task: &str) -> CliResult<Vec<String>> {
    let door = client::DoorRef::of(rec);
    match client::rpc(&door, "CancelTask", json!({"id": task})).await? {
        Ok(t) => {
            let mut lines = vec![format!(
                "canceled: {}",
                field(t.get("id").and_then(Value::as_str).unwrap_or(task))
            )];
            let items: Vec<Value> = t
                .get("artifacts")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|a| a.get("artifactId").and_then(Value::as_str) == Some("residue"))
                .flat_map(|a| {
                    a.get("parts")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default()
                })
                .filter_map(|p| p.get("data").cloned())
                .collect();
            lines.extend(residue_lines(&items));
            Ok(lines)
        }
        Err(e) if e.get("code").and_then(Value::as_i64) == Some(-32002) => {
            let state = e
                .pointer("/data/0/metadata/state")
                .and_then(Value::as_str)
                .unwrap_or("ended");
            Ok(vec![format!(
                "nothing to cancel: task {} is already {}",
                field(task),
                field(state)
            )])
        }
        Err(e) => Err(refused(&rec.url, &e)),
    }
}

/// How long the launch has to end after SIGTERM (its own stop is 5 s of accounts, 10 s of
/// grace, then SIGKILL and a sweep).
const ENDS_WITHIN: Duration = Duration::from_secs(30);
/// How long each formation member has to give its account; one that hangs must not keep the
/// others running.
const ACCOUNT_WITHIN: Duration = Duration::from_secs(30);

/// Stops `rec`'s session (its whole formation for a member), telling `say` each line as it is
/// known; returns once every process it stopped is gone.
pub async fn stop(rec: &RunningCapsule, mut say: impl FnMut(Said)) -> CliResult<()> {
    if rec.formation.is_some() {
        return stop_formation(records::launch_of(rec, &records::running()), say).await;
    }
    for line in account(rec).await? {
        say(Said::Line(line));
    }
    // A sub-capsule is stopped alone (its parent's delegation then ends with it); anything
    // else by its launch, which ends everything it started.
    let target = if rec.supervisor_pid != 0 && rec.parent.is_none() {
        rec.supervisor_pid
    } else {
        rec.pid
    };
    signal_term(target);
    // Return once the launch has ended, so nothing it started is left when we do.
    wait_gone(&[target]).await;
    if records::process_running(rec.pid) {
        return Err(not_ended(&[rec]));
    }
    say(Said::Line(format!("stopped: {}", field(&rec.session_id))));
    Ok(())
}

/// murmur.StopSession on one session, as the lines `mur stop` prints: `canceled:` per task (or
/// `canceled: nothing was running`), then `running:` / `ended:` per residue item.
async fn account(rec: &RunningCapsule) -> CliResult<Vec<String>> {
    let door = client::DoorRef::of(rec);
    let answer = client::rpc(&door, "murmur.StopSession", json!({})).await?;
    let result = answer.map_err(|e| refused(&rec.url, &e))?;
    let canceled: Vec<&str> = result
        .get("canceled")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut lines = Vec::new();
    if canceled.is_empty() {
        lines.push("canceled: nothing was running".to_owned());
    }
    lines.extend(canceled.iter().map(|id| format!("canceled: {}", field(id))));
    let residue = result
        .get("residue")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    lines.extend(residue_lines(&residue));
    Ok(lines)
}

/// Stops every member of one formation launch (`members` in roster order).
async fn stop_formation(members: Vec<RunningCapsule>, mut say: impl FnMut(Said)) -> CliResult<()> {
    for (rec, lines) in accounts(&members).await {
        say(Said::Line(format!(
            "member {}: session {}",
            field(member_of(rec)),
            field(&rec.session_id)
        )));
        match lines {
            Ok(lines) => lines.into_iter().for_each(|l| say(Said::Line(l))),
            // The formation is stopped all the same: an account that cannot be read must not
            // leave every other member running.
            Err(e) => say(Said::Warning(format!(
                "warning: member {} gave no account: {e}",
                field(member_of(rec))
            ))),
        }
    }
    let supervisor = members.first().map(|m| m.supervisor_pid).unwrap_or(0);
    let mut pids: Vec<u32> = members.iter().map(|m| m.pid).collect();
    if supervisor != 0 && records::process_running(supervisor) {
        signal_term(supervisor);
        pids.push(supervisor);
    } else {
        // The launch is gone but its members are not: end them one by one.
        members.iter().for_each(|m| signal_term(m.pid));
    }
    wait_gone(&pids).await;
    let left: Vec<&RunningCapsule> = members
        .iter()
        .filter(|m| records::process_running(m.pid))
        .collect();
    if !left.is_empty() {
        return Err(not_ended(&left));
    }
    for m in &members {
        say(Said::Line(format!("stopped: {}", field(&m.session_id))));
    }
    Ok(())
}

/// Every member's account, asked of all at once (each may take a harness's grace to settle),
/// answered in `members`' order.
async fn accounts(members: &[RunningCapsule]) -> Vec<(&RunningCapsule, CliResult<Vec<String>>)> {
    let mut asked = tokio::task::JoinSet::new();
    for (i, m) in members.iter().enumerate() {
        let m = m.clone();
        asked.spawn(async move {
            let lines = tokio::time::timeout(ACCOUNT_WITHIN, account(&m))
                .await
                .unwrap_or_else(|_| {
                    Err(CliError::new(
                        Code::Unreachable,
                        format!(
                            "the door at {} gave no account within {}s",
                            m.url,
                            ACCOUNT_WITHIN.as_secs()
                        ),
                        "the formation is stopped all the same; read its trace with `mur trace show --formation`",
                    ))
                });
            (i, lines)
        });
    }
    let mut answered: Vec<(usize, CliResult<Vec<String>>)> = Vec::new();
    while let Some(joined) = asked.join_next().await {
        if let Ok(answer) = joined {
            answered.push(answer);
        }
    }
    answered.sort_by_key(|(i, _)| *i);
    answered
        .into_iter()
        .map(|(i, lines)| (&members[i], lines))
        .collect()
}

fn member_of(rec: &RunningCapsule) -> &str {
    rec.member.as_deref().unwrap_or(&rec.name)
}

fn signal_term(pid: u32) {
    let _ = kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
}

/// Waits (at most [`ENDS_WITHIN`]) until none of `pids` runs.
async fn wait_gone(pids: &[u32]) {
    let deadline = Instant::now() + ENDS_WITHIN;
    while pids.iter().any(|p| records::process_running(*p)) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn not_ended(left: &[&RunningCapsule]) -> CliError {
    let sessions: Vec<String> = left
        .iter()
        .map(|r| field(&r.session_id).into_owned())
        .collect();
    let groups: Vec<String> = left.iter().map(|r| format!("-{}", r.pid)).collect();
    let noun = if left.len() == 1 {
        "session"
    } else {
        "sessions"
    };
    CliError::new(
        Code::Unreachable,
        format!(
            "{noun} {} did not end within {}s",
            sessions.join(", "),
            ENDS_WITHIN.as_secs()
        ),
        format!("kill it with `kill -KILL {}`", groups.join(" ")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::terminal::{assert_forged_shown, FORGED};

    #[test]
    fn residue_and_refusals_from_a_door_are_shown_one_line_each() {
        let items = [
            json!({"kind": "detached_shell", "command": FORGED, "work_id": FORGED, "binary": FORGED}),
            json!({"kind": "delegation", "capsule": FORGED, "version": FORGED, "delegation_id": FORGED, "child_session_id": FORGED}),
            json!({"kind": FORGED, "what": FORGED}),
        ];
        let lines = residue_lines(&items);
        assert_eq!(lines.len(), 3);
        for line in &lines {
            assert_forged_shown(line);
            assert_eq!(line.lines().count(), 1, "{line}");
        }
        let said = refused(
            "http://localhost:1",
            &json!({"code": -32001, "message": FORGED}),
        );
        assert_eq!(
            said.message(),
            "the door at http://localhost:1 answered -32001: x^[]0;PWNED^Gx^M^Jtsk_forged completed"
        );
    }
}
