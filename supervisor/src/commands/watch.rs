//! `mur watch ADDRESS | --url HOST:PORT`: a client of murmur.WatchSession, printing one
//! readable line per event until the capsule closes the stream. Watching a session by its
//! address also follows its trace for the jail's egress refusals, which no stream frame carries
//! (the stream extension's frames are a closed list).

use std::time::Duration;

use http_body_util::BodyExt;
use serde_json::{json, Value};

use crate::client;
use crate::error::{CliError, CliResult, Code};
use crate::records;

const STREAM_URI: &str = capsule::door::STREAM_URI;

fn failed(url: &str, e: impl std::fmt::Display) -> CliError {
    CliError::new(
        Code::Unreachable,
        format!("cannot watch {url}: {e}"),
        "check that the capsule is running with `mur ps`",
    )
}

/// One readable line for a StreamResponse `result`.
pub fn describe(result: &Value) -> String {
    let short = |v: &Value| {
        v.as_str()
            .map(|s| s.get(..12).unwrap_or(s).to_owned())
            .unwrap_or_default()
    };
    if let Some(s) = result.get("statusUpdate") {
        let state = s
            .pointer("/status/state")
            .and_then(Value::as_str)
            .unwrap_or("");
        let word = state
            .trim_start_matches("TASK_STATE_")
            .to_lowercase()
            .replace('_', "-");
        let said = s
            .pointer("/status/message/parts/0/text")
            .and_then(Value::as_str)
            .map(|t| format!(": {t}"))
            .unwrap_or_default();
        return format!("{}  {word}{said}", short(&s["taskId"]));
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
        return format!(
            "{}  {name}: {}",
            short(&a["taskId"]),
            text.replace('\n', " ")
        );
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
        return match task {
            Some(t) => format!("{t}  [{frame}] {}", text.replace('\n', " ")),
            None => format!("[{frame}]"),
        };
    }
    result.to_string()
}

/// How often the trace is read again for new refusals.
const TRACE_EVERY: Duration = Duration::from_millis(250);

/// Prints each `egress_denied` record written to `trace` from now on, as
/// `<task>  egress refused  host:port`, until the watch ends.
async fn follow_refusals(trace: std::path::PathBuf) {
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    let mut offset = tokio::fs::metadata(&trace)
        .await
        .map(|m| m.len())
        .unwrap_or(0);
    let mut pending: Vec<u8> = Vec::new();
    let mut every = tokio::time::interval(TRACE_EVERY);
    loop {
        every.tick().await;
        let Ok(mut file) = tokio::fs::File::open(&trace).await else {
            continue;
        };
        if file.seek(std::io::SeekFrom::Start(offset)).await.is_err() {
            continue;
        }
        let mut fresh = Vec::new();
        let Ok(n) = file.read_to_end(&mut fresh).await else {
            continue;
        };
        offset += n as u64;
        pending.extend_from_slice(&fresh);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let Ok(v) = serde_json::from_slice::<Value>(&line) else {
                continue;
            };
            if v["event_type"] == "egress_denied" {
                let task = v["task_id"].as_str().unwrap_or("");
                let short = task.get(..12).unwrap_or(task);
                println!(
                    "{short}  egress refused  {}:{}",
                    v["host"].as_str().unwrap_or(""),
                    v["port"]
                );
            }
        }
    }
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
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "murmur.WatchSession", "params": {}});
    let req = client::post(&url, "/", body, &door.auth_header())?;
    let resp = tokio::time::timeout(Duration::from_secs(10), client::open(&url, req))
        .await
        .map_err(|_| failed(&url, "no answer"))??;
    if resp.status() != 200 {
        return Err(failed(&url, format!("HTTP {}", resp.status())));
    }
    let mut body = resp.into_body();
    let mut pending = String::new();
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else { break };
        let Some(data) = frame.data_ref() else {
            continue;
        };
        pending.push_str(&String::from_utf8_lossy(data));
        while let Some(end) = pending.find("\n\n") {
            let event: String = pending.drain(..end + 2).collect();
            let Some(json) = event.lines().find_map(|l| l.strip_prefix("data: ")) else {
                continue;
            };
            let Ok(v) = serde_json::from_str::<Value>(json) else {
                continue;
            };
            let line = match v.get("result") {
                Some(r) => describe(r),
                None => format!("error: {}", v["error"]),
            };
            println!("{line}");
        }
    }
    Ok(0)
}
