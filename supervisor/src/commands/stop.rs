//! `mur stop ADDRESS`: murmur.StopSession for the account of what the session leaves running,
//! then SIGTERM to the launch, which stops the capsule and sweeps everything it started.

use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};

use super::{refused, residue_lines};
use crate::client;
use crate::error::{CliError, CliResult, Code};
use crate::records;

pub async fn run(address: &str) -> CliResult<i32> {
    let rec = records::resolve_running(Some(address))?;
    let door = client::DoorRef::of(&rec);
    let answer = client::rpc(&door, "murmur.StopSession", json!({})).await?;
    let result = answer.map_err(|e| refused(&rec.url, &e))?;
    let canceled: Vec<&str> = result
        .get("canceled")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if canceled.is_empty() {
        println!("canceled: nothing was running");
    }
    for id in canceled {
        println!("canceled: {id}");
    }
    let residue = result
        .get("residue")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for line in residue_lines(&residue) {
        println!("{line}");
    }
    let target = if rec.supervisor_pid != 0 {
        rec.supervisor_pid
    } else {
        rec.pid
    };
    let _ = kill(Pid::from_raw(target as i32), Signal::SIGTERM);
    // Return once the launch has ended, so nothing it started is left when we do.
    let deadline = Instant::now() + Duration::from_secs(30);
    while records::process_running(target) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if records::process_running(rec.pid) {
        return Err(CliError::new(
            Code::Unreachable,
            format!("session {} did not end within 30s", rec.session_id),
            format!("kill it with `kill -KILL -{}`", rec.pid),
        ));
    }
    println!("stopped: {}", rec.session_id);
    Ok(0)
}
