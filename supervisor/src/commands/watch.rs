//! `mur watch ADDRESS | --url HOST:PORT`: a client of murmur.WatchSession, printing one
//! readable line per event until the capsule closes the stream.

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

pub async fn run(address: Option<&str>, url: Option<&str>) -> CliResult<i32> {
    let rec;
    let door = match (url, address) {
        (Some(u), _) => client::DoorRef {
            url: u,
            token: None,
        },
        (None, a) => {
            rec = records::resolve_running(a)?;
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
