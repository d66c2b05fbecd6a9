//! `mur ps`: the running capsules from `run/`, newest first, pruning records whose process is
//! gone; a door that does not answer its card is shown as unreachable.

use std::time::Duration;

use serde_json::{json, Value};

use crate::client;
use crate::error::CliResult;
use crate::records;

/// A door answers its card, and the card names a JSONRPC interface (a card without
/// supportedInterfaces comes from a runtime at v0.4.0 or earlier and names no session).
async fn reachable(url: &str) -> bool {
    client::card(url, Duration::from_secs(2))
        .await
        .is_ok_and(|card| card.get("supportedInterfaces").is_some())
}

pub async fn run(as_json: bool) -> CliResult<i32> {
    let all = records::running();
    let mut rows = Vec::new();
    for (i, r) in all.iter().enumerate() {
        let up = reachable(&r.url).await;
        rows.push((i + 1, r, up));
    }
    if as_json {
        let list: Vec<Value> = rows
            .iter()
            .map(|(n, r, up)| {
                json!({
                    "address": format!("@{n}"), "session_id": r.session_id, "name": r.name,
                    "version": r.version, "url": r.url, "pid": r.pid,
                    "status": if *up { "running" } else { "unreachable" },
                    "started_at": r.started_at, "records": r.records,
                })
            })
            .collect();
        println!("{}", Value::Array(list));
        return Ok(0);
    }
    if rows.is_empty() {
        println!("no capsule is running");
        return Ok(0);
    }
    println!(
        "{:<4} {:<36} {:<20} {:<24} {:>8}  STATUS",
        "", "SESSION", "CAPSULE", "URL", "PID"
    );
    for (n, r, up) in rows {
        println!(
            "{:<4} {:<36} {:<20} {:<24} {:>8}  {}",
            format!("@{n}"),
            r.session_id,
            format!("{} {}", r.name, r.version),
            r.url.trim_start_matches("http://"),
            r.pid,
            if up { "running" } else { "unreachable" }
        );
    }
    Ok(0)
}
