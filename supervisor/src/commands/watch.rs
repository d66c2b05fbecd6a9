//! `mur watch ADDRESS | --url HOST:PORT`: a client of murmur.WatchSession, printing one
//! readable line per event until the capsule closes the stream. Watching a session by its
//! address also follows its trace for the jail's egress refusals, which no stream frame carries
//! (the stream extension's frames are a closed list); the trace is read as the kernel says it
//! grew, never on a timer.

use http_body_util::BodyExt;
use serde_json::Value;

use crate::client;
use crate::error::{CliError, CliResult, Code};
use crate::follow;
use crate::records;
use crate::terminal;

const STREAM_URI: &str = capsule::door::STREAM_URI;

fn failed(url: &str, e: impl std::fmt::Display) -> CliError {
    CliError::new(
        Code::Unreachable,
        format!("cannot watch {url}: {e}"),
        "check that the capsule is running with `mur ps`",
    )
}

/// One readable line for a StreamResponse `result`. Every value in it is the capsule's or its
/// harness's, and goes through [`terminal::field`]: an answer of many lines stays on this one.
pub fn describe(result: &Value) -> String {
    let short = |v: &Value| {
        v.as_str()
            .map(|s| terminal::field(s.get(..12).unwrap_or(s)).into_owned())
            .unwrap_or_default()
    };
    let field = |t: &str| terminal::field(t).into_owned();
    if let Some(s) = result.get("statusUpdate") {
        let state = s
            .pointer("/status/state")
            .and_then(Value::as_str)
            .unwrap_or("");
        let word = field(
            &state
                .trim_start_matches("TASK_STATE_")
                .to_lowercase()
                .replace('_', "-"),
        );
        let said = s
            .pointer("/status/message/parts/0/text")
            .and_then(Value::as_str)
            .map(|t| format!(": {}", field(t)))
            .unwrap_or_default();
        // A question the operator answers says how.
        let asked = s
            .get("status")
            .and_then(|status| crate::approvals::Open::of(&serde_json::json!({"status": status})))
            .map(|q| {
                format!(
                    "  (approval {}: answer with mur approve or mur deny)",
                    field(&q.approval_id)
                )
            })
            .unwrap_or_default();
        return format!("{}  {word}{said}{asked}", short(&s["taskId"]));
    }
    if let Some(a) = result.get("artifactUpdate") {
        let text = a
            .pointer("/artifact/parts/0/text")
            .and_then(Value::as_str)
            .unwrap_or("");
        let name = a
            .pointer("/artifact/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        return format!("{}  {}: {}", short(&a["taskId"]), field(name), field(text));
    }
    if let Some(m) = result.get("message") {
        let frame = m
            .pointer(&format!(
                "/metadata/{}/frame",
                STREAM_URI.replace('~', "~0").replace('/', "~1")
            ))
            .and_then(Value::as_str)
            .unwrap_or("message");
        let text = m
            .pointer("/parts/0/text")
            .and_then(Value::as_str)
            .unwrap_or("");
        let task = m.get("taskId").map(short).filter(|t| !t.is_empty());
        let frame = field(frame);
        return match task {
            Some(t) => format!("{t}  [{frame}] {}", field(text)),
            None => format!("[{frame}]"),
        };
    }
    result.to_string()
}

/// Prints each `egress_denied` record written to `trace` from now on, as
/// `<task>  egress refused  host:port`, until the watch ends. Woken by the kernel each time the
/// trace's folder changes.
async fn follow_refusals(trace: std::path::PathBuf) {
    let wake = std::sync::Arc::new(tokio::sync::Notify::new());
    let woken = wake.clone();
    let watched = trace.clone();
    let folders = follow::Folders::new(move |p| {
        if p == watched {
            woken.notify_one();
        }
    });
    let Ok(mut folders) = folders else {
        return;
    };
    if folders.add(trace.parent().unwrap_or(&trace)).is_err() {
        return;
    }
    let mut lines = follow::JsonLines::from_end(&trace);
    loop {
        wake.notified().await;
        for v in lines.read_new() {
            if v["event_type"] == "egress_denied" {
                println!("{}", refusal_line(&v));
            }
        }
    }
}

/// `<task>  egress refused  host:port` for an `egress_denied` record: the host is what the
/// harness asked its proxy for, and is shown, never obeyed.
fn refusal_line(v: &Value) -> String {
    let task = v["task_id"].as_str().unwrap_or("");
    let short = terminal::field(task.get(..12).unwrap_or(task)).into_owned();
    let host = terminal::field(v["host"].as_str().unwrap_or("")).into_owned();
    format!("{short}  egress refused  {host}:{}", v["port"])
}

/// Aborts the trace follower when the watch ends.
struct Following(Option<tokio::task::JoinHandle<()>>);

impl Drop for Following {
    fn drop(&mut self) {
        if let Some(h) = &self.0 {
            h.abort();
        }
    }
}

pub async fn run(address: Option<&str>, url: Option<&str>) -> CliResult<i32> {
    let rec;
    let mut following = Following(None);
    let door = match (url, address) {
        (Some(u), _) => client::DoorRef {
            url: u,
            token: None,
        },
        (None, a) => {
            rec = records::resolve_running(a)?;
            following.0 = Some(tokio::spawn(follow_refusals(
                rec.records.join("trace.jsonl"),
            )));
            client::DoorRef::of(&rec)
        }
    };
    let url = format!("http://{}", door.url.trim_start_matches("http://"));
    let door = client::DoorRef {
        url: &url,
        token: door.token,
    };
    let mut body = client::watch_session(&door)
        .await
        .map_err(|e| failed(&url, e))?;
    let mut events = client::SseEvents::default();
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else { break };
        let Some(data) = frame.data_ref() else {
            continue;
        };
        let Some(batch) = events.feed(data) else {
            return Err(failed(&url, "an event past 16 MiB"));
        };
        for v in batch {
            let line = match v.get("result") {
                Some(r) => describe(r),
                None => format!("error: {}", v["error"]),
            };
            println!("{}", terminal::shown(&line));
        }
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::terminal::{assert_forged_shown, FORGED};
    use serde_json::json;

    #[test]
    fn a_question_says_how_it_is_answered() {
        let line = describe(&json!({"statusUpdate": {"taskId": "tsk_0123456789abcdef",
            "status": {"state": "TASK_STATE_INPUT_REQUIRED", "message": {"parts": [
                {"text": "Claude Code asks to run Bash: touch a"},
                {"data": {"kind": "approval", "approval_id": "apr_9", "tool": "Bash",
                          "input": {"command": "touch a"}}}]}}}}));
        assert_eq!(
            line,
            "tsk_01234567  input-required: Claude Code asks to run Bash: touch a  (approval \
             apr_9: answer with mur approve or mur deny)"
        );
    }

    #[test]
    fn every_value_a_capsule_sends_is_shown_on_the_events_one_line() {
        let frame_key = STREAM_URI.to_owned();
        let results = [
            json!({"statusUpdate": {"taskId": FORGED, "status": {"state": FORGED, "message": {"parts": [{"text": FORGED}]}}}}),
            json!({"artifactUpdate": {"taskId": "tsk_1", "artifact": {"name": FORGED, "parts": [{"text": FORGED}]}}}),
            json!({"message": {"taskId": "tsk_1", "parts": [{"text": FORGED}], "metadata": {frame_key.clone(): {"frame": FORGED}}}}),
            json!({"message": {"parts": [], "metadata": {frame_key: {"frame": FORGED}}}}),
        ];
        for r in &results {
            let line = describe(r);
            assert_forged_shown(&line);
            assert_eq!(line.lines().count(), 1, "{line}");
        }
        let refusal =
            json!({"event_type": "egress_denied", "task_id": FORGED, "host": FORGED, "port": 443});
        let line = refusal_line(&refusal);
        assert_forged_shown(&line);
        assert!(
            line.ends_with("x^[]0;PWNED^Gx^M^Jtsk_forged completed:443"),
            "{line}"
        );
    }
}
